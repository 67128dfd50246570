# A run that does not resume (scratch, or a fine-tune from a checkpoint) refuses an out_dir that
# holds another run's checkpoints, before touching it: its own checkpoints, counted from step 0,
# would otherwise be pruned as the oldest while the other run's stayed. init_from=auto continues.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=6 --eval_interval=3 --out_dir=o > /dev/null
sums() { (cd o && sha256sum ckpt_*.safetensors metrics.jsonl && readlink latest.safetensors); }
before=$(sums)
run() { local rc=0; gpt-train -q "${TINY[@]}" --max_iters=9 --eval_interval=3 --out_dir=o "$@" > /dev/null 2> err.txt || rc=$?; echo "$*: exit $rc: $(cat err.txt)"; }
run
run --init_from=o/ckpt_00000003.safetensors
[ "$(sums)" = "$before" ] && echo "out_dir unchanged"
run --init_from=auto
ls o | grep -c '^ckpt_'
readlink o/latest.safetensors
