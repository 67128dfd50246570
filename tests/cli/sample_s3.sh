# gpt-sample -m s3://BUCKET/KEY, against moto's S3 server (tests/cli/s3_server.py; skipped without
# moto): the checkpoint uploaded by boto3 (an independent client) gives the same ids and text as
# the local file with the same seed; $GPT_MODEL may be a URL; a missing key, a bucket without a
# key: one line each; nothing is left in TMPDIR.
source "$TOP/tests/cli/lib.bash"
source "$TOP/tests/cli/s3.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o m.safetensors
s3py 's3.upload_file(*sys.argv[1:])' m.safetensors gk-test runs/m/latest.safetensors
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port
mkdir tmp
export TMPDIR=$PWD/tmp
url=s3://gk-test/runs/m/latest.safetensors
gpt-sample -q -m m.safetensors -n 24 --num-samples 2 --seed 7 --ids -p 'hello' > local.ids
gpt-sample -q -m "$url" -n 24 --num-samples 2 --seed 7 --ids -p 'hello' > s3.ids
wc -w < s3.ids
cmp local.ids s3.ids && echo "ids: same as the file's"
cmp <(gpt-sample -q -m m.safetensors -n 24 -t 0 -p 'the') <(GPT_MODEL=$url gpt-sample -q -n 24 -t 0 -p 'the') &&
  echo "text (GPT_MODEL, greedy): same"
gpt-sample -m "$url" -n 1 2>&1 >/dev/null | grep -c "downloading $url"
run() {
  local rc=0
  "$@" > msg 2>&1 || rc=$?
  sed "s/127.0.0.1:$port/ENDPOINT/g" msg
  echo "exit $rc"
}
run gpt-sample -q -m s3://gk-test/runs/m/nope.safetensors -n 1
run gpt-sample -q -m s3://gk-test/ -n 1
run gpt-sample -q -m s3://gk-nobucket/m.safetensors -n 1
ls tmp
