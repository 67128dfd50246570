# Tiny Shakespeare: 338025 tokens (tiktoken) plus the document token; the header count is
# patched when stdout is a file and -1 on a pipe; decode gives the text back.
source "$TOP/tests/cli/lib.bash"; need_data
txt="$DATA/tinyshakespeare/input.txt"
gpt-tokenize -q < "$txt" > train.bin
header_int train.bin 0
header_int train.bin 1
header_int train.bin 2
header_int train.bin 3
gpt-tokenize -q < "$txt" | cat > piped.bin
header_int piped.bin 2
cmp <(tail -c +1025 train.bin) <(tail -c +1025 piped.bin)
gpt-tokenize -d < piped.bin | cmp - "$txt"
gpt-tokenize -d train.bin | cmp - "$txt"
# stdin, a file and -o give the same bytes
gpt-tokenize -q "$txt" -o named.bin
cmp train.bin named.bin
echo ok
