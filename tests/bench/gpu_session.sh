#!/usr/bin/env bash
# gpu_session.sh: what a development session with a borrowed GPU runs, in one go (the device
# tool's `run`, from the repository root, with .gpukit/ made by tests/bench/gpu_kit.sh and carried):
# build (tools, libgptkit-cuda.so, tests), the op tests on device = cuda against the reference,
# the same under compute-sanitizer (memcheck, racecheck, synccheck), one rank through NCCL, a
# Shakespeare run on cuda beside the CPU, greedy decoding with and without CUDA graphs, and make
# bench-gpu. Everything lands in $OUT (summary.txt first); a step that fails is noted and the
# rest still run. Record the results, dated, in tests/bench/gpu-results.md.
set -uo pipefail
out=${OUT:-/tmp/gpu-session}
mkdir -p "$out"
# the build dependencies and data that tests/bench/gpu_kit.sh packed here (the device has neither)
[ -f .gpukit/env.sh ] && . .gpukit/env.sh
data=${GPT_TEST_DATA:-$PWD/.gpudata}
[ -d "$data" ] || data=$PWD/../shared/data
sum="$out/summary.txt"
note() { echo "$*" | tee -a "$sum"; }
step() { # step NAME CMD...: runs CMD with its output in $out/NAME.log, notes the verdict and time
  local name=$1 t0 rc=0; shift
  t0=$(date +%s)
  "$@" > "$out/$name.log" 2>&1 || rc=$?
  note "$name: exit $rc, $(( $(date +%s) - t0 )) s; $(tail -n 1 "$out/$name.log")"
}
note "gptkit $(git rev-parse --short HEAD 2>/dev/null) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), $(date -u +%F)"
nproc=$(nproc)
step build make -j"$nproc" all units
export GK_TEST_DEVICES="cpu cuda" GK_TEST_CUDA=cuda GPT_VOCAB="$data/gpt2"
# test_nccl_emu on cuda: one rank through the real NCCL (communicator, fp32 and bf16 sums, ...)
# test_infer on cuda: decoding steps recorded as one CUDA graph and replayed = unrecorded
for t in test_ops test_ops_fused test_cuda_ops test_cuda_attn test_nccl_emu test_infer; do step "$t" "build/tests/$t"; done
for tool in memcheck racecheck synccheck; do
  for t in test_cuda_ops test_cuda_attn test_infer; do
    step "sanitizer-$tool-$t" compute-sanitizer --tool "$tool" --error-exitcode 9 "build/tests/$t"
  done
done
# the README's Shakespeare run on the GPU (bf16 and fp32) beside the CPU: final losses side by side
work="$out/shakespeare"
mkdir -p "$work/data/shakespeare_char"
build/bin/gpt-tokenize -q --char "$data/tinyshakespeare/input.txt" --vocab-out "$work/data/shakespeare_char/vocab.json" \
  -o "$work/data/shakespeare_char/train.bin" --val-fraction 0.1 --val-output "$work/data/shakespeare_char/val.bin"
top=$PWD
for run in cuda:bfloat16 cuda:float32 cpu:float32; do
  dev=${run%:*} dt=${run#*:}
  (cd "$work" && step "train-$dev-$dt" "$top/build/bin/gpt-train" -c "$top/train/configs/shakespeare.conf" \
    --device="$dev" --dtype="$dt" --max_iters=500 --eval_interval=250 --out_dir="out-$dev-$dt")
done
# greedy decoding on the GPU's checkpoint: the same tokens with and without CUDA graphs
decode() {
  build/bin/gpt-sample -q -m "$work/out-cuda-bfloat16/latest.safetensors" --device=cuda -t 0 -n 200 \
    -p 'ROMEO:' --ids
}
decode_graphs() {
  local a b
  a=$(decode) && b=$(GPT_CUDA_GRAPHS=0 decode) || return 1
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "the same 200 tokens with and without CUDA graphs"
}
step decode-graphs decode_graphs
step bench-gpu make bench-gpu
note "logs in $out"
