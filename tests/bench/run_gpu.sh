#!/usr/bin/env bash
# make bench-gpu: gptkit on one GPU beside PyTorch, in one run on one machine.
# Training: train_step (median ms per step of forward + backward + AdamW, random tokens) of GPT-2
# 124M, T=1024, bf16 activations, at B=16 and B=64 on --device cuda, at B=16 again with the GELU
# outputs and with the LayerNorm outputs too recomputed (gpt-train's recompute), with the bias
# and GELU gradients in the gemms' epilogues (GPT_CUDA_FUSED_GRADS=1), and with every op timed
# alone (prof); beside it the same step in PyTorch (tests/bench/torch_gpu_step.py: nanoGPT's
# model, bf16 autocast, SDPA flash attention, fused AdamW; eager and torch.compile) when
# `python3 -c 'import torch; assert torch.cuda.is_available()'` works.
# Decode: gpt-sample's single-stream tokens/s (batch 1, greedy, 16-token prompt, 256 new tokens),
# with each token's step replayed as one CUDA graph and without (GPT_CUDA_GRAPHS=0), on GPT-2 124M with bf16 weights and random values (rand_ckpt.c), and the bound the bytes read
# per token put on it at BENCH_BW_GBS GB/s (default 3350: the H100 SXM's HBM3 by its datasheet).
# HellaSwag: gpt-evalppl --hellaswag items/s on that model at 4, 16 and 64 rows a forward.
# Bigger models (part big, config G): gpt2-medium, gpt2-large and gpt2-xl (T=1024, B=8 by default,
# BENCH_BIG_BATCH), each with torch.compile at the same batch: ms/step, tokens/s, MFU, memory.
# Usage: bash tests/bench/run_gpu.sh BUILD   (BUILD holds bench/train_step, bench/rand_ckpt,
# bin/gpt-sample and lib/libgptkit-cuda.so). Environment:
#   BENCH_DEVICE=cuda|cuda-emu (default cuda). BENCH_CONFIG=G|S (default G; S: 4 layers, 4 heads,
#   128 wide, T=64, vocab 65 for training, vocab 50257 for decoding, to check this script on the
#   CPU with BENCH_DEVICE=cuda-emu), BENCH_BATCHES (default "16 64"; S: "4 8"), BENCH_STEPS
#   (timed steps, default 20; S: 2), BENCH_PEAK_TFLOPS (MFU's peak, default 989.5), PYTHON,
#   BENCH_PARTS (default "decode hellaswag train big": which parts run, in that order; also
#   decode-xl: the decode part on a random gpt2-xl; BENCH=PARTS as make bench's, when
#   BENCH_PARTS is unset: make bench-gpu BENCH=decode),
#   BENCH_BIG (default "gpt2-medium gpt2-large gpt2-xl"; S: none), BENCH_BIG_BATCH (default 8).
#   The vocabulary for the prompt: $GPT_VOCAB, else $GPT_TEST_DATA/gpt2 (default ../shared/data).
# Exit status: 0 when every gptkit run worked (a missing torch is a note, not a failure).
set -uo pipefail
build=$(cd "${1:-build}" && pwd) || exit 2
top=$(cd "$(dirname "$0")/../.." && pwd)
device=${BENCH_DEVICE:-cuda} config=${BENCH_CONFIG:-G} peak=${BENCH_PEAK_TFLOPS:-989.5}
python=${PYTHON:-python3} bw=${BENCH_BW_GBS:-3350}
case $config in
  G) batches=${BENCH_BATCHES:-16 64} steps=${BENCH_STEPS:-20} T=1024 L=12 H=12 C=768 Vtrain=50304
     sample_cfg="12 12 768 1024 50257" new_tokens=256 n_items=256 ;;
  S) batches=${BENCH_BATCHES:-4 8} steps=${BENCH_STEPS:-2} T=64 L=4 H=4 C=128 Vtrain=128
     sample_cfg="4 4 128 512 50257" new_tokens=32 n_items=16 ;;
  *) echo "run_gpu.sh: BENCH_CONFIG=$config: not G or S" >&2; exit 2 ;;
esac
work="$build/bench/gpu"; mkdir -p "$work"
calc() { awk "BEGIN { print $1 }"; } # arithmetic on decimals (the device image has no bc)
failed=0

echo "== gptkit bench-gpu: $(date -u +%Y-%m-%dT%H:%MZ), device $device, config $config =="
command -v nvidia-smi >/dev/null 2>&1 &&
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
cat <<EOF
What the numbers are (timings compare only within this run, on this machine):
  ms/step   median wall time of one training step (forward, backward, clip, AdamW), after warm-up,
            GPT-2 $config (L=$L, C=$C, T=$T), bf16 activations and matmul inputs, fp32 master weights
  tokens/s  B*T / ms/step
  MFU       nanoGPT's estimate_mfu: (6N + 12 L H Q T) flops per token x tokens/s / $peak TFLOP/s
            (989.5: H100 SXM dense bf16; BENCH_PEAK_TFLOPS to change)
  memory    gptkit: peak of the device memory the model allocated (parameters, bf16 copies,
            gradients, AdamW moments, activations), not the backend's scratch and workspace;
            torch: torch.cuda.max_memory_allocated
  per-op    the B=${batches%% *} step again with a sync after every op, each op timed alone: their sum exceeds
            the overlapped step; gemms by shape (M N K), types and epilogue
  decode    gpt-sample tokens/s, batch 1, greedy, bf16 weights, random values; beside it
            transformers' generate on the same shape (static cache + torch.compile, and eager)
EOF

# train_step once; its output in $work/NAME.out, echoed on failure.
run_step() {
  local name=$1; shift
  if ! "$build/bench/train_step" --device "$device" --dtype bfloat16 --peak-tflops "$peak" "$@" \
       > "$work/$name.out" 2> "$work/$name.err"; then
    echo "train_step $*: FAILED: $(tail -n 3 "$work/$name.err")"
    failed=1
    return 1
  fi
}

# One row of the table from train_step's output (WHAT: the label's tail, default bf16).
step_row() {
  local out=$1 B=$2 what=${3:-bf16}
  local ms tps mfu mem
  ms=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' "$out")
  tps=$(sed -n 's/^tokens\/s \([0-9]*\),.*/\1/p' "$out")
  mfu=$(sed -n 's/.*MFU \([0-9.e+-]*\)%.*/\1/p' "$out")
  mem=$(sed -n 's/.*by the model: \([0-9.]*\) MiB peak.*/\1/p' "$out")
  printf '%-30s %4s %10s %12s %7s%% %12s\n' "gptkit $device $what" "$B" "$ms" "$tps" "$mfu" \
    "$(printf '%.2f GiB' "$(calc "$mem / 1024")")"
}

# One row from torch_gpu_step.py's line ("... 47.0 ms/step, 348,000 tokens/s, peak 16.1 GiB, MFU 26.0%").
torch_row() {
  local line=$1 what=$2 B=$3
  printf '%-30s %4s %10s %12s %7s%% %12s\n' "$what" "$B" \
    "$(echo "$line" | sed -n 's/.*: \([0-9.]*\) ms\/step.*/\1/p')" \
    "$(echo "$line" | sed -n 's/.* \([0-9,]*\) tokens\/s.*/\1/p' | tr -d ,)" \
    "$(echo "$line" | sed -n 's/.*MFU \([0-9.]*\)%.*/\1/p')" \
    "$(echo "$line" | sed -n 's/.*peak \([0-9.]* GiB\).*/\1/p')"
}

train_bench() {
  local torch_ok=0 B line
  "$python" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && torch_ok=1
  echo
  printf '%-30s %4s %10s %12s %8s %12s\n' what B ms/step tokens/s MFU memory
  for B in $batches; do
    run_step "b$B" --batch "$B" "$config" "$steps" && step_row "$work/b$B.out" "$B"
    [ $torch_ok = 1 ] || continue
    local targs=(--layers "$L" --heads "$H" --embd "$C" --vocab "$Vtrain" -B "$B" -T "$T" --steps "$steps" --peak "$peak")
    for mode in eager compile; do
      local flag=(); [ $mode = compile ] && flag=(--compile)
      if line=$("$python" "$top/tests/bench/torch_gpu_step.py" "${targs[@]}" "${flag[@]}" 2> "$work/torch.err" | tail -n 1) &&
         [ -n "$line" ]; then
        torch_row "$line" "torch $mode" "$B"
      else
        printf '%-30s %4s   failed: %s\n' "torch $mode" "$B" "$(tail -n 1 "$work/torch.err")"
      fi
    done
  done
  [ $torch_ok = 1 ] || echo "(PyTorch with CUDA not found by $python: no torch rows)"
  local B0 rc; B0=$(echo "$batches" | awk '{print $1}')
  # what the backward recomputes costs in time and saves in memory (the rows above: nothing;
  # gpt-train's recompute = auto is gelu on cuda)
  for rc in gelu gelu+ln; do
    run_step "rc-$rc" --recompute "$rc" --batch "$B0" "$config" "$steps" &&
      step_row "$work/rc-$rc.out" "$B0" "bf16 $rc"
  done
  # the bias and GELU gradients in the gemms' epilogues (cuBLASLt's BGRADA, DGELU), opt-in until
  # a GPU run has timed it: GPT_CUDA_FUSED_GRADS=1
  GPT_CUDA_FUSED_GRADS=1 run_step fused --batch "$B0" "$config" "$steps" &&
    step_row "$work/fused.out" "$B0" "bf16 fused"
  echo
  echo "gptkit per-op profile, B=$B0:"
  run_step prof --batch "$B0" "$config" "$(( steps < 5 ? steps : 5 ))" 1 prof && cat "$work/prof.out"
}

# decode_bench [NAME CFG]: gpt-sample's tokens/s on a random model of CFG (n_layer n_head n_embd
# block_size vocab_size; default this config's), then transformers' beside it.
decode_bench() {
  local name=${1:-$config} sample_cfg=${2:-$sample_cfg}
  local data vocab model="$work/decode-$name.safetensors"
  data=${GPT_TEST_DATA:-$top/../shared/data}
  vocab=${GPT_VOCAB:-$data/gpt2}
  echo
  if [ ! -s "$vocab/encoder.json" ] && [ ! -s "$vocab/vocab.json" ]; then
    echo "decode: skipped: no GPT-2 vocabulary at $vocab (set GPT_VOCAB or GPT_TEST_DATA)"
    return 0
  fi
  # shellcheck disable=SC2086 # sample_cfg is five numbers
  [ -s "$model" ] || "$build/bench/rand_ckpt" "$model" $sample_cfg ||
    { echo "decode: rand_ckpt FAILED"; failed=1; return 1; }
  local prompt="First Citizen: Before we proceed any further, hear me speak. All: Speak"
  local line graphs cfg; read -r -a cfg <<< "$sample_cfg"
  printf '%-30s %10s %10s %14s\n' "decode ($name)" tokens/s MB/token "bound tokens/s"
  # each token's step as one CUDA graph (the default), and launched op by op (GPT_CUDA_GRAPHS=0)
  for graphs in 1 0; do
    if ! line=$(GPT_CUDA_GRAPHS=$graphs "$build/bin/gpt-sample" --device "$device" -m "$model" \
                  -V "$vocab" --dtype bf16 -p "$prompt" -n $new_tokens -t 0 --ids 2>&1 >/dev/null |
                  tail -n 1) || ! echo "$line" | grep -q 'tokens/s'; then
      echo "decode: gpt-sample FAILED: $line"; failed=1; return 1
    fi
    local tps np
    tps=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p')
    np=$(echo "$line" | sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p')
    # bytes read per token: bf16 weight matrices (12 C^2 per layer, the tied lm_head over the
    # padded vocab) and the KV cache (bf16 k and v per layer at the mean context np + new/2)
    local Lc=${cfg[0]} Cc=${cfg[2]} Vp=$(( (cfg[4] + 63) / 64 * 64 ))
    local bytes=$(( 2 * (Lc * 12 * Cc * Cc + Vp * Cc) + 2 * 2 * Cc * Lc * (np + new_tokens / 2) ))
    printf '%-30s %10s %10.1f %14.0f   (prompt %s tokens, %s new; bound at %s GB/s)\n' \
      "gptkit $device bf16$([ $graphs = 1 ] || echo ', no graph')" "$tps" \
      "$(calc "$bytes / 1000000")" "$(calc "$bw * 1000000000 / $bytes")" "$np" \
      "$new_tokens" "$bw"
  done
  # transformers' generate on the same shape, prompt length and count (tests/bench/hf_decode.py):
  # the static cache with torch.compile, and eager
  if ! "$python" -c 'import torch, transformers; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "(transformers with CUDA not found by $python: no transformers rows)"
    return 0
  fi
  local mode rate
  "$python" "$top/tests/bench/hf_decode.py" "${cfg[@]}" "$np" "$new_tokens" 2> "$work/hf.err" |
    while read -r line; do
      mode=${line#hf-generate }
      mode=${mode%%:*}
      rate=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p')
      if [ -n "$rate" ]; then
        printf '%-30s %10s\n' "transformers $mode bf16" "$rate"
      else
        printf '%-30s   %s\n' "transformers $mode bf16" "${line#*: }"
      fi
    done
}

# HellaSwag scoring: gpt-evalppl --hellaswag items/s on the decode model (bf16), n_items items of
# HellaSwag's shape from Tiny Shakespeare, at 4 (the default: one item), 16 and 64 rows a forward.
hellaswag_bench() {
  local data vocab model="$work/decode-$config.safetensors" items="$work/hellaswag$n_items.jsonl"
  data=${GPT_TEST_DATA:-$top/../shared/data}
  vocab=${GPT_VOCAB:-$data/gpt2}
  [ -s "$model" ] && [ -s "$data/tinyshakespeare/input.txt" ] ||
    { echo "hellaswag: skipped: no decode model or no Tiny Shakespeare"; return 0; }
  "$python" "$top/tests/bench/hellaswag_items.py" "$data/tinyshakespeare/input.txt" "$n_items" > "$items" ||
    { echo "hellaswag: hellaswag_items.py FAILED"; failed=1; return 1; }
  echo
  printf '%-30s %10s\n' hellaswag items/s
  local rows line
  for rows in 4 16 64; do
    if ! line=$("$build/bin/gpt-evalppl" --device "$device" -m "$model" -V "$vocab" --dtype bf16 \
                  --hellaswag --batch $rows "$items" 2>&1 >/dev/null | tail -n 1) ||
       ! echo "$line" | grep -q ' items in '; then
      echo "hellaswag: gpt-evalppl FAILED: $line"; failed=1; return 1
    fi
    printf '%-30s %10.1f   (%s rows a forward)\n' "gptkit $device bf16" \
      "$(calc "$(echo "$line" | sed -n 's/.*: \([0-9]*\) items in \([0-9.]*\) s.*/\1 \/ \2/p')")" $rows
  done
}

# gpt2-medium, -large and -xl: gptkit's step beside torch.compile's at the same batch (the issue's
# "at least torch.compile's tokens/s"); recompute as gpt-train's auto would pick on a GPU (gelu)
big_bench() {
  local name L H C B=${BENCH_BIG_BATCH:-8} line torch_ok=0
  [ "$config" = G ] || return 0
  "$python" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && torch_ok=1
  echo
  printf '%-30s %4s %10s %12s %8s %12s\n' "bigger models (T=$T)" B ms/step tokens/s MFU memory
  for name in ${BENCH_BIG:-gpt2-medium gpt2-large gpt2-xl}; do
    case $name in
      gpt2-medium) L=24 H=16 C=1024 ;; gpt2-large) L=36 H=20 C=1280 ;; gpt2-xl) L=48 H=25 C=1600 ;;
      *) echo "$name: not gpt2-medium, gpt2-large or gpt2-xl"; failed=1; continue ;;
    esac
    run_step "$name" --recompute gelu --batch "$B" "$name" 10 && step_row "$work/$name.out" "$B" "bf16 $name"
    [ $torch_ok = 1 ] || continue
    if line=$("$python" "$top/tests/bench/torch_gpu_step.py" --layers $L --heads $H --embd $C \
                --vocab 50304 -B "$B" -T "$T" --steps 10 --peak "$peak" --compile 2> "$work/torch.err" | tail -n 1) &&
       [ -n "$line" ]; then
      torch_row "$line" "torch compile $name" "$B"
    else
      printf '%-30s %4s   failed: %s\n' "torch compile $name" "$B" "$(tail -n 1 "$work/torch.err")"
    fi
  done
}

# the quick ones first: under a time limit (gpu_session.sh) torch.compile is what gets cut
for part in ${BENCH_PARTS:-${BENCH:-decode hellaswag train big}}; do
  case $part in
    decode) decode_bench ;; hellaswag) hellaswag_bench ;; train) train_bench ;; big) big_bench ;;
    decode-xl) decode_bench xl "48 25 1600 1024 50257" ;;
    *) echo "BENCH_PARTS: '$part' is not decode, hellaswag, train, big or decode-xl"; failed=1 ;;
  esac
done
exit $failed
