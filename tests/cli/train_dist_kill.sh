# Rank 0 killed (SIGKILL) at a random moment of a 2-rank run that checkpoints every step, KILLS
# times (default 10) each way: under gpt-train's own launcher (--nproc_per_node=2) and as two
# processes started with torchrun's variables. Every run must end within 10 s of the kill (every
# process gone), with a non-zero exit and a line naming rank 0. Rank 1 once blocked in a Gloo
# send for the whole dist_timeout (60 s here). The count and the slowest end go to stderr.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
KILLS=${KILLS:-10}
ARGS=("${TINY[@]}" --n_embd=256 --n_head=4 --threads=1 --eval_interval=100000 --checkpoint_interval=1 --keep_last=2
      --dist_timeout=60 --max_iters=100000)
export GPT_DIST_TOKEN=kill-test-$$
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done' EXIT
now() { date +%s%N; }
slowest=0 runs=0
# started DIR: waits (30 s at most) until the run in DIR has logged a step
started() {
  for _ in $(seq 600); do [ -e "$1/metrics.jsonl" ] && [ -n "$(losses "$1/metrics.jsonl")" ] && return; sleep 0.05; done
  echo "$1: no step logged within 30 s"
}
# ended PID...: waits (20 s at most) until every PID is gone; prints the ms since t0
ended() {
  local p
  for _ in $(seq 400); do
    for p in "$@"; do kill -0 "$p" 2>/dev/null && break; p=; done
    [ -z "$p" ] && break
    sleep 0.05
  done
  echo $(( ($(now) - t0) / 1000000 ))
}
# check WAY I MS RC ERRFILE: one run's verdict (printed only when it fails)
check() {
  runs=$((runs + 1)); [ "$3" -gt "$slowest" ] && slowest=$3
  [ "$3" -le 10000 ] || echo "$1 run $2: ended $3 ms after the kill"
  [ "$4" -ne 0 ] || echo "$1 run $2: exit 0"
  grep -q 'rank 0' "$5" || { echo "$1 run $2: no line names rank 0:"; cat "$5"; }
}
child_rank0() { # LAUNCHER_PID: its child with RANK=0
  local c
  for c in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
    tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx RANK=0 && { echo "$c"; return; }
  done
}
# a random moment of a step (each a few tens of ms with its checkpoint: 0.25 s spans several)
delay() { sleep "0.$(printf %03d $((RANDOM % 250)))"; }

for i in $(seq "$KILLS"); do
  gpt-train -q "${ARGS[@]}" --nproc_per_node=2 --out_dir=l$i > /dev/null 2> l$i.err & lp=$!
  pids+=("$lp")
  started l$i
  delay
  r0=$(child_rank0 "$lp")
  [ -n "$r0" ] || { echo "launcher run $i: rank 0 not found"; continue; }
  t0=$(now); kill -KILL "$r0"
  ms=$(ended "$lp")
  kill -KILL "$lp" 2>/dev/null || true
  rc=0; wait "$lp" || rc=$?
  check launcher "$i" "$ms" "$rc" l$i.err
done
echo "launcher: every run ended within 10 s of rank 0's SIGKILL, with an error naming rank 0 (unless said above)"

for i in $(seq "$KILLS"); do
  port=$(free_port)
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2
  RANK=1 LOCAL_RANK=1 gpt-train -q "${ARGS[@]}" --out_dir=t$i > /dev/null 2> t$i.err & p1=$!
  RANK=0 LOCAL_RANK=0 gpt-train -q "${ARGS[@]}" --out_dir=t$i > /dev/null 2> t${i}r0.err & p0=$!
  pids+=("$p0" "$p1")
  unset MASTER_ADDR MASTER_PORT WORLD_SIZE
  started t$i
  delay
  t0=$(now); kill -KILL "$p0"
  ms=$(ended "$p1")
  kill -KILL "$p1" 2>/dev/null || true
  rc=0; wait "$p1" || rc=$?
  wait "$p0" || true
  check torchrun "$i" "$ms" "$rc" t$i.err
done
echo "torchrun variables: every run ended within 10 s of rank 0's SIGKILL, with an error naming rank 0 (unless said above)"
echo "$runs runs, the slowest ended $slowest ms after the kill" >&2
