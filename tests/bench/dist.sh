#!/usr/bin/env bash
# make bench (BENCH=dist): data-parallel scaling and the cost of a checkpoint, with gpt-train.
# Scaling: the same global batch (2 micro-batches of 8 x 128 tokens) by 1 rank of 1 thread and
# by 2 ranks of 1 thread each (--nproc_per_node=2, Gloo on loopback), median tokens/s of steps
# 6..30 and the median time the 2 ranks spend in collectives per step (comm_ms), with the
# gradient sums overlapped with the backward (the default), after it (GPT_GRAD_OVERLAP=0), in
# bf16 (reduce_dtype=bf16), and with the AdamW moments sharded (zero_stage=1: the sums during the
# backward, then an all-gather of the weights; with GPT_GRAD_OVERLAP=0 a reduce-scatter of the
# gradients after the backward in place of the sums).
# Checkpoints: 30 steps with a checkpoint at every step against none (eval every step in both;
# learning_rate 0 so that the val loss never improves and always_save_checkpoint = false saves
# nothing after step 1), wall-clock per step, training on 1 thread (a core left for the writer)
# and on 2; target: a checkpoint adds under 10% to its step.
# Usage: tests/bench/dist.sh BUILD (data: $GPT_TEST_DATA or ../shared/data).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
work="$build/bench/dist"; rm -rf "$work"; mkdir -p "$work"; cd "$work"
gpt-tokenize -q --char "$data/tinyshakespeare/input.txt" --vocab-out vocab.json -o train.bin \
  --val-fraction 0.1 --val-output val.bin
MODEL=(--train_data=train.bin --val_data=val.bin --vocab=vocab.json --n_layer=4 --n_head=4
       --n_embd=256 --block_size=128 --batch_size=8 --eval_iters=1 --warmup_iters=0 --decay_lr=false)
# median FIELD FILE [FIRST]: the median of a metrics.jsonl field over steps >= FIRST (default 6)
median() { sed -n "s/.*\"step\":\([0-9]*\),.*\"$1\":\([0-9.e+-]*\).*/\1 \2/p" "$2" |
  awk -v f="${3:-6}" '$1 >= f { print $2 }' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }

echo
printf '%-26s %12s %10s %10s\n' "data parallel" tokens/s ratio comm-ms
gpt-train -q "${MODEL[@]}" --threads=1 --gradient_accumulation_steps=2 --max_iters=30 \
  --eval_interval=1000 --out_dir=one > /dev/null
gpt-train -q "${MODEL[@]}" --threads=1 --gradient_accumulation_steps=2 --max_iters=30 \
  --eval_interval=1000 --out_dir=two --nproc_per_node=2 > /dev/null
GPT_GRAD_OVERLAP=0 gpt-train -q "${MODEL[@]}" --threads=1 --gradient_accumulation_steps=2 \
  --max_iters=30 --eval_interval=1000 --out_dir=serial --nproc_per_node=2 > /dev/null
gpt-train -q "${MODEL[@]}" --threads=1 --gradient_accumulation_steps=2 --max_iters=30 \
  --eval_interval=1000 --out_dir=bf16 --nproc_per_node=2 --reduce_dtype=bf16 > /dev/null
gpt-train -q "${MODEL[@]}" --threads=1 --gradient_accumulation_steps=2 --max_iters=30 \
  --eval_interval=1000 --out_dir=zero1 --nproc_per_node=2 --zero_stage=1 > /dev/null
GPT_GRAD_OVERLAP=0 gpt-train -q "${MODEL[@]}" --threads=1 --gradient_accumulation_steps=2 \
  --max_iters=30 --eval_interval=1000 --out_dir=zero1s --nproc_per_node=2 --zero_stage=1 > /dev/null
one=$(median tokens_per_s one/metrics.jsonl)
printf '%-26s %12.0f %10s %10s\n' "1 rank x 1 thread" "$one" 1.00x -
for run in two serial bf16 zero1 zero1s; do
  label="2 ranks x 1 thread"; [ $run = serial ] && label="  the same, sums after"
  [ $run = bf16 ] && label="  the same, bf16 sums"
  [ $run = zero1 ] && label="  the same, zero_stage=1"
  [ $run = zero1s ] && label="    reduce-scatter after"
  tps=$(median tokens_per_s $run/metrics.jsonl)
  printf '%-26s %12.0f %9.2fx %10.2f\n' "$label" "$tps" "$(echo "$tps / $one" | bc -l)" \
    "$(median comm_ms $run/metrics.jsonl)"
done
echo "(4 layers, 256 wide, B=8, T=128, 2 micro-batches per step; $(nproc) cores; ideal 2.00x;"
echo " comm-ms: the time a step waits for collectives; by default each layer's gradients are summed"
echo " during the backward, GPT_GRAD_OVERLAP=0 sums them all after it; reduce_dtype=bf16 sends"
echo " half the bytes; zero_stage=1 then all-gathers the weights, and with GPT_GRAD_OVERLAP=0"
echo " reduce-scatters the gradients after the backward instead of summing them whole during it)"

echo
printf '%-34s %10s %10s %8s\n' "checkpoints (1 rank)" none-s/step every-s/step ratio
for threads in 1 2; do
  ck=("${MODEL[@]}" --threads=$threads --gradient_accumulation_steps=1 --max_iters=30 --eval_interval=1
      --learning_rate=0 --min_lr=0)
  none=$(secs gpt-train -q "${ck[@]}" --always_save_checkpoint=false --out_dir=none$threads)
  every=$(secs gpt-train -q "${ck[@]}" --always_save_checkpoint=true --out_dir=every$threads)
  printf '%-34s %10.3f %10.3f %7.2fx\n' "$threads training thread(s), $(nproc) cores" \
    "$(echo "$none / 30" | bc -l)" "$(echo "$every / 30" | bc -l)" "$(echo "$every / $none" | bc -l)"
done
size=$(du -m -L every1/latest.safetensors | cut -f1)
echo "(a $size MB checkpoint after every step, written in the background, against none; target: under"
echo " 1.10x with a core free for the writer, as on a GPU machine; with every core training, the"
echo " writer's copy and system time come out of the step)"
