#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages gptkit needs to build and test (with `fuzz`: to fuzz), if any are missing.
# Prints what it installs; does nothing (quietly) when everything is present.
set -euo pipefail
need=(build-essential pkg-config libpcre2-dev libarchive-dev libjansson-dev libopenblas-dev
      zlib1g-dev libzstd-dev libsnappy-dev liblz4-dev libcurl4-openssl-dev libssl-dev libgloo-dev openmpi-bin python3-yaml valgrind mandoc xz-utils zstd lz4 zip gzip bzip2 python3 bc jq time iproute2)
# `deps.sh fuzz` (make fuzz): clang with libFuzzer and its sanitizer runtimes, clang's OpenMP.
[ "${1:-}" = fuzz ] && need=(clang libclang-rt-14-dev libomp-dev)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "gptkit: installing build dependencies: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
