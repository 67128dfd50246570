# JSON as datasets ship it besides plain JSON Lines: a UTF-8 byte order mark before the first
# line (plain, with --field, gzip, stdin) is skipped, not read as text; a .json holding one JSON
# array of objects (pretty-printed, compressed, with --field) gives one document an object, the
# same ids as the JSON Lines (tiktoken's, docs.ids), streamed item by item (--max-line bounds an
# item); a bad item or bracket names FILE:LINE: item N, --skip-bad skips and counts items; a
# .json holding one object over several lines, or a JSON string or number, is refused by name.
# (ch: char-level runs, which load no vocabulary, where the text read is what is checked.)
source "$TOP/tests/cli/lib.bash"; need_data
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed 's/ in [0-9.]* m*s$//' err.txt)"; }
ch() { gpt-tokenize -q --char -j 1 "$@"; }
docs=$FIX/tokenize/docs.jsonl
ch "$docs" -o want.bin
echo "== a byte order mark"
{ printf '\xef\xbb\xbf'; cat "$docs"; } > bom.jsonl
gpt-tokenize -q bom.jsonl -o a.bin && ids a.bin | cmp - "$FIX/tokenize/docs.ids" && echo "bom.jsonl: tiktoken's ids"
ch --field text bom.jsonl -o a.bin && cmp a.bin want.bin && echo "--field text: the same text"
gzip -c bom.jsonl > bom.jsonl.gz
ch bom.jsonl.gz -o a.bin && cmp a.bin want.bin && echo "bom.jsonl.gz: the same"
ch --field text < bom.jsonl > a.bin && cmp a.bin want.bin && echo "stdin --field text: the same"
printf '\xef\xbb\xbf  \n{"text": "x"}\n' > bom_blank.jsonl
ch bom_blank.jsonl --vocab-out v.json -o a.bin && echo "BOM, blanks, then a line: '$(gpt-tokenize -q -d -V v.json a.bin)'"
echo "== a JSON array of objects"
jq -s . "$docs" > docs.json
head -n 3 docs.json
gpt-tokenize -q -j 2 docs.json -o b.bin && ids b.bin | cmp - "$FIX/tokenize/docs.ids" && echo "docs.json (pretty-printed): tiktoken's ids"
jq -c -s . "$docs" | { printf '\xef\xbb\xbf'; cat; } | zstd -q > one_line.json.zst
ch one_line.json.zst -o c.bin && cmp c.bin want.bin && echo "one line, a BOM, zstd: the same text"
gzip -dc "$FIX/tokenize/nested.jsonl.gz" | jq -s . > nested.json
ch --field meta.body nested.json -o d.bin && cmp d.bin want.bin && echo "--field meta.body: the same"
ch --field text < docs.json > e.bin && cmp e.bin want.bin && echo "stdin --field text: the same"
printf '[{"text": "a ] } [ \\" {"}, {"n": [1, {"a": "]"}], "text": "b"}]' > brackets.json
ch brackets.json --vocab-out v.json -o f.bin && echo "brackets in strings: '$(gpt-tokenize -q -d -V v.json f.bin)'"
printf ' [ ]\n' > empty.json
run gpt-tokenize --char empty.json -o g.bin
echo "== bad items and arrays: FILE:LINE: item N, exit 1, no output"
printf '[{"text": "a"},\n {"id": 7},\n {"text": 5},\n 3,\n {"text": "b"}]\n' > bad.json
run gpt-tokenize --char bad.json -o h.bin
test ! -e h.bin
run gpt-tokenize --skip-bad bad.json -o h.bin
gpt-tokenize -q -d h.bin; echo
printf '[{"text": "a"}, {"text": "b"},]' > comma.json
run gpt-tokenize --char comma.json -o i.bin
printf '[{"text": "a"} {"text": "b"}]' > nocomma.json
run gpt-tokenize --char nocomma.json -o i.bin
head -c 100 docs.json > cut.json
run gpt-tokenize --char cut.json -o i.bin
printf '[{"text": "a"}]\n[{"text": "b"}]\n' > two.json
run gpt-tokenize --char two.json -o i.bin
printf '[{"text": "%s"}]' "$(head -c 3000 /dev/zero | tr '\0' a)" > long.json
run gpt-tokenize --char --max-line 2000 long.json -o i.bin
test ! -e i.bin
ch --max-line 4000 long.json -o j.bin && echo "--max-line 4000: $(header_int j.bin 2) tokens"
echo "== other JSON in a .json: refused by name"
printf '{\n  "text": "pretty"\n}\n' > pretty.json
run gpt-tokenize --char pretty.json -o k.bin
printf '"just a string"\n' > string.json
run gpt-tokenize --char string.json -o k.bin
printf '42\n' > number.json
run gpt-tokenize --char number.json -o k.bin
test ! -e k.bin
