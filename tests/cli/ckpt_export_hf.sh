# gpt-ckpt export --hf: the tiny fixture imported and exported again loads in transformers'
# GPT2LMHeadModel (and GPT2TokenizerFast) as it is and gives the fixture's logits and loss.
# Runs only where torch and transformers are importable (exit 77 = skipped otherwise).
source "$TOP/tests/cli/lib.bash"
py=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import torch, transformers' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "torch + transformers not importable (pip install 'transformers<4.36')" >&2; exit 77; }
gpt-ckpt import -q "$FIX/hf_tiny" -o tiny.safetensors
gpt-ckpt export -q tiny.safetensors --hf out
ls out
# a bf16 copy exports as bf16 and loads too
gpt-ckpt convert -q tiny.safetensors --dtype bf16 -o half.safetensors
gpt-ckpt export -q half.safetensors --hf half
"$py" - "$FIX/hf_tiny" out half <<'PY' 2>&1 | grep -v -i warn
import struct, sys
import numpy as np
import torch
from transformers import GPT2LMHeadModel, GPT2Tokenizer
fix, out, half = sys.argv[1:4]
raw = open(fix + "/logits.bin", "rb").read()
_, _, T, V = struct.unpack_from("<4i", raw, 0)
ids = list(struct.unpack_from("<%di" % T, raw, 32))
loss = struct.unpack_from("<f", raw, 32 + 4 * T)[0]
want = np.frombuffer(raw, "<f4", T * V, 36 + 4 * T).reshape(T, V)
# fp32: the same numbers; bf16 keeps 8 significant bits (2^-9 relative per weight), summed over
# a few hundred products per logit
for d, tol in ((out, 1e-6), (half, 2e-2)):
    m = GPT2LMHeadModel.from_pretrained(d, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        r = m(torch.tensor([ids]), labels=torch.tensor([ids]))
    err = float(np.abs(r.logits[0].numpy() - want).max() / np.abs(want).max())
    print(d, "logits within %g:" % tol, err < tol, "| loss within %g:" % tol, abs(r.loss.item() - loss) / loss < tol)
    print(d, "tied lm_head:", m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr())
tok = GPT2Tokenizer.from_pretrained(out)
text = open(fix + "/input.txt", encoding="utf-8").read()
print("tokenizer gives the fixture's ids:", tok.encode(text) == ids)
PY
