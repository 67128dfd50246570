# Two machines on one: network namespaces A and B (made here, with this shell's pid in their
# names) joined by a veth pair, 192.0.2.1/24 in A and 192.0.2.2/24 in B (TEST-NET-1), no other
# route. Node 0 in A is rank 0 by Kubeflow Trainer's PET_* variables; node 1 in B is rank 1 by
# torchrun's; MASTER_ADDR is A's veth address and GLOO_SOCKET_IFNAME names the veth. The run trains
# as one node of 2 ranks does (same losses, same checkpoint); the store answers on the veth from B
# and nowhere else (not on A's loopback, not from a third namespace without the veth); a node killed
# (SIGKILL) ends the other within 10 s, naming its rank. Needs root and ip (skipped otherwise).
source "$TOP/tests/cli/lib.bash"; need_data
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 77; }
command -v ip > /dev/null || { echo "needs ip (iproute2)" >&2; exit 77; }
A=gkA$$ B=gkB$$ C=gkC$$
cleanup() {
  for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null || true; done
  for n in $A $B $C; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
ip netns add $A 2>/dev/null || { echo "cannot make a network namespace (ip netns add)" >&2; exit 77; }
ip netns add $B && ip netns add $C
ip link add gka$$ type veth peer name gkb$$ 2>/dev/null || { echo "cannot make a veth pair" >&2; exit 77; }
ip link set gka$$ netns $A && ip link set gkb$$ netns $B
ip -n $A link set gka$$ name gk0 && ip -n $B link set gkb$$ name gk0
ip -n $A addr add 192.0.2.1/24 dev gk0 && ip -n $B addr add 192.0.2.2/24 dev gk0
for n in $A $B $C; do ip -n "$n" link set lo up; done
ip -n $A link set gk0 up && ip -n $B link set gk0 up
for _ in $(seq 100); do ip netns exec $B ping -c1 -W1 192.0.2.1 > /dev/null 2>&1 && break; sleep 0.05; done

tiny_data d
ARGS=("${TINY[@]}" --threads=1 --eval_interval=3 --checkpoint_interval=3 --dist_timeout=30)
PORT=29517
export GPT_DIST_TOKEN=multinode-$$ GLOO_SOCKET_IFNAME=gk0
# node0 ARGS... / node1 ARGS...: the two nodes' processes (exec: background them; $! is the pid)
node0() {
  PET_NNODES=2 PET_NODE_RANK=0 PET_NPROC_PER_NODE=1 PET_MASTER_ADDR=192.0.2.1 PET_MASTER_PORT=$PORT \
    exec ip netns exec $A gpt-train -q "${ARGS[@]}" "$@"
}
node1() {
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=192.0.2.1 MASTER_PORT=$PORT \
    exec ip netns exec $B gpt-train -q "${ARGS[@]}" "$@"
}
# probe NS HOST: "connects" or "refused/unreachable" for the store's port
probe() {
  if ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/$PORT" 2> /dev/null; then echo connects
  else echo "does not connect"; fi
}

node1 --max_iters=6 --out_dir=m > n1.log 2> n1.err & p1=$!
rc0=0; (node0 --max_iters=6 --out_dir=m > n0.log 2> n0.err) || rc0=$?
rc1=0; wait $p1 || rc1=$?
echo "2 nodes x 1 rank: exit $rc0 and $rc1"
env -u GLOO_SOCKET_IFNAME gpt-train -q "${ARGS[@]}" --nproc_per_node=2 --max_iters=6 --out_dir=ref > ref.log
losses m/metrics.jsonl > m.l; losses ref/metrics.jsonl > ref.l
[ "$(wc -l < m.l)" -eq 6 ] && cmp -s m.l ref.l && echo "the losses of 1 node x 2 ranks, to the last digit"
[ -s m/ckpt_00000006.safetensors ] && cmp -s <(st_data m/ckpt_00000006.safetensors) <(st_data ref/ckpt_00000006.safetensors) &&
  echo "the same checkpoint, bit for bit"

# a long run: where the store answers; then node 1 killed; then node 0 killed
for victim in 1 0; do
  PORT=$((PORT + 1))
  node1 --max_iters=100000 --out_dir=k$victim > /dev/null 2> k1.err & p1=$!
  node0 --max_iters=100000 --out_dir=k$victim > /dev/null 2> k0.err & p0=$!
  for _ in $(seq 600); do [ -e k$victim/metrics.jsonl ] && [ -n "$(losses k$victim/metrics.jsonl)" ] && break; sleep 0.05; done
  if [ $victim = 1 ]; then
    echo "the store from node 1 at 192.0.2.1: $(probe $B 192.0.2.1)"
    echo "from node 0 at 127.0.0.1: $(probe $A 127.0.0.1); from node 1 at 127.0.0.1: $(probe $B 127.0.0.1)"
    echo "from a third namespace at 192.0.2.1: $(probe $C 192.0.2.1)"
  fi
  if [ $victim = 1 ]; then dead=$p1 live=$p0 err=k0.err; else dead=$p0 live=$p1 err=k1.err; fi
  t0=$(date +%s%N); kill -KILL $dead
  for _ in $(seq 400); do kill -0 $live 2>/dev/null || break; sleep 0.05; done
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  rc=0; wait $live || rc=$?
  wait $dead || true
  echo "node $victim killed: the other ended $([ $ms -le 10000 ] && echo "within 10 s" || echo "after $ms ms"), exit $rc, naming rank $victim: $(grep -c "rank $victim" $err)"
  echo "node $victim killed: the other ended after $ms ms" >&2
done
