# s3.bash: sourced by the CLI tests against moto's S3 server (tests/cli/s3_server.py): skips the
# test (77) without moto, starts the server for the test's life, and sets port (the server),
# proxy (its fault-injecting proxy), key and secret; s3py CODE ARGS... runs python with s3 (a
# boto3 client of the server: an independent client), keys(BUCKET) and sys.argv. port is a proxy
# in front of moto that checks each body's x-amz-content-sha256 as S3 does. A request the tools
# retry gives up after 2 s of failing (GPT_S3_RETRY_SECONDS; 10 minutes by default), so that a
# fault that lasts fails a test in seconds.
export GPT_S3_RETRY_SECONDS=2
python3 -c 'import moto.server, boto3' 2>/dev/null || { echo "moto is not installed (pip install 'moto[server]')" >&2; exit 77; }
mkfifo ctl
python3 "$TOP/tests/cli/s3_server.py" ready < ctl 2> server.log &
exec 3> ctl # the server runs until this closes
trap 'exec 3>&-; wait' EXIT
for _ in $(seq 600); do [ -f ready ] && break; sleep 0.1; done
read -r port proxy key secret _ < ready
s3py() {
  local code=$1; shift
  python3 - "$@" <<PY
import sys, boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:$port", region_name="us-east-1",
                  aws_access_key_id="$key", aws_secret_access_key="$secret")
def keys(b): return [o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", [])]
$code
PY
}
