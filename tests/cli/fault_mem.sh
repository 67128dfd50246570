# A model or batch that does not fit in memory is refused before any long work (before the model
# is built), with one line giving the bytes needed by part and
# the bytes available, and exit 1; gpt-train writes nothing. On cpu and on cuda-emu (whose device
# memory is the host's): GPT-2 XL's width at twice its depth (3.1B parameters, 50 GB of state
# without a batch) with a batch of 512 x 1024, and a tiny model with a huge batch. gpt-sample and
# gpt-evalppl: a checkpoint whose config says 1000 layers of 8192 (a few TB) is refused before
# its weights are read. (ulimit -v and GPT_MEM_CHECK=warn: fault_mem_ulimit.)
source "$TOP/tests/cli/lib.bash"; need_data
set +e
tiny_data d
source "$TOP/tests/cli/fault_mem.bash"
XL=(--n_layer=96 --n_head=25 --n_embd=1600 --block_size=1024 --batch_size=512)
for dev in cpu cuda-emu; do
  echo "== gpt-train, $dev"
  timed gpt-train -q "${TINY[@]}" "${XL[@]}" --device=$dev --max_iters=1 --out_dir=o
  timed gpt-train -q "${TINY[@]}" --block_size=1024 --batch_size=1000000 --device=$dev --max_iters=1 --out_dir=o
done
test ! -e o && echo "nothing written"
echo "== gpt-sample, gpt-evalppl"
gpt-train -q "${TINY[@]}" --max_iters=1 --out_dir=small > /dev/null
python3 - small/latest.safetensors huge.safetensors <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
c = json.loads(h["__metadata__"]["gptkit.config"])
c.update(n_layer=1000, n_head=64, n_embd=8192, block_size=1024)
h["__metadata__"]["gptkit.config"] = json.dumps(c)
s = json.dumps(h).encode()
s += b" " * (-len(s) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
for dev in cpu cuda-emu; do
  timed gpt-sample -m huge.safetensors --device=$dev -n 5
  timed gpt-evalppl -m huge.safetensors --device=$dev d/val.bin
done
