# The learning rate follows nanoGPT's get_lr (warmup 2, cosine to min_lr at step 20): hand-checked
# values at steps 0, 1, 2, 11 and 19 (logged with the step they produced: 1, 2, 3, 12, 20), and
# decay_lr=false keeps it constant. metrics.jsonl carries the documented keys. llm.c's other
# schedules, hand-checked too (learning_rate 3e-3, min_lr 3e-4): linear at step 5 is
# 3e-4 + (1 - 3/18) 2.7e-3 = 2.55e-3 and at 19 3e-4 + 2.7e-3/18 = 4.5e-4; wsd with
# wsd_decay_frac 0.5 keeps 3e-3 until step 10, then at step 14 is 3e-4 + (1 - sqrt(0.4)) 2.7e-3 =
# 1.29237e-3 and at 19 3e-4 + (1 - sqrt(0.9)) 2.7e-3 = 4.38555e-4; a wsd decay before the end
# of the warmup, or of no step, is refused naming the keys.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=20 --eval_interval=100 --out_dir=o > log.txt
lr() { sed -n "s/.*\"step\":$1,.*\"lr\":\([^,}]*\).*/\1/p" o/metrics.jsonl; }
for s in 1 2 3 12 20; do printf 'step %s lr %.6g\n' $s "$(lr $s)"; done
grep '"step":20,' o/metrics.jsonl | grep -o '"[a-z_]*":' | tr -d '":' | tr '\n' ' '; echo
gpt-train -q "${TINY[@]}" --max_iters=3 --decay_lr=false --out_dir=c > /dev/null
sed -n 's/.*"lr":\([^,}]*\).*/\1/p' c/metrics.jsonl | sort -u
gpt-train -q "${TINY[@]}" --max_iters=20 --eval_interval=100 --lr_schedule=linear --out_dir=lin > /dev/null
gpt-train -q "${TINY[@]}" --max_iters=20 --eval_interval=100 --lr_schedule=wsd --wsd_decay_frac=0.5 --out_dir=wsd > /dev/null
lr() { sed -n "s/.*\"step\":$2,.*\"lr\":\([^,}]*\).*/\1/p" $1/metrics.jsonl; }
for s in 6 20; do printf 'linear: step %s lr %.6g\n' $s "$(lr lin $s)"; done
for s in 10 11 15 20; do printf 'wsd: step %s lr %.6g\n' $s "$(lr wsd $s)"; done
for f in 0.95 0.01; do
  gpt-train -q "${TINY[@]}" --max_iters=3 --lr_schedule=wsd --wsd_decay_frac=$f --out_dir=bad 2>&1 && echo "accepted $f"
done
test ! -e bad
