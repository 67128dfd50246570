#!/usr/bin/env bash
# gpu_kit.sh: packs, here, what a borrowed GPU machine lacks to build and test gptkit, into the
# ignored folder .gpukit/ that the device tool's `run` carries (carry [".gpukit"]). The device
# image is described as nvcc, the CUDA libraries and PyTorch; nothing says it has our -dev
# packages, and it cannot fetch any, so the kit holds:
#   sysroot.tar.xz  the Debian -dev packages the Makefile's DEBS names (libpcre2, libarchive, jansson,
#                   zlib, OpenBLAS, libcurl, OpenSSL, zstd, snappy, lz4) and Gloo's, with the
#                   libraries they load, and pkgconf (pkg-config, used when
#                   the device has none), unpacked by dpkg -x (no scripts),
#                   docs and static libraries left out (about 25 MB)
#   data/           ../shared/data (gpt2/, tinyshakespeare/, tokenizer-cases/: 3 MB), so that
#                   tests/run.sh runs whole there too
#   env.sh          sourced there (tests/bench/gpu_session.sh does): unpacks the sysroot into
#                   /tmp/gpukit-root once and points pkg-config, the compilers and the linker at it.
#                   Every program and library built gets an RPATH to it (EXTRA_LDFLAGS: nothing
#                   else on the machine sees those libraries), and NCCL is found in CUDA's folder
#                   or, failing that, in PyTorch's pip wheel (NCCL_HOME)
#   nccl-include/   this machine's nccl.h, for a wheel that has the library but no header
#   cudnn/include/  cuDNN's frontend headers (from /usr/local/include, where .ci/deps.sh puts
#                   them; the folder is named include/ since they include "../include/...") and
#                   this CUDA's cudnn*.h, so that libgptkit-cuda.so has cuDNN's attention
# Usage (here, root, with Debian's package lists: apt-get update first): tests/bench/gpu_kit.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
kit=$top/.gpukit
data=$(cd "${GPT_TEST_DATA:-$top/../shared/data}" && pwd)
# the -dev packages the Makefile asks for (its DEBS list, so that the kit follows it), Gloo, pkgconf
want=($(sed -n '/^DEBS *:=/,/[^\\]$/p' "$top/Makefile" | grep -o '[a-z0-9.+-]*:[a-z0-9.+-]*-dev' | cut -d: -f2)
      libgloo-dev pkgconf)
# What the device's base system has (C library, compiler runtime, PAM and the like), and the
# OpenBLAS builds we do not link: not packed.
skip='^(adduser|cdebconf|debconf|dpkg|gcc-[0-9]+-base|install-info|libaudit.*|libc-dev-bin|libc6|libc6-dev|libcap-ng0|libcrypt-dev|libcrypt1|libdb5\.3|libdebian-installer4|libgcc-s1|libgomp1|libmd0|libnewt0\.52|libnsl-dev|libnsl2|libpam.*|libreadline8|libselinux1|libsemanage.*|libsepol2|libslang2|libstdc\+\+6|libtextwrap1|libtinfo6|libtirpc.*|linux-libc-dev|passwd|readline-common|rpcsvc-proto|tar|libopenblas.*-(openmp|serial).*)$'
work=$(mktemp -d)
chmod 755 "$work" # apt-get download runs as _apt
trap 'rm -rf "$work"' EXIT
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${want[@]}" | grep '^[a-z0-9]' | sort -u | grep -v -E "$skip" > "$work/pkgs"
mkdir -p "$work/debs" "$work/root"
(cd "$work/debs" && apt-get download $(cat "$work/pkgs") > /dev/null)
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
rm -rf "$work"/root/usr/share/{doc,man,info,locale,lintian,bug,bash-completion}
find "$work/root" -name '*.a' -delete
rm -rf "$kit"
mkdir -p "$kit/data"
tar -C "$work/root" -cJf "$kit/sysroot.tar.xz" .
cp -r "$data/gpt2" "$data/tinyshakespeare" "$data/tokenizer-cases" "$kit/data/"
nccl_h=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/../include/nccl.h
[ -f "$nccl_h" ] && mkdir -p "$kit/nccl-include" && cp "$nccl_h" "$kit/nccl-include/"
# cuDNN's frontend headers (header-only: the PyPI wheel nvidia-cudnn-frontend, which .ci/deps.sh
# puts in /usr/local/include) and this CUDA's cudnn*.h, for attention_cudnn.cpp
# (else the wheel itself, fetched by pip)
fe=${CUDNN_FRONTEND_INCLUDE:-/usr/local/include}
if [ ! -f "$fe/cudnn_frontend.h" ] && python3 -m pip download -q --no-deps -d "$work/fe" nvidia-cudnn-frontend==1.32.0 >&2 &&
   python3 -m zipfile -e "$work"/fe/nvidia_cudnn_frontend-*.whl "$work/fe/w"; then
  fe=$work/fe/w/include
fi
if [ -f "$fe/cudnn_frontend.h" ]; then
  mkdir -p "$kit/cudnn/include" # named include/: the frontend includes "../include/..."
  cp -r "$fe"/cudnn_frontend* "$fe"/cudnn_backend_base.h "$kit/cudnn/include/"
  cp "$(dirname "$nccl_h")"/cudnn*.h "$kit/cudnn/include/" 2>/dev/null || true
fi
cat > "$kit/env.sh" <<'EOF'
# .gpukit/env.sh (written by tests/bench/gpu_kit.sh): source it from the repository root.
kit=$PWD/.gpukit
R=/tmp/gpukit-root
[ -d "$R/usr" ] || { mkdir -p "$R" && { tar -C "$R" -xJf "$kit/sysroot.tar.xz" 2>/dev/null ||
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$kit/sysroot.tar.xz" "$R"; }; }
lib=$R/usr/lib/x86_64-linux-gnu
dirs="$lib:$lib/openblas-pthread:$R/lib/x86_64-linux-gnu:$R/usr/lib"
export PKG_CONFIG_SYSROOT_DIR=$R PKG_CONFIG_LIBDIR=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$R/usr/share/pkgconfig
export CPATH=$R/usr/include:$R/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
export LIBRARY_PATH=$dirs${LIBRARY_PATH:+:$LIBRARY_PATH}
export EXTRA_LDFLAGS="-Wl,--disable-new-dtags -Wl,-rpath,$dirs -Wl,-rpath-link,$dirs"
export GPT_TEST_DATA=$kit/data
if ! command -v pkg-config > /dev/null; then # the kit's pkgconf, on its own libpkgconf
  mkdir -p "$R/kitbin"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" "$R/usr/bin/pkgconf" > "$R/kitbin/pkg-config"
  chmod +x "$R/kitbin/pkg-config"
  export PATH=$PATH:$R/kitbin
fi
cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
if [ ! -f "$cuda/include/nccl.h" ]; then # PyTorch's wheel: nvidia/nccl/lib/libnccl.so.2
  so=$(python3 -c 'import glob, nvidia.nccl as n; print(sorted(glob.glob(list(n.__path__)[0] + "/lib/libnccl.so*"))[0])' 2>/dev/null ||
       find /opt /usr -name 'libnccl.so*' 2>/dev/null | head -n 1)
  if [ -n "$so" ]; then # its header beside it, else the one packed here (NCCL's C API is stable)
    inc=$(dirname "$(dirname "$so")")/include
    [ -f "$inc/nccl.h" ] || inc=$kit/nccl-include
    mkdir -p "$R/nccl/lib"
    ln -sfn "$inc" "$R/nccl/include"
    ln -sf "$so" "$R/nccl/lib/libnccl.so"
    ln -sf "$so" "$R/nccl/lib/libnccl.so.2"
    export NCCL_HOME=$R/nccl
  fi
fi
# cuDNN: the frontend's headers packed here (the Makefile's CUDNN_FRONTEND_INCLUDE), and
# libcudnn.so.9 from CUDA's folder or else PyTorch's wheel (nvidia/cudnn/lib), loaded at run time
[ -f "$kit/cudnn/include/cudnn_frontend.h" ] && export CUDNN_FRONTEND_INCLUDE=$kit/cudnn/include
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9' && [ ! -e "$cuda/lib64/libcudnn.so.9" ]; then
  d=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0] + "/lib")' 2>/dev/null)
  [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
[ -e "$cuda/lib64/libcudnn.so.9" ] && export LD_LIBRARY_PATH=$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "gpukit: sysroot $R, NCCL ${NCCL_HOME:-in $cuda}, cuDNN frontend ${CUDNN_FRONTEND_INCLUDE:-none}, data $GPT_TEST_DATA"
EOF
echo "gpu_kit: $(du -sh "$kit" | cut -f1) in $kit ($(wc -l < "$work/pkgs") packages); carry [\".gpukit\"]"
