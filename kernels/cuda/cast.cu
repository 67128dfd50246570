/* cast.cu: the CUDA backend's element type conversion (gk_ops.cast: fp32 <-> bf16, or a copy
 * between equal types), and cu_cast_on for the backend's own uses on any stream. */
#include "kernels/cuda/cuda_internal.h"

template <typename D, typename S>
__global__ void cast_kernel(D *dst, const S *src, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = cu_to<D>(cu_f(src[i]));
}

void cu_cast_on(gk_backend *be, cudaStream_t stream, void *dst, gk_elt dt, const void *src,
                size_t n)
{
    unsigned threads = 256, blocks = cu_blocks(n, threads);
    unsigned most = (unsigned)CU(be)->sm_count * 8; /* grid-stride beyond a few waves */
    if (blocks > most) blocks = most;
    if (dt == GK_BF16)
        GK_LAUNCH((cast_kernel<bf16, float>), blocks, threads, 0, stream, (bf16 *)dst,
                  (const float *)src, n);
    else
        GK_LAUNCH((cast_kernel<float, bf16>), blocks, threads, 0, stream, (float *)dst,
                  (const bf16 *)src, n);
}

void cu_cast(gk_backend *be, void *dst, gk_elt dt, const void *src, gk_elt st, size_t n)
{
    CU_BEGIN(be);
    if (!n) return;
    if (dt == st) {
        cu_copy(be, dst, src, n * gk_elt_size(dt));
        return;
    }
    cu_cast_on(be, CU(be)->stream, dst, dt, src, n);
    CU_LAUNCHED(be, "cast_kernel");
}

