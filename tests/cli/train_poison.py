# train_poison.py FILE TENSOR VALUE: sets every value of the F32 tensor TENSOR in the safetensors
# FILE to VALUE, in place (used to make a model whose loss overflows: finite weights, NaN loss).
import json, struct, sys

path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    t = json.loads(f.read(n))[name]
    assert t["dtype"] == "F32", t["dtype"]
    a, b = t["data_offsets"]
    f.seek(8 + n + a)
    f.write(struct.pack("<f", value) * ((b - a) // 4))
