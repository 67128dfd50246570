# gpt-ckpt info (text, --stats, --json) and convert (nanoGPT's dtype names and the short aliases,
# --strip-optimizer) on the imported tiny fixture, plus a training-style copy of it with AdamW
# moments and trainer state.
source "$TOP/tests/cli/lib.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o a.safetensors
gpt-ckpt info a.safetensors | sed -n '2,5p;7,10p'
gpt-ckpt info --stats a.safetensors | sed -n '7p;10,11p'
# a training checkpoint: every parameter gets optimizer.m/v copies, and gptkit.train metadata
python3 - a.safetensors t.safetensors <<'PY'
import json, struct, sys
s = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", s, 0)[0]
hdr, data = json.loads(s[8:8 + n]), s[8 + n:]
meta = hdr.pop("__metadata__")
meta.pop("gptkit.checksums", None)  # tensors added: the copy has no checksums
meta["gptkit.train"] = json.dumps({"step": 7, "tokens": 3584, "seed": 1, "rng_counter": 7, "world_size": 1})
out, blob = {"__metadata__": meta}, b""
items = sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0])
params = [(k, v) for k, v in items if k.startswith("transformer.")]
rest = [(k, v) for k, v in items if not k.startswith("transformer.")]
for kind in ("", "optimizer.m.", "optimizer.v."):
    for k, v in params:
        b, e = v["data_offsets"]
        out[kind + k] = dict(v, data_offsets=[len(blob), len(blob) + e - b]); blob += data[b:e]
for k, v in rest:
    b, e = v["data_offsets"]
    out[k] = dict(v, data_offsets=[len(blob), len(blob) + e - b]); blob += data[b:e]
h = json.dumps(out).encode(); h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + blob)
PY
gpt-ckpt info t.safetensors | sed -n '5p'
gpt-ckpt info --json --stats t.safetensors | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(sorted(j))
print(j["parameters"], j["dtype"], j["optimizer"], j["train"]["step"], j["tokenizer"]["vocab_size"])
t = {x["name"]: x for x in j["tensors"]}
w = t["transformer.h.0.ln_1.weight"]
print(w["shape"], w["dtype"], round(w["mean"], 4), w["nan"], w["inf"], len(t))'
echo "== convert"
gpt-ckpt convert t.safetensors --dtype bfloat16 -o t16.safetensors 2>&1
gpt-ckpt info t16.safetensors | sed -n '3p;5p'
gpt-ckpt info t16.safetensors | grep -E '^(transformer.wte|optimizer.m.transformer.wte|tokenizer)'
gpt-ckpt convert -q t.safetensors --dtype fp16 --strip-optimizer -o s.safetensors
gpt-ckpt info s.safetensors | sed -n '3p;5p'
gpt-ckpt info s.safetensors | grep -c optimizer || true
gpt-ckpt convert -q s.safetensors --dtype fp32 -o s32.safetensors
gpt-ckpt info s32.safetensors | sed -n '3p'
# bf16 values are the fp32 ones rounded: exported back they load in transformers' layout
# (a new export directory gets 0777 less the umask, as mkdir gives)
(umask 027 && gpt-ckpt export -q t16.safetensors --hf t16hf)
stat -c '%a %n' t16hf
python3 -c 'import json; c = json.load(open("t16hf/config.json")); print(c["torch_dtype"], c["n_layer"])'
gpt-ckpt export -q t16.safetensors --llmc t16.bin
stat -c %s t16.bin
