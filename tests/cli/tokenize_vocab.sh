# Vocabulary lookup: -V, then $GPT_VOCAB, then the HuggingFace cache layout
# ($HF_HOME/hub/models--gpt2/snapshots/REV/ with vocab.json + merges.txt), else a clear error.
# The fingerprint in the shard header is the same whichever file format the vocabulary came from.
source "$TOP/tests/cli/lib.bash"; need_data
printf 'Hello, world! Vocabulary lookup.\n' > t.txt
gpt-tokenize -q -V "$DATA/gpt2" t.txt -o a.bin
snap=hf/hub/models--gpt2/snapshots/0123abc
mkdir -p "$snap"
cp "$DATA/gpt2/encoder.json" "$snap/vocab.json"; cp "$DATA/gpt2/vocab.bpe" "$snap/merges.txt"
unset GPT_VOCAB
HF_HOME=$PWD/hf gpt-tokenize -q t.txt -o b.bin
cmp a.bin b.bin
GPT_VOCAB="$PWD/$snap" HF_HOME=/nonexistent gpt-tokenize -q t.txt -o c.bin
cmp a.bin c.bin
header_int a.bin 4 | grep -qv '^0$'
rc=0; HF_HOME=/nonexistent gpt-tokenize t.txt -o d.bin 2> err.txt || rc=$?
echo "exit $rc"
grep -c 'no GPT-2 vocabulary found' err.txt
test ! -e d.bin
