# gpt-train with out_dir, train_data and val_data in a bucket (train/s3out.h, train/s3data.h),
# against moto's S3 server (tests/cli/s3_server.py; skipped without moto), out_dirs under a prefix
# and at a bucket's root. Checks: 10 steps + resume from the bucket (init_from=auto) give the
# losses and the final weights of 20 steps in one local run, bit for bit; shards from the bucket
# (a glob over keys, read in place) the losses and weights of the same files, also with
# connections dropped mid-range; a bad shard header in a bucket is one line as for a file;
# ranks on two machines resume from the bucket (the checkpoint downloaded by the rank that does
# not see rank 0's staging directory); 2 ranks then a resume at 1 the local runs';
# keep_last/keep_every prune objects as they prune files; a second trainer is refused naming the
# holder, a lock left by a dead pid of this host, or one not renewed for 5 minutes, is taken over;
# an upload failing for good (the proxy answering 503 to everything) stops training with a
# non-zero exit and latest on the previous checkpoint; SIGKILL during a multipart upload leaves
# latest whole and the next run aborts the upload left behind.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/s3.bash"
tiny_data d
pport=$proxy
mkdir tmp
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port TMPDIR=$PWD/tmp
s3py 'for b in ("run-l", "run-f", "run-m"): s3.create_bucket(Bucket=b)'
get() { s3py 'open(sys.argv[3], "wb").write(s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2])["Body"].read())' "$@"; }

# resume from the bucket is exact
gpt-train -q "${TINY[@]}" --dropout=0.1 --max_iters=20 --eval_interval=10 --out_dir=a > /dev/null
gpt-train -q "${TINY[@]}" --dropout=0.1 --max_iters=10 --eval_interval=10 --out_dir=s3://gk-test/runs/b > /dev/null
gpt-train "${TINY[@]}" --dropout=0.1 --max_iters=20 --eval_interval=10 --out_dir=s3://gk-test/runs/b/ --init_from=auto > /dev/null 2> b2.err
grep -o 'resuming from .*' b2.err | sed 's|/[^ ]*/tmp/gpt-train\.[A-Za-z0-9]*|STAGE|'
get gk-test runs/b/latest latest.txt && cat latest.txt
get gk-test "runs/b/$(cat latest.txt)" b.safetensors
get gk-test runs/b/metrics.jsonl b.jsonl
cmp <(losses a/metrics.jsonl) <(losses b.jsonl) && echo "losses: same as the local run's ($(losses b.jsonl | wc -l) lines)"
cmp <(st_data a/latest.safetensors) <(st_data b.safetensors) && echo "weights and optimizer state: same bits"
s3py 'print("runs/b:", " ".join(k for k in keys("gk-test") if k.startswith("runs/b")))'
ls tmp | wc -l # the staging directories are gone

# refusals, one line each, the lock not left behind: a run that does not resume on a prefix with a
# latest, init_from=resume on an empty prefix, a pattern that matches no object
fails() { local rc=0; gpt-train -q "${TINY[@]}" --max_iters=1 "$@" > /dev/null 2> err.txt || rc=$?; cat err.txt; echo "exit $rc"; }
fails --out_dir=s3://gk-test/runs/b
fails --out_dir=s3://gk-test/runs/none --init_from=resume
fails --out_dir=s3://gk-test/runs/none --train_data='s3://gk-test/nope_*.bin'
s3py 'print("locks left:", [k for k in keys("gk-test") if k.endswith("gpt-train.lock")])'

# data from the bucket (a glob over keys, two shards, a key the glob does not match), read by
# ranged GETs ahead of the run: the losses and weights of the same shards as local files (the
# same windows, bit for bit), nothing written to TMPDIR
mkdir two && cp d/train.bin two/train_000.bin && cp d/val.bin two/train_001.bin
s3py '
s3.create_bucket(Bucket="data")
for k, f in (("owt/train_000.bin", "two/train_000.bin"), ("owt/train_001.bin", "two/train_001.bin"),
             ("owt/train_001.bin.idx", "d/val.bin"), ("owt/val.bin", "d/val.bin"), ("train_0.bin", "d/val.bin")):
    s3.upload_file(f, "data", k)'
gpt-train -q "${TINY[@]}" --max_iters=6 --eval_interval=3 --train_data='two/train_*.bin' --out_dir=lf > /dev/null
gpt-train -q "${TINY[@]}" --max_iters=6 --eval_interval=3 --train_data='s3://data/owt/train_*.bin' --val_data=s3://data/owt/val.bin \
  --out_dir=sf > /dev/null
cmp <(losses lf/metrics.jsonl) <(losses sf/metrics.jsonl) && cmp <(st_data lf/latest.safetensors) <(st_data sf/latest.safetensors) &&
  echo "data from the bucket: the losses and weights of the local files ($(losses sf/metrics.jsonl | wc -l) lines)"
gpt-ckpt info --json sf/latest.safetensors | grep -o '"train_data":"[^"]*","val_data":"[^"]*"'
ls tmp | wc -l

# connections dropped in the middle of window reads (the proxy forwards half of each of the next
# 4 answers to a range that does not start at byte 0, then closes): retried, the same run
export AWS_ENDPOINT_URL=http://127.0.0.1:$pport
curl -sS -X POST "http://127.0.0.1:$pport/__fault?n=4&what=drop&ranged=1" > /dev/null
gpt-train "${TINY[@]}" --max_iters=6 --eval_interval=3 --train_data='s3://data/owt/train_*.bin' --val_data=s3://data/owt/val.bin \
  --out_dir=sd > /dev/null 2> sd.err
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
echo "retried: $(sed -n 's/^gpt-train: warning: [a-z_]*: \([0-9]*\) requests retried$/\1/p' sd.err | awk '{s += $1} END {print s + 0}') requests"
cmp <(losses lf/metrics.jsonl) <(losses sd/metrics.jsonl) && cmp <(st_data lf/latest.safetensors) <(st_data sd/latest.safetensors) &&
  echo "drops: the losses and weights of the local files"

# a bad shard header is one line naming the object, as it names a file: a damaged magic, a text
# file, a count past the object's end; the same message for the local file but for its name
python3 - <<'PY'
import struct
h = list(struct.unpack("<256i", open("d/train.bin", "rb").read(1024)))
body = open("d/train.bin", "rb").read()[1024:]
open("magic.bin", "wb").write(struct.pack("<256i", h[0] ^ 4, *h[1:]) + body)
open("count.bin", "wb").write(struct.pack("<256i", *h[:2], h[2] + 100, *h[3:]) + body)
open("text.bin", "w").write("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 30)
PY
s3py 'for f in ("magic.bin", "count.bin", "text.bin"): s3.upload_file(f, "data", "bad/" + f)'
for f in magic count text; do
  fails --train_data=s3://data/bad/$f.bin --out_dir=bad
  fails --train_data=$f.bin --out_dir=bad | sed '$d'
done
[ ! -e bad ] && echo "no out_dir left"

# 2 ranks on this machine (each reads the bucket's shards), then a resume at 1 rank from the
# bucket: the losses and weights of the same runs on local files and a local out_dir
s3py 's3.create_bucket(Bucket="run-w")'
w=(--max_iters=4 --eval_interval=2 --device=cpu --threads=1 --gradient_accumulation_steps=2)
gpt-train -q "${TINY[@]}" "${w[@]}" --nproc_per_node=2 --train_data='two/train_*.bin' --out_dir=lw > /dev/null 2>&1
gpt-train -q "${TINY[@]}" "${w[@]}" --max_iters=6 --train_data='two/train_*.bin' --out_dir=lw --init_from=auto > /dev/null
gpt-train -q "${TINY[@]}" "${w[@]}" --nproc_per_node=2 --train_data='s3://data/owt/train_*.bin' --out_dir=s3://run-w > /dev/null
gpt-train -q "${TINY[@]}" "${w[@]}" --max_iters=6 --train_data='s3://data/owt/train_*.bin' --out_dir=s3://run-w --init_from=auto > /dev/null
get run-w metrics.jsonl w.jsonl && get run-w ckpt_00000006.safetensors w6.safetensors
cmp <(losses lw/metrics.jsonl) <(losses w.jsonl) && cmp <(st_data lw/latest.safetensors) <(st_data w6.safetensors) &&
  echo "2 ranks, then 1: the losses and weights of the local run"

# 1 rank, then 2 ranks as on two machines (torchrun's variables, one local rank each): rank 1
# cannot see rank 0's staging directory (a TMPDIR relative to another working directory) and
# downloads the checkpoint to resume from out of the bucket; the losses and weights of the same
# runs on local files and a local out_dir
s3py 's3.create_bucket(Bucket="run-n")'
gpt-train -q "${TINY[@]}" "${w[@]}" --train_data='two/train_*.bin' --out_dir=ln > /dev/null
gpt-train -q "${TINY[@]}" "${w[@]}" --max_iters=6 --nproc_per_node=2 --train_data='two/train_*.bin' --out_dir=ln \
  --init_from=auto > /dev/null 2>&1
gpt-train -q "${TINY[@]}" "${w[@]}" --train_data='s3://data/owt/train_*.bin' --out_dir=s3://run-n > /dev/null
mkdir -p tmp0 n1/tmp1 && ln -s ../d n1/d
port2=$(free_port)
n=(--max_iters=6 --train_data='s3://data/owt/train_*.bin' --out_dir=s3://run-n --init_from=auto)
(cd n1 && TMPDIR=tmp1 RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=1 MASTER_PORT=$port2 \
  gpt-train -q "${TINY[@]}" "${w[@]}" "${n[@]}" > /dev/null) & pid=$!
TMPDIR=tmp0 RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 MASTER_PORT=$port2 \
  gpt-train -q "${TINY[@]}" "${w[@]}" "${n[@]}" > /dev/null
wait $pid
get run-n metrics.jsonl n.jsonl && get run-n ckpt_00000006.safetensors n6.safetensors
cmp <(losses ln/metrics.jsonl) <(losses n.jsonl) && cmp <(st_data ln/latest.safetensors) <(st_data n6.safetensors) &&
  echo "1 rank, then 2 on two machines: the losses and weights of the local run"
ls tmp0 n1/tmp1 | grep -c gpt-train || true

# pruning: the same checkpoints kept as in a local out_dir
gpt-train -q "${TINY[@]}" --max_iters=7 --eval_interval=100 --checkpoint_interval=1 --keep_last=2 --keep_every=3 --out_dir=k > /dev/null
gpt-train -q "${TINY[@]}" --max_iters=7 --eval_interval=100 --checkpoint_interval=1 --keep_last=2 --keep_every=3 --out_dir=s3://gk-test/runs/k > /dev/null
s3py 'print("runs/k:", " ".join(k[7:] for k in keys("gk-test") if k.startswith("runs/k/ckpt_")))'
echo "k:      $(ls k | grep '^ckpt_' | tr '\n' ' ')"

# the lock: a live trainer holds it; one of a dead pid on this host is taken over
gpt-train -q "${TINY[@]}" --max_iters=100000 --eval_interval=5 --out_dir=s3://run-l > /dev/null &
pid=$!
for _ in $(seq 300); do s3py 'sys.exit("latest" not in keys("run-l"))' && break; sleep 0.1; done
kill -STOP $pid
rc=0; gpt-train -q "${TINY[@]}" --max_iters=3 --out_dir=s3://run-l --init_from=auto > /dev/null 2> err.txt || rc=$?
sed "s/pid $pid on host $(hostname), lock renewed [0-9: -]* UTC/pid PID on host HOST, lock renewed TIME/" err.txt; echo "exit $rc"
kill -CONT $pid; kill -TERM $pid
rc=0; wait $pid || rc=$?; echo "first run: exit $rc"
s3py 'print("lock after the run:", "gpt-train.lock" in keys("run-l"))'
dead=$(sh -c 'echo $$') # the pid of a process that has ended
s3py 's3.put_object(Bucket="run-l", Key="gpt-train.lock", Body=sys.argv[1].encode())' "$dead $(hostname) 1800000000"
gpt-train "${TINY[@]}" --max_iters=100 --out_dir=s3://run-l --init_from=auto > /dev/null 2> err.txt
grep -o 'taking over the lock.*' err.txt | sed "s/pid $dead on host $(hostname)/pid PID on host HOST/"
s3py 's3.put_object(Bucket="run-l", Key="gpt-train.lock", Body=b"1 elsewhere 1800000000\n")'
rc=0; gpt-train -q "${TINY[@]}" --max_iters=101 --out_dir=s3://run-l --init_from=auto > /dev/null 2> err.txt || rc=$?
cat err.txt; echo "exit $rc"
s3py 's3.put_object(Bucket="run-l", Key="gpt-train.lock", Body=b"1 elsewhere 1000000000\n")' # not renewed since 2001
gpt-train "${TINY[@]}" --max_iters=101 --out_dir=s3://run-l --init_from=auto > /dev/null 2> err.txt
grep -o 'taking over the lock.*' err.txt

# a run whose lock another took over (thinking it gone) stops at its next checkpoint, latest not
# moved, and leaves that lock alone
s3py 's3.delete_object(Bucket="run-l", Key="gpt-train.lock")'
gpt-train "${TINY[@]}" --max_iters=100000 --eval_interval=50 --out_dir=s3://run-l --init_from=auto > steps.txt 2> err.txt &
pid=$!
# (a step: its SIGTERM handler is in place by then)
for _ in $(seq 300); do grep -q '^step [0-9]*/' steps.txt && break; sleep 0.1; done
s3py 's3.put_object(Bucket="run-l", Key="gpt-train.lock", Body=b"1 elsewhere 1800000000\n")'
kill -TERM $pid 2> /dev/null || true; rc=0; wait $pid || rc=$? # it may have stopped at a checkpoint already
grep -o 'another run has taken over the lock.*' err.txt | sed 's/ckpt_[0-9]*/ckpt_N/'; echo "exit $rc"
refused=$(grep -o '(ckpt_[0-9]*.safetensors not uploaded)' err.txt | tr -d '()' | cut -d' ' -f1)
get run-l latest latest.txt && [ -n "$refused" ] && [ "$(cat latest.txt)" != "$refused" ] && echo "latest not moved to it"
s3py 'print("the lock now:", s3.get_object(Bucket="run-l", Key="gpt-train.lock")["Body"].read())'

# an upload that fails for good: a non-zero exit, latest on the previous checkpoint
export AWS_ENDPOINT_URL=http://127.0.0.1:$pport
gpt-train -q "${TINY[@]}" --max_iters=2 --out_dir=s3://run-f > /dev/null
gpt-train "${TINY[@]}" --max_iters=100000 --eval_interval=100 --out_dir=s3://run-f --init_from=auto > /dev/null 2> err.txt &
pid=$!
for _ in $(seq 300); do grep -q '^gpt-train: resuming' err.txt && break; sleep 0.1; done
curl -sS -X POST "http://127.0.0.1:$pport/__fault?n=1000000&what=503" > /dev/null
rc=0; wait $pid || rc=$?
curl -sS -X POST "http://127.0.0.1:$pport/__fault?n=0&what=503" > /dev/null
echo "upload failing: exit $rc"
grep -c 'uploading ckpt_00000100.safetensors to s3://run-f' err.txt
get run-f latest latest.txt && cat latest.txt
get run-f ckpt_00000002.safetensors f.safetensors && gpt-ckpt verify -q f.safetensors && echo "ckpt_00000002: verifies"
export AWS_ENDPOINT_URL=http://127.0.0.1:$port

# SIGKILL during a multipart upload (5 MiB parts of a 38 MB checkpoint), then the next run
export GPT_S3_PART_SIZE=5242880
big=(--n_layer=4 --n_embd=256 --n_head=4)
gpt-train -q "${TINY[@]}" "${big[@]}" --max_iters=100000 --eval_interval=1 --out_dir=s3://run-m > /dev/null 2>&1 &
pid=$!
s3py '
import os, signal, time
for _ in range(3000):
    if "latest" in keys("run-m") and s3.list_multipart_uploads(Bucket="run-m").get("Uploads"):
        os.kill(int(sys.argv[1]), signal.SIGKILL)
        break
    time.sleep(0.01)
' $pid
wait $pid 2> /dev/null || true
s3py 'print("uploads in progress after the kill:", len(s3.list_multipart_uploads(Bucket="run-m").get("Uploads", [])) > 0)'
get run-m latest latest.txt && get run-m "$(cat latest.txt)" m.safetensors && gpt-ckpt verify -q m.safetensors && echo "latest: a whole checkpoint"
step=$(sed 's/ckpt_0*\([0-9]*\).*/\1/' latest.txt)
gpt-train "${TINY[@]}" "${big[@]}" --max_iters=$((step + 1)) --eval_interval=1 --out_dir=s3://run-m --init_from=auto > /dev/null 2> err.txt
grep -o 'aborted the upload of s3://run-m/ckpt_[0-9]*.safetensors left by a run that was killed' err.txt | sed 's/ckpt_[0-9]*/ckpt_N/' | sort -u
s3py 'print("uploads in progress after the next run:", len(s3.list_multipart_uploads(Bucket="run-m").get("Uploads", [])))'
get run-m latest latest.txt && [ "$(cat latest.txt)" = "$(printf 'ckpt_%08d.safetensors' $((step + 1)))" ] && echo "latest: one step further"
# the settings stored in the checkpoint name the bucket, not the staging directory
gpt-ckpt info --json m.safetensors | grep -o '"out_dir":"[^"]*"' 
