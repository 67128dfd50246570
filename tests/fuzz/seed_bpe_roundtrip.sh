#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/bpe_roundtrip: the first KB of some of ../shared/data/tokenizer-cases
# (the texts checked against tiktoken: Unicode spaces, contractions, <|endoftext|>, emoji, CRLF,
# controls, Korean, code, noncharacters, punctuation runs) and a few invalid UTF-8 sequences.
# Usage: tests/fuzz/seed_bpe_roundtrip.sh   (needs ../shared/data/tokenizer-cases)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cases=${GPT_TEST_DATA:-$top/../shared/data}/tokenizer-cases
out=$top/tests/fuzz/corpus/bpe_roundtrip
rm -rf "$out" && mkdir -p "$out"
for c in unicode_spaces contractions endoftext_in_text emoji crlf nul_and_controls korean \
         code_python replacement_and_noncharacters punctuation_runs; do
  head -c 1024 "$cases/$c.txt" >"$out/$c"
done
printf 'caf\xc3 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf \xff<|endoftext|>\n\nx\n' >"$out/invalid_utf8"
