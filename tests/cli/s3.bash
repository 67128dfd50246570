# s3.bash: sourced by the CLI tests against moto's S3 server (tests/cli/s3_server.py): skips the
# test (77) without moto, starts the server for the test's life, and sets port (the server),
# proxy (its fault-injecting proxy), key and secret; s3py CODE ARGS... runs python with s3 (a
# boto3 client of the server: an independent client), keys(BUCKET) and sys.argv, in one python
# process for the test (s3py_worker.py: boto3 imported once, not at each call). port is a proxy
# in front of moto that checks each body's x-amz-content-sha256 as S3 does. A request the tools
# retry gives up after 2 s of failing (GPT_S3_RETRY_SECONDS; 10 minutes by default), so that a
# fault that lasts fails a test in seconds.
export GPT_S3_RETRY_SECONDS=2
python3 -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("moto") and u.find_spec("boto3")))' ||
  { echo "moto is not installed (pip install 'moto[server]')" >&2; exit 77; }
mkfifo ctl
python3 "$TOP/tests/cli/s3_server.py" ready < ctl 2> server.log &
s3_server_pid=$!
exec 3> ctl # the server runs until this closes
# (the worker's and the server's ends waited for, whatever the test's status)
trap 'exec 3>&- 4>&- 5<&-; wait ${s3py_pid:-} $s3_server_pid 2> /dev/null || true' EXIT
for _ in $(seq 600); do [ -f ready ] && break; sleep 0.1; done
read -r port proxy key secret _ < ready
s3py_dir=$PWD/.s3py # (the test may change directory)
mkdir "$s3py_dir" && mkfifo "$s3py_dir/in" "$s3py_dir/out"
python3 "$TOP/tests/cli/s3py_worker.py" "$port" "$key" "$secret" "$s3py_dir" < "$s3py_dir/in" > "$s3py_dir/out" &
s3py_pid=$!
exec 4> "$s3py_dir/in" 5< "$s3py_dir/out"
s3py() { # CODE ARGS...: the code's stdout and stderr, and its exit status
  local rc
  printf '%s' "$1" > "$s3py_dir/code"; shift
  printf '%s\0' "$@" > "$s3py_dir/args"
  echo >&4
  read -r rc <&5 || rc=1
  cat "$s3py_dir/stdout"; cat "$s3py_dir/stderr" >&2
  return "$rc"
}
