# A non-finite loss or gradient norm stops gpt-train at that step (exit 1, one line naming the
# step) without writing a checkpoint of that state: latest stays on the last good one. With
# skip_nonfinite = true the updates are skipped and counted (log line, metrics.jsonl, the
# checkpoint's trainer state). NaN and Inf are written as null in metrics.jsonl.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=4 --eval_interval=4 --out_dir=o > /dev/null
# ln_f.weight = 3e38: finite, but the final LayerNorm's outputs overflow, so the loss is NaN
python3 "$TOP/tests/cli/train_poison.py" o/ckpt_00000004.safetensors transformer.ln_f.weight 3e38
rc=0; gpt-train -q "${TINY[@]}" --max_iters=8 --eval_interval=4 --out_dir=o --init_from=resume > log.txt 2> err.txt || rc=$?
echo "exit $rc"; cat err.txt
cut -d'|' -f1-2 log.txt
ls o | grep ckpt_
tail -n 1 o/metrics.jsonl | grep -o '"step":5,"loss":null,"lr":[0-9.e-]*,"grad_norm":null'
gpt-train "${TINY[@]}" --max_iters=7 --eval_interval=7 --out_dir=o --init_from=resume --skip_nonfinite=true > log.txt 2> err.txt
echo "skip_nonfinite: exit $?"
grep 'update skipped' err.txt
sed 's/|.*|/|...|/' log.txt
readlink o/latest.safetensors
tail -n 1 o/metrics.jsonl | grep -o '"train_loss":null,"val_loss":null,"skipped":3'
python3 -c 'import json, struct, sys; f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
st = json.loads(json.loads(f.read(n))["__metadata__"]["gptkit.train"]); print("checkpoint: step", st["step"], "skipped", st["skipped"])' o/latest.safetensors
