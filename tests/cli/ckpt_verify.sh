# Checkpoint checksums: gpt-ckpt verify on a good and a damaged checkpoint (one byte flipped
# inside a known tensor); gpt-sample, gpt-evalppl and gpt-train --init_from refuse the damaged
# one in one line naming the file and the tensor; a checkpoint without checksums (written
# before them) still loads, with a note under -v.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
gpt-train -q "${TINY[@]}" --max_iters=2 --eval_interval=2 --out_dir=o > train.log
cp o/ckpt_00000002.safetensors good.safetensors
# offset FILE TENSOR: the file offset of the tensor's byte 5
offset() {
  python3 - "$@" <<'PY'
import json, struct, sys
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    print(8 + n + json.loads(f.read(n))[sys.argv[2]]['data_offsets'][0] + 5)
PY
}
# flip FILE OFFSET: inverts the bits of one byte in place
flip() {
  local b; b=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((255 - b)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
code() { "$@" > out 2> err && echo "exit 0" || echo "exit $?"; echo "$(wc -l < err) line(s), $(wc -c < out) bytes out"; }
# sizes masked: the trainer state's recent losses and norms are written to 17 digits, so a file's
# size can differ by a few bytes from one CPU to another
masked() { sed 's/ tensors, [0-9]* bytes)/ tensors, N bytes)/' "$@"; }
echo "== verify"
gpt-ckpt verify good.safetensors | masked
cp good.safetensors bad.safetensors
flip bad.safetensors "$(offset bad.safetensors transformer.h.1.mlp.c_fc.weight)"
{ cmp -l good.safetensors bad.safetensors || true; } | wc -l
code gpt-ckpt verify good.safetensors bad.safetensors
masked out; cat err
# a byte of an AdamW moment, which only a resume reads, is found as well
cp good.safetensors badm.safetensors
flip badm.safetensors "$(offset badm.safetensors optimizer.m.transformer.wpe.weight)"
code gpt-ckpt verify badm.safetensors
cat err
# a byte of the header: refused as before, by the header checks
cp good.safetensors badh.safetensors
printf 'X' | dd of=badh.safetensors bs=1 seek=8 conv=notrunc status=none
code gpt-ckpt verify badh.safetensors
cat err
echo "== loaders"
head -c 500 d/input.txt > t.txt
code gpt-sample -m bad.safetensors -n 10
cat err
code gpt-evalppl -m bad.safetensors t.txt
cat err
code gpt-train -q "${TINY[@]}" --max_iters=4 --init_from=bad.safetensors --out_dir=r
cat err
code gpt-ckpt info bad.safetensors
cat err
echo "== no checksums"
# the same checkpoint with the key removed, as gptkit wrote them before checksums
python3 - good.safetensors old.safetensors <<'PY'
import json, struct, sys
s = open(sys.argv[1], 'rb').read()
n = struct.unpack_from('<Q', s, 0)[0]
hdr = json.loads(s[8:8 + n])
del hdr['__metadata__']['gptkit.checksums']
h = json.dumps(hdr).encode(); h += b' ' * (-len(h) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + s[8 + n:])
PY
gpt-ckpt verify old.safetensors | masked
gpt-sample -v -m old.safetensors -n 3 -p a 2>&1 >/dev/null | grep checksums
gpt-sample -q -m old.safetensors -n 3 -p a | wc -c
# a checkpoint converted or resumed from it carries checksums again
gpt-ckpt convert -q old.safetensors --dtype bf16 -o new.safetensors
gpt-ckpt verify new.safetensors | masked
