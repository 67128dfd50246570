# --val-fraction by documents (10 files: 9 train, 1 validation), by tokens for one document,
# --doc-sep, and numbered shards.
source "$TOP/tests/cli/lib.bash"; need_data
for i in 0 1 2 3 4 5 6 7 8 9; do echo "doc $i" > f$i.txt; done
gpt-tokenize -q f*.txt -o train.bin --val-fraction 0.1 --val-output val.bin
gpt-tokenize -q -d val.bin; echo
gpt-tokenize -q -d train.bin | head -c 30; echo
printf 'one<|endoftext|>two<|endoftext|>three' > sep.txt
gpt-tokenize -q --doc-sep '<|endoftext|>' sep.txt -o sep.bin
ids sep.bin
gpt-tokenize -q -d sep.bin; echo
gpt-tokenize -q "$DATA/tinyshakespeare/input.txt" -o sh --shard-tokens 100K
ls sh_*.bin | tr '\n' ' '; echo
for f in sh_*.bin; do header_int "$f" 2; done | tr '\n' ' '; echo
cat sh_000000.bin > joined.bin; for f in sh_00000[1-3].bin; do tail -c +1025 "$f" >> joined.bin; done
printf '\xff\xff\xff\xff' | dd of=joined.bin bs=1 seek=8 conv=notrunc status=none
gpt-tokenize -d joined.bin | cmp - "$DATA/tinyshakespeare/input.txt"
