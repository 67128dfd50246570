# NCCL is optional for the CUDA backend (one GPU needs none): the library nvcc built loads NCCL
# when a run of several ranks opens its communicator, so it is not linked against it; without
# nccl.h, make builds comm_nccl.cu with GK_NO_NCCL, which needs no NCCL header or symbol and
# refuses several ranks (kernels/cuda/comm_nccl.cu).
source "$TOP/tests/cli/lib.bash"
lib=$GPT_TEST_BUILD/lib/libgptkit-cuda.so
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -f "$lib" ] && [ -x "$nvcc" ] || { echo "no nvcc build of the CUDA backend" >&2; exit 77; }
readelf -d "$lib" | grep 'NEEDED.*nccl' > /dev/null && echo "libgptkit-cuda.so is linked against NCCL"
nm -D --undefined-only "$lib" | grep ' nccl' > /dev/null && echo "libgptkit-cuda.so needs NCCL symbols at load"
echo "loaded at run time"
# make, where neither CUDA_HOME nor NCCL_HOME has nccl.h: every nvcc line says GK_NO_NCCL
mkdir -p nocuda/include
make -s -n -C "$TOP" BUILD="$PWD/b" CUDA_HOME="$PWD/nocuda" NCCL_HOME= "$PWD/b/lib/libgptkit-cuda.so" > plan.txt
[ -f /usr/include/nccl.h ] || { grep nvcc plan.txt | grep -v -- -DGK_NO_NCCL > /dev/null && echo "an nvcc line without GK_NO_NCCL"; }
grep -q 'note: .* has no NCCL' plan.txt && echo "make says so"
# the object without NCCL: compiles warning-free, defines the slot, references no nccl*
"$nvcc" -std=c++17 -gencode arch=compute_90,code=sm_90 -Xcompiler -fPIC,-Wall,-Wextra -Werror all-warnings \
  -I"$TOP" -DGK_NO_NCCL -c "$TOP/kernels/cuda/comm_nccl.cu" -o nonccl.o
nm -C nonccl.o | grep -c ' T cu_comm_open('
nm -u nonccl.o | grep nccl > /dev/null && echo "nonccl.o references NCCL"
echo "GK_NO_NCCL builds"
