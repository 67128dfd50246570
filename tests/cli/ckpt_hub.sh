# gpt-ckpt import NAME from a fake hub on 127.0.0.1 (tests/cli/fake_hub.py): the HuggingFace cache
# layout, an interrupted transfer resumed by a Range request, a partial .incomplete blob continued,
# the sha256 check, a cached model used without network, and the errors: unknown repo, a repo
# without model.safetensors, offline, no server, a cached snapshot lacking vocab.json and
# merges.txt (offline, no server).
source "$TOP/tests/cli/lib.bash"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
# hub NAME ARGS...: starts a fake hub logging to NAME.log; sets $ep to its endpoint.
hub() {
  local name=$1; shift
  python3 "$TOP/tests/cli/fake_hub.py" --root "$FIX/hf_tiny" --port-file "$name.port" \
    --log "$name.log" "$@" & pids+=($!)
  for _ in $(seq 100); do [ -s "$name.port" ] && break; sleep 0.1; done
  ep="http://127.0.0.1:$(cat "$name.port")"
}
# show: the error lines with the varying parts (port, temp dir) replaced.
show() { sed "s|127\.0\.0\.1:[0-9]*|HUB|g; s|$PWD|.|g"; }
export HF_HOME=$PWD/hf
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY HF_TOKEN HF_HUB_OFFLINE  # loopback only
gpt-ckpt import -q "$FIX/hf_tiny" -o want.safetensors
sha=$(sha256sum "$FIX/hf_tiny/model.safetensors" | cut -d' ' -f1)
repo=hf/hub/models--org--tiny

echo "== download, cut after 60000 bytes and resumed"
hub a --repo org/tiny --cut model.safetensors:60000
HF_ENDPOINT=$ep gpt-ckpt import org/tiny 2> a.err
cmp tiny.safetensors want.safetensors
grep -c 'connection lost after 60000 bytes' a.err
grep -c "^GET /lfs/$sha bytes=60000-$" a.log
rev=$(cat $repo/refs/main); echo "refs/main: $rev"
readlink $repo/snapshots/$rev/model.safetensors | sed "s/$sha/SHA256/"
ls $repo/snapshots/$rev
ls $repo/blobs | grep -c incomplete || true

echo "== cached: no network needed"
rm tiny.safetensors
HF_ENDPOINT=http://127.0.0.1:9 gpt-ckpt import -q org/tiny -o cached.safetensors
cmp cached.safetensors want.safetensors

echo "== a partial blob is continued"
hub b --repo org/part
mkdir -p hf/hub/models--org--part/blobs
head -c 1000 "$FIX/hf_tiny/model.safetensors" > hf/hub/models--org--part/blobs/$sha.incomplete
HF_ENDPOINT=$ep gpt-ckpt import -q org/part
cmp part.safetensors want.safetensors
grep -c "^GET /lfs/$sha bytes=1000-$" b.log

echo "== errors"
hub c --repo org/bad --bad-etag model.safetensors
set +e
HF_ENDPOINT=$ep gpt-ckpt import -q org/bad 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
ls hf/hub/models--org--bad/blobs | grep -c ffff
HF_ENDPOINT=$ep gpt-ckpt import -q org/nothere 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
hub d --repo org/pickled --missing model.safetensors
HF_ENDPOINT=$ep gpt-ckpt import -q org/pickled 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HUB_OFFLINE=1 gpt-ckpt import -q org/other 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
# (curl's own words vary between versions: cut them)
HF_ENDPOINT=http://127.0.0.1:9 gpt-ckpt import -q org/other 2>&1 | sed 's/\(cannot reach [^ ]*\): [^(]*/\1: ... /'
echo "exit ${PIPESTATUS[0]}"
gpt-ckpt import -q 'bad..name' 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
# a cached snapshot that lacks only the tokenizer files: named, offline and with no network
nv=hf/hub/models--org--novocab; c40=abcdef0123456789abcdef0123456789abcdef01; mkdir -p $nv/refs $nv/snapshots/$c40
echo $c40 > $nv/refs/main; cp "$FIX"/hf_tiny/{config.json,model.safetensors} $nv/snapshots/$c40/
HF_HUB_OFFLINE=1 gpt-ckpt import -q org/novocab 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_ENDPOINT=http://127.0.0.1:9 gpt-ckpt import -q org/novocab 2>&1 | sed 's/\(cannot reach [^ ]*\): [^(]*/\1: ... /' | show
echo "exit ${PIPESTATUS[0]}"
ls *.safetensors
