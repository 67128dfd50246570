# gpt-evalppl -m s3://BUCKET/KEY, against moto's S3 server (tests/cli/s3_server.py; skipped without
# moto): the checkpoint uploaded by boto3 (an independent client) scores text and a shard exactly
# as the local file does (--json, bits); a missing key is one line; nothing is left in TMPDIR.
source "$TOP/tests/cli/lib.bash"
source "$TOP/tests/cli/s3.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o m.safetensors
s3py 's3.upload_file(*sys.argv[1:])' m.safetensors gk-test runs/m/latest.safetensors
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port
mkdir tmp
export TMPDIR=$PWD/tmp
url=s3://gk-test/runs/m/latest.safetensors
cp "$FIX/hf_tiny/input.txt" t.txt
gpt-evalppl -q --json -m m.safetensors t.txt > local.json
gpt-evalppl -q --json -m "$url" t.txt > s3.json
jq -r '.tokens' s3.json
cmp local.json s3.json && echo "text: same as the file's"
cmp <(gpt-evalppl -q --per-doc -m m.safetensors t.txt t.txt) <(GPT_MODEL=$url gpt-evalppl -q --per-doc t.txt t.txt) &&
  echo "--per-doc (GPT_MODEL): same"
run() {
  local rc=0
  "$@" > msg 2>&1 || rc=$?
  sed "s/127.0.0.1:$port/ENDPOINT/g" msg
  echo "exit $rc"
}
run gpt-evalppl -q -m s3://gk-test/runs/m/nope.safetensors t.txt
ls tmp
