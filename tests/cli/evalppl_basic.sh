# gpt-evalppl on a tiny char-level model: a shard and the same text give the same tokens and
# NLL (text adds bpb); --json keys; stdin from gpt-tokenize; strides; errors.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=10 --eval_interval=10 --out_dir=o > train.log
export GPT_MODEL=o/latest.safetensors
head -c 3000 d/input.txt | tail -c 1000 > t.txt
gpt-tokenize -q -V d/vocab.json t.txt -o t.bin
gpt-evalppl -q --json t.bin > shard.json
gpt-evalppl -q --json t.txt > text.json
jq -c 'keys_unsorted' shard.json text.json
jq -r '.tokens' shard.json
cmp <(jq -c '{tokens, nll, ppl}' shard.json) <(jq -c '{tokens, nll, ppl}' text.json) && echo "shard = text"
gpt-tokenize -q -V d/vocab.json < t.txt | gpt-evalppl -q --json > pipe.json
cmp pipe.json shard.json && echo "stdin pipe = shard"
cat t.txt | gpt-evalppl -q --json | cmp - text.json && echo "stdin text = text"
# smaller strides see more context: every token is still scored once
gpt-evalppl -q --json --stride 4 t.bin | jq -r '.tokens'
gpt-evalppl -q --json --context 8 --stride 8 t.bin | jq -r '.tokens'
jq -n --slurpfile a shard.json --slurpfile b <(gpt-evalppl -q --json --stride 4 t.bin) \
  '$b[0].nll < $a[0].nll' 
# two files: totals add up; --per-doc gives a line per input (no <|endoftext|> in a char vocab)
gpt-evalppl -q --per-doc t.bin t.bin | sed 's/nll.*//'
# the human form
gpt-evalppl -q t.txt | sed -E 's/[0-9]+\.[0-9]+/X/g'
code() { "$@" > out 2> err && echo "exit 0" || echo "exit $?"; wc -l < err; }
code gpt-evalppl -m nope.safetensors t.bin
code gpt-evalppl --stride 9 --context 8 t.bin
code gpt-evalppl --context 17 t.bin
printf 'xyz\xe2\x82\xac' > euro.txt
code gpt-evalppl euro.txt
cat err
code gpt-evalppl --raw t.txt
printf 'a' > one.txt
code gpt-evalppl one.txt
