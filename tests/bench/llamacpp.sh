#!/usr/bin/env bash
# make bench BENCH=llamacpp: gpt-sample beside llama.cpp's llama-bench, the reference for CPU
# decoding, on the same GPT-2 124M random weights (rand_ckpt.c), one stream, 2 threads:
# gptkit fp32 / fp16 / bf16 / int8 against llama.cpp's f32 / f16 / bf16 / q8_0 (the same Q8_0 layout: blocks
# of 32 weights and one fp16 scale), each pair run back to back, BENCH_ROUNDS times (3), the
# median of each. gptkit: 256 new tokens after a 16-token prompt; llama.cpp: 256 tokens generated
# after 16 tokens of context (llama-bench -n 256 -d 16), so both attend over the same lengths.
# llama.cpp comes from PyPI (the only source this project's machines reach): the sources that
# llama-cpp-python's sdist vendors (pinned below), built here with cmake for this CPU (GGML_NATIVE;
# about 10 minutes on 2 cores, kept in $BUILD/bench/llamacpp for the next run), or a llama.cpp
# checkout named by $GPT_LLAMACPP_SRC. The weights go checkpoint -> gpt-ckpt export --hf ->
# tests/bench/gguf_from_hf.py (llama.cpp's own gguf-py) -> GGUF. Usage: llamacpp.sh BUILD
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$build/bin:$PATH"
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
work="$build/bench/llamacpp"; mkdir -p "$work"
pin=0.3.36 # llama-cpp-python's version: its vendor/llama.cpp
rounds=${BENCH_ROUNDS:-3}

src=${GPT_LLAMACPP_SRC:-}
if [ -z "$src" ]; then
  src="$work/llama_cpp_python-$pin/vendor/llama.cpp"
  if [ ! -d "$src" ]; then
    echo "bench: downloading llama-cpp-python $pin's sources (pip) for llama.cpp"
    python3 -m pip download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$pin"
    tar xzf "$work/llama_cpp_python-$pin.tar.gz" -C "$work"
  fi
fi
bench_bin="$work/build/bin/llama-bench"
if [ ! -x "$bench_bin" ]; then
  echo "bench: building llama.cpp's llama-bench (cmake, GGML_NATIVE)"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > "$work/cmake.log" 2>&1
  cmake --build "$work/build" --target llama-bench -j "$(nproc)" >> "$work/cmake.log" 2>&1 ||
    { tail -n 20 "$work/cmake.log"; exit 1; }
fi
python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q numpy

model="$build/bench/gpt2-124M-random.safetensors"
[ -s "$model" ] || "$build/bench/rand_ckpt" "$model"
if [ ! -s "$work/q8_0.gguf" ]; then
  rm -rf "$work/hf"
  gpt-ckpt export "$model" --hf "$work/hf" 2> /dev/null
  for t in f32 f16 bf16 q8_0; do
    PYTHONPATH="$src/gguf-py" python3 "$top/tests/bench/gguf_from_hf.py" "$work/hf" "$data/gpt2/encoder.json" \
      "$data/gpt2/vocab.bpe" $t "$work/$t.ggufpart"
    mv "$work/$t.ggufpart" "$work/$t.gguf"
  done
  rm -rf "$work/hf"
fi

nobl="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2"
prompt="First Citizen: Before we proceed any further, hear me speak. All: Speak" # 16 BPE tokens
ours() { $nobl gpt-sample --device cpu -m "$model" -V "$data/gpt2" --dtype "$1" -p "$prompt" -n 256 -t 0 --ids 2>&1 \
  > /dev/null | tail -n 1 | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p'; }
theirs() { "$bench_bin" -m "$work/$1.gguf" -p 0 -n 256 -d 16 -t 2 -r 1 -o csv 2> /dev/null |
  python3 -c 'import csv, sys; print(list(csv.DictReader(sys.stdin))[-1]["avg_ts"])'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo
printf '%-34s %10s %10s %8s\n' "decoding, tokens/s" gptkit llama.cpp ratio
for pair in float32:f32 float16:f16 bfloat16:bf16 int8:q8_0; do
  dt=${pair%%:*} lt=${pair##*:}
  : > "$work/ours.$lt"; : > "$work/theirs.$lt"
  for _ in $(seq "$rounds"); do
    ours "$dt" >> "$work/ours.$lt"
    theirs "$lt" >> "$work/theirs.$lt"
  done
  o=$(median < "$work/ours.$lt") t=$(median < "$work/theirs.$lt")
  printf '%-34s %10.1f %10.1f %7.2fx\n' "gptkit $dt / llama.cpp $lt" "$o" "$t" "$(echo "$o / $t" | bc -l)"
done
echo "(GPT-2 124M random weights, one stream, 2 threads, 256 tokens after 16 of context, median of"
echo " $rounds alternating runs; llama.cpp: llama-bench of llama-cpp-python $pin's sources, GGML_NATIVE;"
echo " ratio: gptkit's tokens/s / llama.cpp's, target at least 1.0x)"
