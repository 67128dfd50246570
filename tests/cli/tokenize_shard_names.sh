# Numbered shards (--shard-tokens) are named as llm.c and nanoGPT users expect: -o train.bin
# gives train_000000.bin, train_000001.bin, ... (the prefix's .bin dropped; before:
# train.bin_000000.bin) and its validation split train_val.bin; -o train gives the same names.
# A FIFO as -o with numbered shards is refused in one line (exit 2), and so is a validation
# split beside it: no file is made next to it (timeout: a FIFO without a reader blocks an open).
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed 's/ in [0-9.]* m*s$//' err.txt)"; }
docs=$FIX/tokenize/docs.jsonl
mkdir a b c
gpt-tokenize -q --char "$docs" -o a/train.bin --shard-tokens 500 && ls a
gpt-tokenize -q --char "$docs" -o b/train --shard-tokens 500 && cmp a/train_000002.bin b/train_000002.bin &&
  echo "-o train: the same shards"
gpt-tokenize -q --char "$docs" -o c/train.bin --shard-tokens 500 --val-docs 2 && ls c
gpt-tokenize -q --char "$docs" -o c/x.bin --val-docs 2 && ls c | grep '^x'
mkfifo p
run timeout 10 gpt-tokenize --char "$docs" -o p --shard-tokens 500
run timeout 10 gpt-tokenize --char "$docs" -o p --val-docs 2
ls
