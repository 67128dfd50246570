# gpt-sample on a tiny char-level model: same seed, same output; another seed, another output;
# -t 0 is deterministic; --ids decodes to the text; --num-samples; -f; generation past block_size.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=10 --eval_interval=10 --out_dir=o > train.log
export GPT_MODEL=o/latest.safetensors
gpt-sample -q -n 30 --seed 7 > a1
gpt-sample -q -n 30 --seed 7 > a2
gpt-sample -q -n 30 --seed 8 > b
cmp a1 a2 && echo "same seed: same output"
cmp -s a1 b || echo "other seed: other output"
gpt-sample -q -n 30 -t 0 --seed 1 > g1
gpt-sample -q -n 30 -t 0 --seed 2 > g2
cmp g1 g2 && echo "greedy: seed does not matter"
# --ids: the same tokens as the text (char vocab: id i is the i-th character of vocab.json)
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --ids > ids
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' > text
wc -w < ids
jq -rj --argjson ids "[$(tr ' ' , < ids)]" '. as $v | $ids | map($v[.]) | join("")' d/vocab.json > decoded
echo >> decoded
cmp decoded text && echo "ids decode to the text"
head -c 6 text; echo
# three samples as one batch: separated by "---", sample 0 equal to a batch of one
gpt-sample -q -n 30 --seed 7 -p 'ROMEO:' --num-samples 3 > three
grep -c '^---$' three
head -n "$(wc -l < text)" three | cmp - text && echo "sample 0 of the batch = the single sample"
# prompt from a file
printf 'JULIET:\n' > prompt.txt
gpt-sample -q -n 5 -f prompt.txt > fromfile; head -n 1 fromfile
# a prompt longer than block_size (16) is cropped; 40 tokens run past block_size
gpt-sample -n 40 -p "$(head -c 50 d/input.txt)" > long 2> long.err
grep -c 'cropped to the last 16' long.err
[ "$(wc -c < long)" -gt 80 ] && echo "long sample ok"
# --stop-at-eot is harmless on a char vocab (no <|endoftext|>)
gpt-sample -q -n 10 --stop-at-eot | wc -l
# the summary counts in words that read right: one token, several tokens
gpt-sample -n 1 > /dev/null 2> summary.txt
sed -E 's/[0-9]+\.[0-9]+/T/g' summary.txt
