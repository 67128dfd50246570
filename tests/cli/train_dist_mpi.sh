# Data-parallel training started by mpirun (OpenMPI's variables): 2 ranks train the same model
# as one process with the same global batch; a bad setting under mpirun, which ends every rank
# once one has exited: rank 1 waits until rank 0 has said why (tr_dist_await_report), so the
# reason is always there. Skipped where mpirun is missing (.ci/deps.sh installs openmpi-bin).
source "$TOP/tests/cli/lib.bash"; need_data
command -v mpirun > /dev/null || { echo "mpirun not found (install openmpi-bin)" >&2; exit 77; }
tiny_data d
ARGS=("${TINY[@]}" --threads=1 --dropout=0.1 --gradient_accumulation_steps=4 --max_iters=6
      --eval_interval=3 --dist_timeout=60)
gpt-train -q "${ARGS[@]}" --out_dir=one > one.log
losses one/metrics.jsonl > one.l
MASTER_PORT=$(free_port) mpirun --allow-run-as-root --oversubscribe -x MASTER_PORT -np 2 \
  gpt-train -q "${ARGS[@]}" --out_dir=mpi > mpi.log
losses mpi/metrics.jsonl > mpi.l
close mpi.l one.l 1e-5 && st_close mpi/latest.safetensors one/latest.safetensors 1e-4 && echo "mpi: the one-process run"
MASTER_PORT=$(free_port) mpirun --allow-run-as-root --oversubscribe -x MASTER_PORT -np 2 \
  gpt-train -q "${ARGS[@]}" --out_dir=mpibad --gradient_accumulation_steps=3 > /dev/null 2> mpibad.err || true
grep -c "^gpt-train: --gradient_accumulation_steps: gradient_accumulation_steps = 3 does not split over 2 ranks" mpibad.err
