# gpt-tokenize with s3:// inputs and outputs, against moto's S3 server (tests/cli/s3_server.py;
# skipped without moto): objects uploaded by boto3 (an independent client) of every kind (text,
# gzip, tar, JSON Lines, Parquet) give the bits the local files give, one by one and as a pattern
# or prefix (listed in S3's order: sorted by bytes); -o s3://.../PREFIX with --shard-tokens and
# --val-output s3://... upload objects holding the bytes of the local outputs; nothing is left in
# TMPDIR; a stream cut halfway resumed, one cut on every try an error; errors in one line; an upload refused for good (the fault proxy's 503 on every
# request) exits 1 and leaves no object. The corpus lies at the root of bucket gk-other: moto
# 5.2.1 refuses the signature of a listing whose prefix holds a '/' (boto3's as well as ours), so
# a prefix with folders is not listed here.
source "$TOP/tests/cli/lib.bash"
source "$TOP/tests/cli/s3.bash"
export GPT_VOCAB=$FIX/hf_tiny
mkdir -p c/sub
python3 -c 'print(" ".join(f"word{i} of b" for i in range(400)))' > c/b.txt
python3 -c 'print(" ".join(f"Line {i}, B." for i in range(300)))' > c/B.txt
printf 'one\ntwo words\n' | gzip -n > c/a.txt.gz
printf '{"text": "first line"}\n{"text": "second, with \\u00e9"}\n' > c/d.jsonl
cp "$FIX/parquet/content.parquet" c/e.parquet
( cd c && printf 'in a tar\n' > m1.txt && tar cf sub/t.tar m1.txt && rm m1.txt )
python3 - "$port" "$key" "$secret" <<'PY'
import os, sys, boto3
port, key, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret)
for root, _, files in os.walk("c"):
    for f in files:
        s3.upload_file(os.path.join(root, f), "gk-other", os.path.relpath(os.path.join(root, f), "c"))
s3.put_object(Bucket="gk-other", Key="folder/", Body=b"")  # a console's "folder": skipped
PY
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINT_URL=http://127.0.0.1:$port
mkdir tmp
export TMPDIR=$PWD/tmp
# each kind alone: the bits of the local file
for f in b.txt a.txt.gz d.jsonl e.parquet sub/t.tar; do
  gpt-tokenize -q "c/$f" -o want.bin
  gpt-tokenize -q "s3://gk-other/$f" -o got.bin
  cmp want.bin got.bin && echo "$f: same as the file's ($(( $(stat -c %s got.bin) - 1024 )) token bytes)"
done
# a pattern and a prefix: S3's order (bytes: B.txt before a.txt.gz), the same bits as the files so
gpt-tokenize -v 's3://gk-other/*' -o glob.bin 2> glob.err
sed -n 's/^gpt-tokenize: \(streaming\|downloaded\) //p' glob.err
gpt-tokenize -q c/B.txt c/a.txt.gz c/b.txt c/d.jsonl c/e.parquet -o want.bin
cmp want.bin glob.bin && echo "pattern: same as the files in that order"
gpt-tokenize -q s3://gk-other/ -o prefix.bin
gpt-tokenize -q c/B.txt c/a.txt.gz c/b.txt c/d.jsonl c/e.parquet c/sub/t.tar -o want.bin
cmp want.bin prefix.bin && echo "prefix: every object under it, sub/ too"
# a large object streamed (past a pipe's buffer), and --max-docs stopping a stream early
python3 -c 'print("\n".join(f"line {i}: some text to tokenize, {i * 7 % 1000} here" for i in range(40000)))' > big1.txt
sed 's/line/row/' big1.txt > big2.txt
python3 - "$port" "$key" "$secret" <<'PY'
import sys, boto3
port, key, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret)
for f in ("big1.txt", "big2.txt"):
    s3.upload_file(f, "gk-test", f)
PY
gpt-tokenize -q big1.txt -o want.bin
gpt-tokenize -v s3://gk-test/big1.txt -o got.bin 2>&1 | grep -c '^gpt-tokenize: streaming s3://gk-test/big1.txt'
cmp want.bin got.bin && echo "big1.txt ($(stat -c %s big1.txt) bytes) streamed: same as the file's"
gpt-tokenize -q --max-docs 1 big1.txt big2.txt -o want.bin
gpt-tokenize -q --max-docs 1 's3://gk-test/big*' -o got.bin
cmp want.bin got.bin && echo "--max-docs 1: the stream stopped early, the same as from the files"
gpt-tokenize -q --max-tokens 1000 big1.txt -o want.bin
gpt-tokenize -q --max-tokens 1000 s3://gk-test/big1.txt -o got.bin
cmp want.bin got.bin && echo "--max-tokens 1000: stopped mid-object, the same as from the file"
# outputs: numbered shards and a validation shard uploaded, the bytes of the local outputs
mkdir loc
gpt-tokenize -q c/B.txt c/b.txt --shard-tokens 700 --val-docs 1 --val-output loc/val.bin -o loc/train
gpt-tokenize -q 's3://gk-other/[bB].txt' --shard-tokens 700 --val-docs 1 --val-output s3://gk-test/out/val.bin \
  -o s3://gk-test/out/train
python3 - "$port" "$key" "$secret" <<'PY'
import os, sys, boto3
port, key, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret)
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="gk-test")["Contents"] if o["Key"].startswith("out/")]
local = sorted(os.listdir("loc"))
print("objects:", " ".join(k[4:] for k in keys), "| local:", " ".join(local))
same = all(s3.get_object(Bucket="gk-test", Key="out/" + f)["Body"].read() == open("loc/" + f, "rb").read() for f in local)
print("uploaded outputs:", "same bytes as the local ones" if same else "DIFFER")
PY
ls tmp
run() {
  local rc=0
  "$@" > msg 2>&1 || rc=$?
  sed "s/127.0.0.1:$port/ENDPOINT/g; s/127.0.0.1:$proxy/PROXY/g; s/closed with [0-9]* bytes/closed with N bytes/; s/gave up after [0-9]* tries and [0-9.]* s/gave up after N tries and T s/" msg
  echo "exit $rc"
}
run gpt-tokenize -q s3://gk-other/nope.txt -o x.bin
run gpt-tokenize -q 's3://gk-other/*.nothing' -o x.bin
run gpt-tokenize -q s3://gk-nobucket/a.txt -o x.bin
run gpt-tokenize -q c/b.txt -o s3://gk-test/
run gpt-tokenize -q c/b.txt -o s3://gk-nobucket/train.bin
# through the proxy: a stream cut halfway is resumed (the bits of the file); one cut on every
# try fails the run after the reader saw a clean end of what came: exit 1, no output
gpt-tokenize -q big1.txt -o want.bin
curl -s -X POST "http://127.0.0.1:$proxy/__fault?n=2&what=drop" > /dev/null # the HEAD, then the GET
AWS_ENDPOINT_URL=http://127.0.0.1:$proxy gpt-tokenize -q s3://gk-test/big1.txt -o got.bin
cmp want.bin got.bin && echo "a stream cut halfway: resumed, the same as the file's"
curl -s -X POST "http://127.0.0.1:$proxy/__fault?n=100&what=drop" > /dev/null
AWS_ENDPOINT_URL=http://127.0.0.1:$proxy run gpt-tokenize -q s3://gk-test/big1.txt -o cut.bin
ls cut.bin 2>/dev/null || echo "no cut.bin"
# every request to the proxy answered 503: the upload fails for good, no object is left
curl -s -X POST "http://127.0.0.1:$proxy/__fault?n=100000&what=503" > /dev/null
AWS_ENDPOINT_URL=http://127.0.0.1:$proxy run gpt-tokenize -q c/b.txt c/B.txt --shard-tokens 700 -o s3://gk-test/fail/train
python3 - "$port" "$key" "$secret" <<'PY'
import sys, boto3
port, key, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret)
print("objects under fail/:", sum(o["Key"].startswith("fail/") for o in s3.list_objects_v2(Bucket="gk-test").get("Contents", [])),
      "uploads in progress:", len(s3.list_multipart_uploads(Bucket="gk-test").get("Uploads", [])))
PY
ls tmp
