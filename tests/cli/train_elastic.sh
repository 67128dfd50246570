# Elastic and faulty runs. SIGTERM to one of 2 ranks: all stop at the next step boundary, rank 0
# checkpoints, both exit 0; the job then goes on with 1 rank, then with 2 again (init_from = auto),
# and its losses are those of an uninterrupted one-process run. A rank killed with SIGKILL: the
# other exits 1 within the timeout, naming it; a rendezvous that never completes times out.
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
ARGS=("${TINY[@]}" --threads=1 --dropout=0.1 --gradient_accumulation_steps=4 --eval_interval=4
      --dist_timeout=30 --out_dir=e --init_from=auto)
port=$(free_port)
# rank R ARGS...: rank R of 2 (exec: run it in the background or in a subshell; $! is its pid)
rank() { RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 MASTER_PORT=$port exec gpt-train -q "${ARGS[@]}" "${@:2}"; }
rank 1 --max_iters=100000 > r1.log 2> r1.err & p1=$!
rank 0 --max_iters=100000 > r0.log 2> r0.err & p0=$!
for _ in $(seq 600); do [ -e e/metrics.jsonl ] && [ "$(losses e/metrics.jsonl | wc -l)" -ge 3 ] && break; sleep 0.05; done
kill -TERM $p1
rc0=0 rc1=0; wait $p0 || rc0=$?; wait $p1 || rc1=$?
echo "SIGTERM to rank 1: exit $rc0 and $rc1"
s=$(losses e/metrics.jsonl | tail -n 1 | cut -d' ' -f1)
[ "$(readlink e/latest.safetensors)" = "$(printf 'ckpt_%08d.safetensors' "$s")" ] && echo "checkpoint at the last step"
gpt-train -q "${ARGS[@]}" --max_iters=$((s + 3)) > one.log
port=$(free_port)
rank 1 --max_iters=$((s + 6)) > r1b.log & p1=$!
(rank 0 --max_iters=$((s + 6)) > r0b.log)
wait $p1
gpt-train -q "${TINY[@]}" --threads=1 --dropout=0.1 --gradient_accumulation_steps=4 --eval_interval=4 \
  --max_iters=$((s + 6)) --out_dir=ref > ref.log
losses e/metrics.jsonl > e.l
losses ref/metrics.jsonl > ref.l
[ "$(wc -l < e.l)" -eq $((s + 6)) ] && echo "2 ranks, then 1, then 2: every step logged once"
close e.l ref.l 1e-5 && echo "2 ranks, then 1, then 2: the losses of one uninterrupted process"
# SIGKILL: rank 0 learns that rank 1 is gone and stops, exit 1, without a hang
port=$(free_port)
ARGS=("${TINY[@]}" --threads=1 --gradient_accumulation_steps=4 --eval_interval=1000 --dist_timeout=30 --out_dir=k)
rank 1 --max_iters=100000 > /dev/null 2>&1 & p1=$!
rank 0 --max_iters=100000 > k.log 2> k.err & p0=$!
for _ in $(seq 600); do [ -e k/metrics.jsonl ] && [ "$(losses k/metrics.jsonl | wc -l)" -ge 2 ] && break; sleep 0.05; done
kill -KILL $p1
rc0=0; wait $p0 || rc0=$?
echo "SIGKILL to rank 1: rank 0 exit $rc0, $(wc -l < k.err) line naming rank 1: $(grep -c 'rank 1' k.err)"
# a rendezvous that never completes: rank 1 never comes
port=$(free_port)
rc=0; RANK=0 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${TINY[@]}" --dist_timeout=1 --out_dir=never \
  --max_iters=1 2> never.err || rc=$?
echo "exit $rc: $(sed "s/:$port/:PORT/" never.err)"
# a rank that hangs (SIGSTOP): rank 0 gives up after dist_timeout, naming it
port=$(free_port)
ARGS=("${TINY[@]}" --threads=1 --eval_interval=1000 --dist_timeout=3 --out_dir=h)
rank 1 --max_iters=100000 > /dev/null 2>&1 & p1=$!
rank 0 --max_iters=100000 > h.log 2> h.err & p0=$!
for _ in $(seq 600); do [ -e h/metrics.jsonl ] && [ "$(losses h/metrics.jsonl | wc -l)" -ge 2 ] && break; sleep 0.05; done
kill -STOP $p1
rc0=0; wait $p0 || rc0=$?
kill -KILL $p1
echo "SIGSTOP to rank 1: rank 0 exit $rc0: $(sed -E 's/[0-9]*ms/Nms/; s/for (send|recv) operation/for send or recv operation/' h.err)"
