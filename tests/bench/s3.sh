#!/usr/bin/env bash
# make bench (BENCH=s3): gpt-train with its data and its out_dir in a bucket of a local S3 server
# (moto's, as the tests run it: tests/cli/s3.bash; skipped without moto).
# Data: the same 40 steps (4 layers, 256 wide, B=8, T=128) on Tiny Shakespeare's shard read from
# a local file and from the bucket (ranged GETs read ahead, train/readahead.c), median ms per
# step of steps 6..40 (gpt-train's own step time, data loading included); target: the bucket
# within 5% of the file (1.05x). The server shares this machine's CPUs with the training (about
# 3 ms of CPU a request, 8 requests a step here, and a 37 MB PUT a checkpoint): on a loaded
# machine that, not the network, is most of the difference, so it runs at nice 19 as a stand-in
# for a store elsewhere (BENCH_S3_NICE=0 leaves it at the training's priority; gpt-train -v says
# how many windows were not read ahead in time).
# Checkpoints: 40 steps with a checkpoint every 10 (a 38 MB checkpoint uploaded by the writer
# thread while training goes on), the time from one step's log line to the next's, so that the
# checkpoint's part in its step counts (the state copied to the host, the upload's share of the
# CPUs): the median of the 3 steps that checkpoint against the median of the plain ones, for a
# local out_dir and for the bucket; target: the bucket within 10% of a plain step (1.10x).
# Training on 1 thread (a core left for the server and the readers or the writer) and on 2; the
# runs of each pair alternate, BENCH_ROUNDS times (3), and the medians are over all of them.
# Usage: tests/bench/s3.sh BUILD (data: $GPT_TEST_DATA or ../shared/data).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$TOP/../shared/data}" && pwd)
work="$build/bench/s3"; rm -rf "$work"; mkdir -p "$work"; cd "$work"
source "$TOP/tests/cli/s3.bash" # the server, until this script ends; port, key, secret, s3py
server=$! # (s3.bash's background job)
# The server stands for a store on other machines: at nice BENCH_S3_NICE (19; 0: as it is), every
# thread of it (those it starts later inherit it), it takes only the CPU time training leaves.
nice_to=${BENCH_S3_NICE:-19}
if [ "$nice_to" != 0 ]; then
  for t in /proc/$server/task/*; do renice -n "$nice_to" -p "${t##*/}" > /dev/null; done
fi
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port
export TMPDIR=$work
gpt-tokenize -q --char "$data/tinyshakespeare/input.txt" --vocab-out vocab.json -o train.bin \
  --val-fraction 0.1 --val-output val.bin
s3py 's3.create_bucket(Bucket="bench"); s3.upload_file("train.bin", "bench", "data/train.bin"); s3.upload_file("val.bin", "bench", "data/val.bin")'
MODEL=(--vocab=vocab.json --n_layer=4 --n_head=4 --n_embd=256 --block_size=128 --batch_size=8
       --eval_iters=1 --warmup_iters=0 --decay_lr=false --gradient_accumulation_steps=1 --max_iters=40)
# steps FILE: the step ms of a metrics.jsonl, steps 6..
steps() { sed -n 's/.*"step":\([0-9]*\),.*"ms":\([0-9.e+-]*\).*/\1 \2/p' "$1" | awk '$1 >= 6 { print $2 }'; }
# gaps FILE EVERY: from lines "STEP SECONDS" (the time each step's log line came), the ms from
# the line before to each line of steps 6..: "c MS" for a step right after a checkpoint (steps
# 11, 21, 31 for EVERY 10: the checkpoint is taken after the step's line), else "p MS"
gaps() { awk -v k="$2" 'NR > 1 && $1 >= 6 { printf "%s %.3f\n", ($1 - 1) % k == 0 ? "c" : "p", 1e3 * ($2 - t) } { t = $2 }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# stamped CMD...: CMD's stdout lines "step N/..." as "N SECONDS" (the time each line came)
stamped() { "$@" | python3 -c '
import sys, time
for line in sys.stdin:
    if line.startswith("step "):
        print(line.split()[1].split("/")[0], time.monotonic(), flush=True)'; }
rounds=${BENCH_ROUNDS:-3} # the runs alternate, round after round, so that the machine's load falls on both

echo
printf '%-34s %10s %10s %8s\n' "data streamed from a bucket" file-ms s3-ms ratio
for threads in 1 2; do
  : > file$threads.ms; : > s3data$threads.ms
  for round in $(seq "$rounds"); do
    gpt-train -q "${MODEL[@]}" --threads=$threads --eval_interval=1000 --train_data=train.bin --val_data=val.bin \
      --out_dir=file$threads.$round > /dev/null
    gpt-train -q "${MODEL[@]}" --threads=$threads --eval_interval=1000 --train_data=s3://bench/data/train.bin \
      --val_data=s3://bench/data/val.bin --out_dir=s3data$threads.$round > /dev/null
    steps file$threads.$round/metrics.jsonl >> file$threads.ms
    steps s3data$threads.$round/metrics.jsonl >> s3data$threads.ms
  done
  f=$(median < file$threads.ms) s=$(median < s3data$threads.ms)
  printf '%-34s %10.1f %10.1f %7.3fx\n' "$threads training thread(s), $(nproc) cores" "$f" "$s" "$(echo "$s / $f" | bc -l)"
done
echo "(median ms per step, steps 6..40 of $rounds runs each, windows of 129 tokens read by ranged GETs"
echo " from moto on 127.0.0.1 (nice $nice_to) ahead of the loop; target: within 1.05x with a core free"
echo " for the server and the readers; with every core training, the server's CPU time is the step's)"

echo
printf '%-34s %10s %10s %8s\n' "checkpointing step" plain-ms ckpt-ms ratio
for threads in 1 2; do
  ck=("${MODEL[@]}" --threads=$threads --eval_interval=1000 --train_data=train.bin --val_data=val.bin
      --checkpoint_interval=10 --log_interval=1)
  : > local$threads.gaps; : > bucket$threads.gaps
  for round in $(seq "$rounds"); do
    stamped gpt-train -q "${ck[@]}" --out_dir=local$threads.$round > local$threads.$round.t
    s3py 's3.create_bucket(Bucket=sys.argv[1])' "run$threads-$round"
    stamped gpt-train -q "${ck[@]}" --out_dir=s3://run$threads-$round > bucket$threads.$round.t
    gaps local$threads.$round.t 10 >> local$threads.gaps
    gaps bucket$threads.$round.t 10 >> bucket$threads.gaps
  done
  for where in local bucket; do
    p=$(awk '$1 == "p" { print $2 }' $where$threads.gaps | median)
    c=$(awk '$1 == "c" { print $2 }' $where$threads.gaps | median)
    label="out_dir local"; [ $where = bucket ] && label="out_dir s3://"
    printf '%-34s %10.1f %10.1f %7.3fx\n' "$label, $threads thread(s)" "$p" "$c" "$(echo "$c / $p" | bc -l)"
  done
done
size=$(du -m -L local1.1/latest.safetensors | cut -f1)
echo "(a $size MB checkpoint every 10 steps, written (local) or uploaded (s3://) by the writer"
echo " thread; the time from the log line before a checkpointing step to its own, median of the"
echo " 3 such steps of each of $rounds runs against the plain ones; target: the bucket within 1.10x"
echo " with a core free, as on a GPU machine; with every core training, the server's CPU time and the"
echo " kernel's writeback come out of the step)"
