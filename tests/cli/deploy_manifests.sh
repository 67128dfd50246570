# train/deploy/: every YAML manifest parses and names the image, the gpt-train command (init_from =
# auto), the shared volume and the launcher variables README.md documents; the Dockerfile builds
# CUDA devel -> runtime with ENTRYPOINT gpt-train (tests/cli/deploy_manifests.py). Where this
# gpt-train knows the distributed keys, it accepts the manifests' command (--print-config).
# slurm.sbatch passes bash -n and runs under a fake Slurm (scontrol, srun, scancel): MASTER_ADDR
# is the first node, a failure is passed on, USR1 (its time limit near) becomes SIGTERM to the
# tasks and then a requeue once they have exited 0, and SIGTERM to the script (preemption) leaves
# it waiting for the tasks, with no requeue of its own.
source "$TOP/tests/cli/lib.bash"
python3 -c 'import yaml' 2> /dev/null || { echo "python3 has no yaml module (python3-yaml)" >&2; exit 77; }
python3 "$TOP/tests/cli/deploy_manifests.py" "$TOP" argv.txt
mapfile -t argv < argv.txt
help=$(gpt-train --help 2> /dev/null || true)
if [[ $help == *--total_batch_size=* ]]; then
  GPT_CONFIG_DIR=$TOP/train/configs "${argv[@]}" --print-config > config.txt
  grep -qx 'init_from = auto  # --init_from' config.txt
  echo "gpt-train accepts the manifests' command" >&2
else
  echo "gpt-train not built or without the distributed keys: its check of the command skipped" >&2
fi

sbatch=$TOP/train/deploy/slurm.sbatch
bash -n "$sbatch" && echo "slurm.sbatch: bash -n passes"
mkdir bin
cat > bin/scontrol << 'FAKE'
#!/bin/bash
case $1 in
  show) printf 'gpu17\ngpu18\n' ;;
  requeue) echo "scontrol requeue $2" >> "$LOG" ;;
esac
FAKE
cat > bin/scancel << 'FAKE'
#!/bin/bash
echo "scancel $*" >> "$LOG"
pid=$(cat srun.pid)
kill -TERM "$pid"
# the step ends before the script's trap returns: the race that once lost srun's exit status
while kill -0 "$pid" 2> /dev/null; do sleep 0.01; done
FAKE
cat > bin/srun << 'FAKE'
#!/bin/bash
# a job step: records its command line, then ends as $FAKE_STEP says
echo "srun MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT $*" >> "$LOG"
case $FAKE_STEP in
  ok) exit 0 ;;
  fail) exit 1 ;;
esac
trap 'echo "step: SIGTERM, checkpoint, exit 0" >> "$LOG"; exit 0' TERM
echo $$ > srun.pid
for _ in $(seq 600); do sleep 0.05; done   # no SIGTERM within 30 s: a failure
exit 3
FAKE
chmod +x bin/*
export PATH=$PWD/bin:$PATH LOG=$PWD/log SLURM_JOB_ID=4242 SLURM_JOB_NODELIST='gpu[17-18]'
export GPT_JOB_DIR=/shared/gptkit
slurm() { local rc=0; : > log; FAKE_STEP=$1 bash "$sbatch" 2> /dev/null || rc=$?; cat log; echo "exit $rc"; }
slurm ok
slurm fail
: > log
# the time limit near: Slurm sends USR1 to the script (--signal=B:USR1@120)
FAKE_STEP='wait' bash "$sbatch" 2> /dev/null & job=$!
for _ in $(seq 600); do [ -s srun.pid ] && break; sleep 0.05; done
kill -USR1 $job
rc=0; wait $job || rc=$?
cat log; echo "exit $rc"
: > log; rm srun.pid
# preemption: Slurm sends SIGTERM to the script and to the tasks; the script waits for them
FAKE_STEP='wait' bash "$sbatch" 2> /dev/null & job=$!
for _ in $(seq 600); do [ -s srun.pid ] && break; sleep 0.05; done
kill -TERM $job
sleep 0.2
kill -TERM "$(cat srun.pid)"
rc=0; wait $job || rc=$?
cat log; echo "exit $rc"
