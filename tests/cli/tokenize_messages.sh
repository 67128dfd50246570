# Messages that used to mislead: a closed stdin (encoded as an empty document, exit 0), an output
# directory that does not exist (read like a missing input), -d of a char shard without -V ("no
# GPT-2 vocabulary found"), -d of text or garbage (decoded as raw tokens), "1 tokens", "0.0 MB/s".
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(cat err.txt) [stdout: $(wc -c < out.txt) bytes]"; }
printf 'hello world\n' > t.txt
# stdin closed: an error, and nothing written (the shell made x.bin: it stays empty)
run sh -c 'gpt-tokenize <&- > x.bin'; wc -c < x.bin
run sh -c 'gpt-tokenize -o y.bin <&-'; test ! -e y.bin && echo "no y.bin"
run sh -c 'gpt-tokenize -d <&-'
run sh -c 'gpt-tokenize -q t.txt -o t.bin <&-' && test -s t.bin && echo "files: stdin not needed"
# the output's directory
run gpt-tokenize t.txt -o nodir/x.bin
run gpt-tokenize t.txt -o t.txt/x.bin
run gpt-tokenize t.txt -o .
run gpt-tokenize t.txt -o nodir/pre --shard-tokens 10
run gpt-tokenize t.txt -o o.bin --val-fraction 0.5 --val-output nodir/v.bin
ls | grep -c '\.tmp\.\|o\.bin' || true
# -d of a char shard: its header says how big its vocabulary is; -V is what it needs
tiny_data d
run gpt-tokenize -d d/train.bin
run env -u GPT_VOCAB HF_HOME=/nonexistent gpt-tokenize -d d/train.bin
gpt-tokenize -d -V d/vocab.json d/train.bin d/val.bin | cmp - d/input.txt && echo "with -V: the text"
# -d of text or garbage: "not a token shard", before anything is written
run gpt-tokenize -d t.txt
printf 'ok\0\0' > g.bin; head -c 3000 /dev/zero | tr '\0' '\376' >> g.bin
run gpt-tokenize -d g.bin
run gpt-tokenize -d t.bin g.bin
run sh -c 'gpt-tokenize -d - < t.txt'
# header-less tokens (nanoGPT) still decode
tail -c +1025 t.bin > raw.bin
gpt-tokenize -d raw.bin | cmp - t.txt && echo "raw: the text"
# -d to a full disk fails
run sh -c 'gpt-tokenize -d t.bin > /dev/full'
# the summary: singular and plural, a time for tiny inputs and no meaningless rate
gpt-tokenize -o e.bin < /dev/null 2>&1 | sed -E 's/in [0-9.]+ m?s/in T/'
gpt-tokenize t.txt -o t.bin 2>&1 | sed -E 's/in [0-9.]+ m?s/in T/'
gpt-tokenize "$DATA/tinyshakespeare/input.txt" -o s.bin 2>&1 | sed -E 's/in [0-9.]+ m?s \([0-9.]+ [kMG]?B\/s\)/in T (R)/'
# the summary lost to a full disk is a failed run too (the shard itself is complete)
rc=0; gpt-tokenize t.txt -o f.bin 2> /dev/full || rc=$?; echo "stderr full: exit $rc"; test -s f.bin
