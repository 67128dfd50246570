# Every tiktoken reference case, end to end: file -> shard ids == .ids (after the document
# token), --allow-special == .special_ids, and -d gives the text back byte for byte.
source "$TOP/tests/cli/lib.bash"; need_data
n=0
for txt in "$DATA"/tokenizer-cases/*.txt; do
  name=${txt%.txt}
  gpt-tokenize -q -j2 "$txt" -o out.bin
  want="50256 $(cat "$name.ids")"
  got=$(ids out.bin)
  [ "$got" = "${want% }" ] || { echo "$(basename "$name"): ids differ" >&2; exit 1; }
  gpt-tokenize -q -d out.bin > back.txt
  cmp -s back.txt "$txt" || { echo "$(basename "$name"): decode differs" >&2; exit 1; }
  if [ -f "$name.special_ids" ]; then
    gpt-tokenize -q --allow-special "$txt" -o sp.bin
    [ "$(ids sp.bin)" = "50256 $(cat "$name.special_ids")" ] || { echo "$(basename "$name"): special ids differ" >&2; exit 1; }
  fi
  n=$((n + 1))
done
echo "$n cases"
