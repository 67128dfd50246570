# gpt-train's hellaswag key: at each evaluation (step 0 too) the items are scored (kernels/infer/multichoice.c, as
# gpt-evalppl --hellaswag scores them) and acc_norm is printed and logged; the logged accuracies
# equal gpt-evalppl's on the checkpoint of that step, whole rows or rows in forwards of
# batch_size (2 here: 4 endings in two forwards); 2 ranks (each scoring every other item)
# give the one-process numbers; eval_only; bad items stop the run before training.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
# 16 items from the training text: a 24-character context, its true next 8 characters (at
# position i mod 4) and 3 other places' next 8, with a newline-free alphabet
python3 - d/input.txt > items.jsonl <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read().replace("\n", " ")
for i in range(16):
    at = 500 + 977 * i
    ends = [text[at + 24 + 1231 * k:at + 32 + 1231 * k] for k in range(4)]
    label = i % 4
    ends[0], ends[label] = ends[label], ends[0]
    print(json.dumps({"ctx": text[at:at + 24], "endings": ends, "label": label}))
PY
ARGS=("${TINY[@]}" --threads=1 --batch_size=2 --gradient_accumulation_steps=4 --max_iters=8
      --eval_interval=4 --hellaswag=items.jsonl --dist_timeout=60)
gpt-train -q "${ARGS[@]}" --out_dir=one > one.log
grep -o 'step [0-9]*: .*' one.log | sed -E 's/[0-9]+\.[0-9]+/X/g'
jq -c 'select(.hellaswag_acc_norm != null) | {step, hellaswag_acc, hellaswag_acc_norm}' one/metrics.jsonl > one.acc
wc -l < one.acc
grep -v '"step":0,' one.acc > ckpt.acc
for step in 4 8; do
  gpt-evalppl -q --hellaswag --json -m one/ckpt_0000000$step.safetensors items.jsonl |
    jq -c --argjson s $step '{step: $s, hellaswag_acc: .acc, hellaswag_acc_norm: .acc_norm}'
done | cmp - ckpt.acc && echo "the accuracies gpt-evalppl gives on the checkpoints"
gpt-train -q "${ARGS[@]}" --out_dir=two --nproc_per_node=2 > two.log
jq -c 'select(.hellaswag_acc_norm != null) | {step, hellaswag_acc, hellaswag_acc_norm}' two/metrics.jsonl |
  cmp - one.acc && echo "2 ranks: the same accuracies"
gpt-train -q "${ARGS[@]}" --out_dir=one --init_from=resume --eval_only=true | sed -E 's/[0-9]+\.[0-9]+/X/g'
code() { "$@" > out 2> err && echo "exit 0" || echo "exit $?"; cat err; }
# setup errors (exit 2) alike: no items file, no vocabulary (the data's found beside it, so the
# shards are copied away from it), no items, a bad item
code gpt-train -q "${ARGS[@]}" --out_dir=bad --hellaswag=nope.jsonl
mkdir nv && cp d/train.bin d/val.bin nv/
code gpt-train -q "${ARGS[@]}" --out_dir=bad --train_data=nv/train.bin --val_data=nv/val.bin --vocab= \
  --hellaswag=items.jsonl
printf '%s\n' '{"ctx": "a", "endings": ["b", "c"], "label": 0}' '{"ctx": "a", "endings": ["b", "%"], "label": 0}' > bad.jsonl
printf '\n' > empty.jsonl
code gpt-train -q "${ARGS[@]}" --out_dir=bad --hellaswag=empty.jsonl
code gpt-train -q "${ARGS[@]}" --out_dir=bad --hellaswag=bad.jsonl
test ! -e bad && echo "no out_dir left"
