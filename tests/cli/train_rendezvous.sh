# The rendezvous as a stranger or an impatient user meets it: rank 0 alone says once whom it waits
# for; SIGTERM while waiting is one line and exit 1; a rank without the job token (GPT_DIST_TOKEN)
# is refused, as is a second rank 1, and rank 0's timeout names the refused client (was: only
# "1 of 2 ranks arrived"); a client that connects as rank 1 and counts itself arrived without
# becoming ready is told apart in the timeout's message; ranks started with different world
# sizes are told so at once, on both sides (was: "2 of 2 ranks arrived" after the timeout).
source "$TOP/tests/cli/lib.bash"; need_data
tiny_data d
ARGS=("${TINY[@]}" --threads=1 --max_iters=1 --out_dir=o)
norm() { sed -E "s/:$port\b/:PORT/g; s/127\.0\.0\.1:[0-9]+ \(pid [0-9]+\)/ADDR (pid N)/g; s/last: 127\.0\.0\.1:[0-9]+:/last: ADDR:/" "$@"; }
# rank 0 alone: "waiting for 1 more rank" once, after a second; no token: said once
port=$(free_port)
rc=0; RANK=0 WORLD_SIZE=2 MASTER_PORT=$port gpt-train "${ARGS[@]}" --dist_timeout=2 2> alone.err > /dev/null || rc=$?
echo "alone: exit $rc"; grep -E "waiting|GPT_DIST_TOKEN|rendezvous" alone.err | norm
# SIGTERM while waiting: rank 0 for its ranks, rank 1 for a store that is not there yet
port=$(free_port)
export GPT_DIST_TOKEN=tok
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=30 2> term0.err & p0=$!
RANK=1 WORLD_SIZE=2 MASTER_PORT=$((port + 1)) gpt-train -q "${ARGS[@]}" --dist_timeout=30 2> term1.err & p1=$!
sleep 1.5; kill -TERM $p0 $p1
rc0=0 rc1=0; wait $p0 || rc0=$?; wait $p1 || rc1=$?
echo "SIGTERM: exit $rc0 and $rc1"; norm term0.err; sed "s/:$((port + 1))\b/:PORT1/" term1.err
# a wrong token is refused at HELLO; rank 0 then times out with 1 of 2
port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=3 2> tok0.err & p0=$!
rc1=0; GPT_DIST_TOKEN=other RANK=1 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=3 2> tok1.err || rc1=$?
rc0=0; wait $p0 || rc0=$?
echo "wrong token: exit $rc0 and $rc1"; norm tok1.err tok0.err
# a second rank 1 is refused, naming both
port=$(free_port)
RANK=0 WORLD_SIZE=3 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=3 2> dup0.err & p0=$!
RANK=1 WORLD_SIZE=3 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=3 2> dup1.err & p1=$!
sleep 1
rc=0; RANK=1 WORLD_SIZE=3 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=3 2> dup2.err || rc=$?
wait $p0 $p1 || true
echo "second rank 1: exit $rc"; norm dup2.err
# a client that says HELLO as rank 1 (with the token) and adds itself to the count, but never
# becomes ready: 1 of 2 arrived, 2 connected
port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=3 2> fake.err & p0=$!
for _ in $(seq 50); do exec 3<> /dev/tcp/127.0.0.1/$port && break; sleep 0.1; done 2> /dev/null
# HELLO: rank 1, protocol 2, token "tok", pid 7; ADD "rdzv/arrived" 1
printf '\x2c\0\0\0\x01\x08\0\0\0\x01\0\0\0\0\0\0\0\x08\0\0\0\x02\0\0\0\0\0\0\0\x03\0\0\0tok\x08\0\0\0\x07\0\0\0\0\0\0\0' >&3
printf '\x1d\0\0\0\x04\x0c\0\0\0rdzv/arrived\x08\0\0\0\x01\0\0\0\0\0\0\0' >&3
rc=0; wait $p0 || rc=$?
exec 3<&-
echo "a rank that never became ready: exit $rc"; norm fake.err
# rank 1 started with another world size: both stop at once, naming the sizes
port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=30 2> w0.err & p0=$!
rc1=0; RANK=1 WORLD_SIZE=3 MASTER_PORT=$port gpt-train -q "${ARGS[@]}" --dist_timeout=30 2> w1.err || rc1=$?
rc0=0; wait $p0 || rc0=$?
echo "world sizes differ: exit $rc0 and $rc1"; norm w0.err w1.err
