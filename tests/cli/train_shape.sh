# Resuming or fine-tuning keeps the checkpoint's model shape: a shape setting that contradicts it
# is an error naming both values (exit 2, nothing trained); block_size may shrink (the position
# embeddings are cropped, as nanoGPT's crop_block_size) and says so. The config printed and
# stored in checkpoints is the one trained (a fine-tune stored the default n_layer = 12 before).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
# meta FILE: the model config and the shape keys of the stored effective config, and wpe's shape
meta() {
  python3 -c 'import json, struct, sys
f = open(sys.argv[1], "rb"); h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
m = h["__metadata__"]; c = json.loads(m["gptkit.train"])["config"]
print("model", m["gptkit.config"]); print("stored", {k: c[k] for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias")})
print("wpe", h["transformer.wpe.weight"]["shape"])' "$1"
}
gpt-train -q "${TINY[@]}" --max_iters=4 --eval_interval=4 --out_dir=o > /dev/null
cp o/metrics.jsonl metrics.orig
run() { local rc=0; gpt-train -q "${TINY[@]}" --max_iters=6 --out_dir=o --init_from=resume "$@" > /dev/null 2> err.txt || rc=$?; echo "$*: exit $rc: $(cat err.txt)"; }
run --n_layer=3
run --n_embd=64 --n_head=4
run --bias=true
run --block_size=32
printf 'n_head = 4\n' > wide.conf
run -c wide.conf
ls o | grep ckpt_; cmp metrics.orig o/metrics.jsonl && echo "nothing trained"
gpt-train "${TINY[@]}" --max_iters=6 --eval_interval=6 --out_dir=o --init_from=resume --block_size=8 2> err.txt | grep -c '^step [56]/6'
grep -e 'cropping' -e '^block_size' err.txt
meta o/latest.safetensors
# a fine-tune gives no shape: it is the checkpoint's, printed and stored so
gpt-train --train_data=d/train.bin --val_data=d/val.bin --batch_size=2 --gradient_accumulation_steps=1 \
  --eval_iters=1 --threads=2 --max_iters=1 --init_from=o/ckpt_00000004.safetensors --out_dir=ft 2> err.txt > /dev/null
grep -e '^n_layer' -e '^n_embd' -e '^block_size' -e '^vocab_size' err.txt
meta ft/latest.safetensors
# cropping keeps the first rows: a fine-tune at learning_rate 0 leaves wpe as loaded
gpt-train -q --train_data=d/train.bin --val_data= --batch_size=2 --gradient_accumulation_steps=1 --threads=2 \
  --max_iters=1 --learning_rate=0 --decay_lr=false --block_size=8 --init_from=o/ckpt_00000004.safetensors --out_dir=crop > /dev/null
python3 -c 'import json, struct, sys
def wpe(p):
    f = open(p, "rb"); n = struct.unpack("<Q", f.read(8))[0]; a, b = json.loads(f.read(n))["transformer.wpe.weight"]["data_offsets"]
    f.seek(8 + n + a); return f.read(b - a)
full, cropped = wpe(sys.argv[1]), wpe(sys.argv[2])
print("wpe cropped to its first rows:", len(cropped) == 8 * 32 * 4 and full[:len(cropped)] == cropped)' o/ckpt_00000004.safetensors crop/latest.safetensors
