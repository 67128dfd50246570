# A gpt-train that fails at start (missing data, bad model shape, bad checkpoint) leaves no out_dir
# behind; eval_only never creates or writes one; a run that starts training does.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(cat err.txt)"; }
run gpt-train -q "${TINY[@]}" --train_data=missing.bin --out_dir=o1
rc=0; gpt-train -q "${TINY[@]}" --n_head=3 --out_dir=o2 2> /dev/null || rc=$?; echo "n_head = 3: exit $rc"
run gpt-train -q "${TINY[@]}" --init_from=nothing.safetensors --out_dir=o3
run gpt-train -q "${TINY[@]}" --init_from=resume --out_dir=o4
ls -d o1 o2 o3 o4 2>/dev/null || echo "no out_dir left behind"
gpt-train -q "${TINY[@]}" --max_iters=2 --out_dir=o5 > /dev/null
gpt-train -q "${TINY[@]}" --init_from=o5/latest.safetensors --eval_only=true --out_dir=o6 > /dev/null
ls -d o6 2>/dev/null || echo "eval_only made no out_dir"
cp o5/metrics.jsonl m.orig
gpt-train -q "${TINY[@]}" --init_from=o5/latest.safetensors --eval_only=true --out_dir=o5 > /dev/null
cmp m.orig o5/metrics.jsonl && echo "eval_only left metrics.jsonl alone"
ls o5
