# Token shards in a bucket read in place (common/io/shard_s3.h, as gpt-train reads them) by
# gpt-tokenize -d and gpt-evalppl, against moto's S3 server (skipped without moto): the text
# and the score of the local files, an object among local files, a GPT-2 (uint16) shard of
# several ranges; a damaged header, a text object and a missing key are one line naming the
# object; nothing is written to TMPDIR.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/s3.bash"
tiny_data d
mkdir tmp
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port TMPDIR=$PWD/tmp
head -c 300000 "$DATA/tinyshakespeare/input.txt" > g.txt
gpt-tokenize -q g.txt -V "$DATA/gpt2" -o g.bin # about 80000 tokens: two ranges of 65536
printf 'First Citizen:\nBefore we proceed any further, hear me speak.\n%.0s' $(seq 30) > text.bin
python3 -c '
import struct, sys
b = bytearray(open("d/val.bin", "rb").read()); b[0] ^= 4; open("magic.bin", "wb").write(b)'
s3py 'for f in ("d/val.bin", "g.bin", "magic.bin", "text.bin"): s3.upload_file(f, "gk-test", "sh/" + f.split("/")[-1])'
gpt-tokenize -d -V d/vocab.json d/val.bin > want.txt
gpt-tokenize -d -V d/vocab.json s3://gk-test/sh/val.bin | cmp - want.txt && echo "-d: the text of the file ($(wc -c < want.txt) bytes)"
gpt-tokenize -d -V d/vocab.json d/val.bin s3://gk-test/sh/val.bin | cmp -s - <(gpt-tokenize -d -V d/vocab.json d/val.bin d/val.bin) &&
  echo "-d: a file then an object: as two files"
gpt-tokenize -d -V "$DATA/gpt2" s3://gk-test/sh/g.bin | cmp - g.txt && echo "-d: GPT-2 shard, the text tokenized"
gpt-train -q "${TINY[@]}" --max_iters=2 --out_dir=out > /dev/null
gpt-evalppl -q -m out --json d/val.bin > want.json
gpt-evalppl -q -m out --json s3://gk-test/sh/val.bin | cmp - want.json && echo "evalppl: the score of the file"
fails() { local rc=0; "$@" > /dev/null 2> err.txt || rc=$?; sed "s/127.0.0.1:$port/ENDPOINT/g" err.txt; echo "exit $rc"; }
for k in magic.bin text.bin nope.bin; do
  fails gpt-tokenize -d -V d/vocab.json s3://gk-test/sh/$k
  fails gpt-evalppl -q -m out s3://gk-test/sh/$k
done
ls tmp | wc -l
