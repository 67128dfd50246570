# gpt-tokenize hf://datasets/... from a hostile or broken hub (tests/cli/fake_hub.py's hostile
# modes): a file that grows past its announced size (cut, deleted), a HEAD that announces another
# size than the listing (refused), a stalled download (retried, then given up within
# GPT_HUB_STALL_S in all), a redirect loop (at most 5), HF_TOKEN sent to the endpoint's host only
# (not to a listing page or an LFS CDN on another host), a relative LFS redirect (refs/main still
# names the commit; offline finds the files), a ref that names no commit (ignored), a gated
# dataset and a missing one with and without HF_TOKEN.
source "$TOP/tests/cli/lib.bash"; need_data
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
# hub NAME ARGS...: starts a fake hub (in the background: they start together) logging to
# NAME.log; at NAME: waits until it listens and sets $ep to its endpoint.
hub() { fake_hub "$1" --dataset --root ds --repo org/ds "${@:2}"; }
at() { hub_at "$1"; }
show() { hub_show; }
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY HF_TOKEN HF_HUB_OFFLINE
mkdir -p ds/data
cp "$FIX/tokenize/docs.parquet" ds/data/a.parquet
cp "$FIX/tokenize/docs.jsonl" ds/data/b.jsonl
sha=$(sha256sum ds/data/a.parquet | cut -d' ' -f1)
gpt-tokenize -q ds/data/a.parquet ds/data/b.jsonl -o want.bin
url='hf://datasets/org/ds/data/*'
blobs=datasets--org--ds/blobs
hub a --oversize data/a.parquet:3000000
hub b --stall data/a.parquet:100
hub c --redirect-loop data/a.parquet
hub d --foreign --page-size 1
hub e --relative-lfs
hub f --gated
hub g --head-size data/a.parquet:3000000
set +e

echo "== a file that grows past its announced size: cut and deleted"
at a
HF_HOME=$PWD/a HF_ENDPOINT=$ep gpt-tokenize -q "$url" -o a.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
echo "blobs: $(ls a/hub/$blobs | wc -l), output: $(ls a.bin* 2>/dev/null | wc -l)"

echo "== a HEAD that announces another size than the listing: refused before the download"
at g
HF_HOME=$PWD/g HF_ENDPOINT=$ep gpt-tokenize -q "$url" -o g.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
echo "requests for the content: $(grep -c '^GET /lfs/' g.log)"

echo "== a stalled download: retried, then given up (GPT_HUB_STALL_S=1.5 in all)"
at b
start=$(date +%s)
HF_HOME=$PWD/b HF_ENDPOINT=$ep GPT_HUB_STALL_S=1.5 gpt-tokenize "$url" -o b.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
echo "within 5 s: $(( $(date +%s) - start <= 5 ))"
grep "^GET /lfs/" b.log | show

echo "== a redirect loop: at most 5 redirects"
at c
HF_HOME=$PWD/c HF_ENDPOINT=$ep gpt-tokenize -q "$url" -o c.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
echo "requests for the content: $(grep -c '^GET /lfs/' c.log)"

echo "== HF_TOKEN goes to the endpoint's host only: not to a next page or an LFS host elsewhere"
at d
HF_HOME=$PWD/d HF_ENDPOINT=$ep HF_TOKEN=secret gpt-tokenize -q "$url" -o d.bin 2>&1 | show
cmp d.bin want.bin && echo "the local files' tokens"
show < d.log

echo "== a relative LFS redirect: refs/main names the commit, offline finds the files"
at e
HF_HOME=$PWD/e HF_ENDPOINT=$ep gpt-tokenize -q "$url" -o e.bin 2>&1 | show
echo "refs/main: $(cat e/hub/datasets--org--ds/refs/main)"
ls e/hub/datasets--org--ds/snapshots
HF_HOME=$PWD/e HF_HUB_OFFLINE=1 gpt-tokenize -q "$url" -o e2.bin 2>&1 | show
cmp e.bin want.bin && cmp e2.bin want.bin && echo "online and offline: the local files' tokens"
echo "== a ref that names a branch, not a commit: not a snapshot"
mv e/hub/datasets--org--ds/snapshots/* e/hub/datasets--org--ds/snapshots/main
echo main > e/hub/datasets--org--ds/refs/main
HF_HOME=$PWD/e HF_HUB_OFFLINE=1 gpt-tokenize -q "$url" -o e3.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"

echo "== gated, without and with HF_TOKEN; a missing dataset with HF_TOKEN"
at f
HF_HOME=$PWD/f HF_ENDPOINT=$ep gpt-tokenize -q "$url" -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HOME=$PWD/f HF_ENDPOINT=$ep HF_TOKEN=secret gpt-tokenize -q "$url" -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HOME=$PWD/f HF_ENDPOINT=$ep HF_TOKEN=secret gpt-tokenize -q 'hf://datasets/org/other/x/*' -o f.bin 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
ls f.bin 2>/dev/null || echo "no output left"
