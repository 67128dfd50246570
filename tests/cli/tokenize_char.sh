# Char-level (nanoGPT shakespeare_char): 65 characters, 90/10 split of 1115394 characters into
# 1003854 + 111540 tokens, no document token; the vocabulary file decodes and re-encodes.
source "$TOP/tests/cli/lib.bash"; need_data
txt="$DATA/tinyshakespeare/input.txt"
gpt-tokenize -q --char --vocab-out vocab.json "$txt" -o train.bin --val-fraction 0.1 --val-output val.bin
header_int train.bin 2
header_int val.bin 2
header_int train.bin 3
cat train.bin > all.bin; tail -c +1025 val.bin >> all.bin   # header count is now stale: use -1
printf '\xff\xff\xff\xff' | dd of=all.bin bs=1 seek=8 conv=notrunc status=none
gpt-tokenize -d -V vocab.json all.bin | cmp - "$txt"
ids train.bin | cut -d' ' -f1-8
gpt-tokenize -q -V vocab.json "$txt" -o again.bin
cmp <(tail -c +1025 again.bin | head -c 2007708) <(tail -c +1025 train.bin)
# a character outside the vocabulary is an error naming it
printf 'caf\xc3\xa9\n' > new.txt
if gpt-tokenize -q -V vocab.json new.txt -o new.bin 2>err.txt; then exit 1; fi
grep -q 'U+00E9' err.txt
test ! -e new.bin
