# gpt-train with out_dir in a bucket (train/s3out.h, train/s3unsent.c, common/io/stagedir.h),
# against moto's S3 server and its fault proxy: a checkpoint whose upload fails for good (the
# proxy answering 503 to everything when SIGTERM's checkpoint is uploaded) is kept in
# TMPDIR/gpt-train-unsent.HASH, named in the error, and verifies; a run killed with SIGKILL
# leaves its staging directory, which the next run sweeps (never the unsent checkpoint); a run
# that does not resume is refused naming the kept checkpoint; the next init_from=auto run
# uploads it, resumes from it, and removes it.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/s3.bash"
tiny_data d
mkdir tmp
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$proxy TMPDIR=$PWD/tmp
export AWS_MAX_ATTEMPTS=2 GPT_S3_RETRY_SECONDS=5 # a failure is for good at once
s3py 's3.create_bucket(Bucket="run-u")'
get() { s3py 'open(sys.argv[3], "wb").write(s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2])["Body"].read())' "$@"; }
fault() { curl -sS -X POST "http://127.0.0.1:$proxy/__fault?n=$1&what=503" > /dev/null; }
wait_line() { for _ in $(seq 600); do grep -q "$1" "$2" && return; sleep 0.05; done; }

gpt-train -q "${TINY[@]}" --max_iters=2 --out_dir=s3://run-u > /dev/null
gpt-train "${TINY[@]}" --max_iters=100000 --eval_interval=100000 --out_dir=s3://run-u --init_from=auto \
  > steps.txt 2> err.txt &
pid=$!
wait_line '^step [0-9]*/' steps.txt # (a step: its SIGTERM handler is in place by then)
fault 1000000
kill -TERM $pid
rc=0; wait $pid || rc=$?
fault 0
echo "upload failing: exit $rc"
kept=$(grep -o 'the checkpoint is kept at [^:]*' err.txt | sed 's/.* //')
grep -o 'the checkpoint is kept at .*' err.txt | sed "s|$PWD/tmp/gpt-train-unsent\.[0-9a-f]*/ckpt_[0-9]*|TMP/gpt-train-unsent.HASH/ckpt_N|"
gpt-ckpt verify -q "$kept" > /dev/null && echo "kept: verifies"
step=$(basename "$kept" | sed 's/ckpt_0*\([0-9]*\).*/\1/')
get run-u latest latest.txt && cat latest.txt
ls tmp | sed 's/\.[0-9a-f]*$/.HASH/'

# SIGKILL leaves the staging directory; the next run sweeps it, and keeps the unsent checkpoint
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
gpt-train "${TINY[@]}" --max_iters=100000 --eval_interval=100000 --out_dir=s3://gk-test/other > /dev/null 2> kill.txt &
pid=$!
wait_line 'staging checkpoints in' kill.txt
kill -KILL $pid; wait $pid 2> /dev/null || true
echo "after SIGKILL: $(ls tmp | grep -c '^gpt-train\.') staging directory"

# a run that does not resume is refused, naming the kept checkpoint (and sweeps the dead one)
rc=0; gpt-train -q "${TINY[@]}" --max_iters=1 --out_dir=s3://run-u > /dev/null 2> err.txt || rc=$?
sed "s|$PWD/tmp/gpt-train-unsent\.[0-9a-f]*/ckpt_[0-9]*|TMP/gpt-train-unsent.HASH/ckpt_N|" err.txt; echo "exit $rc"
ls tmp | sed 's/\.[0-9a-f]*$/.HASH/'

# the next run uploads it and resumes from it; nothing left in TMPDIR
gpt-train "${TINY[@]}" --max_iters=$((step + 1)) --eval_interval=100000 --out_dir=s3://run-u --init_from=auto \
  > /dev/null 2> err.txt
grep -o 'uploading .* (kept there after its upload failed)' err.txt |
  sed "s|$PWD/tmp/gpt-train-unsent\.[0-9a-f]*/ckpt_[0-9]*|TMP/gpt-train-unsent.HASH/ckpt_N|"
grep -o 'resuming from .*' err.txt | sed "s|/[^ ]*/tmp/gpt-train\.[A-Za-z0-9]*|STAGE|; s/step $step\$/step N/"
get run-u latest latest.txt && [ "$(cat latest.txt)" = "$(printf 'ckpt_%08d.safetensors' $((step + 1)))" ] && echo "latest: one step past it"
get run-u metrics.jsonl m.jsonl && [ "$(losses m.jsonl | wc -l)" = $((step + 1)) ] && echo "metrics: every step"
ls tmp | wc -l
