# Resuming never rewrites metrics.jsonl: max_iters at or below the checkpoint's step is refused in
# one line (exit 2) with nothing touched (init_from=auto on a finished run is done: exit 0); a
# resume appends, keeping the lines a killed run logged past its checkpoint, and drops only a
# last line the kill cut short.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=10 --eval_interval=10 --out_dir=o > /dev/null
cp o/metrics.jsonl metrics.orig
for args in "resume 5" "resume 10" "auto 5" "auto 10"; do
  set -- $args
  rc=0; gpt-train -q "${TINY[@]}" --init_from=$1 --max_iters=$2 --out_dir=o > out.txt 2> err.txt || rc=$?
  echo "init_from=$1 max_iters=$2: exit $rc: $(cat out.txt err.txt)"
done
cmp metrics.orig o/metrics.jsonl && echo "metrics.jsonl untouched"
# a run killed after its step-10 checkpoint had logged steps 11 and 12, and half of 13
printf '{"step":11,"loss":3.25}\n{"step":12,"loss":3.125}\n{"step":13,"loss":3.5' >> o/metrics.jsonl
gpt-train -q "${TINY[@]}" --init_from=resume --max_iters=14 --eval_interval=10 --out_dir=o > /dev/null
losses o/metrics.jsonl | cut -d' ' -f1 | tr '\n' ' '; echo
head -c $(stat -c %s metrics.orig) o/metrics.jsonl | cmp - metrics.orig && echo "history kept"
python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' o/metrics.jsonl && echo "all lines JSON"
