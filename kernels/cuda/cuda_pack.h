/* cuda_pack.h: what the element-wise and row-wise op files (elementwise.cu, encoder.cu,
 * layernorm.cu, classifier.cu) share:
 * packs of V consecutive elements moved by 16-byte loads and stores (V = 1: the fallback for
 * unaligned rows or pointers), the op configurations that carry the element type and pack width
 * as one template parameter (so CU_LAUNCH's arguments hold no comma), small device helpers and
 * the grid of a grid-stride loop. */
#ifndef GK_CUDA_PACK_H
#define GK_CUDA_PACK_H

#include "kernels/cuda/cuda_internal.h"
#include "kernels/rng.h"

namespace { /* internal linkage: each .cu file has its own copy of the instantiations */

template <typename E, int N> struct alignas(sizeof(E) * N) cu_pack {
    E v[N];
};
/* f[0..N) = p[0..N) as floats; p aligned to N elements; loads of at most 16 bytes. */
template <int N, typename E> static __device__ __forceinline__ void load_f(float *f, const E *p)
{
    constexpr int W = (int)(16 / sizeof(E)) < N ? (int)(16 / sizeof(E)) : N;
    for (int k = 0; k < N; k += W) {
        cu_pack<E, W> q = *reinterpret_cast<const cu_pack<E, W> *>(p + k);
        for (int j = 0; j < W; j++) f[k + j] = cu_f(q.v[j]);
    }
}
/* p[0..N) = f[0..N) rounded to E. */
template <int N, typename E> static __device__ __forceinline__ void store_f(E *p, const float *f)
{
    constexpr int W = (int)(16 / sizeof(E)) < N ? (int)(16 / sizeof(E)) : N;
    for (int k = 0; k < N; k += W) {
        cu_pack<E, W> q;
        for (int j = 0; j < W; j++) q.v[j] = cu_to<E>(f[k + j]);
        *reinterpret_cast<cu_pack<E, W> *>(p + k) = q;
    }
}

template <typename T_, int V_> struct op_cfg {
    typedef T_ T;
    static constexpr int V = V_;
};
/* The encoder's configuration adds the type of wte (W). */
template <typename T_, typename W_, int V_> struct enc_cfg {
    typedef T_ T;
    typedef W_ W;
    static constexpr int V = V_;
};

} /* namespace */

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The dropout multiplier of element i (1 when p == 0). */
static __device__ __forceinline__ float dropout_of(uint64_t key, size_t i, float p)
{
    return p > 0.0f ? gk_rng_dropout(key, i, p) : 1.0f;
}
/* Blocks for a grid-stride loop over `items` (enough to fill the device, no more). */
static inline unsigned grid_for(gk_backend *be, size_t items, unsigned threads)
{
    size_t cap = (size_t)(CU(be)->sm_count > 0 ? CU(be)->sm_count : 132) * 16;
    size_t b = (items + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b < cap ? b : cap);
}
#define GRID_STRIDE(k, n)                                                   \
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < (n); \
         k += (size_t)gridDim.x * blockDim.x)

#endif
