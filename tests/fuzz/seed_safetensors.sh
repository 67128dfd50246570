#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/safetensors with gptkit's own tools: a tiny training checkpoint
# (n_layer=1, n_embd=8, char vocab: moments, vocabulary, config, train state, checksums), its
# bf16 and fp16 conversions without moments, the reference fixture, and two foreign files from
# python3's standard library (header not padded: the aligned copy; scalars, empty tensors, all
# dtypes, no metadata).
# Usage: tests/fuzz/seed_safetensors.sh [BUILD]
set -euo pipefail
source "$(dirname "$0")/seed_lib.bash"
seed_begin safetensors "${1:-}"
tiny_ckpt $'to be or not to be, that is the question.\n' 40 8
rm -rf "$out" && mkdir -p "$out"
cp o/ckpt_00000001.safetensors "$out/train.safetensors"
"$bin/gpt-ckpt" convert -q o/ckpt_00000001.safetensors --dtype bf16 --strip-optimizer -o "$out/bf16.safetensors"
"$bin/gpt-ckpt" convert -q o/ckpt_00000001.safetensors --dtype fp16 --strip-optimizer -o "$out/fp16.safetensors"
cp "$top/tests/fixtures/st_ref.safetensors" "$out/ref.safetensors"
python3 - "$out" <<'PY'
import json, struct, sys
def write(path, tensors, meta=None, pad=False):
    hdr, data = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    if pad:
        h += b" " * (-(8 + len(h)) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
# not padded: the data section starts at an odd offset
write(sys.argv[1] + "/unaligned.safetensors",
      [("a", "F64", [2], struct.pack("<2d", 1.5, -2)), ("b", "I64", [1], struct.pack("<q", 7)),
       ("c", "F32", [2, 1], struct.pack("<2f", 0.25, 3)), ("d", "BF16", [3], b"\x80\x3f" * 3),
       ("e", "U8", [3], b"xyz")], {"format": "pt", "k": "v"})
write(sys.argv[1] + "/dtypes.safetensors",
      [("scalar", "F32", [], struct.pack("<f", 1)), ("empty", "F16", [0, 4], b""),
       ("b", "BOOL", [2], b"\x01\x00"), ("i8", "I8", [1], b"\xff"), ("u16", "U16", [1], b"\x01\x02"),
       ("i16", "I16", [1], b"\x01\x02"), ("f16", "F16", [1, 1, 1], b"\x00\x3c"),
       ("i32", "I32", [1], b"\x01\x02\x03\x04"), ("u32", "U32", [1], b"\x01\x02\x03\x04"),
       ("u64", "U64", [1], b"\x01" * 8), ("e5", "F8_E5M2", [1], b"\x3c"), ("e4", "F8_E4M3", [1], b"\x38")],
      pad=True)
PY
ls -l "$out" | awk 'NR > 1 { print $5, $9 }'
