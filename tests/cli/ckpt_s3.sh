# gpt-ckpt on s3:// checkpoints, against moto's S3 server (tests/cli/s3_server.py; skipped without
# moto): info of a checkpoint uploaded by boto3 (an independent client) equals info of the file
# (text and --json, but for the name), and so do export --hf and convert; verify names the URL;
# import and convert write to s3:// (the bytes those of local outputs; no temporary left);
# credentials from the environment or from a profile in ~/.aws; a missing key, a missing bucket, a wrong secret (the key id named, not the secret), a
# bucket without a key, no server: one line each.
source "$TOP/tests/cli/lib.bash"
source "$TOP/tests/cli/s3.bash"
gpt-ckpt import -q "$FIX/hf_tiny" -o a.safetensors
s3py 's3.upload_file(*sys.argv[1:])' a.safetensors gk-test runs/a/latest.safetensors
export HOME=$PWD/home AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port
url=s3://gk-test/runs/a/latest.safetensors
gpt-ckpt info "$url" | head -n 1
cmp <(gpt-ckpt info "$url" | sed 1d) <(gpt-ckpt info a.safetensors | sed 1d) && echo "info: same as the file's"
cmp <(gpt-ckpt info --json --stats "$url" | sed 's/"file":"[^"]*"//') \
    <(gpt-ckpt info --json --stats a.safetensors | sed 's/"file":"[^"]*"//') && echo "info --json --stats: same"
gpt-ckpt export -q --hf hf "$url" && gpt-ckpt export -q --hf hf2 a.safetensors && cmp hf/model.safetensors hf2/model.safetensors &&
  echo "export --hf: same"
gpt-ckpt verify "$url"
gpt-ckpt convert -q "$url" -o b16.safetensors --dtype bf16 && gpt-ckpt convert -q a.safetensors -o a16.safetensors --dtype bf16 &&
  cmp b16.safetensors a16.safetensors && echo "convert: same"
# writing: import and convert -o s3://...: the bytes those of the local outputs (boto3 reads them)
mkdir tmp
export TMPDIR=$PWD/tmp
gpt-ckpt import -q "$FIX/hf_tiny" -o s3://gk-test/runs/b/imported.safetensors
gpt-ckpt convert -q a.safetensors -o s3://gk-test/runs/b/a16.safetensors --dtype bf16
python3 - "$port" "$key" "$secret" <<'PY'
import sys, boto3
port, key, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret)
for k, local in (("runs/b/imported.safetensors", "a.safetensors"), ("runs/b/a16.safetensors", "a16.safetensors")):
    same = s3.get_object(Bucket="gk-test", Key=k)["Body"].read() == open(local, "rb").read()
    print(f"s3://gk-test/{k}: {'same as' if same else 'DIFFERS from'} {local}")
PY
mkdir -p home/.aws
printf '[moto]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$key" "$secret" > home/.aws/credentials
printf '[profile moto]\nendpoint_url = http://127.0.0.1:%s\n' "$port" > home/.aws/config
( unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL; AWS_PROFILE=moto gpt-ckpt info -q "$url" | sed -n 2p )
run() {
  local rc=0
  "$@" > msg 2>&1 || rc=$?
  sed "s/$key/KEYID/g; s/127.0.0.1:$port/ENDPOINT/g; s/after [0-9]* ms/after N ms/" msg
  echo "exit $rc"
}
run gpt-ckpt info -q s3://gk-test/runs/a/nope.safetensors
run gpt-ckpt verify -q s3://gk-test/runs/a/nope.safetensors
run gpt-ckpt info -q s3://gk-nobucket/a.safetensors
AWS_SECRET_ACCESS_KEY=wrong-secret run gpt-ckpt info -q "$url"
run gpt-ckpt info -q s3://gk-test/
AWS_ENDPOINT_URL=http://127.0.0.1:1 run gpt-ckpt info -q "$url"
run gpt-ckpt convert -q a.safetensors -o s3://gk-nobucket/x.safetensors --dtype bf16
run gpt-ckpt import -q "$FIX/hf_tiny" -o s3://gk-test
ls tmp
