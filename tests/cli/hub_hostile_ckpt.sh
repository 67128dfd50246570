# gpt-ckpt import ORG/NAME from a hostile or broken hub (tests/cli/fake_hub.py's hostile modes):
# model.safetensors growing past its announced size (cut, deleted), a redirect loop (at most 5),
# HF_TOKEN sent to the endpoint's host only (not to the LFS host a redirect names), a relative
# LFS redirect (refs/main still names the commit: the cached model imports offline), a gated
# model and a missing one with and without HF_TOKEN.
source "$TOP/tests/cli/lib.bash"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
# hub NAME ARGS...: starts a fake hub (in the background: they start together) logging to
# NAME.log; at NAME: waits until it listens and sets $ep to its endpoint.
hub() { fake_hub "$1" --root "$FIX/hf_tiny" --repo org/tiny "${@:2}"; }
at() { hub_at "$1"; }
show() { hub_show; }
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY HF_TOKEN HF_HUB_OFFLINE
gpt-ckpt import -q "$FIX/hf_tiny" -o want.safetensors
sha=$(sha256sum "$FIX/hf_tiny/model.safetensors" | cut -d' ' -f1)
size=$(stat -c %s "$FIX/hf_tiny/model.safetensors")
hub a --oversize model.safetensors:$((size + 1000000))
hub b --redirect-loop model.safetensors
hub c --foreign
hub d --relative-lfs
hub e --gated
set +e

echo "== model.safetensors growing past its announced size: cut and deleted"
at a
HF_HOME=$PWD/a HF_ENDPOINT=$ep gpt-ckpt import -q org/tiny -o a.safetensors 2>&1 | show | sed "s/ $size / SIZE /"
echo "exit ${PIPESTATUS[0]}"
echo "its blob: $(ls a/hub/models--org--tiny/blobs | grep -c "$sha"), output: $(ls a.safetensors* 2>/dev/null | wc -l)"

echo "== a redirect loop: at most 5 redirects"
at b
HF_HOME=$PWD/b HF_ENDPOINT=$ep gpt-ckpt import -q org/tiny -o b.safetensors 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
echo "requests for the content: $(grep -c '^GET /lfs/' b.log)"

echo "== HF_TOKEN goes to the endpoint's host only, not to the LFS host of a redirect"
at c
HF_HOME=$PWD/c HF_ENDPOINT=$ep HF_TOKEN=secret gpt-ckpt import -q org/tiny -o c.safetensors 2>&1 | show
cmp c.safetensors want.safetensors && echo "imported"
grep 'model.safetensors\|/lfs/' c.log | show

echo "== a relative LFS redirect: refs/main names the commit, the cached model imports offline"
at d
HF_HOME=$PWD/d HF_ENDPOINT=$ep gpt-ckpt import -q org/tiny -o d.safetensors 2>&1 | show
echo "refs/main: $(cat d/hub/models--org--tiny/refs/main)"
ls d/hub/models--org--tiny/snapshots
HF_HOME=$PWD/d HF_HUB_OFFLINE=1 gpt-ckpt import -q org/tiny -o d2.safetensors 2>&1 | show
cmp d.safetensors want.safetensors && cmp d2.safetensors want.safetensors && echo "online and offline: imported"

echo "== gated, without and with HF_TOKEN; a missing model with HF_TOKEN"
at e
HF_HOME=$PWD/e HF_ENDPOINT=$ep gpt-ckpt import -q org/tiny -o e.safetensors 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HOME=$PWD/e HF_ENDPOINT=$ep HF_TOKEN=secret gpt-ckpt import -q org/tiny -o e.safetensors 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
HF_HOME=$PWD/e HF_ENDPOINT=$ep HF_TOKEN=secret gpt-ckpt import -q org/other -o e.safetensors 2>&1 | show; echo "exit ${PIPESTATUS[0]}"
ls e.safetensors 2>/dev/null || echo "no output left"
