# The learning rate follows nanoGPT's get_lr (warmup 2, cosine to min_lr at step 20): hand-checked
# values at steps 0, 1, 2, 11 and 19 (logged with the step they produced: 1, 2, 3, 12, 20), and
# decay_lr=false keeps it constant. metrics.jsonl carries the documented keys.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=20 --eval_interval=100 --out_dir=o > log.txt
lr() { sed -n "s/.*\"step\":$1,.*\"lr\":\([^,}]*\).*/\1/p" o/metrics.jsonl; }
for s in 1 2 3 12 20; do printf 'step %s lr %.6g\n' $s "$(lr $s)"; done
grep '"step":20,' o/metrics.jsonl | grep -o '"[a-z_]*":' | tr -d '":' | tr '\n' ' '; echo
gpt-train -q "${TINY[@]}" --max_iters=3 --decay_lr=false --out_dir=c > /dev/null
sed -n 's/.*"lr":\([^,}]*\).*/\1/p' c/metrics.jsonl | sort -u
