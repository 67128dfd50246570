# A char-level run without `vocab =` finds the vocab.json that gpt-tokenize --vocab-out wrote
# beside its shards (gpt-train(1): "the one the data was made with, when found"), so that its
# checkpoints carry it and gpt-sample needs no -V (was: "vocabulary unknown", then gpt-sample
# asked for a GPT-2 vocabulary). A vocab.json of another vocabulary there is not taken. Without
# one, gpt-sample names -V, not the GPT-2 lookup.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
NOVOCAB=()
for a in "${TINY[@]}"; do [[ $a == --vocab=* ]] || NOVOCAB+=("$a"); done
gpt-train "${NOVOCAB[@]}" --max_iters=2 --eval_interval=2 --out_dir=o > train.log 2> train.err
grep -c 'vocabulary unknown' train.err || true
gpt-ckpt info o/latest.safetensors | grep '^tokenizer:'
gpt-sample -q -m o/latest.safetensors -n 20 --seed 3 > s.txt
gpt-sample -q -m o/latest.safetensors -V d/vocab.json -n 20 --seed 3 | cmp - s.txt && echo "same text as with -V"
# the shards elsewhere (no vocab.json beside them), and a vocab.json of another text beside them
mkdir e f; cp d/train.bin d/val.bin e/; cp d/train.bin d/val.bin f/
printf 'xyz' > other.txt; gpt-tokenize -q --char other.txt --vocab-out f/vocab.json -o /dev/null
for dir in e f; do
  args=(); for a in "${NOVOCAB[@]}"; do args+=("${a/=d\//=$dir/}"); done
  gpt-train "${args[@]}" --max_iters=2 --eval_interval=2 --out_dir=o$dir > /dev/null 2> train.err
  grep 'vocabulary unknown' train.err
  gpt-sample -q -m o$dir/latest.safetensors -n 5 2>&1 && echo "exit 0" || echo "exit $?"
done
