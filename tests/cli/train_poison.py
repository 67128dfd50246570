# train_poison.py FILE TENSOR VALUE: sets every value of the F32 tensor TENSOR in the safetensors
# FILE to VALUE, in place (used to make a model whose loss overflows: finite weights, NaN loss),
# and its CRC in gptkit.checksums (a file as a diverged run writes it, not a damaged one).
import json, re, struct, sys, zlib

path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    t = json.loads(f.read(n))[name]
    assert t["dtype"] == "F32", t["dtype"]
    a, b = t["data_offsets"]
    data = struct.pack("<f", value) * ((b - a) // 4)
    f.seek(8 + n + a)
    f.write(data)
    f.seek(8)
    key = re.compile(rb'[{,]\\"' + re.escape(name.encode()) + rb'\\":\\"([0-9a-f]{8})')
    m = key.search(f.read(n))
    if m:
        f.seek(8 + m.start(1))
        f.write(b"%08x" % zlib.crc32(data))
