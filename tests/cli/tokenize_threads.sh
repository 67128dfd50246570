# The output is identical for every thread count, on text long enough to be cut into chunks.
source "$TOP/tests/cli/lib.bash"; need_data
for i in 1 2 3; do cat "$DATA/tinyshakespeare/input.txt" "$DATA"/tokenizer-cases/*.txt; done > big.txt
gpt-tokenize -q -j1 big.txt -o j1.bin
gpt-tokenize -q -j2 big.txt -o j2.bin
gpt-tokenize -q -j5 big.txt -o j5.bin
cmp j1.bin j2.bin
cmp j1.bin j5.bin
gpt-tokenize -d j2.bin | cmp - big.txt
echo same
