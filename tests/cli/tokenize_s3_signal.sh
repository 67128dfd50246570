# gpt-tokenize -o s3://... (tokenize/stage.h) against moto's S3 server and its fault proxy:
# SIGTERM during a multipart upload (5 MiB parts; the proxy answering 503 from the first part on
# until the signal is sent, so that it lands inside the upload) aborts the upload, removes the staging directory and
# dies of the signal; SIGKILL there leaves both, and a rerun to the same output aborts the
# upload left in progress on its key, sweeps the dead staging directory and writes the object.
source "$TOP/tests/cli/lib.bash"; need_data
source "$TOP/tests/cli/s3.bash"
mkdir tmp
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$proxy TMPDIR=$PWD/tmp
export GPT_S3_PART_SIZE=5242880
for _ in $(seq 6); do cat "$DATA/tinyshakespeare/input.txt"; done > big.txt # 13 MB of tokens: 3 parts
fault() { curl -sS -X POST "http://127.0.0.1:$proxy/__fault?n=$1&what=503" > /dev/null; }
uploads() { s3py 'print(len(s3.list_multipart_uploads(Bucket="gk-test").get("Uploads", [])))'; }
count() { curl -sS "http://127.0.0.1:$proxy/__count"; }
# in_upload SIG PID: once the proxy has had PID's first two requests (the listing of uploads left
# on the key, then the one that creates the upload), it answers 503 to the rest (the upload waits,
# retrying its first part) while PID gets SIG
in_upload() {
  for _ in $(seq 1000); do [ "$(count)" -ge $((c0 + 2)) ] && break; sleep 0.01; done
  fault 1000000; kill -"$1" "$2"
}

c0=$(count); gpt-tokenize -q --char big.txt --vocab-out v.json -o s3://gk-test/sig/train.bin & pid=$!
in_upload TERM $pid
fault 0
rc=0; wait $pid || rc=$?
echo "SIGTERM: exit $rc"
s3py 'print("uploads in progress:", len(s3.list_multipart_uploads(Bucket="gk-test").get("Uploads", [])),
           "objects:", [k for k in keys("gk-test") if k.startswith("sig/")])'
ls tmp | wc -l

c0=$(count); gpt-tokenize -q --char big.txt --vocab-out v.json -o s3://gk-test/sig/train.bin & pid=$!
in_upload KILL $pid
wait $pid 2> /dev/null || true
fault 0
echo "SIGKILL: uploads in progress: $(uploads), staging directories: $(ls tmp | grep -c '^gpt-tokenize\.')"
gpt-tokenize --char big.txt --vocab-out v.json -o s3://gk-test/sig/train.bin 2> err.txt
grep -o 'aborted the upload .*' err.txt
s3py 'print("rerun: uploads in progress:", len(s3.list_multipart_uploads(Bucket="gk-test").get("Uploads", [])), end=", ")
open("got.bin", "wb").write(s3.get_object(Bucket="gk-test", Key="sig/train.bin")["Body"].read())'
echo "staging directories: $(ls tmp | wc -l)"
gpt-tokenize -q --char big.txt -V v.json -o want.bin
cmp want.bin got.bin && echo "the object: the same as the file's ($(stat -c %s got.bin) bytes)"
