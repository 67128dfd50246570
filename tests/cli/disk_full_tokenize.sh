# gpt-tokenize on a full disk (a small tmpfs; a filler file leaves N kB free, so that the write
# fails at the header, midway, or at the commit's last flush): exit 1, one line naming the file
# and "No space left on device", no temporary left, and an earlier output of that name kept.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/disk_full.bash"
head -c 100000 "$DATA/tinyshakespeare/input.txt" > in.txt
gpt-tokenize -q in.txt -o ref.bin # 62 kB
small_fs fs 256
echo "== one shard"
echo old > fs/t.bin
for kb in 0 28 60; do
  fill fs $kb; try gpt-tokenize -q in.txt -o fs/t.bin; leftovers fs; cat fs/t.bin
done
fill fs 64; gpt-tokenize -q in.txt -o fs/t.bin && cmp fs/t.bin ref.bin && echo "64 kB free: written"
rm fs/t.bin
echo "== numbered shards (5000 tokens, 10 kB each)"
# a failed run leaves none of its shards: the one being written and those already completed go
for kb in 0 24; do
  fill fs $kb; try gpt-tokenize -q in.txt -o fs/s --shard-tokens 5000; leftovers fs
  for f in fs/s_*.bin; do [ -e "$f" ] && echo "$f: $(header_int "$f" 2) tokens, $(( $(stat -c %s "$f") - 1024 )) bytes"; done
  rm -f fs/s_*
done
echo "== --val-output"
# 0: the training shard's first write; 52: the validation shard; 60: the training shard's commit,
# after the validation shard's (which is removed again: no half of a split is left)
for kb in 0 52 60; do
  fill fs $kb; try gpt-tokenize -q in.txt -o fs/t.bin --val-fraction 0.1 --val-output fs/v.bin; leftovers fs
done
mkdir big
fill fs 52; try gpt-tokenize -q in.txt -o fs/t.bin --val-fraction 0.1 --val-output big/v.bin; leftovers fs; leftovers big
fill fs 64; gpt-tokenize -q in.txt -o fs/t.bin --val-fraction 0.1 --val-output big/v.bin; leftovers fs; leftovers big
echo "== --char --vocab-out"
rm -f fs/t.bin big/v.bin
fill fs 0; try gpt-tokenize -q --char in.txt --vocab-out fs/vocab.json -o big/c.bin; leftovers fs; leftovers big
echo "== a full TMPDIR (the tokens held for --val-fraction, the text for --char)"
rm -f big/*
fill fs 0; TMPDIR=fs try gpt-tokenize -q in.txt -o big/t.bin --val-fraction 0.1 --val-output big/v.bin; leftovers fs; leftovers big
TMPDIR=fs try gpt-tokenize -q --char in.txt -o big/c.bin; leftovers fs; leftovers big
