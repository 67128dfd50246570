# JSON Lines: one document a line, ids equal tiktoken's (tests/ref/tokenize_rows.py made
# docs.ids), plain and gzip, a dotted --field, -j 1 and -j 2 alike; bad lines fail naming FILE:LINE
# and leave no output, or are skipped and counted with --skip-bad; --max-line bounds a line.
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed 's/ in [0-9.]* m*s$//' err.txt)"; }
gpt-tokenize -q -j 1 "$FIX/tokenize/docs.jsonl" -o a.bin
ids a.bin | cmp - "$FIX/tokenize/docs.ids" && echo "jsonl: tiktoken's ids"
gpt-tokenize -q -j 2 "$FIX/tokenize/docs.jsonl" -o b.bin
cmp a.bin b.bin && echo "-j 1 = -j 2"
gpt-tokenize -q --field meta.body "$FIX/tokenize/nested.jsonl.gz" -o c.bin
cmp a.bin c.bin && echo "gzip, --field meta.body: the same"
# on stdin (no name) only with --field; else the text is one document
gpt-tokenize -q --field text < "$FIX/tokenize/docs.jsonl" > d.bin
cmp a.bin d.bin && echo "stdin with --field: the same"
gpt-tokenize -q < "$FIX/tokenize/docs.jsonl" > e.bin
echo "stdin without --field: $(header_int e.bin 2) tokens, $(ids e.bin | grep -o 50256 | wc -l) document"
# a .txt holding JSON is text; the same with --field is JSON Lines
cp "$FIX/tokenize/docs.jsonl" docs.txt
gpt-tokenize -q docs.txt -o f.bin; echo "docs.txt: $(ids f.bin | grep -o 50256 | wc -l) document"
gpt-tokenize -q --field text docs.txt -o f.bin; cmp a.bin f.bin && echo "docs.txt --field text: rows"
printf '{"text": "ok"}\nnot json\n{"id": 1, "body": "x"}\n{"text": 5}\n[1, 2]\n{"text": "fine"}\n' > bad.jsonl
run gpt-tokenize bad.jsonl -o g.bin
test ! -e g.bin && ! ls g.bin.tmp* 2>/dev/null
printf '{"text": "ok"}\n{"id": 1, "body": "x"}\n' > nofield.jsonl
run gpt-tokenize nofield.jsonl -o g.bin
printf '{"text": "ok"}\n{"text": {"a": 1}}\n' > notstr.jsonl
run gpt-tokenize notstr.jsonl -o g.bin
printf '{"text": "ok"}\n[1, 2]\n' > array.jsonl
run gpt-tokenize array.jsonl -o g.bin
test ! -e g.bin
run gpt-tokenize --skip-bad bad.jsonl -o h.bin
gpt-tokenize -q -d h.bin; echo
printf '{"text": "%s"}\n' "$(head -c 3000 /dev/zero | tr '\0' a)" > long.jsonl
run gpt-tokenize --max-line 2000 long.jsonl -o i.bin
test ! -e i.bin
gpt-tokenize -q --max-line 4000 long.jsonl -o i.bin && echo "--max-line 4000: $(header_int i.bin 2) tokens"
run gpt-tokenize --field '' docs.txt -o j.bin
# a pretty-printed .json (one object over several lines) is not JSON Lines: said so
printf '{\n  "text": "pretty"\n}\n' > pretty.json
run gpt-tokenize pretty.json -o k.bin
