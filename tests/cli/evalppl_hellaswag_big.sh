# gpt-evalppl --hellaswag on a context holding a 32 MB word, under an address-space limit that
# the model and the items fit in but the BPE merges of such a word (about 32 bytes a byte) do not:
# a row keeps its last 32 tokens, so the context is encoded only from a whitespace after the
# word on (the scores equal those of the text after the word alone); with the word at the end,
# where no such cut exists, the item is encoded whole and, if that runs out of memory, the error
# names the file and line (before: "BPE encoder: out of memory", no file, no line).
# Skipped under AddressSanitizer (make check), which cannot start under ulimit -v.
source "$TOP/tests/cli/lib.bash"
if ldd "$(command -v gpt-evalppl)" | grep libasan > /dev/null; then
  echo "AddressSanitizer cannot run under ulimit -v" >&2; exit 77
fi
gpt-ckpt import -q "$FIX/hf_tiny" -o m.safetensors
export GPT_MODEL=m.safetensors
python3 - <<'PY'
import json
tail = "The cat sat on the mat, and looked at the dog: \"hello there!\"\n" * 100
word = "x" * (32 << 20)
def item(ctx): return json.dumps({"ctx": ctx, "endings": ["the mat.", "a dog."], "label": 0}) + "\n"
open("small.jsonl", "w").write(item(tail))
open("cut.jsonl", "w").write(item(tail) + item("A " + word + " " + tail))
open("end.jsonl", "w").write(item(tail) + item(tail) + item("A cat " + word))
PY
# the lowest limit (in steps of 100 MB) that scoring the small item needs: the machine's own
# (threads, libraries); OpenBLAS spins when it cannot map its buffer, hence the timeout
base=
for mb in 300 400 500 600 700 800 900 1000 1200 1400 1600 2000; do
  if (ulimit -v $((mb * 1024)); timeout 5 gpt-evalppl -q --hellaswag small.jsonl > /dev/null 2>&1); then
    base=$mb; break
  fi
done
[ -n "$base" ] || { echo "gpt-evalppl did not run under 2 GB of address space"; exit 1; }
limit=$(((base + 100) * 1024)) # the items' 200 MB fit, the 600 MB of merges do not
(ulimit -v $limit; timeout 60 gpt-evalppl -q --hellaswag --per-doc --json cut.jsonl > cut.out 2> cut.err)
echo "cut: exit $? $(cat cut.err)"
jq -s -c '{same: (.[0].nll == .[1].nll and .[0].tokens == .[1].tokens)}' cut.out
rc=0; (ulimit -v $limit; timeout 60 gpt-evalppl -q --hellaswag --per-doc --json end.jsonl > end.out 2> end.err) || rc=$?
# with the BPE encoder's memory bounded (tokenize/ and common/text/), the item may be scored
if { [ $rc -eq 0 ] && [ "$(wc -l < end.out)" -eq 4 ]; } ||
   { [ $rc -eq 1 ] && grep -qx 'gpt-evalppl: end.jsonl:3: .*out of memory' end.err &&
     [ "$(wc -l < end.err)" -eq 1 ] && [ ! -s end.out ]; }; then
  echo "end.jsonl:3: scored, or its error names the file and line"
else
  echo "end: exit $rc"; cat end.err
fi
