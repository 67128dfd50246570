# skip_grad_z / skip_loss_z (llm.c's -sg / -sl): a step whose gradient norm or loss is more than
# z standard deviations above the mean of the last 128 steps' is not applied, with a warning that
# says so and by how much; none before 128 values are in. The windows are in every checkpoint:
# a run resumed just before a skipped step skips it too, giving the uninterrupted run's losses
# and weights bit for bit. A poisoned checkpoint (ln_f.weight = 5: finite, the loss leaps) has
# its loss spike skipped, its weights and moments left as they were.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
A=("${TINY[@]}" --eval_interval=200 --skip_grad_z=0.5)
gpt-train "${A[@]}" --max_iters=200 --out_dir=a > a.log 2> a.err
first=$(sed -n 's/.*warning: step \([0-9]*\): gradient norm .*update skipped (1 so far)$/\1/p' a.err)
[ "$first" -gt 128 ] && echo "the first skipped step comes after the window filled"
n=$(grep -c 'update skipped' a.err)
grep -q "\"step\":200,.*\"skipped\":$n[,}]" a/metrics.jsonl && echo "metrics.jsonl counts every warning"
awk '/update skipped/ { for (i = 1; i < NF; i++) if ($(i + 1) == "standard") z = $i;
                        if (!(z > 0.5)) bad++ }
     END { print (bad + 0) " warnings at or under z = 0.5" }' a.err
python3 -c 'import json, struct, sys; f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
st = json.loads(json.loads(f.read(n))["__metadata__"]["gptkit.train"])
print("checkpoint windows:", len(st["recent_loss"]), len(st["recent_grad_norm"]))' a/latest.safetensors
gpt-train -q "${A[@]}" --max_iters=$((first - 1)) --out_dir=b > /dev/null
gpt-train -q "${A[@]}" --max_iters=200 --out_dir=b --init_from=resume > /dev/null
cmp <(losses a/metrics.jsonl) <(losses b/metrics.jsonl) && echo "resumed before a skip: the same losses"
cmp <(st_data a/latest.safetensors) <(st_data b/latest.safetensors) && echo "and the same weights and moments"
# a loss spike, from a poisoned checkpoint
python3 "$TOP/tests/cli/train_poison.py" a/latest.safetensors transformer.ln_f.weight 5
cp a/latest.safetensors poisoned.safetensors
gpt-train "${TINY[@]}" --eval_interval=1000 --skip_loss_z=3 --max_iters=202 --out_dir=a \
  --init_from=resume > /dev/null 2> c.err
sed -n 's/.*warning: step \([0-9]*\): loss [0-9.]* is [0-9.]* standard deviations above the mean of the last 128 steps.*update skipped.*/step \1: loss spike skipped/p' c.err
cmp <(st_data poisoned.safetensors) <(st_data a/latest.safetensors) && echo "weights and moments unchanged"
