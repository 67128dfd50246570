# lib.bash: helpers sourced by the CLI test scripts (run from a fresh temp dir by tests/run.sh).
# DATA is the shared test data, TOP the source tree, FIX the fixtures; PATH holds the tools.
set -euo pipefail
# The CUDA emulator's shared-memory race checker (kernels/emu/emu_race.cpp) takes half of a whole
# run's time; every kernel the tools launch runs under it in the op tests (test_ops, _fused,
# _paths: each kernel on shapes around its tiles), so a CLI test runs without it unless asked
# (GPT_EMU_RACECHECK=1).
export GPT_EMU_RACECHECK=${GPT_EMU_RACECHECK:-0}

need_data() {
  [ -d "$DATA/gpt2" ] || { echo "shared test data not found at $DATA" >&2; exit 77; }
  export GPT_VOCAB="$DATA/gpt2"
}

# ids SHARD: the shard's tokens (after the 1024-byte header) on one line, space-separated.
ids() { od -An -v -tu2 -j1024 "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; echo; }
# ids32 SHARD: the same for uint32 shards.
ids32() { od -An -v -tu4 -j1024 "$1" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; echo; }
# header_int SHARD I: the I-th int32 of the header.
header_int() { od -An -td4 -j$(( $2 * 4 )) -N4 "$1" | tr -d ' '; }

# tiny_data DIR: a char-level dataset from the first 20000 characters of Tiny Shakespeare.
tiny_data() {
  mkdir -p "$1"
  head -c 20000 "$DATA/tinyshakespeare/input.txt" > "$1/input.txt"
  gpt-tokenize -q --char "$1/input.txt" --vocab-out "$1/vocab.json" -o "$1/train.bin" \
    --val-fraction 0.1 --val-output "$1/val.bin"
}
# A model small enough for tests: pass as arguments to gpt-train.
TINY=(--train_data=d/train.bin --val_data=d/val.bin --vocab=d/vocab.json --n_layer=2 --n_head=2
      --n_embd=32 --block_size=16 --batch_size=4 --gradient_accumulation_steps=2 --eval_iters=2
      --warmup_iters=2 --lr_decay_iters=20 --learning_rate=3e-3 --min_lr=3e-4 --threads=2)
# tiny_scored: a model of TINY trained 10 steps on tiny_data d as $GPT_MODEL (o/), 1000 bytes
# of its text in t.txt and gpt-evalppl's fp32 score of them in f32.json (the narrow dtypes' tests).
tiny_scored() {
  tiny_data d
  gpt-train -q "${TINY[@]}" --max_iters=10 --eval_interval=10 --out_dir=o > train.log
  export GPT_MODEL=o/latest.safetensors
  head -c 3000 d/input.txt | tail -c 1000 > t.txt
  gpt-evalppl -q --json t.txt > f32.json
}
# nll_within A.json B.json R: prints true when gpt-evalppl's NLLs differ by less than R relative.
nll_within() {
  jq -n --slurpfile a "$1" --slurpfile b "$2" "((\$a[0].nll - \$b[0].nll) / \$a[0].nll | fabs) < $3"
}
# st_data FILE: the data section of a safetensors file (everything after its JSON header).
st_data() { local n; n=$(od -An -tu8 -N8 "$1" | tr -d ' '); tail -c +$((9 + n)) "$1"; }
# losses FILE: "step loss" per line from a metrics.jsonl.
losses() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,}]*\).*/\1 \2/p' "$1"; }
# free_port: a TCP port nobody listens on now (for a test's rendezvous), drawn at random below
# the kernel's ephemeral range, so that no outgoing connection (mpirun's own, another test's) is
# given it before the test's rank 0 listens there.
free_port() {
  python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(100):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        continue
    print(port)
    break
'
}
# st_close A B TOL [FLOOR]: the two safetensors files hold the same data as float32s, within TOL
# of the larger magnitude or FLOOR absolute (1e-6): prints the largest difference when they do not.
st_close() {
  paste <(st_data "$1" | od -An -v -tf4 -w4) <(st_data "$2" | od -An -v -tf4 -w4) |
    awk -v tol="$3" -v floor="${4:-1e-6}" '
    { d = $1 - $2; if (d < 0) d = -d; m = ($1 < 0 ? -$1 : $1); n = ($2 < 0 ? -$2 : $2); if (n > m) m = n
      if (d > tol * m && d > floor) { bad++; if (d > worst) { worst = d; at = NR } } }
    END { if (bad) printf "%d floats differ, the largest by %g (float %d)\n", bad, worst, at; exit bad > 0 }'
}
# close A B TOL: every "step loss" line of A within TOL relative of B's (losses files).
close() {
  paste "$1" "$2" | awk -v tol="$3" '$1 != $3 { print "step mismatch"; bad = 1 }
    { d = $2 - $4; if (d < 0) d = -d; if (d > tol * $4) { printf "step %d: %s vs %s\n", $1, $2, $4; bad = 1 } }
    END { exit bad }'
}
# fake_hub NAME ARGS...: starts tests/cli/fake_hub.py ARGS in the background (its pid added to
# the caller's pids array), logging to NAME.log; hub_at NAME waits until it listens and sets $ep
# to its endpoint; hub_show filters a tool's output for comparison ($sha: the file's hash).
fake_hub() {
  local name=$1; shift
  python3 "$TOP/tests/cli/fake_hub.py" --port-file "$name.port" --log "$name.log" "$@" &
  pids+=($!)
}
hub_at() {
  for _ in $(seq 100); do [ -s "$1.port" ] && break; sleep 0.05; done
  ep="http://127.0.0.1:$(cat "$1.port")"
}
hub_show() { sed "s|127\.0\.0\.1:[0-9]*|HUB|g; s|localhost:[0-9]*|LOCALHOST|g; s|$PWD|.|g; s|$sha|SHA|g; s|at least [0-9]*|at least N|"; }
