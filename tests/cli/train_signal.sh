# SIGTERM: the step in progress finishes, a checkpoint is written, exit status 0; then
# init_from=auto continues from it. Also checks metrics.jsonl and loss.svg.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=100000 --eval_interval=5 --out_dir=o > log.txt &
pid=$!
for _ in $(seq 300); do [ -e o/latest.safetensors ] && [ "$(wc -l < o/metrics.jsonl)" -ge 8 ] && break; sleep 0.1; done
kill -TERM $pid
rc=0; wait $pid || rc=$?
echo "exit $rc"
last=$(losses o/metrics.jsonl | tail -n 1 | cut -d' ' -f1)
target=$(readlink o/latest.safetensors)
[ "$target" = "$(printf 'ckpt_%08d.safetensors' "$last")" ] && echo "checkpoint at the last step"
grep -q '<svg' o/loss.svg && grep -q 'val (eval)' o/loss.svg && echo "plot ok"
head -n 1 o/metrics.jsonl | grep -q '"step":0,"train_loss":' && echo "eval at step 0 logged"
gpt-train -q "${TINY[@]}" --max_iters=$((last + 2)) --eval_interval=5 --out_dir=o --init_from=auto > log2.txt
grep -c '^step [0-9]*/' log2.txt # training lines (eval lines depend on where the signal landed)
