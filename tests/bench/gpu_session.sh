#!/usr/bin/env bash
# gpu_session.sh: what a development session with a borrowed GPU runs, in one go (the device
# tool's `run`, from the repository root, with .gpukit/ made by tests/bench/gpu_kit.sh and carried):
# build (tools, libgptkit-cuda.so, tests), the op tests on device = cuda against the reference,
# one rank through NCCL, a Shakespeare run on cuda, greedy decoding with and without CUDA graphs,
# make bench-gpu (the targets), the attention paths and the kernels' knobs side by side, where
# the time goes (decoding's matmul kernels against cuBLASLt's; train_step's per-op profile; ncu on
# the decode kernels and on the training step's attention and row-wise kernels), 100 steps of
# GPT-2 124M through gpt-train, the bigger models, gpt2-xl with optimizer_offload (issue 40), the
# op tests under compute-sanitizer (memcheck, then racecheck and synccheck), and the Shakespeare
# run in fp32 and on the CPU.
#
# The device tool lends 15 minutes in all, machine start included, and at most 10 a command, so
# the steps run most valuable first, each under its own time limit, and all of them end by
# GPU_SESSION_S seconds (default 480) after the start: a step that would not fit is skipped and
# noted, and a step that fails is noted while the rest still run. $OUT gets three files (the tool
# brings back 8 at most): summary.txt (one line a step), bench-gpu.txt (make bench-gpu's report)
# and logs.tar.gz (every step's log), rewritten after each step, so that a run stopped at the
# tool's limit still returns what it did. Record the results, dated, in tests/bench/gpu-results.md.
# GPU_SESSION_ONLY=REGEX runs only the steps whose names match it (build always runs), for a
# second call that rechecks a fix or runs what the first call had no time for.
set -uo pipefail
t_start=$(date +%s)
budget=${GPU_SESSION_S:-480}
out=${OUT:-/tmp/gpu-session}
logs=/tmp/gpu-session-logs work=/tmp/gpu-session-work
rm -rf "$logs" "$work"
mkdir -p "$out" "$logs" "$work"
# the build dependencies and data that tests/bench/gpu_kit.sh packed here (the device has neither)
[ -f .gpukit/env.sh ] && . .gpukit/env.sh
data=${GPT_TEST_DATA:-$PWD/.gpudata}
[ -d "$data" ] || data=$PWD/../shared/data
sum="$out/summary.txt"
note() { echo "$*" | tee -a "$sum"; }
left() { echo $(( t_start + budget - $(date +%s) )); }
# step NAME LIMIT CMD...: runs CMD for at most LIMIT seconds (less when less is left), its output
# in NAME.log; notes the verdict, the time and the log's last line, then repacks the logs.
step() {
  local name=$1 limit=$2 t0 rc=0 l; shift 2
  l=$(left)
  if [ "$name" != build ] && [ -n "${GPU_SESSION_ONLY:-}" ] && ! [[ $name =~ $GPU_SESSION_ONLY ]]; then return; fi
  if [ "$l" -lt 15 ]; then note "$name: skipped, ${l} s left"; return; fi
  [ "$limit" -gt "$l" ] && limit=$l
  t0=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$logs/$name.log" 2>&1 || rc=$?
  [ "$rc" = 124 ] && echo "(stopped at its limit of $limit s)" >> "$logs/$name.log"
  note "$name: exit $rc, $(( $(date +%s) - t0 )) s; $(tail -n 1 "$logs/$name.log")"
  tar -C "$logs" -czf "$out/logs.tar.gz.tmp" . && mv "$out/logs.tar.gz.tmp" "$out/logs.tar.gz"
}
# the tree sent is the working tree, but its .git can be the one the session began with: pass
# GPU_SESSION_REV=$(git rev-parse --short HEAD) from here to name the commit in the summary
note "gptkit ${GPU_SESSION_REV:-$(git rev-parse --short HEAD 2>/dev/null)} on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), $(date -u +%F), budget $budget s"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
      /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
note "$(nvcc --version 2>/dev/null | tail -n 1); compute-sanitizer: ${san:-none}"

# 1. build: the H100's sm_90 alone (half the nvcc work of the default 80 90)
step build 240 make -j"$(nproc)" CUDA_ARCH=90 all units build/bench/train_step build/bench/rand_ckpt
export GPT_TEST_DEVICES="cpu cuda" GPT_TEST_CUDA=cuda GPT_VOCAB="$data/gpt2"

# 2. the op tests on cuda against the reference (test_ops and test_ops_fused: every op family on
# one harness, GPT_TEST_DEVICES; test_cuda_comm: one rank through NCCL's collectives on the device's
# stream); test_ops also on each attention path (cuda:plain, cuda:flash, fa2 as cuda's auto, and
# cuDNN's, cuda:cudnn: against ref, GPT-2's T = 1024 included; skipped, saying why, where the
# library has no cuDNN or libcudnn.so.9 does not load: the build step's log says whether it has);
# test_nccl_emu: one rank through the real NCCL (communicator, fp32 and bf16 sums, ...);
# test_infer: decoding steps recorded as one CUDA graph and replayed = unrecorded, and a step
# whose capture breaks runs unrecorded; test_decode_fused: the fused decode step (matvec, mlp)
# against the separate ops; test_draw: the tokens drawn on the GPU against the host's sampler
paths="cuda:plain cuda:flash cuda:cudnn cuda:fused" # fa2: auto's, on device cuda; fused: gemm_bwd's epilogues
GPT_TEST_DEVICES="cpu cuda $paths" step test_ops 150 build/tests/test_ops
for t in test_cuda_comm test_ops_fused test_infer test_nccl_emu test_decode_fused test_draw; do
  step "$t" 90 "build/tests/$t"
done

# 3. the README's Shakespeare run on the GPU, then greedy decoding on its checkpoint: the same
# tokens with and without CUDA graphs
mkdir -p "$work/data/shakespeare_char"
build/bin/gpt-tokenize -q --char "$data/tinyshakespeare/input.txt" --vocab-out "$work/data/shakespeare_char/vocab.json" \
  -o "$work/data/shakespeare_char/train.bin" --val-fraction 0.1 --val-output "$work/data/shakespeare_char/val.bin"
top=$PWD
train() { # train DEVICE DTYPE LIMIT
  (cd "$work" && step "train-$1-$2" "$3" "$top/build/bin/gpt-train" -c "$top/train/configs/shakespeare.conf" \
    --device="$1" --dtype="$2" --max_iters=500 --eval_interval=250 --out_dir="out-$1-$2")
}
train cuda bfloat16 90
export work
decode() {
  build/bin/gpt-sample -q -m "$work/out-cuda-bfloat16/latest.safetensors" --device=cuda -t 0 -n 200 \
    -p 'ROMEO:' --ids
}
decode_graphs() {
  local a b
  a=$(decode) && b=$(GPT_CUDA_GRAPHS=0 decode) || return 1
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "the same 200 tokens with and without CUDA graphs"
}
export -f decode decode_graphs # timeout runs programs, not functions: through bash
step decode-graphs 60 bash -c decode_graphs
# 3a. speed beside PyTorch (eager and torch.compile) and llm.c's figures: the issue's targets, so
# before the variants and profiles that explain them; the variants next, as they decide defaults
# (the attention path, the fused gradients, the knobs)
BENCH_PARTS="decode hellaswag train" step bench-gpu 200 make bench-gpu
cp "$logs/bench-gpu.log" "$out/bench-gpu.txt" 2>/dev/null
# variant_lib DIR DEFS: libgptkit-cuda.so built into DIR with CUDA_DEFS=DEFS (the kernels' knobs),
# reusing the build step's attention_cudnn.o, which CUDA_DEFS does not change and whose
# cudnn-frontend headers take most of a build (about a minute of the machine's time)
variant_lib() {
  mkdir -p "$1/cuda/kernels/cuda" && cp -p build/cuda/kernels/cuda/attention_cudnn.o "$1/cuda/kernels/cuda/" &&
  make -s -j"$(nproc)" BUILD="$1" CUDA_ARCH=90 CUDA_DEFS="$2" "$1/lib/libgptkit-cuda.so" > /dev/null
}
export -f variant_lib
# 3b. the attention paths and the kernels' knobs, side by side: each variant's library built apart
# (CUDA_DEFS), checked by test_ops on the GPU (the default on fa2, flash and plain against the
# reference, a variant on the path its knob changes; cuDNN's is not built apart), then the B=16
# step with it (GPT_CUDA_LIB): its median, and the times of the ops the knobs move (attention, the
# column reductions bias_bwd and layernorm_bwd), on the fa2 kernels (auto's path) or, for a
# variant of the FL_ knobs, the wmma flash kernels (--attention=flash). The first variant is the
# default, as a baseline, timed on all three paths (fa2, flash, and cuDNN's fused attention,
# --attention=cudnn, where the library has it: its note or error line shows when it declines or
# fails), and again with GPT_CUDA_FUSED_GRADS=1 (gemm_bwd through cuBLASLt's BGRADA and DGELU
# epilogues: its gemm rows +dbias, +dgelu against the gemm, bias_bwd and gelu_bwd rows without).
# The knobs, most telling first: attention_fa2_tile.h's FA_FAST_EXP=0 takes exp2f for the
# softmax's 2^x (3 instructions more an element than the default's ex2.approx.ftz, the 11-27
# kernels' way); attention_fa2.cu's FA_FWD_MT=2 gives each warp of the forward 32 query rows, not
# 16 (each K and V fragment feeds twice the mma: 231 registers, 2 blocks an SM, against 128 and
# 4); cuda_internal.h's CU_COL_CHUNKS (default 256) is how many row chunks the column reductions
# use (4 layernorm_bwd blocks an SM at 512 on an H100, 2 at 256); attention_fa2_bwd.cu's
# FB_KV_REG_D=32 reads K and V again from shared memory for each chunk in the kv kernel, where the
# default holds them in registers (both 128 registers on sm_90 since 11-29, 4 blocks an SM; on
# 11-27 holding them took 159 and 3 blocks, and the backward 6.46 ms against 6.70);
# attention_flash.cu's FL_PREFETCH and FL_*_BLOCKS tune the wmma kernels. GPU_VARIANTS:
# ';'-separated CUDA_DEFS, the first empty.
variants() {
  local i=0 v lib
  IFS=';' read -r -a vs <<< "${GPU_VARIANTS:- ;-DFA_FAST_EXP=0;-DFA_FWD_MT=2;-DCU_COL_CHUNKS=512;-DFB_KV_REG_D=32}"
  for v in "${vs[@]}"; do
    i=$((i + 1)) lib=/tmp/variant-$i/lib/libgptkit-cuda.so
    echo "== variant $i: [${v# }]"
    if [ -z "${v// /}" ]; then lib=$PWD/build/lib/libgptkit-cuda.so # the default: the build step's
    else variant_lib /tmp/variant-$i "$v" || { echo "build failed"; continue; }
    fi
    # the default on the three paths, a variant on the one its knob changes (CU_ knobs: all ops, fa2's)
    GPT_CUDA_LIB=$lib GPT_TEST_DEVICES="$([ $i = 1 ] && echo cuda cuda:plain cuda:flash ||
      { [[ $v = *FL_* ]] && echo cuda:flash || echo cuda; })" build/tests/test_ops 2>&1 | tail -n 1
    for a in $([[ $v = *FL_* ]] && echo flash || echo fa2) $([ $i = 1 ] && echo flash cudnn); do
      echo "-- attention=$a"
      GPT_CUDA_LIB=$lib build/bench/train_step --device cuda --dtype bfloat16 --attention=$a --batch 16 G 5 1 prof 2>&1 |
        grep -E -i 'median|^  (gemm|attention_(fwd|bwd)|bias_bwd|gelu_bwd|layernorm_bwd) |note|error|fail|cudnn'
    done
    if [ $i = 1 ]; then # the bias and GELU gradients in the gemms' epilogues (cuBLASLt's), opt-in
      echo "-- attention=fa2, GPT_CUDA_FUSED_GRADS=1"
      GPT_CUDA_FUSED_GRADS=1 build/bench/train_step --device cuda --dtype bfloat16 --batch 16 G 5 1 prof 2>&1 |
        grep -E -i 'median|^  (gemm|attention_(fwd|bwd)|bias_bwd|gelu_bwd|layernorm_bwd) |d(gelu|bias)|note|error|fail'
    fi
  done
}
export -f variants
step variants 300 bash -c variants
# 3c. decoding's few-row matmuls: matmul_rows.cu's kernels with the fused step (the default: 4
# kernels a layer, the MLP in one, the token drawn in the same replay) against the MLP on two
# launches (-DGV_MLP=0: 5 a layer), the same kernels on the separate ops (-DGV_MATVEC=0: 7 a
# layer) and cuBLASLt's (a library built with -DGV_ROWS=0): tokens/s of a random 124M, 256 new
# tokens, graphs on
decode_variants() {
  build/bench/rand_ckpt "$work/dv.safetensors" 12 12 768 1024 50257 > /dev/null || return 1
  local v lib
  for v in default -DGV_MLP=0 -DGV_MATVEC=0 -DGV_ROWS=0; do
    lib=$PWD/build/lib/libgptkit-cuda.so
    if [ $v != default ]; then
      lib=/tmp/dv/lib/libgptkit-cuda.so
      variant_lib /tmp/dv "$v" || { echo "$v: build failed"; continue; }
    fi
    echo "$v: $(GPT_CUDA_LIB=$lib build/bin/gpt-sample -m "$work/dv.safetensors" --device=cuda -V "$GPT_VOCAB" \
      --dtype bf16 -t 0 -n 256 -p 'First Citizen: Before we proceed any further, hear me speak.' --ids 2>&1 > /dev/null | tail -n 1)"
  done
}
export -f decode_variants
step decode-variants 170 bash -c decode_variants

# 3d. where the time goes: the 124M training step at B=16 with each op timed alone (train_step's
# per-op profile), and each kernel of the first decoding steps of a random 124M model (ncu,
# graphs off so that each kernel is seen alone; ncu.csv in the logs)
step prof 60 build/bench/train_step --device cuda --dtype bfloat16 --batch 16 G 5 1 prof
ncu_decode() {
  build/bench/rand_ckpt "$work/decode.safetensors" 12 12 768 1024 50257 > /dev/null &&
  GPT_CUDA_GRAPHS=0 "$(command -v ncu || echo /usr/local/cuda/bin/ncu)" --clock-control none --print-units base \
    --metrics gpu__time_duration.sum --csv -c 600 \
    build/bin/gpt-sample -q -m "$work/decode.safetensors" --device=cuda -V "$GPT_VOCAB" --dtype bf16 -t 0 -n 12 \
    -p 'First Citizen: Before we proceed any further, hear me speak.' --ids > "$logs/ncu.csv" 2> "$work/ncu.err" &&
  python3 - "$logs/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; k, v = h.index('Kernel Name'), h.index('Metric Value')
t = collections.defaultdict(lambda: [0, 0.0])
for r in rows[1:]:
    t[r[k][:70]][0] += 1; t[r[k][:70]][1] += float(r[v].replace(',', ''))
for name, (n, ns) in sorted(t.items(), key=lambda x: -x[1][1]):
    print(f"{ns / 1e3:10.1f} us {n:5d} x {ns / n / 1e3:8.2f} us  {name}")
PY
}
export -f ncu_decode
export logs
step ncu-decode 90 bash -c ncu_decode
# the kernels of one B=16 training step that the next change aims at, with ncu's sections on
# occupancy, memory and shared-memory traffic, tensor pipes and warp stalls: fa2's (auto's path;
# 23% of the synchronized step on an H200, 2026-11-27), then the row-wise ones that ran at a third
# to a half of the memory bandwidth there (layernorm_bwd 1.74 ms, bias_bwd 1.75, the residual add
# with layernorm 1.15 ms a step: is it latency, occupancy or the in-launch reduction's tail?)
ncu_kernels() {
  local k
  # NAME:SKIP, the launch after the first SKIP of that kernel (res_ln_fwd_kernel's first is ln1's
  # layernorm alone; its second adds the residual)
  for k in fa2_fwd:0 fa2_bwd_kv:0 fa2_bwd_q:0 layernorm_bwd_kernel:0 bias_bwd_kernel:0 res_ln_fwd_kernel:1; do
    "$(command -v ncu || echo /usr/local/cuda/bin/ncu)" --clock-control none -k "regex:^${k%:*}" -s "${k#*:}" -c 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section WarpStateStats \
      build/bench/train_step --device cuda --dtype bfloat16 --batch 16 --attention=fa2 G 1 || return 1
  done
}
export -f ncu_kernels
step ncu-kernels 200 bash -c ncu_kernels

# 4. GPT-2 124M through gpt-train on cuda: Tiny Shakespeare in GPT-2 BPE, B=16 x T=1024, 100 steps
# (the loss falls from ~10.9; the last line is the checkpoint, written asynchronously)
mkdir -p "$work/bpe"
build/bin/gpt-tokenize -q -V "$data/gpt2" "$data/tinyshakespeare/input.txt" -o "$work/bpe/train.bin" \
  --val-fraction 0.1 --val-output "$work/bpe/val.bin"
(cd "$work" && step train-gpt2-124m 120 "$top/build/bin/gpt-train" -c "$top/train/configs/gpt2.conf" \
  --device=cuda --train_data=bpe/train.bin --val_data=bpe/val.bin --out_dir=out-124m --batch_size=16 \
  --gradient_accumulation_steps=1 --max_iters=100 --warmup_iters=10 --lr_decay_iters=100 \
  --eval_interval=100 --eval_iters=5 --log_interval=10)

# 5. the bigger models (gpt2-medium, -large, -xl, B=8) beside torch.compile: issue 24's item 4
BENCH_PARTS=big step bench-big 150 make bench-gpu

# 5b. issue 40: gpt2-xl (1.56B) trained from scratch on this one GPU with optimizer_offload (the
# plan: 17.6 GB of device memory at B=4 x 1024 in bf16, so a 24 GB card's; 18.9 GB of host), 6
# steps: its tokens/s (metrics.jsonl) and the peak of nvidia-smi's memory.used (CUDA's context,
# NCCL's and the allocator's slack included, which an allocator's cap would leave out: at most
# 24 GiB is the 24 GB card's fit) beside 124M at zero_stage 0 (step 4's); the final checkpoint
# (19 GB) may be cut short by the inner timeout, after the steps are logged
offload_xl() {
  local smi rc=0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$logs/xl-mem.csv" &
  smi=$!
  (cd "$work" && timeout 150 "$top/build/bin/gpt-train" -c "$top/train/configs/gpt2-xl.conf" \
    --device=cuda --train_data=bpe/train.bin --val_data=bpe/val.bin --out_dir=out-xl \
    --batch_size=4 --gradient_accumulation_steps=1 --max_iters=6 --eval_interval=1000 \
    --log_interval=1 --optimizer_offload=true) || rc=$?
  kill "$smi" 2>/dev/null
  local peak; peak=$(sort -n "$logs/xl-mem.csv" | tail -1)
  if [ -z "$peak" ]; then echo "peak memory.used: no reading"
  elif [ "$peak" -le 24576 ]; then echo "peak memory.used: $peak MiB (fits a 24 GiB card)"
  else echo "peak memory.used: $peak MiB (does not fit a 24 GiB card)"; fi
  return $rc
}
export -f offload_xl
export work top
step offload-xl 170 bash -c offload_xl

# 5c. issue 43's other decoding goal: gpt2-xl (random weights) at 1000 tokens/s, one stream, bf16,
# beside transformers' generate (static cache + torch.compile, and eager) on the same shape
BENCH_PARTS=decode-xl step decode-xl 150 make bench-gpu

# 6. the op tests under compute-sanitizer (test_ops on cuda alone, then on the attention paths):
# memcheck first, then the slower racecheck, synccheck. API errors are not counted: cuBLASLt's
# own queries fail by design (NoKernelImage), and test_infer breaks a graph capture on purpose
for tool in memcheck racecheck synccheck; do
  for t in test_ops test_ops-paths test_infer; do
    devices=cuda
    [ $t = test_ops-paths ] && devices=$paths
    GPT_TEST_DEVICES=$devices step "sanitizer-$tool-$t" 90 "${san:-compute-sanitizer}" --tool "$tool" \
      --report-api-errors no --error-exitcode 9 "build/tests/${t%-paths}"
  done
done

# 7. the same Shakespeare run in fp32 and on the CPU: final losses side by side
train cuda float32 60
train cpu float32 90
note "done in $(( $(date +%s) - t_start )) s; logs in $out/logs.tar.gz"
