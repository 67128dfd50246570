#!/usr/bin/env python3
"""ckpt_nobias.py: a bias-free (bias = false) gptkit checkpoint from one with biases, for the
gpt-ckpt export tests. Python standard library only.

    ckpt_nobias.py IN.safetensors OUT.safetensors

Copies IN without its model biases (every "transformer.*.bias" tensor: LayerNorm and Linear
biases) and with "bias": false in its gptkit.config metadata; everything else (weights,
vocabulary tensors, other metadata) is kept byte for byte. The result is what gpt-train writes
for a bias = false model of the same shape.
"""
import json
import struct
import sys


def main():
    src, dst = sys.argv[1:3]
    raw = open(src, "rb").read()
    n = struct.unpack_from("<Q", raw, 0)[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    meta = header.pop("__metadata__")
    meta.pop("gptkit.checksums", None)  # the tensors change: a file without checksums
    cfg = json.loads(meta["gptkit.config"])
    cfg["bias"] = False
    meta["gptkit.config"] = json.dumps(cfg)
    out, blob = {"__metadata__": meta}, b""
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if name.startswith("transformer.") and name.endswith(".bias"):
            continue
        b, e = t["data_offsets"]
        out[name] = dict(t, data_offsets=[len(blob), len(blob) + e - b])
        blob += data[b:e]
    text = json.dumps(out).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)


if __name__ == "__main__":
    main()
