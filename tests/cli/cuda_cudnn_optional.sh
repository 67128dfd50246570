# cuDNN is optional for the CUDA backend: where make found cuDNN's frontend headers, the library
# loads libcudnn.so.9 at run time (the frontend's dynamic loading), so it is not linked against
# cuDNN and needs no cudnn* symbol at load; without the headers (none found, or CUDNN=0) make
# says so and builds attention_cudnn.cpp as a stub that references no cuDNN symbol (attention =
# cudnn is then refused in one line: cli/attention_setting).
source "$TOP/tests/cli/lib.bash"
lib=$GPT_TEST_BUILD/lib/libgptkit-cuda.so
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -f "$lib" ] && [ -x "$nvcc" ] || { echo "no nvcc build of the CUDA backend" >&2; exit 77; }
readelf -d "$lib" | grep -i 'NEEDED.*cudnn' > /dev/null && echo "libgptkit-cuda.so is linked against cuDNN"
nm -D --undefined-only "$lib" | grep -i ' cudnn' > /dev/null && echo "libgptkit-cuda.so needs cuDNN symbols at load"
echo "loaded at run time"
# make, where no cudnn_frontend.h is found: no GK_HAVE_CUDNN on the C++ line, and a note
mkdir -p nocuda/include
make -s -n -C "$TOP" BUILD="$PWD/b" CUDA_HOME="$PWD/nocuda" CUDNN_FRONTEND_INCLUDE= "$PWD/b/lib/libgptkit-cuda.so" > plan.txt
grep -c 'attention_cudnn\.cpp' plan.txt
grep 'attention_cudnn\.cpp' plan.txt | grep -q GK_HAVE_CUDNN && echo "built with cuDNN all the same"
grep -q 'note: .* has no cuDNN attention' plan.txt && echo "make says so"
# the stub: warning-free, defines the four functions, references nothing of cuDNN's
${CXX:-g++} -std=c++17 -fPIC -Wall -Wextra -Werror -I"$TOP" -isystem "$(dirname "$nvcc")/../include" \
  -c "$TOP/kernels/cuda/attention_cudnn.cpp" -o stub.o
nm -C stub.o | grep -c ' T cu_cudnn_'
nm -u stub.o | grep -i cudnn > /dev/null && echo "the stub references cuDNN"
echo "the stub builds"
