#!/usr/bin/env bash
# build.sh: builds the CUDA emulator and its tests (temporary: the Makefile will take this over).
# Output: BUILD/lib/libgptkit-cuda-emu-core.a (static, -fPIC, hidden visibility: the lead links it
# with the kernels into libgptkit-cuda-emu.so) and BUILD/tests/test_emu_* (run them with
# tests/run.sh BUILD emu). Each tests/unit/emu/*.cu is also compiled by nvcc -arch=sm_90 when nvcc
# is found (NVCC_CHECK=0 skips that). SAN=1 builds with AddressSanitizer and UBSan; CXXFLAGS are added
# (-DGK_EMU_PORTABLE_SWITCH tests the setjmp switch that non-x86-64 hosts use).
# Usage: kernels/emu/build.sh [BUILD]   (default build-emu; run from anywhere)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${1:-build-emu}
CXX=${CXX:-g++}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
flags="-O2 -g -std=c++17 -fPIC -fvisibility=hidden -Wall -Wextra -D_GNU_SOURCE -DGK_CUDA_EMU -I. $(pkg-config --cflags openblas) ${CXXFLAGS:-}"
ldflags="-pthread"
if [ "${SAN:-0}" = 1 ]; then
  flags="$flags -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  ldflags="$ldflags -fsanitize=address,undefined"
fi
libs="$(pkg-config --libs openblas) -lm"
headers="kernels/emu/*.h kernels/cuda/dialect.h tests/unit/test.h"
mkdir -p "$build/obj/kernels/emu" "$build/obj/tests/unit/emu" "$build/lib" "$build/tests" "$build/nvcc"

# stale OUT SRC: true when OUT is missing or older than SRC or any header.
stale() { [ ! -e "$1" ] || [ -n "$(find "$2" $headers -newer "$1" 2>/dev/null | head -n 1)" ]; }

objs=()
for src in kernels/emu/*.cpp; do
  obj="$build/obj/${src%.cpp}.o"
  objs+=("$obj")
  if stale "$obj" "$src"; then echo "CXX $src"; $CXX $flags -c "$src" -o "$obj"; fi
done
lib="$build/lib/libgptkit-cuda-emu-core.a"
rm -f "$lib" && ar rcs "$lib" "${objs[@]}"

for src in tests/unit/emu/test_*.cu; do
  name=$(basename "$src" .cu)
  obj="$build/obj/tests/unit/emu/$name.o"
  if stale "$obj" "$src"; then
    echo "CXX $src"
    $CXX $flags -x c++ -c "$src" -o "$obj"
    if [ "${NVCC_CHECK:-1}" = 1 ] && [ -x "$NVCC" ]; then
      echo "NVCC $src"
      "$NVCC" -c -arch=sm_90 -std=c++17 -I. "$src" -o "$build/nvcc/$name.o"
    fi
  fi
  $CXX $ldflags -o "$build/tests/$name" "$obj" "$lib" $libs
done
echo "built $lib and $(ls "$build"/tests/test_emu_* | wc -l) test binaries in $build"
