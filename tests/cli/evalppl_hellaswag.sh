# gpt-evalppl --hellaswag on the tiny transformers fixture: every item's summed NLL per ending,
# token counts, predictions and the accuracies equal what transformers computed
# (tests/ref/hellaswag_tiny.py -> tests/fixtures/hellaswag/expect.json), item 4 needing its
# context cut to the model's 32 tokens; rows packed 1, 3, 4 (the default) or 16 a forward and
# cuda-emu give the same; the text form; errors.
source "$TOP/tests/cli/lib.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o m.safetensors
export GPT_MODEL=m.safetensors
H="$FIX/hellaswag"
gpt-evalppl -q --hellaswag --per-doc --json "$H/items.jsonl" > got.jsonl
tail -n 1 got.jsonl
# per item: labels, predictions and counts exactly; the sums within float32 rounding
jq -s -c --slurpfile want "$H/expect.json" '
  [.[:-1], $want[0].items] | transpose | map(
    (.[0].line == .[1].line and .[0].label == .[1].label and .[0].pred == .[1].pred and
     .[0].pred_norm == .[1].pred_norm and .[0].tokens == .[1].tokens and
     ([.[0].nll, .[1].nll] | transpose | all(((.[0] - .[1]) | fabs) <= 1e-5 * (.[1] | fabs))))
  ) | {items: length, all_match: all}' got.jsonl
jq -s -c --slurpfile want "$H/expect.json" \
  '.[-1] | {acc_match: (.acc - $want[0].acc | fabs < 1e-12), acc_norm_match: (.acc_norm - $want[0].acc_norm | fabs < 1e-12)}' got.jsonl
# rows packed 1, 3 or 16 a forward: the sums of 4 (the default)
for rows in 1 3 16; do
  gpt-evalppl -q --hellaswag --per-doc --json --batch $rows "$H/items.jsonl" |
    jq -s -c --slurpfile d got.jsonl --argjson r $rows '[.[:-1], $d[0:-1]] | transpose |
      {rows: $r, same: all(.[0].pred == .[1].pred and .[0].tokens == .[1].tokens and
        ([.[0].nll, .[1].nll] | transpose | all(((.[0] - .[1]) | fabs) <= 1e-6 * (.[1] | fabs))))}'
done
# the same on cuda-emu (fp32), from stdin
gpt-evalppl -q --hellaswag --per-doc --json --device cuda-emu --dtype float32 < "$H/items.jsonl" |
  jq -s -c --slurpfile cpu got.jsonl '[.[:-1], $cpu[0:-1]] | transpose |
    all(.[0].pred == .[1].pred and .[0].pred_norm == .[1].pred_norm and
        ([.[0].nll, .[1].nll] | transpose | all(((.[0] - .[1]) | fabs) <= 1e-4 * (.[1] | fabs))))'
# without --batch: 4 rows a forward on the CPU and under the emulator (host memory), 64 on a GPU
for dev in cpu cuda-emu; do
  err=$(gpt-evalppl --hellaswag --device $dev --dtype float32 "$H/items.jsonl" 2>&1 > /dev/null)
  [[ $err == *"(4 rows a forward)"* ]] && echo "$dev: 4 rows a forward"
done
# the human form, two files: totals add up
cp "$H/items.jsonl" items.jsonl
gpt-evalppl -q --hellaswag items.jsonl items.jsonl
gpt-evalppl -q --hellaswag --per-doc items.jsonl | head -n 2
code() { "$@" > out 2> err && echo "exit 0" || echo "exit $?"; cat err; [ -s out ] && echo "stdout not empty" || true; }
item() { printf '%s\n' '{"ctx": "A cat sat on", "endings": ["the mat.", "a dog."], "label": 0}' "$1" > bad.jsonl; }
for bad in '{"ctx": "A cat", "endings": ["x", "y"], "label": 2}' \
    '{"ctx": "A cat", "endings": ["x", "y"], "label": 1.5}' \
    '{"ctx": "A cat", "endings": ["x", "y"], "label": "+1"}' \
    '{"ctx": "A cat", "endings": ["x"], "label": 0}' \
    '{"ctx": "", "endings": ["x", "y"], "label": 0}' \
    '{"ctx": "A cat", "endings": ["x", "y"]}' \
    '{"ctx": "A cat", "endings": ["x", 7], "label": "1"}' \
    '{"ctx": "A cat", "endings": ["x", "y"], "label": 0' \
    '["A cat"]'; do
  item "$bad"
  code gpt-evalppl --hellaswag bad.jsonl
done
item '{"ctx": "A cat", "endings": ["x", "a very long ending that does not fit"], "label": 0}'
code gpt-evalppl --hellaswag --context 16 bad.jsonl
# a byte-order mark at the start of the file is skipped; elsewhere it is shown escaped, as
# control characters are; one item and one row a forward are singular
printf '\xEF\xBB\xBF{"ctx": "A cat sat on", "endings": ["the mat.", "a dog."], "label": 0}\n' > bom.jsonl
gpt-evalppl --hellaswag --batch 1 bom.jsonl 2>&1 | sed -E 's/[0-9]+\.[0-9]+ s/X s/'
cat bom.jsonl bom.jsonl > bom2.jsonl
code gpt-evalppl --hellaswag bom2.jsonl
printf '\x01\n' > ctl.jsonl
code gpt-evalppl --hellaswag ctl.jsonl
printf '\n \n' > empty.jsonl
code gpt-evalppl --hellaswag empty.jsonl
code gpt-evalppl --hellaswag nope.jsonl
code gpt-evalppl --hellaswag .
code gpt-evalppl --hellaswag --stride 4 "$H/items.jsonl"
code gpt-evalppl --hellaswag --raw "$H/items.jsonl"
code gpt-evalppl --batch 4 "$H/items.jsonl"
code gpt-evalppl --hellaswag <&-
