# Outputs onto devices, as root (the test machines run as root; /dev is writable then): with
# numbered shards or a validation split, -o /dev/null discards every shard and no file is made in
# /dev (before: /dev/null_000000.bin... and /dev/null_val.bin were created there); another
# device (/dev/zero) is refused in one line, exit 2, and nothing is made beside it either.
source "$TOP/tests/cli/lib.bash"; need_data
[ "$(id -u)" = 0 ] || { echo "not root: /dev is not writable, so the files beside a device cannot be made" >&2; exit 77; }
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed 's/ in [0-9.]* m*s$//' err.txt)"; }
docs=$FIX/tokenize/docs.jsonl
leftovers() { ls /dev/null_* /dev/zero_* 2>/dev/null || true; rm -f /dev/null_*.bin /dev/zero_*.bin; }
trap leftovers EXIT
run gpt-tokenize --char "$docs" -o /dev/null --shard-tokens 500
echo "in /dev: $(leftovers | wc -l) files"
run gpt-tokenize --char "$docs" -o /dev/null --shard-tokens 500 --val-docs 2
run gpt-tokenize --char "$docs" -o /dev/null --shard-tokens 500 --val-fraction 0.5 --val-output /dev/null
run gpt-tokenize --char "$docs" -o /dev/null --val-tokens 10
echo "in /dev: $(leftovers | wc -l) files"
run gpt-tokenize --char "$docs" -o /dev/zero --shard-tokens 500
run gpt-tokenize --char "$docs" -o /dev/zero --val-docs 2
echo "in /dev: $(leftovers | wc -l) files"
test -c /dev/null && echo "/dev/null is still a character device"
