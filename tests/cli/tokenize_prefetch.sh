# A run over hf:// files that stops early (--max-docs) while the next file's download is still
# starting in the background (the fake hub answers its HEAD after 1 s): the download is stopped
# and waited for before the summary, so that whatever it says comes before, and the summary
# line is the last (before: "downloading .../001.parquet" printed after the summary).
source "$TOP/tests/cli/lib.bash"; need_data
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
export HF_HOME=$PWD/hf
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY HF_TOKEN HF_HUB_OFFLINE
mkdir -p ds/data
cp "$FIX/tokenize/docs.parquet" ds/data/000.parquet
cp "$FIX/parquet/zstd_v1_dict.parquet" ds/data/001.parquet
python3 "$TOP/tests/cli/fake_hub.py" --dataset --root ds --repo org/ds --port-file port \
  --log hub.log --delay data/001.parquet:1 & pids+=($!)
for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
HF_ENDPOINT=http://127.0.0.1:$(cat port) gpt-tokenize 'hf://datasets/org/ds/data/*.parquet' --max-docs 3 \
  -o a.bin 2> err.txt
echo "--max-docs 3: $(ids a.bin | tr ' ' '\n' | grep -c '^50256$') documents"
echo "the last line: $(tail -n 1 err.txt | sed 's/ in [0-9.]* m*s$//')"
grep -c "^HEAD /datasets/org/ds/resolve/main/data/001.parquet" hub.log
