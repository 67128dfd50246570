# Parquet inputs: one document a row, ids equal tiktoken's (tests/ref/tokenize_rows.py made
# docs.parquet and docs.ids; a null row skipped and counted), -j 1 = -j 2; --column; a quoted glob
# and a directory stand for their files in sorted order (Parquet, JSON Lines and text mixed);
# bad files (tests/ref/parquet_fixtures.py) fail naming the file and leave no output.
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
run sh -c 'gpt-tokenize < docs.parquet > g.bin'
