# Inputs of NUL bytes: libarchive reads any input that starts with a 512-byte block of NULs as a
# tar archive that ends there (a real empty tar is only such blocks: the two cannot be told
# apart), so a file of 512 NULs or more, plain, compressed or on stdin, holds no documents. It
# used to become an empty shard with nothing said; now one line names the input (exit 0, as for
# skipped binary members). Fewer NULs are text, as tiktoken reads them.
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed -E 's/in [0-9.]+ m?s/in T/' err.txt)"; }
head -c 4 /dev/zero > z4
head -c 511 /dev/zero > z511
head -c 512 /dev/zero > z512
head -c 4096 /dev/zero > z4096
head -c 4096 /dev/zero | gzip > z4096.gz
head -c 4096 /dev/zero | zstd -q > z4096.zst
tar -cf empty.tar --files-from /dev/null
python3 -c 'import zipfile; zipfile.ZipFile("empty.zip", "w").close()'
printf 'text after a block of NULs\n' | cat z512 - > z512text
run gpt-tokenize z4 -o z4.bin; ids z4.bin
run gpt-tokenize z511 -o z511.bin; echo "$(ids z511.bin | wc -w) tokens"
for f in z512 z4096 z4096.gz z4096.zst empty.tar empty.zip z512text; do
  run gpt-tokenize "$f" -o "$f.bin"; echo "$f.bin: $(wc -c < "$f.bin") bytes"
done
run sh -c 'gpt-tokenize -o stdin.bin < z4096.gz'
run gpt-tokenize -q z4096 -o q.bin
run gpt-tokenize --char z4096 -o c.bin
# beside other inputs: their documents, and the line for the empty one
printf 'hello\n' > t.txt
run gpt-tokenize t.txt z4096.gz t.txt -o two.bin; ids two.bin
