# SIGTERM during a long evaluation acts at once (the evaluation is cut between batches) and a
# stop always writes a checkpoint: during the eval at step 0 (checkpoint of step 0) and during
# an eval at step 5 (checkpoint of step 5, its metrics line without eval losses).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
# stop PID: SIGTERM, then the exit status, or "still running" if it has not ended 10 s later.
stop() {
  kill -TERM "$1"
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then echo "still running 10 s after SIGTERM"; kill -KILL "$1"; fi
  local rc=0; wait "$1" || rc=$?; echo "exit $rc"
}
trap 'kill -KILL $(jobs -p) 2>/dev/null || true' EXIT # a failed check leaves no endless evaluation
gpt-train -q "${TINY[@]}" --max_iters=100 --eval_interval=5 --eval_iters=100000000 --out_dir=o > /dev/null &
pid=$!
for _ in $(seq 300); do [ -e o/metrics.jsonl ] && break; sleep 0.1; done
sleep 0.5 # well into the step-0 evaluation (100000000 batches)
stop $pid
ls o | grep ckpt_
wc -l < o/metrics.jsonl
# 2 steps, then a resumed run is stopped in its evaluation at step 5
gpt-train -q "${TINY[@]}" --max_iters=2 --eval_interval=5 --out_dir=p > /dev/null
gpt-train -q "${TINY[@]}" --max_iters=100 --eval_interval=5 --eval_iters=100000000 --out_dir=p --init_from=resume > /dev/null &
pid=$!
for _ in $(seq 300); do grep -q '"step":4,' p/metrics.jsonl && break; sleep 0.1; done
sleep 1
stop $pid
readlink p/latest.safetensors
tail -n 1 p/metrics.jsonl | grep -o '"step":5,"loss":[^,]*' | cut -d, -f1
tail -n 1 p/metrics.jsonl | grep -c train_loss || true
