#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/state: the trainer state (gptkit.train) of checkpoints gpt-train
# writes (one step; 140 steps, whose spike windows are full; a skipped step counted), and
# hand-made variants (no windows, an empty window, a window too long, a NaN-like string, a
# value of the wrong type, not an object).
# Usage: tests/fuzz/seed_state.sh [BUILD]
set -euo pipefail
source "$(dirname "$0")/seed_lib.bash"
seed_begin state "${1:-}"
rm -rf "$out" && mkdir -p "$out"
tiny_ckpt 'To be, or not to be, that is the question. ' 40 16
more=(--train_data=train.bin --val_data=train.bin --vocab=vocab.json --n_layer=1 --n_head=2
      --n_embd=8 --block_size=16 --batch_size=2 --eval_iters=1 --warmup_iters=1 --threads=1)
"$bin/gpt-train" -q "${more[@]}" --max_iters=140 --eval_interval=140 --skip_grad_z=0.5 --out_dir=p > /dev/null
python3 - o/ckpt_00000001.safetensors p/latest.safetensors "$out" <<'PY'
import json, struct, sys
def state(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))["__metadata__"]["gptkit.train"]
one, full = state(sys.argv[1]), state(sys.argv[2])
out = sys.argv[3]
def put(name, text):
    open(out + "/" + name, "w").write(text)
put("one_step.json", one)
put("windows_full.json", full)
s = json.loads(full)
del s["config"]
put("no_config.json", json.dumps(s))
put("minimal.json", '{"step":1,"tokens":2,"seed":3,"rng_counter":4}')
put("empty_window.json", '{"step":1,"tokens":2,"seed":3,"rng_counter":4,"recent_loss":[]}')
put("long_window.json", json.dumps(dict(s, recent_loss=[1.0] * 129)))
put("string_value.json", json.dumps(dict(s, recent_grad_norm=[1.5, "NaN"])))
put("wrong_type.json", '{"step":"1","tokens":2,"seed":3,"rng_counter":4}')
put("array.json", '[1,2,3]')
PY
ls "$out"
