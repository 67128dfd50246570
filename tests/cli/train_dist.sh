# Data-parallel training on this machine: 2 ranks started with the torchrun-style variables and
# by --nproc_per_node (by mpirun: train_dist_mpi) train the same model as one process with the
# same global batch (the same losses and final weights, within float32 reduction order); the
# suggestion when gradient_accumulation_steps does not split over the ranks; zero_stage = 1, 2 and
# 3 equal zero_stage = 0, and their checkpoints (full moments and parameters, gathered) the
# unsharded one, also across a resume into shards or into one rank; bf16
# gradient sums (reduce_dtype) on Gloo and on the emulated NCCL.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
ARGS=("${TINY[@]}" --threads=1 --dropout=0.1 --gradient_accumulation_steps=4 --max_iters=6
      --eval_interval=3 --dist_timeout=60)
gpt-train -q "${ARGS[@]}" --out_dir=one > one.log
losses one/metrics.jsonl > one.l
# two_ranks OUT_DIR ARGS...: ranks 0 and 1 as torchrun would start them
two_ranks() {
  local out=$1 port; shift; port=$(free_port)
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --out_dir=$out "$@" > $out.r1.log &
  local pid=$!
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --out_dir=$out "$@" > $out.log
  wait $pid
}
same() { # same NAME [FLOOR]: OUT_DIR's losses and weights are one's (st_close's FLOOR)
  losses $1/metrics.jsonl > $1.l
  close $1.l one.l 1e-5 && st_close $1/latest.safetensors one/latest.safetensors 1e-4 ${2:-} &&
    echo "$1: the one-process run"
}
two_ranks torchrun
same torchrun
test ! -s torchrun.r1.log && echo "rank 1 printed nothing"
# each layer's gradients summed during the backward (the default) give the bits of one sum after
# it (2 ranks: a + b either way)
(export GPT_GRAD_OVERLAP=0; two_ranks serial)
losses serial/metrics.jsonl | cmp - torchrun.l && cmp <(st_data serial/latest.safetensors) \
  <(st_data torchrun/latest.safetensors) && echo "sums during the backward: the bits of one sum after it"
grep -c '^step [0-9]*/' torchrun.log
gpt-train -q "${ARGS[@]}" --out_dir=spawned --nproc_per_node=2 > spawned.log
same spawned
# the same total batch as 4 micro-batches of 2 ranks x 2, given as tokens
gpt-train -q "${ARGS[@]}" --out_dir=tokens --nproc_per_node=2 --gradient_accumulation_steps=1 \
  --total_batch_size=256 > tokens.log
same tokens
# ZeRO-1: the moments sharded across 2 ranks; checkpoints hold them whole
two_ranks zero --zero_stage=1
same zero
# ... its gradients summed whole during the backward (the default) or reduce-scattered after it
# (GPT_GRAD_OVERLAP=0): with 2 ranks both add a + b
(export GPT_GRAD_OVERLAP=0; two_ranks zserial --zero_stage=1)
losses zserial/metrics.jsonl | cmp - zero.l && cmp <(st_data zserial/latest.safetensors) \
  <(st_data zero/latest.safetensors) && echo "ZeRO-1 sums during the backward: the bits of the reduce-scatter after it"
# ... and resume into shards: stopped at step 3, continued by 2 ZeRO-1 ranks (each loads its
# shard of the moments) and by 1 rank (the whole moments)
two_ranks zres --zero_stage=1 --max_iters=3
cp -r zres zres1
two_ranks zres --zero_stage=1 --init_from=resume
same zres
gpt-train -q "${ARGS[@]}" --out_dir=zres1 --zero_stage=1 --init_from=resume > zres1.log
same zres1
# ZeRO-2: each layer's gradients reduce-scattered during the backward into the ranks' shards
# (accumulated there over each rank's 2 micro-steps), the moments sharded by layer alike: the
# one-process run, also resumed into shards at step 3
two_ranks z2 --zero_stage=2
same z2
two_ranks z2res --zero_stage=2 --max_iters=3
two_ranks z2res --zero_stage=2 --init_from=resume
same z2res
# ZeRO-3: the parameters sharded by layer too, each layer's all-gathered before its forward and
# its backward: stage 2's weights within float32 rounding (the same sums and shards, but dlnf
# summed a stripe of wte at a time: 1e-5 absolute, where AdamW moves a weight by 3e-3 a step),
# also resumed into shards at step 3 and from them into one process at stage 0
two_ranks z3 --zero_stage=3
st_close z3/latest.safetensors z2/latest.safetensors 1e-4 1e-5 &&
  echo "zero_stage 3: stage 2's weights within float32 rounding"
same z3 1e-5
two_ranks z3res --zero_stage=3 --max_iters=3
cp -r z3res z3res1
two_ranks z3res --zero_stage=3 --init_from=resume
same z3res 1e-5
gpt-train -q "${ARGS[@]}" --out_dir=z3res1 --init_from=resume > z3res1.log
same z3res1 1e-5
# ... and on 4 ranks (one micro-batch each), stopped at step 3 and resumed by one process at
# stage 0 (the checkpoint is every rank's slice, streamed to rank 0's writer)
gpt-train -q "${ARGS[@]}" --out_dir=four3 --nproc_per_node=4 --zero_stage=3 --max_iters=3 > four3.log
cp -r four3 four3one
gpt-train -q "${ARGS[@]}" --out_dir=four3 --nproc_per_node=4 --zero_stage=3 --init_from=resume > four3.log
same four3 1e-5
gpt-train -q "${ARGS[@]}" --out_dir=four3one --init_from=resume > four3one.log
same four3one 1e-5
# ... where every forward is a collective: an eval_iters that does not split over the ranks (rank
# 1 makes a third forward it does not count) and a sample, which every rank makes and rank 0 prints
two_ranks z2eval --zero_stage=2 --eval_iters=3 --sample_tokens=8
two_ranks z3eval --zero_stage=3 --eval_iters=3 --sample_tokens=8
diff <(sed 's/|[^|]*ms.*//' z2eval.log) <(sed 's/|[^|]*ms.*//' z3eval.log) && grep -q '^sample at step 3' z3eval.log &&
  test ! -s z3eval.r1.log && echo "zero_stage 3: stage 2's evaluations and samples"
# gradient sums in bf16 (reduce_dtype): the losses stay within 1e-3 of the float32 sums' (bf16
# rounds each gradient by at most 2^-9 of itself), and the weights are not the same bits
two_ranks bf16 --reduce_dtype=bf16
losses bf16/metrics.jsonl > bf16.l
close bf16.l torchrun.l 1e-3 && ! cmp -s <(st_data bf16/latest.safetensors) <(st_data torchrun/latest.safetensors) && \
  echo "bf16 sums: the float32 sums' losses within 1e-3, other weights"
# errors: a total batch that does not split, a sum type gptkit has not, nproc_per_node under a launcher (the launcher adds
# "; stopped the other ranks" when another rank was still running: when is a race; so is the order
# of rank 0's error and the launcher's line when another rank exits first: the lines are sorted)
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(sed "s/rank [0-9]* (pid [0-9]*)/rank N (pid P)/; s/; stopped the other ranks//" err.txt | LC_ALL=C sort)"; }
run gpt-train -q "${ARGS[@]}" --out_dir=bad --total_batch_size=100
run gpt-train -q "${ARGS[@]}" --out_dir=bad --reduce_dtype=float16
run gpt-train -q "${ARGS[@]}" --out_dir=bad --zero_stage=3
run gpt-train -q "${ARGS[@]}" --out_dir=bad --nproc_per_node=3
run gpt-train -q "${ARGS[@]}" --out_dir=bad --nproc_per_node=3 --gradient_accumulation_steps=2
RANK=0 WORLD_SIZE=2 run gpt-train -q "${ARGS[@]}" --out_dir=bad --nproc_per_node=2
test ! -e bad
# CUDA ranks under the emulator (their NCCL calls on host collectives) train as the CPU ranks do
two_ranks emu --device=cuda-emu --dtype=float32
losses emu/metrics.jsonl > emu.l
close emu.l torchrun.l 2e-5 && st_close emu/latest.safetensors torchrun/latest.safetensors 1e-3 && \
  echo "cuda-emu, 2 ranks: the CPU's 2 ranks"
two_ranks emuz2 --device=cuda-emu --dtype=float32 --zero_stage=2
losses emuz2/metrics.jsonl > emuz2.l
close emuz2.l torchrun.l 2e-5 && st_close emuz2/latest.safetensors torchrun/latest.safetensors 1e-3 && \
  echo "cuda-emu, 2 ranks, zero_stage 2: the CPU's 2 ranks"
two_ranks emuz3 --device=cuda-emu --dtype=float32 --zero_stage=3
st_close emuz3/latest.safetensors emuz2/latest.safetensors 1e-4 1e-5 && \
  echo "cuda-emu, 2 ranks, zero_stage 3: stage 2's weights within float32 rounding"
# bf16 sums through NCCL (emulated) as through Gloo: with 2 ranks both add the same two roundings;
# 1e-6 tells them from float32 sums (whose losses differ from bf16.l by 3e-6 or more)
two_ranks emu16 --device=cuda-emu --dtype=float32 --reduce_dtype=bf16
losses emu16/metrics.jsonl > emu16.l
close emu16.l bf16.l 1e-6 && echo "cuda-emu, 2 ranks, bf16 sums: the CPU's"
# rank 0's setup error (nothing to resume) ends both ranks, and only rank 0 reports it
port=$(free_port) rc0=0 rc1=0
RANK=1 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --out_dir=none --init_from=resume 2> r1.err & p=$!
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --out_dir=none --init_from=resume 2> r0.err || rc0=$?
wait $p || rc1=$?
echo "exit $rc0 and $rc1: $(cat r0.err r1.err)"
