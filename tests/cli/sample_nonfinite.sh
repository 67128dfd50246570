# A checkpoint holding a NaN or an infinity is refused where it is loaded, in one line naming
# the file and the tensor: gpt-sample prints no text (it printed "zzzz" and exited 0),
# gpt-evalppl no nan, gpt-train does not resume from it (AdamW moments are checked too).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=4 --eval_interval=4 --out_dir=o > train.log
# poison FILE TENSOR INDEX VALUE: overwrites one float32 of an F32 tensor in place, and its
# checksum in gptkit.checksums (as a diverged run would have written it: not a damaged file)
poison() {
  python3 - "$@" <<'EOF'
import json, re, struct, sys, zlib
path, name, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with open(path, 'r+b') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    hdr = f.read(n)
    t = json.loads(hdr)[name]
    assert t['dtype'] == 'F32'
    b, e = t['data_offsets']
    f.seek(8 + n + b)
    data = bytearray(f.read(e - b))
    data[4 * index:4 * index + 4] = struct.pack('<f', value)
    f.seek(8 + n + b)
    f.write(data)
    key = re.compile(rb'[{,]\\"' + re.escape(name.encode()) + rb'\\":\\"([0-9a-f]{8})')
    f.seek(8 + key.search(hdr).start(1))
    f.write(b'%08x' % zlib.crc32(data))
EOF
}
code() { "$@" > out 2> err && echo "exit 0" || echo "exit $?"; echo "$(wc -l < err) line(s), $(wc -c < out) bytes out"; }
head -c 500 d/input.txt > t.txt
cp o/ckpt_00000004.safetensors nan.safetensors
poison nan.safetensors transformer.h.1.mlp.c_fc.weight 5 nan
code gpt-sample -m nan.safetensors -n 10
cat err
code gpt-evalppl -m nan.safetensors t.txt
cat err
cp o/ckpt_00000004.safetensors inf.safetensors
poison inf.safetensors transformer.wte.weight 0 -inf
code gpt-sample -m inf.safetensors --dtype bf16 -n 10
cat err
mkdir r && cp o/ckpt_00000004.safetensors r/ && ln -s ckpt_00000004.safetensors r/latest.safetensors
poison r/ckpt_00000004.safetensors optimizer.v.transformer.wpe.weight 3 inf
code gpt-train -q "${TINY[@]}" --max_iters=6 --init_from=resume --out_dir=r
grep -o "r/latest.safetensors: tensor 'optimizer.v.transformer.wpe.weight' holds +Inf at element 3" err
# the checkpoint they were copied from is fine
gpt-sample -q -m o/latest.safetensors -n 5 -p a | wc -c
gpt-evalppl -q -m o/latest.safetensors t.txt | cut -c1-10
