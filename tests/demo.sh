#!/usr/bin/env bash
# make demo: the main job, end to end, on Tiny Shakespeare.
# The text is looked for locally first (TEXT=FILE, then ../shared/data), and only then
# downloaded (short connect timeout: machines without network must not hang).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$build/bin:$PATH"
work="$build/demo"
mkdir -p "$work"
shared="$top/../shared/data"
url_text=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
url_vocab=https://openaipublic.blob.core.windows.net/gpt-2/encodings/main

fetch() { # fetch URL FILE: download with a short connect timeout, atomically
  command -v curl >/dev/null || return 1
  curl -fsSL --connect-timeout 5 --max-time 120 -o "$2.part" "$1" && mv "$2.part" "$2"
}

text=${TEXT:-}
if [ -z "$text" ] && [ -f "$shared/tinyshakespeare/input.txt" ]; then text="$shared/tinyshakespeare/input.txt"; fi
if [ -z "$text" ]; then
  text="$work/input.txt"
  [ -f "$text" ] || fetch "$url_text" "$text" || {
    echo "demo: no text found. Put a text file somewhere and run: make demo TEXT=/path/to/file.txt" >&2
    exit 1; }
fi
if [ -z "${GPT_VOCAB:-}" ]; then
  if [ -f "$shared/gpt2/encoder.json" ]; then export GPT_VOCAB="$shared/gpt2"
  elif [ -f "$work/gpt2/encoder.json" ] || { mkdir -p "$work/gpt2" && fetch "$url_vocab/encoder.json" "$work/gpt2/encoder.json" &&
         fetch "$url_vocab/vocab.bpe" "$work/gpt2/vocab.bpe"; }; then export GPT_VOCAB="$work/gpt2"
  else echo "demo: no GPT-2 vocabulary found; set GPT_VOCAB to a directory with encoder.json and vocab.bpe" >&2; exit 1
  fi
fi

echo "== gpt-tokenize: $text (GPT-2 BPE)"
gpt-tokenize "$text" -o "$work/shakespeare.bin"
count=$(od -An -td4 -j8 -N4 "$work/shakespeare.bin" | tr -d ' ')
echo "tokens: $count (including one <|endoftext|> document token) -> $work/shakespeare.bin"
echo "== decoded back, first lines:"
(gpt-tokenize -d "$work/shakespeare.bin" || true) | head -n 4
if gpt-tokenize -d "$work/shakespeare.bin" | cmp -s - "$text"; then
  echo "round trip: identical to the input ($(wc -c < "$text") bytes)"
else
  echo "round trip: DIFFERS from the input" >&2; exit 1
fi

echo "== gpt-tokenize --char: 90/10 split for char-level training"
data="$work/data/shakespeare_char"
mkdir -p "$data"
gpt-tokenize --char "$text" --vocab-out "$data/vocab.json" -o "$data/train.bin" \
  --val-fraction 0.1 --val-output "$data/val.bin"

echo "== gpt-train -c shakespeare.conf (nanoGPT's CPU example: 4 layers, 128 wide, 2000 steps)"
cd "$work"
rm -rf out
gpt-train -q -c "$top/train/configs/shakespeare.conf" ${DEMO_TRAIN_ARGS:-} | tee train.log |
  grep -E '^step [0-9]+:' || true   # the eval lines; every step is in train.log
val=$(grep -o 'val loss [0-9.]*' train.log | tail -n 1 | cut -d' ' -f3)
echo "final val loss: $val (nanoGPT's README: ~1.88; nanoGPT in PyTorch on this data: 1.906, see tests/bench/nanogpt_shakespeare.py)"
echo "checkpoint: $work/out/latest.safetensors -> $(readlink out/latest.safetensors)"
echo "loss plot:  $work/out/loss.svg"

echo "== gpt-evalppl: perplexity of the trained model on the validation shard"
gpt-evalppl -m out/latest.safetensors "$data/val.bin"
echo "== gpt-sample -n 300 (a sample from the trained model)"
gpt-sample -q -m out/latest.safetensors -n 300 --seed 1
echo
