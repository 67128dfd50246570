# A failed write to stdout or stderr (here /dev/full) fails the run: the step in progress is
# checkpointed, then one line says what failed and the exit status is 1 (was 0, the log lost).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
rc=0; gpt-train -q "${TINY[@]}" --max_iters=1000 --eval_interval=5 --out_dir=o > /dev/full 2> err.txt || rc=$?
echo "stdout full: exit $rc"; cat err.txt
readlink o/latest.safetensors
rc=0; gpt-train "${TINY[@]}" --max_iters=1000 --eval_interval=5 --out_dir=e 2> /dev/full > /dev/null || rc=$?
echo "stderr full: exit $rc"
readlink e/latest.safetensors
# the checkpoint is sound: the run continues from it
gpt-train -q "${TINY[@]}" --max_iters=2 --eval_interval=5 --out_dir=o --init_from=resume | grep -c '^step [12]/2'
