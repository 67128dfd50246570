#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/tokenize_jsonl: JSON Lines as datasets hold them (the settings byte
# first: see fuzz_tokenize_jsonl.c): the tiktoken fixture's lines, a nested field, bad lines of
# each kind, CRLF ends, no final newline, a gzip file, a long line, a byte order mark; JSON arrays
# of objects (settings bit 5): the fixture's objects pretty-printed, bad items and brackets in strings.
# Usage: tests/fuzz/seed_tokenize_jsonl.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/tests/fuzz/corpus/tokenize_jsonl
rm -rf "$out" && mkdir -p "$out" && cd "$out"
{ printf '\x00'; cat "$top/tests/fixtures/tokenize/docs.jsonl"; } > docs
{ printf '\x02'; gzip -dc "$top/tests/fixtures/tokenize/nested.jsonl.gz"; } > nested
{ printf '\x0a'; gzip -dc "$top/tests/fixtures/tokenize/nested.jsonl.gz" | gzip -n; } > nested_gz
printf '\x01{"text": "ok"}\nnot json\n{"id": 1}\n{"text": 5}\n[1]\n{"text": null}\n\n{"text": "x"}' > bad_skip
printf '\x00{"text": "ok"}\r\n{"text": "a\\u0000b \\ud83d\\ude00"}\r\n' > crlf
printf '\x04{"a": {"b": {"c": "deep"}}, "a.b.c": "flat"}\n{"a": {"b": 1}}\n' > dotted
{ printf '\x09{"text": "'; head -c 200 /dev/zero | tr '\0' a; printf '"}\n{"text": "short"}\n'; } > long
{ printf '\x00\xef\xbb\xbf'; cat "$top/tests/fixtures/tokenize/docs.jsonl"; } > bom
{ printf '\x20'; jq -s . "$top/tests/fixtures/tokenize/docs.jsonl"; } > array
printf '\x21[{"text": "ok"}, 5, {"id": 1}, {"text": "a ] } [ \\" {"}, {"text": [1, {"a": "]"}]}, "s"]' > array_bad
ls -l "$out" | awk 'NR > 1 { print $5, $9 }'
