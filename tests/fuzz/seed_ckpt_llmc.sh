#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/ckpt_llmc with gptkit's own tools: a tiny model (n_layer=1,
# n_embd=8, vocab 7, block_size 4) exported as an llm.c version 3 (fp32) checkpoint, the same as
# version 5 (bf16, as tests/cli/ckpt_llmc.sh makes it), and its bare 1024-byte header.
# Usage: tests/fuzz/seed_ckpt_llmc.sh [BUILD]
set -euo pipefail
source "$(dirname "$0")/seed_lib.bash"
seed_begin ckpt_llmc "${1:-}"
tiny_ckpt $'abcdef\n' 60 4
rm -rf "$out" && mkdir -p "$out"
"$bin/gpt-ckpt" export -q o/ckpt_00000001.safetensors --llmc "$out/fp32.bin"
python3 - "$out/fp32.bin" "$out/bf16.bin" <<'PY'
import array, sys
b = open(sys.argv[1], "rb").read()
hdr = array.array("i", b[:1024]); hdr[1] = 5
f = array.array("I", b[1024:])
out = array.array("H", (((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF for x in f))
open(sys.argv[2], "wb").write(hdr.tobytes() + out.tobytes())
PY
head -c 1024 "$out/fp32.bin" > "$out/header_only.bin"
ls -l "$out" | awk 'NR > 1 { print $5, $9 }'
