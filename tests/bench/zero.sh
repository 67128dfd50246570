#!/usr/bin/env bash
# make bench (BENCH=zero): ZeRO's stages side by side on 2 CPU ranks (Gloo on loopback), with
# gpt-train. Speed: the dist bench's model (4 layers, 256 wide, B=8, T=128, 2 micro-batches a
# step) by 2 ranks of 1 thread at zero_stage 0, 1, 2 and 3: median tokens/s of steps 6..30, the
# ratio to stage 1 (issue 40 asks stage 2 at 0.95x or more, stage 3 at 0.85x) and the median
# time a step waits for collectives; optimizer_offload's host AdamW over 124M floats
# (adamw_host.c: what each offloaded step adds on the CPU). Memory: GPT-2 124M (the gpt2 preset,
# fp32, batch 1 x 64 so that the activations are small), 2 ranks started by hand with torchrun's
# variables, 3 steps and a checkpoint: each rank's peak resident memory (/usr/bin/time) beside
# what --plan says of it.
# Usage: tests/bench/zero.sh BUILD (data: $GPT_TEST_DATA or ../shared/data).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
work="$build/bench/zero"; rm -rf "$work"; mkdir -p "$work"; cd "$work"
# median FIELD FILE: the median of a metrics.jsonl field over steps >= 6
median() { sed -n "s/.*\"step\":\([0-9]*\),.*\"$1\":\([0-9.e+-]*\).*/\1 \2/p" "$2" |
  awk '$1 >= 6 { print $2 }' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

gpt-tokenize -q --char "$data/tinyshakespeare/input.txt" --vocab-out vocab.json -o char.bin \
  --val-fraction 0.1 --val-output charval.bin
SMALL=(--train_data=char.bin --val_data=charval.bin --vocab=vocab.json --n_layer=4 --n_head=4 --n_embd=256
       --block_size=128 --batch_size=8 --eval_iters=1 --warmup_iters=0 --decay_lr=false
       --threads=1 --gradient_accumulation_steps=2 --max_iters=30 --eval_interval=1000)
echo
printf '%-28s %12s %10s %10s\n' "2 ranks x 1 thread" tokens/s "vs stage 1" comm-ms
for z in 0 1 2 3; do
  gpt-train -q "${SMALL[@]}" --out_dir=speed$z --nproc_per_node=2 --zero_stage=$z > /dev/null
done
one=$(median tokens_per_s speed1/metrics.jsonl)
for z in 0 1 2 3; do
  tps=$(median tokens_per_s speed$z/metrics.jsonl)
  printf '%-28s %12.0f %9.2fx %10.2f\n' "zero_stage $z" "$tps" "$(echo "$tps / $one" | bc -l)" \
    "$(median comm_ms speed$z/metrics.jsonl)"
done
echo "(4 layers, 256 wide, B=8, T=128, 2 micro-batches a step; $(nproc) cores)"
# optimizer_offload's update on the host: the CPU backend's AdamW over 124M floats (adamw_host.c)
echo
"$build/bench/adamw_host" 124475904 2 | awk '{ printf "optimizer_offload: the host AdamW over " \
  "GPT-2 124M (%s floats, bf16 copies written), %s threads: %s ms a step, %s GB/s\n", $3, $5, $7, $9 }'

[ -x /usr/bin/time ] || { echo "memory: skipped (/usr/bin/time not installed: Debian package time)"; exit 0; }
gpt-tokenize -q -V "$data/gpt2" "$data/tinyshakespeare/input.txt" -o bpe.bin \
  --val-fraction 0.1 --val-output bpeval.bin
BIG=(-q -c gpt2 --train_data=bpe.bin --val_data=bpeval.bin --batch_size=1 --block_size=64 --gradient_accumulation_steps=2
     --max_iters=3 --eval_interval=1000 --eval_iters=1 --threads=1 --dropout=0)
echo
printf '%-28s %14s %14s %16s\n' "GPT-2 124M, 2 ranks" "rank 0 peak" "rank 1 peak" "--plan says"
for z in 0 1 2 3; do
  port=$((29700 + RANDOM % 1000))
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_PORT=$port /usr/bin/time -f %M -o rss1 \
    gpt-train "${BIG[@]}" --out_dir=mem$z --zero_stage=$z > /dev/null &
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_PORT=$port /usr/bin/time -f %M -o rss0 \
    gpt-train "${BIG[@]}" --out_dir=mem$z --zero_stage=$z > /dev/null
  wait
  plan=$(gpt-train "${BIG[@]}" --zero_stage=$z --nproc_per_node=2 --plan --plan-memory=100G |
    awk '/^peak/ { print $2 " " $3 }')
  gb0=$(echo "$(cat rss0) / 1000000" | bc -l) gb1=$(echo "$(cat rss1) / 1000000" | bc -l)
  printf '%-28s %11.2f GB %11.2f GB %16s\n' "zero_stage $z" "$gb0" "$gb1" "$plan"
done
echo "(fp32, batch 1 x 64, 3 steps and a checkpoint (each rank's host copy: its slice, 3 x the"
echo " parameters over the ranks); peak resident memory of each process; --plan: every rank's)"
