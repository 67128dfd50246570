# Parquet inputs: one document a row, ids equal tiktoken's (tests/ref/tokenize_rows.py made
# docs.parquet and docs.ids; a null row skipped and counted), -j 1 = -j 2; --column; a quoted glob
# and a directory stand for their files in sorted order (Parquet, JSON Lines and text mixed);
# bad files (tests/ref/parquet_fixtures.py) fail naming the file and leave no output; Parquet
# compressed (gzip, zstd, xz), on stdin or through a pipe is read as the file is; column
# mistakes exit 1 whatever their kind.
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed 's/ in [0-9.]* m*s.*$//' err.txt)"; }
cp "$FIX/tokenize/docs.parquet" "$FIX/tokenize/docs.jsonl" .
for f in two_strings numbers bad_dict_index bad_pagelen nested content; do cp "$FIX/parquet/$f.parquet" .; done
run gpt-tokenize -j 1 docs.parquet -o a.bin
ids a.bin | cmp - "$FIX/tokenize/docs.ids" && echo "parquet: tiktoken's ids"
gpt-tokenize -q -j 2 docs.parquet -o b.bin; cmp a.bin b.bin && echo "-j 1 = -j 2"
# a directory and a glob: sorted, each file by its content
mkdir -p d/sub; cp docs.parquet d/b.parquet; cp docs.jsonl d/a.jsonl; cp docs.parquet d/sub/c.parquet
cp docs.parquet d/.hidden.parquet; echo "plain text" > d/z.txt
gpt-tokenize -q d -o dir.bin
{ cat "$FIX/tokenize/docs.ids" "$FIX/tokenize/docs.ids" "$FIX/tokenize/docs.ids"; echo "50256 25638 2420 198"; } |
  tr -s ' \n' '\n\n' > want.txt
ids dir.bin | tr -s ' \n' '\n\n' | cmp - want.txt && echo "directory: a.jsonl, b.parquet, sub/c.parquet, z.txt"
gpt-tokenize -q 'd/*.parquet' d/sub -o glob.bin
ids glob.bin | tr -s ' \n' '\n\n' | cmp - <(cat "$FIX/tokenize/docs.ids" "$FIX/tokenize/docs.ids" | tr -s ' \n' '\n\n') &&
  echo "'d/*.parquet' d/sub: b.parquet, sub/c.parquet"
run gpt-tokenize 'd/*.nothing' -o g.bin
mkdir empty; run gpt-tokenize empty -o g.bin
# columns: by name, nested by a dotted path, the choice refused with the columns listed
run gpt-tokenize content.parquet -o c.bin
run gpt-tokenize --column title two_strings.parquet -o t.bin
gpt-tokenize -q -d t.bin; echo
run gpt-tokenize two_strings.parquet -o g.bin
run gpt-tokenize --column nope content.parquet -o g.bin
run gpt-tokenize --column meta.text nested.parquet -o n.bin
# limits and the first documents to validation across files
gpt-tokenize -q --max-docs 10 docs.parquet docs.parquet -o m.bin
echo "--max-docs 10 over two files: $(ids m.bin | tr ' ' '\n' | grep -c '^50256$') documents"
gpt-tokenize -q --val-docs 8 --val-output v.bin docs.parquet docs.parquet -o tr.bin
cmp v.bin a.bin && echo "--val-docs 8: the first file"
# bad files: one line naming the file and the row group, no output
run gpt-tokenize numbers.parquet -o g.bin
run gpt-tokenize docs.parquet bad_dict_index.parquet -o g.bin
run gpt-tokenize docs.parquet bad_pagelen.parquet -o g.bin
head -c 1000 docs.parquet > cut.parquet
run gpt-tokenize cut.parquet -o g.bin
test ! -e g.bin && ! ls g.bin* 2>/dev/null
# numbered shards: those completed before the bad file are removed too, and no temporary is left
run gpt-tokenize docs.parquet docs.parquet bad_dict_index.parquet -o sh --shard-tokens 10
! ls sh_* 2>/dev/null
# Parquet as a stream (compressed, on stdin, through a pipe): copied into a temporary file in
# TMPDIR and read as the file is (before: gzip'd Parquet was read as binary text, U+FFFD warning;
# stdin refused). Char-level runs (no vocabulary to load) compare the text read.
mkdir tmp; export TMPDIR=$PWD/tmp
ch() { gpt-tokenize -q --char -j 1 "$@"; }
ch docs.parquet -o ca.bin
gzip -c docs.parquet > docs.parquet.gz; zstd -q docs.parquet -o docs.parquet.zst; xz -c docs.parquet > docs.parquet.xz
run gpt-tokenize docs.parquet.gz -o z.bin; cmp z.bin a.bin && echo "docs.parquet.gz: tiktoken's ids"
for f in docs.parquet.zst docs.parquet.xz; do ch $f -o z.bin; cmp z.bin ca.bin && echo "$f: the same text"; done
ch < docs.parquet > z.bin && cmp z.bin ca.bin && echo "stdin: the same text"
ch <(cat docs.parquet.gz) -o z.bin && cmp z.bin ca.bin && echo "a pipe of gzip: the same text"
run gpt-tokenize --char --column nope docs.parquet.gz -o g.bin
gzip -c cut.parquet > cut.parquet.gz
run gpt-tokenize --char cut.parquet.gz -o g.bin
test ! -e g.bin && echo "TMPDIR left empty: $(ls tmp | wc -l) files"
TMPDIR=nodir run gpt-tokenize docs.parquet.gz -o g.bin
# a column mistake is exit 1, whatever it is (the file does not offer what was asked, as a JSON
# line without the field); 2 is for a command line wrong in itself
run gpt-tokenize --char --column n content.parquet -o g.bin
run gpt-tokenize --column '' content.parquet -o g.bin
