#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages gptkit needs to build and test (with `fuzz`: to fuzz), if any are missing,
# and cuDNN's frontend headers (below).
# Prints what it installs; does nothing (quietly) when everything is present.
set -euo pipefail
need=(build-essential pkg-config libpcre2-dev libarchive-dev libjansson-dev libopenblas-dev
      zlib1g-dev libzstd-dev libsnappy-dev liblz4-dev libcurl4-openssl-dev libssl-dev libgloo-dev openmpi-bin python3-yaml valgrind mandoc xz-utils zstd lz4 zip gzip bzip2 python3 python3-pip bc jq time iproute2)
# `deps.sh fuzz` (make fuzz): clang with libFuzzer and its sanitizer runtimes, clang's OpenMP.
[ "${1:-}" = fuzz ] && need=(clang libclang-rt-14-dev libomp-dev)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
# cuDNN's frontend headers (header-only: PyPI's nvidia-cudnn-frontend wheel, its include/) in
# /usr/local/include, where the Makefile finds them, so that the CUDA library is built with
# cuDNN's attention (attention_cudnn.cpp); without pip or network: a note, and the build goes
# without it
cudnn_frontend() {
  [ -f /usr/local/include/cudnn_frontend.h ] && return 0
  local t; t=$(mktemp -d)
  if python3 -m pip download -q --no-deps -d "$t" nvidia-cudnn-frontend==1.32.0 >&2 &&
     python3 -m zipfile -e "$t"/nvidia_cudnn_frontend-*.whl "$t/w" && [ -f "$t/w/include/cudnn_frontend.h" ]; then
    echo "gptkit: installing cuDNN's frontend headers (nvidia-cudnn-frontend 1.32.0) in /usr/local/include" >&2
    $sudo cp -r "$t/w/include/." /usr/local/include/
  else
    echo "gptkit: note: cuDNN's frontend headers not installed (pip download failed): no cuDNN attention" >&2
  fi
  rm -rf "$t"
}
if [ ${#missing[@]} -eq 0 ]; then [ -n "${1:-}" ] || cudnn_frontend; exit 0; fi
echo "gptkit: installing build dependencies: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
[ -n "${1:-}" ] || cudnn_frontend
