# Every tool reads shards through one header parser: a shard whose magic was damaged on disk is
# "damaged shard header" in gpt-train, gpt-evalppl and gpt-tokenize -d (before: read as text by
# gpt-evalppl, as raw tokens and then "vocab_size not set" by gpt-train); text given as training
# data is not a shard; a nanoGPT raw .bin given to gpt-evalppl without --raw suggests --raw
# (before: scored as text). gpt-evalppl with stdin closed says so.
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(cat err.txt)"; }
tiny_data d
cp d/train.bin dm.bin; printf '\310\306' | dd of=dm.bin bs=1 seek=0 conv=notrunc 2> /dev/null
cp d/train.bin dz.bin; printf '\0\0\0\0' | dd of=dz.bin bs=1 seek=0 conv=notrunc 2> /dev/null
run gpt-train -q "${TINY[@]}" --train_data=dm.bin --max_iters=2 --out_dir=o1
run gpt-train -q "${TINY[@]}" --val_data=dz.bin --max_iters=2 --out_dir=o1
run gpt-train -q "${TINY[@]}" --train_data=d/input.txt --max_iters=2 --out_dir=o1
run gpt-tokenize -d -V d/vocab.json dm.bin
gpt-train -q "${TINY[@]}" --max_iters=4 --eval_interval=4 --out_dir=o > train.log
export GPT_MODEL=o/latest.safetensors
run gpt-evalppl -q dm.bin
run gpt-evalppl -q dz.bin
tail -c +1025 d/val.bin > raw.bin
run gpt-evalppl -q raw.bin
run sh -c 'gpt-evalppl -q <&-' # stdin closed (before: "nothing to score")
gpt-evalppl -q --json --raw raw.bin | jq -r .tokens
gpt-evalppl -q --json d/val.bin | jq -r .tokens
head -c 1000 d/input.txt > t.txt
gpt-evalppl -q --json t.txt | jq -r .tokens
