# ZeRO-2 and 3 make wte's gradient a stripe at a time, never whole (kernels/model/gpt2_head.c).
# On 3 ranks a vocabulary of 50040 (padded to 50048 rows of 32) cuts into 16672 rows a rank, two
# stripes of 10912 and 5760 rows, and a tail of wte's last 32 rows (24 of them tokens) beside
# wpe; the tokens (a shard written here) reach every rank's rows, both stripes and the tail.
# Trained 4 steps at zero_stage 2 and 3, the losses and the final weights and moments are one
# process's (within float32 reduction order: 1e-4 relative or 1e-4 absolute; AdamW divides each
# gradient by its own magnitude, so a rounding apart in a row of wte that only the softmax
# reaches, a gradient near 1/50000, moves its weight by up to a few 1e-5, where a lost or
# misplaced row moves it by the learning rate, 3e-3), and so is a resume from stage 3 into one
# process. At stage 3 wte's weights are gathered a stripe at a time too.
source "$TOP/tests/cli/lib.bash"; need_data
python3 - <<'PY'
import struct
def shard(path, n, mul):
    ids = [(i * mul) % 50040 for i in range(n)]
    head = struct.pack("<5i", 20240520, 1, n, 50040, 0) + bytes(1024 - 20)
    open(path, "wb").write(head + struct.pack("<%dH" % n, *ids))
shard("train.bin", 8000, 7919)
shard("val.bin", 1000, 104729)
PY
ARGS=(--train_data=train.bin --val_data=val.bin --vocab= --vocab_size=50040 --n_layer=2 --n_head=2
      --n_embd=32 --block_size=16 --batch_size=4 --gradient_accumulation_steps=6 --warmup_iters=2
      --lr_decay_iters=20 --learning_rate=3e-3 --min_lr=3e-4 --threads=1 --dropout=0.1
      --max_iters=4 --eval_interval=1000 --eval_iters=1 --dist_timeout=60)
gpt-train -q "${ARGS[@]}" --out_dir=one > /dev/null
losses one/metrics.jsonl > one.l
for z in 2 3; do
  gpt-train -q "${ARGS[@]}" --out_dir=z$z --nproc_per_node=3 --zero_stage=$z > /dev/null
  losses z$z/metrics.jsonl > z$z.l
  close z$z.l one.l 1e-5 && st_close z$z/latest.safetensors one/latest.safetensors 1e-4 1e-4 &&
    echo "zero_stage $z on 3 ranks: the one-process run"
done
gpt-train -q "${ARGS[@]}" --out_dir=z3 --max_iters=6 --init_from=resume > /dev/null
gpt-train -q "${ARGS[@]}" --out_dir=one --max_iters=6 --init_from=resume > /dev/null
losses z3/metrics.jsonl > z3.l
losses one/metrics.jsonl > one.l
close z3.l one.l 1e-5 && echo "resumed from zero_stage 3 into one process: the same steps"
# the same on 3 emulated CUDA devices (NCCL's reduce-scatter, the gemm on a column block of the
# logits in device memory), float32 and bfloat16
gpt-train -q "${ARGS[@]}" --max_iters=2 --out_dir=e32 --nproc_per_node=3 --zero_stage=3 \
  --device=cuda-emu --dtype=float32 > /dev/null
gpt-train -q "${ARGS[@]}" --max_iters=2 --out_dir=one2 > /dev/null
losses e32/metrics.jsonl > e32.l
losses one2/metrics.jsonl > one2.l
close e32.l one2.l 1e-5 && echo "cuda-emu, zero_stage 3 on 3 ranks, float32: the one-process run"
gpt-train -q "${ARGS[@]}" --max_iters=2 --out_dir=e16 --nproc_per_node=3 --zero_stage=3 \
  --device=cuda-emu --dtype=bfloat16 > /dev/null
gpt-train -q "${ARGS[@]}" --max_iters=2 --out_dir=e16one --device=cuda-emu --dtype=bfloat16 > /dev/null
losses e16/metrics.jsonl > e16.l
losses e16one/metrics.jsonl > e16one.l
close e16.l e16one.l 1e-4 && echo "cuda-emu, zero_stage 3 on 3 ranks, bfloat16: one process's within 1e-4"
