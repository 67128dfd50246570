# gpt-tokenize hf://datasets/OWNER/NAME/PATH from a fake hub on 127.0.0.1 (tests/cli/fake_hub.py
# --dataset): the files listed through the tree API (paginated), a glob, a folder; downloaded into
# the HF cache as model files are (datasets--ORG--NAME, snapshots in folders; the next file in the
# background while one is read, stopped when the reading stops early), an interrupted
# transfer resumed by a Range request, a partial .incomplete blob continued, the sha256 check; a
# second run reuses the blobs, HF_HUB_OFFLINE=1 reads the cache without network; the errors.
source "$TOP/tests/cli/lib.bash"; need_data
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
# hub NAME ARGS...: starts a fake dataset hub serving ds/, logging to NAME.log; sets $ep.
hub() {
  local name=$1; shift
  python3 "$TOP/tests/cli/fake_hub.py" --dataset --root ds --port-file "$name.port" \
    --log "$name.log" "$@" & pids+=($!)
  for _ in $(seq 100); do [ -s "$name.port" ] && break; sleep 0.1; done
  ep="http://127.0.0.1:$(cat "$name.port")"
}
show() { sed "s|127\.0\.0\.1:[0-9]*|HUB|g; s|$PWD|.|g; s/ in [0-9.]* m*s.*$//"; }
export HF_HOME=$PWD/hf
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY HF_TOKEN HF_HUB_OFFLINE
mkdir -p ds/data/train ds/data/test
cp "$FIX/tokenize/docs.parquet" ds/data/train/000.parquet
cp "$FIX/parquet/zstd_v1_dict.parquet" ds/data/train/001.parquet
cp "$FIX/tokenize/docs.jsonl" ds/data/test/docs.jsonl
echo "# a dataset" > ds/README.md
sha=$(sha256sum ds/data/train/001.parquet | cut -d' ' -f1)
gpt-tokenize -q ds/data/train/000.parquet ds/data/train/001.parquet -o want.bin
repo=hf/hub/datasets--org--ds

echo "== a glob, listed in pages of 1, 001.parquet cut after 1000 bytes and resumed"
hub a --repo org/ds --page-size 1 --cut data/train/001.parquet:1000
HF_ENDPOINT=$ep gpt-tokenize 'hf://datasets/org/ds/data/train/*.parquet' -o a.bin 2> a.err
cmp a.bin want.bin && echo "the local files' tokens, 000 then 001"
grep -c 'connection lost after 1000 bytes' a.err
grep -c "^GET /lfs/$sha bytes=1000-$" a.log
grep '^GET /api/' a.log | sed 's/cursor=[0-9]*/cursor=K/' | sort | uniq -c | sed 's/^ *//'
rev=$(cat $repo/refs/main); echo "refs/main: $rev"
readlink $repo/snapshots/$rev/data/train/001.parquet | sed "s/$sha/SHA256/"
ls $repo/blobs | grep -c incomplete || true
grep -v '^gpt-tokenize: downloading\|resuming\|connection lost' a.err | show

echo "== again: the blobs reused (HEAD only), then offline with no server"
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds/data/train/*.parquet' -o b.bin
cmp a.bin b.bin && echo same
grep -c "^GET /lfs/" a.log
HF_HUB_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:9 gpt-tokenize -q 'hf://datasets/org/ds/data/train/*.parquet' -o c.bin
cmp a.bin c.bin && echo "offline: same"

echo "== a folder, -j 1 = -j 2; a partial blob continued"
HF_ENDPOINT=$ep gpt-tokenize -q -j 1 hf://datasets/org/ds/data/test -o d1.bin
HF_ENDPOINT=$ep gpt-tokenize -q -j 2 hf://datasets/org/ds/data/test/ -o d2.bin
cmp d1.bin d2.bin && ids d1.bin | cmp - "$FIX/tokenize/docs.ids" && echo "data/test/docs.jsonl: tiktoken's ids"
rm -rf hf
mkdir -p $repo/blobs; head -c 700 ds/data/train/001.parquet > $repo/blobs/$sha.incomplete
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds/data/train/001.parquet' --max-docs 3 -o e.bin
grep -c "^GET /lfs/$sha bytes=700-$" a.log
echo "--max-docs 3: $(ids e.bin | tr ' ' '\n' | grep -c '^50256$') documents"

echo "== stopped early while the next file downloads in the background, then the whole"
rm -rf hf
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds/data/train/*.parquet' --max-docs 3 -o g.bin
echo "--max-docs 3: $(ids g.bin | tr ' ' '\n' | grep -c '^50256$') documents"
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds/data/train/*.parquet' -o h.bin
cmp h.bin want.bin && echo "the whole: the local files' tokens"

echo "== a revision (@v1.0, a tag), then offline; a commit offline"
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds@v1.0/data/test/*.jsonl' -o r.bin
grep -c "^GET /api/datasets/org/ds/tree/v1.0/data/test?recursive=1 " a.log
grep -c "^HEAD /datasets/org/ds/resolve/v1.0/data/test/docs.jsonl " a.log
echo "refs/v1.0: $(cat $repo/refs/v1.0)"
HF_HUB_OFFLINE=1 gpt-tokenize -q 'hf://datasets/org/ds@v1.0/data/test/*.jsonl' -o r2.bin
HF_HUB_OFFLINE=1 gpt-tokenize -q "hf://datasets/org/ds@$(cat $repo/refs/v1.0)/data/test/*.jsonl" -o r3.bin
cmp r.bin r2.bin && cmp r.bin r3.bin && ids r.bin | cmp - "$FIX/tokenize/docs.ids" && echo "@v1.0: tiktoken's ids, online and offline"

echo "== errors"
set +e
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds/data/*.nothing' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds/nofolder/*.parquet' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/other/data/*.parquet' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/ds@bad~rev/data/*' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HUB_OFFLINE=1 gpt-tokenize -q 'hf://datasets/org/ds@v2/data/*' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HUB_OFFLINE=1 gpt-tokenize -q 'hf://datasets/org/never/x.parquet' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HUB_OFFLINE=1 gpt-tokenize -q 'hf://datasets/org/ds/data/test/*.parquet' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_ENDPOINT=http://127.0.0.1:9 gpt-tokenize -q 'hf://datasets/org/ds/data/*' -o f.bin 2>&1 |
  sed 's/\(cannot reach [^ ]*\): [^(]*/\1: ... /'; echo "exit ${PIPESTATUS[0]}"
hub c --repo org/bad --bad-etag data/train/000.parquet
HF_ENDPOINT=$ep gpt-tokenize -q 'hf://datasets/org/bad/data/train/*' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
ls f.bin* 2>/dev/null || echo "no output left"
