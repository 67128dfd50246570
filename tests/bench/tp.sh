#!/usr/bin/env bash
# make bench (BENCH=tp): tensor parallel on 2 CPU ranks (Gloo on loopback) beside data parallel on
# 2 and one process, with gpt-train. Speed: the zero bench's model (4 layers, 256 wide, B=8,
# T=128, 2 micro-batches a step): one process of 2 threads, DP=2 and TP=2 of 1 thread a rank (the
# same 2 cores): median tokens/s of steps 6..30, the ratio to one process, and the median time a
# step waits for collectives (TP: its 4 all-reduces a layer and the vocabulary's, of B x T x 256
# floats, per micro-batch; DP: one sum of the gradients a step). Memory: GPT-2 124M (the gpt2
# preset, fp32, batch 1 x 64), one process and 2 ranks at tensor_parallel 2 started by hand with
# torchrun's variables, 3 steps and a checkpoint: each rank's peak resident memory
# (/usr/bin/time) beside what --plan says.
# Usage: tests/bench/tp.sh BUILD (data: $GPT_TEST_DATA or ../shared/data).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
work="$build/bench/tp"; rm -rf "$work"; mkdir -p "$work"; cd "$work"
# median FIELD FILE: the median of a metrics.jsonl field over steps >= 6
median() { sed -n "s/.*\"step\":\([0-9]*\),.*\"$1\":\([0-9.e+-]*\).*/\1 \2/p" "$2" |
  awk '$1 >= 6 { print $2 }' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

gpt-tokenize -q --char "$data/tinyshakespeare/input.txt" --vocab-out vocab.json -o char.bin \
  --val-fraction 0.1 --val-output charval.bin
SMALL=(--train_data=char.bin --val_data=charval.bin --vocab=vocab.json --n_layer=4 --n_head=4 --n_embd=256
       --block_size=128 --batch_size=8 --eval_iters=1 --warmup_iters=0 --decay_lr=false
       --gradient_accumulation_steps=2 --max_iters=30 --eval_interval=1000)
echo
printf '%-28s %12s %10s %10s\n' "the same 2 cores" tokens/s "vs 1 proc" comm-ms
gpt-train -q "${SMALL[@]}" --threads=2 --out_dir=one > /dev/null
gpt-train -q "${SMALL[@]}" --threads=1 --out_dir=dp --nproc_per_node=2 > /dev/null
gpt-train -q "${SMALL[@]}" --threads=1 --out_dir=tp --nproc_per_node=2 --tensor_parallel=2 > /dev/null
base=$(median tokens_per_s one/metrics.jsonl)
for run in "one:1 process, 2 threads" "dp:DP=2, 1 thread a rank" "tp:TP=2, 1 thread a rank"; do
  dir=${run%%:*} tps=$(median tokens_per_s ${run%%:*}/metrics.jsonl)
  comm=$(median comm_ms $dir/metrics.jsonl); comm=${comm:-0}
  printf '%-28s %12.0f %9.2fx %10.2f\n' "${run#*:}" "$tps" "$(echo "$tps / $base" | bc -l)" "$comm"
done
echo "(4 layers, 256 wide, B=8, T=128, 2 micro-batches a step; $(nproc) cores)"

[ -x /usr/bin/time ] || { echo "memory: skipped (/usr/bin/time not installed: Debian package time)"; exit 0; }
gpt-tokenize -q -V "$data/gpt2" "$data/tinyshakespeare/input.txt" -o bpe.bin \
  --val-fraction 0.1 --val-output bpeval.bin
BIG=(-q -c gpt2 --train_data=bpe.bin --val_data=bpeval.bin --batch_size=1 --block_size=64 --gradient_accumulation_steps=2
     --max_iters=3 --eval_interval=1000 --eval_iters=1 --threads=1 --dropout=0)
echo
printf '%-28s %14s %14s %16s\n' "GPT-2 124M" "rank 0 peak" "rank 1 peak" "--plan says"
/usr/bin/time -f %M -o rss gpt-train "${BIG[@]}" --out_dir=mem1 > /dev/null
plan=$(gpt-train "${BIG[@]}" --plan --plan-memory=100G | awk '/^peak/ { print $2 " " $3 }')
printf '%-28s %11.2f GB %14s %16s\n' "1 process" "$(echo "$(cat rss) / 1000000" | bc -l)" - "$plan"
port=$((29700 + RANDOM % 1000))
V=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_PORT=$port)
env "${V[@]}" RANK=1 LOCAL_RANK=1 /usr/bin/time -f %M -o rss1 \
  gpt-train "${BIG[@]}" --out_dir=mem2 --tensor_parallel=2 > /dev/null &
env "${V[@]}" RANK=0 LOCAL_RANK=0 /usr/bin/time -f %M -o rss0 \
  gpt-train "${BIG[@]}" --out_dir=mem2 --tensor_parallel=2 > /dev/null
wait
plan=$(gpt-train "${BIG[@]}" --tensor_parallel=2 --nproc_per_node=2 --plan --plan-memory=100G |
  awk '/^peak/ { print $2 " " $3 }')
printf '%-28s %11.2f GB %11.2f GB %16s\n' "tensor_parallel 2" "$(echo "$(cat rss0) / 1000000" | bc -l)" \
  "$(echo "$(cat rss1) / 1000000" | bc -l)" "$plan"
echo "(fp32, batch 1 x 64, 3 steps and a checkpoint; peak resident memory of each process;"
echo " --plan: rank 0's)"
