#!/usr/bin/env python3
"""Reference fixture for common/io/safetensors.c, made with the real safetensors library.

    pip install safetensors numpy ml_dtypes     (only needed to run this script; tests need no Python)
    python3 tests/ref/safetensors_fixture.py                 # writes tests/fixtures/st_ref.safetensors
    python3 tests/ref/safetensors_fixture.py --verify FILE   # checks a file written by the C writer

The expected contents (EXPECTED, METADATA) are repeated in tests/unit/test_safetensors.c, which reads
the fixture and checks every value, and can write the same tensors with the C writer
(GPT_ST_VERIFY_OUT=FILE build/tests/test_safetensors) for --verify to check with the Rust parser.
"""
import os
import sys

import ml_dtypes
import numpy as np
from safetensors import deserialize, safe_open, serialize_file
from safetensors.numpy import _flatten

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "st_ref.safetensors")

# bf16 cases chosen to exercise round-to-nearest-even: 1+2^-8 is a tie (rounds down to 1.0),
# 1+3*2^-8 is a tie that rounds up, pi rounds normally.
BF16_SOURCE = np.array([1.0, np.float32(np.pi), -1.00390625, 1.01171875], dtype=np.float32)

EXPECTED = {
    "f32": np.array([[0.0, 1.0, -2.5], [3.25, 1e-8, -65504.0]], dtype=np.float32),
    "f16": np.array([1.0, -2.0, 65504.0, 2.0**-14, 2.0**-24, np.inf], dtype=np.float16),
    "bf16": BF16_SOURCE.astype(ml_dtypes.bfloat16).reshape(2, 2),
    "i64": np.array([-1, 2**40, 2**63 - 1], dtype=np.int64),
    "u8": np.frombuffer(b"hello", dtype=np.uint8).copy(),
    "scalar": np.array(42, dtype=np.int32),
}
METADATA = {"format": "pt", "gptkit.test": "caf\u00e9 \"q\""}
DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64", "u8": "U8", "scalar": "I32"}


def write(path):
    keep = []
    serialize_file(_flatten(EXPECTED, keep), path, metadata=METADATA)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def verify(path):
    raw = open(path, "rb").read()
    entries = dict(deserialize(raw))  # the Rust parser: validates header, offsets, coverage
    assert set(entries) == set(EXPECTED), f"tensor names {sorted(entries)}"
    for name, want in EXPECTED.items():
        got = entries[name]
        assert got["dtype"] == DTYPES[name], f"{name}: dtype {got['dtype']}"
        assert tuple(got["shape"]) == want.shape, f"{name}: shape {got['shape']}"
        assert bytes(got["data"]) == want.tobytes(), f"{name}: values differ"
    with safe_open(path, framework="numpy") as f:
        assert f.metadata() == METADATA, f"metadata {f.metadata()}"
        assert np.array_equal(f.get_tensor("f32"), EXPECTED["f32"])
    n = int.from_bytes(raw[:8], "little")
    assert (8 + n) % 8 == 0, "data section not 8-aligned"
    same = os.path.exists(OUT) and open(OUT, "rb").read() == raw
    print(f"{path}: OK ({len(entries)} tensors, metadata matches; "
          f"{'byte-identical to' if same else 'differs in layout from'} the reference file)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--verify":
        verify(sys.argv[2])
    elif len(sys.argv) == 1:
        write(OUT)
        verify(OUT)
    else:
        sys.exit(__doc__)
