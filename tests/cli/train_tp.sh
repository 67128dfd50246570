# tensor_parallel = 2 (Megatron's split: attention by heads, the MLP by hidden units, the
# vocabulary by rows) through gpt-train's launcher: on 2 CPU ranks, and data parallel x 2 across
# two such groups on 4 (also with ZeRO-1 and 3 across them), 20 steps with dropout off: the
# losses (1e-5) and final weights and moments (1e-4) of one process; a run stopped at step 10
# resumes at another tensor_parallel (2 -> 1, 1 -> 2) as the uninterrupted run, since
# checkpoints are whole (gpt-sample reads one); on 2 cuda-emu devices over the emulator's NCCL
# the same in float32, and in bfloat16 the losses within its rounding (each rank's part of a
# projection rounded to bf16 before the sum: 1e-3); settings it cannot take are refused with a
# line naming the numbers.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
ARGS=("${TINY[@]}" --threads=1 --max_iters=20 --eval_interval=10)
gpt-train -q "${ARGS[@]}" --out_dir=one > /dev/null
losses one/metrics.jsonl > one.l
for n in 2 4; do
  gpt-train -q "${ARGS[@]}" --nproc_per_node=$n --tensor_parallel=2 --out_dir=tp$n > /dev/null
  losses tp$n/metrics.jsonl | close - one.l 1e-5 && st_close tp$n/latest.safetensors \
    one/latest.safetensors 1e-4 && echo "$n ranks, tensor_parallel 2: one process"
done
for z in 1 3; do # ZeRO over the data-parallel pairs
  gpt-train -q "${ARGS[@]}" --nproc_per_node=4 --tensor_parallel=2 --zero_stage=$z --out_dir=z$z > /dev/null
  losses z$z/metrics.jsonl | close - one.l 1e-5 && st_close z$z/latest.safetensors \
    one/latest.safetensors 1e-4 && echo "4 ranks, tensor_parallel 2, zero_stage $z: one process"
done
gpt-train -q "${ARGS[@]}" --max_iters=10 --nproc_per_node=2 --tensor_parallel=2 --out_dir=r21 > /dev/null
gpt-train -q "${ARGS[@]}" --init_from=resume --out_dir=r21 > /dev/null
gpt-train -q "${ARGS[@]}" --max_iters=10 --out_dir=r12 > /dev/null
gpt-train -q "${ARGS[@]}" --init_from=resume --nproc_per_node=2 --tensor_parallel=2 --out_dir=r12 > /dev/null
for o in r21 r12; do
  losses $o/metrics.jsonl | close - one.l 1e-5 && st_close $o/latest.safetensors \
    one/latest.safetensors 1e-4 && echo "$o: resumed, the uninterrupted run"
done
gpt-sample -q -m tp2/latest.safetensors -n 20 --seed 1 > s2.txt
gpt-sample -q -m one/latest.safetensors -n 20 --seed 1 > s1.txt
cmp -s s1.txt s2.txt && test -s s1.txt && echo "gpt-sample: the same text from either checkpoint"
for dt in float32 bfloat16; do
  gpt-train -q "${ARGS[@]}" --device=cuda-emu --dtype=$dt --out_dir=e1$dt > /dev/null
  gpt-train -q "${ARGS[@]}" --device=cuda-emu --dtype=$dt --nproc_per_node=2 --tensor_parallel=2 \
    --out_dir=e2$dt > /dev/null
  losses e1$dt/metrics.jsonl > e1$dt.l
  if [ $dt = float32 ]; then
    losses e2$dt/metrics.jsonl | close - e1$dt.l 1e-5 && st_close e2$dt/latest.safetensors \
      e1$dt/latest.safetensors 1e-4 && echo "cuda-emu $dt, tensor_parallel 2: one device"
  else
    losses e2$dt/metrics.jsonl | close - e1$dt.l 1e-3 && echo "cuda-emu $dt, tensor_parallel 2: one device's losses"
  fi
done
run() { local rc=0; "$@" > out.txt 2> err.txt || rc=$?; echo "exit $rc: $(grep -v 'exited with status' err.txt)"; }
run gpt-train -q "${ARGS[@]}" --tensor_parallel=2 --out_dir=bad
run gpt-train -q "${ARGS[@]}" --tensor_parallel=2 --nproc_per_node=3 --out_dir=bad
run gpt-train -q "${ARGS[@]}" --tensor_parallel=4 --nproc_per_node=4 --out_dir=bad
run gpt-train -q "${ARGS[@]}" --tensor_parallel=2 --nproc_per_node=2 --optimizer_offload=true \
  --device=cuda-emu --out_dir=bad
test ! -e bad/latest.safetensors && echo "nothing trained"
