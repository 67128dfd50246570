# Data that does not fit the model, and checkpoints newer than this gptkit, are refused with one
# line (exit 1, or 2 for a setting) before any training or scoring, and gpt-train writes nothing:
# a shard of another vocabulary (fingerprint) as val_data, as a second train shard, and under
# init_from = a checkpoint, resume and auto; a shard whose header says more tokens than the
# model has (vocab_size set lower, or a checkpoint with a smaller vocabulary); token ids beyond
# the model's vocabulary in shards that do not say their vocab size (header 0, nanoGPT's
# header-less files), in gpt-train as in gpt-evalppl; a checkpoint of format version 3 in every
# tool that loads one.
source "$TOP/tests/cli/lib.bash"; need_data
set +e
tiny_data d                                   # 58 characters
printf 'abcabcabba cab\n%.0s' {1..200} > small.txt
gpt-tokenize -q --char small.txt --vocab-out small.json -o small.bin   # 5 characters
# set_int SHARD I V: the I-th int32 of the header = V
set_int() { python3 -c 'import struct,sys; f=open(sys.argv[1],"r+b"); f.seek(4*int(sys.argv[2])); f.write(struct.pack("<i",int(sys.argv[3])))' "$@"; }
cp d/train.bin nofp.bin; set_int nofp.bin 4 0           # no fingerprint: vocab size 58 still said
cp d/train.bin unknown.bin; set_int unknown.bin 3 0; set_int unknown.bin 4 0   # says nothing
tail -c +1025 d/train.bin > raw.bin                      # nanoGPT's header-less uint16
try() { "$@" > out.txt 2> err.txt; echo "exit $? ($(wc -l < err.txt) line): $(grep -v 'notice\|^gpt-train: device' err.txt)"; }
T=(--vocab=d/vocab.json --val_data= --n_layer=1 --n_head=2 --n_embd=16 --block_size=16 --batch_size=2 --max_iters=2 --eval_iters=1 --threads=2 -q)
gpt-train "${T[@]}" --train_data=d/train.bin --val_data=d/val.bin --eval_interval=2 --out_dir=ok > /dev/null
gpt-train "${T[@]}" --vocab=small.json --train_data=small.bin --eval_interval=2 --out_dir=sm > /dev/null

echo "== gpt-train: another vocabulary"
try gpt-train "${T[@]}" --train_data=d/train.bin --val_data=small.bin --out_dir=x
try gpt-train "${T[@]}" --train_data=d/train.bin,small.bin --out_dir=x
try gpt-train "${T[@]}" --vocab= --train_data=d/train.bin --val_data=small.bin --out_dir=x  # d/vocab.json found
cp d/train.bin lone.bin                                  # no vocabulary beside it: the shard's own
try gpt-train "${T[@]}" --vocab= --train_data=lone.bin --val_data=small.bin --out_dir=x
try gpt-train "${T[@]}" --vocab= --train_data=small.bin --init_from=ok/latest.safetensors --out_dir=x
try gpt-train "${T[@]}" --vocab= --train_data=small.bin --init_from=resume --max_iters=4 --out_dir=ok
try gpt-train "${T[@]}" --vocab= --train_data=d/train.bin --val_data=small.bin --init_from=auto --max_iters=4 --out_dir=ok
echo "== gpt-train: more tokens than the model has"
try gpt-train "${T[@]}" --train_data=d/train.bin --vocab_size=40 --out_dir=x
try gpt-train "${T[@]}" --vocab= --train_data=nofp.bin --init_from=sm/latest.safetensors --out_dir=x
try gpt-train "${T[@]}" --vocab= --train_data=unknown.bin --vocab_size=40 --out_dir=x
try gpt-train "${T[@]}" --vocab= --train_data=raw.bin --vocab_size=40 --out_dir=x
try gpt-train "${T[@]}" --vocab= --train_data=unknown.bin --init_from=sm/latest.safetensors --out_dir=x
test ! -e x && echo "nothing written"
ls ok | grep -c ckpt_
echo "== gpt-evalppl"
try gpt-evalppl -m ok/latest.safetensors small.bin
try gpt-evalppl -m sm/latest.safetensors nofp.bin
try gpt-evalppl -m sm/latest.safetensors unknown.bin
try gpt-evalppl -m sm/latest.safetensors --raw raw.bin
try gpt-evalppl -m ok/latest.safetensors d/val.bin small.bin
echo "== format version 3"
python3 - ok/latest.safetensors v3.safetensors <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
old = b'"gptkit.format_version":"2"'
assert b.count(old) == 1, "no format version in the header"
open(sys.argv[2], "wb").write(b.replace(old, b'"gptkit.format_version":"3"'))
PY
try gpt-train "${T[@]}" --train_data=d/train.bin --init_from=v3.safetensors --out_dir=x
mkdir v3run; cp v3.safetensors v3run/ckpt_00000002.safetensors; ln -s ckpt_00000002.safetensors v3run/latest.safetensors
try gpt-train "${T[@]}" --train_data=d/train.bin --init_from=auto --max_iters=4 --out_dir=v3run
try gpt-sample -m v3.safetensors -n 5
try gpt-evalppl -m v3.safetensors d/val.bin
try gpt-ckpt info v3.safetensors
try gpt-ckpt verify v3.safetensors
try gpt-ckpt convert v3.safetensors -o conv.safetensors --dtype bf16
ls conv.safetensors 2>/dev/null || echo "no conv.safetensors"
ls v3run
