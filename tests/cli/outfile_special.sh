# Outputs whose path is not a plain file (issue 23): a symbolic link is followed (its target
# replaced, the link kept; a dangling one makes its target), a FIFO with a reader gets the bytes
# and stays a FIFO, /dev/null and /dev/full are written where they are (a full device is an
# error, exit 1) and stay character devices: gpt-tokenize's -o, --vocab-out and --val-output,
# gpt-ckpt convert -o and export --llmc. (As root these were renamed over before.)
source "$TOP/tests/cli/lib.bash"
printf 'hello world\nthe quick brown fox jumps\n' > in.txt
gpt-tokenize -q --char in.txt -o ref.bin --vocab-out ref.json
gpt-tokenize -q --char in.txt -o refv.bin --val-fraction 0.5 --val-output refval.bin
gpt-ckpt import -q "$FIX/hf_tiny" -o a.safetensors
gpt-ckpt convert -q --dtype bf16 a.safetensors -o ref.safetensors
# kept LINK TEXT FILE REF: LINK still says TEXT, and FILE (what it names) holds REF's bytes
kept() { [ -L "$1" ] && [ "$(readlink "$1")" = "$2" ] && cmp "$3" "$4" && echo "$1 -> $2: written, link kept"; }

echo "== symbolic links"
echo old > t.bin && ln -s t.bin l.bin && ln -s v.json lv.json && mkdir sub && ln -s ../val.bin sub/lval.bin
gpt-tokenize -q --char in.txt -o l.bin --vocab-out lv.json
kept l.bin t.bin t.bin ref.bin
kept lv.json v.json v.json ref.json
gpt-tokenize -q --char in.txt -o l.bin --val-fraction 0.5 --val-output sub/lval.bin
kept l.bin t.bin t.bin refv.bin
kept sub/lval.bin ../val.bin val.bin refval.bin
ln -s c.safetensors lc.safetensors
gpt-ckpt convert -q --dtype bf16 a.safetensors -o lc.safetensors
kept lc.safetensors c.safetensors c.safetensors ref.safetensors
echo "temporaries left: $(ls | grep -c '\.tmp\.' || true)"

echo "== a FIFO with a reader"
mkfifo p.bin p.st
timeout 20 cat p.bin > got.bin & gpt-tokenize -q --char in.txt -o p.bin; wait $!
[ -p p.bin ] && echo "p.bin: still a FIFO; header count $(header_int got.bin 2) (read to EOF)"
cmp <(tail -c +1025 got.bin) <(tail -c +1025 ref.bin) && echo "p.bin: the tokens of ref.bin"
timeout 20 cat p.st > got.st & gpt-ckpt convert -q --dtype bf16 a.safetensors -o p.st; wait $!
[ -p p.st ] && cmp got.st ref.safetensors && echo "p.st: still a FIFO, the bytes of ref.safetensors"

echo "== /dev/null and /dev/full"
gpt-tokenize -q --char in.txt -o /dev/null --vocab-out /dev/null && echo "gpt-tokenize -o /dev/null: exit 0"
gpt-ckpt convert -q --dtype bf16 a.safetensors -o /dev/null && echo "gpt-ckpt convert -o /dev/null: exit 0"
gpt-tokenize -q --char in.txt -o /dev/full || echo "exit $?"
gpt-tokenize -q --char in.txt -o x.bin --vocab-out /dev/full || echo "exit $?"
gpt-ckpt convert -q --dtype bf16 a.safetensors -o /dev/full || echo "exit $?"
gpt-ckpt export -q --llmc /dev/full a.safetensors || echo "exit $?"
[ -c /dev/null ] && [ -c /dev/full ] && echo "/dev/null, /dev/full: still character devices"
echo "temporaries in /dev: $(ls /dev | grep -c '\.tmp\.' || true)"
