# llm.c checkpoints: export --llmc writes llm.c's version 3 layout (header, padded vocab, Linear
# weights transposed to (out,in)); importing it back gives identical weights; a version 5 (bf16)
# file imports to the bf16-rounded weights.
source "$TOP/tests/cli/lib.bash"
export HF_HOME=$PWD/hf; unset GPT_VOCAB
gpt-ckpt import -q "$FIX/hf_tiny" -o a.safetensors
gpt-ckpt export -q a.safetensors --llmc a.bin
# header: magic, version, maxT, V, L, NH, C, Vp
od -An -td4 -N32 a.bin | tr -s ' ' | sed 's/^ //'
stat -c %s a.bin
gpt-ckpt import -q a.bin -V "$FIX/hf_tiny" -o b.safetensors
cmp a.safetensors b.safetensors && echo "round trip: identical"
# the layout, checked independently: qkvw of layer 1 is llm.c array 5, (3C,C) = transpose of ours
python3 - a.bin a.safetensors <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = struct.unpack_from("<8i", b, 0)
T, V, L, NH, C, Vp = h[2:8]
off = 1024 + 4 * (Vp * C + T * C + 2 * L * C + C * 3 * C)  # wte wpe ln1w ln1b qkvw[0]
llmc = struct.unpack_from("<%df" % (3 * C * C), b, off)
s = open(sys.argv[2], "rb").read()
n = struct.unpack_from("<Q", s, 0)[0]
t = json.loads(s[8:8 + n])["transformer.h.1.attn.c_attn.weight"]
ours = struct.unpack_from("<%df" % (3 * C * C), s, 8 + n + t["data_offsets"][0])
ok = all(llmc[o * C + i] == ours[i * 3 * C + o] for o in range(3 * C) for i in range(C))
pad = struct.unpack_from("<%df" % ((Vp - V) * C), b, 1024 + 4 * V * C)
print("qkvw transposed:", ok, "| padded rows zero:", not any(pad))
PY
# version 5: the same file with bf16 values (round to nearest even)
python3 - a.bin a5.bin <<'PY'
import array, sys
b = open(sys.argv[1], "rb").read()
hdr = array.array("i", b[:1024]); hdr[1] = 5
f = array.array("I", b[1024:])
out = array.array("H", (((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF for x in f))
open(sys.argv[2], "wb").write(hdr.tobytes() + out.tobytes())
PY
gpt-ckpt import -q a5.bin -V "$FIX/hf_tiny" -o c.safetensors
gpt-ckpt convert -q a.safetensors --dtype bf16 -o half.safetensors
gpt-ckpt convert -q half.safetensors --dtype fp32 -o d.safetensors
cmp c.safetensors d.safetensors && echo "bf16 file: identical to convert's rounding"
# no vocabulary to be found: a warning, and a checkpoint without one
gpt-ckpt import a.bin -o novocab.safetensors 2>&1 | grep -c warning
gpt-ckpt info novocab.safetensors | grep '^tokenizer'
# exported without a vocabulary: no end-of-text id, so none in config.json (GPT2Config's default
# 50256 would lie outside the 301-token vocabulary)
gpt-ckpt export -q novocab.safetensors --hf novocab
jq -c '[.bos_token_id, .eos_token_id, .vocab_size]' novocab/config.json
# a bias = false model: llm.c's layout always has biases, so they are written as zeros: the file
# is a.bin with its seven bias arrays zeroed, and imported back it scores text as the original
python3 "$TOP/tests/cli/ckpt_nobias.py" a.safetensors nb.safetensors
gpt-ckpt export -q nb.safetensors --llmc nb.bin
python3 - a.bin nb.bin <<'PY'
import array, struct, sys
a, nb = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
T, V, L, NH, C, Vp = struct.unpack_from("<8i", a, 0)[2:8]
sizes = [("wte", Vp * C), ("wpe", T * C), ("ln1w", L * C), ("ln1b", L * C), ("qkvw", L * 3 * C * C),
         ("qkvb", L * 3 * C), ("attprojw", L * C * C), ("attprojb", L * C), ("ln2w", L * C),
         ("ln2b", L * C), ("fcw", L * 4 * C * C), ("fcb", L * 4 * C), ("fcprojw", L * 4 * C * C),
         ("fcprojb", L * C), ("lnfw", C), ("lnfb", C)]
want, at = bytearray(a), 1024
for name, n in sizes:
    if name.endswith("b"):
        want[at:at + 4 * n] = bytes(4 * n)
    at += 4 * n
print("bias-free llm.c file: the same weights, zero biases:", bytes(want) == nb, at == len(a))
PY
gpt-ckpt import -q nb.bin -V "$FIX/hf_tiny" -o nb2.safetensors
nll() { gpt-evalppl -q --json -m "$1" "$FIX/hf_tiny/input.txt" | jq -r .nll; }
a=$(nll a.safetensors) nb=$(nll nb.safetensors) nb2=$(nll nb2.safetensors)
echo "imported back: the bias-free model's nll: $([ "$nb2" = "$nb" ] && echo yes || echo "no: $nb2 $nb")," \
  "not the original's: $([ "$nb" != "$a" ] && echo yes || echo no)"
