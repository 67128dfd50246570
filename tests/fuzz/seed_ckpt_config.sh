#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/ckpt_config: the HuggingFace config.json of tests/fixtures/hf_tiny,
# variants import handles differently (n_ctx instead of n_positions, n_inner set, settings it
# warns about, another model_type), and the gptkit.config metadata of a checkpoint gpt-ckpt
# import writes.
# Usage: tests/fuzz/seed_ckpt_config.sh [BUILD]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${1:-$top/build}" && pwd)/bin
out=$top/tests/fuzz/corpus/ckpt_config
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rm -rf "$out" && mkdir -p "$out"
cp "$top/tests/fixtures/hf_tiny/config.json" "$out/hf_tiny.json"
(cd "$work" && HF_HOME=$work/hf "$bin/gpt-ckpt" import -q "$top/tests/fixtures/hf_tiny" -o t.safetensors)
python3 - "$top/tests/fixtures/hf_tiny/config.json" "$work/t.safetensors" "$out" <<'PY'
import json, struct, sys
base = json.load(open(sys.argv[1]))
def put(name, **changes):
    c = {k: v for k, v in dict(base, **changes).items() if v is not ...}
    open(sys.argv[3] + "/" + name, "w").write(json.dumps(c))
put("n_ctx_only.json", n_positions=..., n_ctx=16)
put("n_inner.json", n_inner=128, model_type=...)
put("warnings.json", activation_function="relu", layer_norm_epsilon=1e-6, n_ctx=64,
    scale_attn_by_inverse_layer_idx=True, reorder_and_upcast_attn=True, scale_attn_weights=False)
put("other_model.json", model_type="llama")
with open(sys.argv[2], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n))["__metadata__"]
open(sys.argv[3] + "/gptkit_config.json", "w").write(meta["gptkit.config"])
open(sys.argv[3] + "/gptkit_dropout.json", "w").write(json.dumps(dict(json.loads(meta["gptkit.config"]), bias=False, dropout=0.1)))
PY
ls -l "$out" | awk 'NR > 1 { print $5, $9 }'
