# Resume is exact: 20 steps in one run and 10 + resume + 10 give the same losses and the same
# final weights and optimizer state, bit for bit (dropout on, gradient accumulation on).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --dropout=0.1 --sample_tokens=8 --max_iters=20 --eval_interval=10 --out_dir=a > a.log
gpt-train -q "${TINY[@]}" --dropout=0.1 --sample_tokens=8 --max_iters=10 --eval_interval=10 --out_dir=b > b1.log
gpt-train -q "${TINY[@]}" --dropout=0.1 --sample_tokens=8 --max_iters=20 --eval_interval=10 --out_dir=b --init_from=resume > b2.log
losses a/metrics.jsonl > a.losses
losses b/metrics.jsonl > b.losses
wc -l < a.losses
cmp a.losses b.losses
cmp <(st_data a/latest.safetensors) <(st_data b/latest.safetensors)
readlink b/latest.safetensors
ls b | grep -c '^ckpt_'
# the log lines of steps 11..20 are the same too
diff <(grep '^step' a.log | tail -n 11 | sed 's/| [0-9.]* ms.*//') <(grep '^step' b2.log | sed 's/| [0-9.]* ms.*//')
# auto resumes when a checkpoint exists, and trains nothing more at max_iters
gpt-train -q "${TINY[@]}" --max_iters=20 --out_dir=b --init_from=auto
# checkpoint_interval: a checkpoint every 3 steps without an evaluation (eval_interval 100), and
# the last step's; evaluations at steps 0 and 7 only
gpt-train -q "${TINY[@]}" --max_iters=7 --eval_interval=100 --checkpoint_interval=3 --keep_last=5 --out_dir=c > /dev/null
ls c | grep '^ckpt_' | tr '\n' ' '; echo
grep -c '"val_loss"' c/metrics.jsonl
# keep_every: a checkpoint every step, keep_last 2, and those of steps 3 and 6 kept for good
gpt-train -q "${TINY[@]}" --max_iters=7 --eval_interval=100 --checkpoint_interval=1 --keep_last=2 --keep_every=3 --out_dir=k > /dev/null
ls k | grep '^ckpt_' | tr '\n' ' '; echo
