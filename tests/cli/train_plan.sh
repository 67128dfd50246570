# gpt-train --plan: the memory plan per rank (every rank alike, each with its slice of the
# checkpoint snapshot), printed before any model memory is allocated, exit 0, nothing written;
# --plan-memory=SIZE plans for devices of SIZE each, so that these figures do not depend on the
# machine. A plan that does not fit says what would. A run that does not fit fails with its one
# error line as before, then (not with -q) the same table and suggestions on stderr.
# GPT-2 124M (the gpt2 preset), checked by hand: 124,439,808 parameters, stored with wte padded
# to 50304 rows: 124,475,904 floats = 497,903,616 bytes = 497.9 MB (474.8 MiB) of fp32 master
# weights, as many of gradients, twice that (995.8 MB) of AdamW moments; the bf16 copy holds wte
# (50304 x 768) and each layer's four matrices (768 x 2304, 768 x 768, 768 x 3072, 3072 x 768):
# 123,568,128 x 2 bytes = 247.1 MB; workspace 64 MiB = 67.1 MB; the checkpoint snapshot
# (parameters and moments) 3 x 497.9 MB = 1.5 GB. ZeRO-1 over 2 ranks: each rank's moments half,
# 497.9 MB, and each rank's snapshot its half (and the tails): 746.9 MB. tensor_parallel 2: a
# layer's part is 3,546,240 floats (c_attn 884,736 + 1,152 bias, attn c_proj 294,912, c_fc
# 1,179,648 + 1,536, mlp c_proj 1,179,648, LayerNorms 3,072, two c_proj biases 1,536), wte rank
# 0's 25,129 rows padded with its zero row to 25,152 x 768 = 19,316,736, wpe 786,432, ln_f 1,536:
# 62,659,584 floats = 250.6 MB; its snapshot 3 x that and wte whole (154.4 MB) = 906.3 MB.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
echo "== tiny model, 1 rank"
gpt-train -q "${TINY[@]}" --plan-memory=100M
echo "== gpt2 124M, cpu"
gpt-train -q -c gpt2 --plan-memory=24G
echo "== gpt2 124M, 2 ranks, zero_stage=1, bfloat16 on cuda-emu"
gpt-train -q -c gpt2 --plan --plan-memory=24G --nproc_per_node=2 --zero_stage=1 \
  --device=cuda-emu --dtype=bfloat16
echo "== gpt2 124M, 2 ranks, tensor_parallel=2: every block matrix and wte halved"
gpt-train -q -c gpt2 --plan --plan-memory=24G --nproc_per_node=2 --tensor_parallel=2
echo "== gpt2-xl, 8 ranks, bfloat16: zero_stage=1 shards the moments, 2 the gradients too, 3 the weights"
for z in 1 2 3; do
  gpt-train -q -c gpt2-xl --plan --plan-memory=80G --nproc_per_node=8 --zero_stage=$z \
    --device=cuda-emu --dtype=bfloat16 | grep -E '^(model|weights|gradients|AdamW|peak)'
done
echo "== gpt2-xl on 4 GPUs of 24 GB, planned without a GPU (--device=cuda): stage 3 fits 4 x 1024"
for z in 2 3; do
  gpt-train -q -c gpt2-xl --plan --plan-memory=24G --nproc_per_node=4 --zero_stage=$z \
    --device=cuda --dtype=bfloat16 --batch_size=4 | grep -E '^(run|peak|largest|fits)'
done
echo "== gpt2-xl on one GPU of 24 GB and a host of 64 GB: optimizer_offload fits 4 x 1024"
for o in false true; do
  gpt-train -q -c gpt2-xl --plan-memory=24G --plan-host-memory=64G --device=cuda \
    --dtype=bfloat16 --batch_size=4 --optimizer_offload=$o |
    grep -E '^(weights|AdamW|optimizer offload|checkpoint|peak|largest|fits)'
done
echo "== dtype auto, planned without a GPU: cuda's default, bfloat16"
gpt-train -q -c gpt2-xl --plan-memory=24G --plan-host-memory=64G --device=cuda --batch_size=4 \
  --optimizer_offload=true | grep -E '^(run|fits)'
echo "== WORLD_SIZE=4"
WORLD_SIZE=4 RANK=0 gpt-train -q -c gpt2 --plan-memory=24G --zero_stage=1 | sed -n '2,3p'
echo "== does not fit 12 GB at recompute = false: gelu, a smaller batch or 2 ZeRO-1 ranks would"
gpt-train -q -c gpt2 --plan-memory=12G --recompute=false | sed -n '/^fits/,$p'
echo "== nothing fits 1 GB"
gpt-train -q -c gpt2 --plan-memory=1G | sed -n '/^fits/,$p'
test ! -e out-gpt2 && echo "nothing written"
echo "== cuda-emu as a device of 200 MB, then of 60 MB (GPT_EMU_MEM): the plan reads its size"
GPT_EMU_MEM=200M gpt-train -q "${TINY[@]}" --plan --device=cuda-emu | grep -E '^(available|fits)'
rc=0; GPT_EMU_MEM=60M gpt-train -q "${TINY[@]}" --device=cuda-emu --max_iters=1 --out_dir=o 2>&1 || rc=$?
echo "exit $rc"
# 70 MB hold the 67.8 MB it needs: the backend's cuBLASLt workspace, allocated when it opens, is
# counted once (in the plan's workspace and scratch), not also out of what the device has free
GPT_EMU_MEM=70M gpt-train -q "${TINY[@]}" --device=cuda-emu --max_iters=1 --out_dir=o70 > /dev/null &&
  echo "70 MB: trained ($(ls o70/latest.safetensors))"
echo "== init_from: the checkpoint's shape, as the run takes it (block_size may shrink, no other key change)"
gpt-train -q --train_data=d/train.bin --init_from=o70 --plan --plan-memory=100M | sed -n 1p
gpt-train -q --train_data=d/train.bin --init_from=o70/latest.safetensors --block_size=8 \
  --plan --plan-memory=100M | sed -n 1p
rc=0; gpt-train -q --train_data=d/train.bin --init_from=o70 --n_layer=3 --plan 2>&1 || rc=$?
echo "exit $rc"
echo "== a cuda-emu device of 95 MB: a 12-layer model fits one process only with optimizer_offload"
echo "   (111.0 MB without, 82.7 with) and 2 ranks only at zero_stage 3 (98.4 MB at 2, 91.5 at 3)"
FIT=("${TINY[@]}" --n_layer=12 --n_head=4 --n_embd=128 --block_size=32 --batch_size=1
     --max_iters=1 --eval_iters=1 --device=cuda-emu --dtype=bfloat16)
export GPT_EMU_MEM=95M
rc=0; gpt-train "${FIT[@]}" --out_dir=f0 > f0.log 2>&1 || rc=$?
grep -q '^gpt-train: model + batch need 111.0 MB' f0.log && echo "one process: exit $rc, refused, then"
sed -n '/^what would fit/,$p' f0.log
gpt-train -q "${FIT[@]}" --optimizer_offload=true --out_dir=f0 > /dev/null &&
  gpt-ckpt verify f0/latest.safetensors | cut -d' ' -f2 | sed 's/^/offloaded: trained, checkpoint /'
rc=0; gpt-train "${FIT[@]}" --nproc_per_node=2 --zero_stage=2 --out_dir=f2 > f2.log 2>&1 || rc=$?
grep -q '^gpt-train: model + batch need 98.4 MB' f2.log && echo "2 ranks, zero_stage 2: exit $rc, refused, then"
# rank 1 refuses too, and its line and the launcher's may fall between rank 0's: the table's only
grep -v '^gpt-train' f2.log | sed -n '/^what would fit/,$p'
test ! -e f2/latest.safetensors && echo "zero_stage 2: nothing trained"
gpt-train -q "${FIT[@]}" --nproc_per_node=2 --zero_stage=3 --out_dir=f3 > /dev/null &&
  gpt-ckpt verify f3/latest.safetensors | cut -d' ' -f2 | sed 's/^/zero_stage 3: trained, checkpoint /'
unset GPT_EMU_MEM
echo "== a run that does not fit"
set +e
gpt-train "${TINY[@]}" --block_size=1024 --batch_size=1000000 --max_iters=1 --out_dir=o \
  > out.txt 2> err.txt
echo "exit $?, stdout $(wc -c < out.txt) bytes"
# this machine's memory and what fits in it masked (and the spaces that pad them)
grep -v '^gpt-train: device' err.txt | tr -s ' ' | sed -E 's/[0-9]+\.[0-9] (kB|MB|GB|TB)/X \1/g;
  s/\((MemAvailable|cgroup memory limit|ulimit -v)\)/(LIMIT)/; s/(batch_size( =)?) +[0-9]+/\1 N/'
test ! -e o && echo "nothing written"
