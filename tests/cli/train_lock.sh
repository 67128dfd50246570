# Two gpt-train on one out_dir: the second says who holds it (pid, host) and exits 1 before
# touching anything (checkpoints, metrics.jsonl, loss.svg unchanged), whether it would start from
# scratch, resume or fine-tune. The lock file goes away with the run that held it.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=100000 --eval_interval=5 --out_dir=o > log.txt &
pid=$!
trap 'kill -KILL $pid 2>/dev/null || true' EXIT # never leave it stopped
for _ in $(seq 300); do [ -e o/latest.safetensors ] && break; sleep 0.1; done
kill -STOP $pid # holds still (and holds the lock) while the others try
# every thread stopped (state T): a writer thread inside a write(2) finishes that call first
stopped() { for t in /proc/$pid/task/*/stat; do [ "$(sed 's/.*) \(.\).*/\1/' "$t")" = T ] || return 1; done; }
for _ in $(seq 100); do stopped && break; sleep 0.05; done
snapshot() { (cd o && ls -l --time-style=+%s.%N && md5sum -- *); }
snapshot > before.txt
step=$(readlink o/latest.safetensors | sed 's/ckpt_0*\([0-9]*\).*/\1/')
for init in scratch resume auto o/latest.safetensors; do
  rc=0; gpt-train -q "${TINY[@]}" --max_iters=$((step + 2)) --out_dir=o --init_from=$init > /dev/null 2> err.txt || rc=$?
  echo "init_from=$init: exit $rc: $(sed "s/pid $pid on host $(hostname)/pid PID on host HOST/" err.txt)"
done
snapshot > after.txt
cmp before.txt after.txt && echo "out_dir untouched"
kill -CONT $pid; kill -TERM $pid
rc=0; wait $pid || rc=$?; echo "first run: exit $rc"
ls o | grep -c lock || true
step=$(readlink o/latest.safetensors | sed 's/ckpt_0*\([0-9]*\).*/\1/')
gpt-train -q "${TINY[@]}" --max_iters=$((step + 1)) --eval_interval=5 --out_dir=o --init_from=auto > /dev/null && echo "next run: exit 0"
