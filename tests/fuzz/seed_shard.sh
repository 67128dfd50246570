#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/shard with gptkit's own tools: shards written to a file (count in the
# header) and to a pipe (count unknown), uint16 BPE and char-level, a bare header, a raw file.
# Usage: tests/fuzz/seed_shard.sh [BUILD]   (needs ../shared/data/gpt2)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${1:-$top/build}" && pwd)/bin
out=$top/tests/fuzz/corpus/shard
export GPT_VOCAB=${GPT_VOCAB:-$top/../shared/data/gpt2}
rm -rf "$out" && mkdir -p "$out" && cd "$out"
printf 'Hello, world! The quick brown fox.\n' | "$bin/gpt-tokenize" -q -o gpt2.bin
printf 'abcabc hello\n' | "$bin/gpt-tokenize" -q --char -o char.bin
printf 'First Citizen:\nBefore we proceed\n' | "$bin/gpt-tokenize" -q | cat >pipe.bin
head -c 1024 gpt2.bin >header_only.bin
printf 'Hi there' | "$bin/gpt-tokenize" -q | tail -c +1025 >raw16.bin   # the tokens, no header
