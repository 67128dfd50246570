/* classifier.cu: the CUDA backend's softmax cross-entropy over the vocabulary, forward
 * (each row's loss and log-sum-exp) and backward (dlogits from the saved log-sum-exp): one block
 * per row, online max and sum in fp32, templates on an op_cfg P (activation type T, pack width
 * V; see cuda_pack.h), packs of 16-byte loads, V = 1 when a row or pointer is not aligned. */
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

/* ---- softmax + cross-entropy: a block per row ---- */

#define XENT_THREADS 512

/* A log-sum-exp state: the max m and the sum s of exp(x - m). */
struct lse_st {
    float m, s;
};
/* The state of both a's and b's values. */
struct lse_merge {
    __device__ __forceinline__ lse_st operator()(lse_st a, lse_st b) const
    {
        float M = fmaxf(a.m, b.m);
        if (M == -INFINITY) return a;
        a.s = a.s * expf(a.m - M) + b.s * expf(b.m - M);
        a.m = M;
        return a;
    }
};
/* The state of the lane lane ^ o (reduce.h's butterfly takes it). */
static __device__ __forceinline__ lse_st cu_shfl_xor(lse_st v, int o)
{
    return {cu_shfl_xor(v.m, o), cu_shfl_xor(v.s, o)};
}

/* Packs cover the first V columns (the last one partly: its columns >= V are skipped). */
template <class P>
static __global__ void xent_fwd_kernel(float *losses, float *lse, const typename P::T *logits,
                                       const int *targets, int Vn, int Vp)
{
    constexpr int V = P::V;
    __shared__ lse_st red[32];
    const typename P::T *l = logits + (size_t)blockIdx.x * Vp;
    float m = -INFINITY, s = 0.0f;
    for (int cp = threadIdx.x; cp < (Vn + V - 1) / V; cp += blockDim.x) {
        float f[V], pm = -INFINITY;
        load_f<V>(f, l + (size_t)cp * V);
        for (int j = 0; j < V; j++)
            if (cp * V + j < Vn) pm = fmaxf(pm, f[j]);
        if (pm > m) s *= expf(m - pm), m = pm;
        for (int j = 0; j < V; j++)
            if (cp * V + j < Vn) s += expf(f[j] - m);
    }
    lse_st r = block_reduce_warp0(lse_st{m, s}, red, lse_st{-INFINITY, 0.0f}, lse_merge());
    if (threadIdx.x != 0) return;
    float z = r.m + logf(r.s);
    int t = targets[blockIdx.x];
    lse[blockIdx.x] = z;
    losses[blockIdx.x] = t >= 0 ? z - cu_f(l[t]) : 0.0f;
}

template <class P>
static __global__ void xent_bwd_kernel(typename P::T *dlogits, const typename P::T *logits,
                                       const float *lse, const int *targets, float dloss, int Vn,
                                       int Vp)
{
    constexpr int V = P::V;
    size_t row = blockIdx.x;
    int t = targets[row];
    float z = lse[row];
    for (int cp = threadIdx.x; cp < Vp / V; cp += blockDim.x) {
        size_t i = row * Vp + (size_t)cp * V;
        float f[V];
        load_f<V>(f, logits + i);
        for (int j = 0; j < V; j++) {
            int c = cp * V + j;
            f[j] = t >= 0 && c < Vn ? (expf(f[j] - z) - (c == t ? 1.0f : 0.0f)) * dloss : 0.0f;
        }
        store_f<V>(dlogits + i, f);
    }
}

template <typename T>
static void xent_fwd_run(gk_backend *be, float *losses, float *lse, const T *logits,
                         const int *targets, int N, int V, int Vp)
{
    typedef op_cfg<T, 16 / sizeof(T)> PV;
    typedef op_cfg<T, 1> P1;
    if (Vp % PV::V == 0 && aligned16(logits))
        CU_LAUNCH(be, xent_fwd_kernel<PV>, (unsigned)N, XENT_THREADS, 0, losses, lse, logits,
                  targets, V, Vp);
    else
        CU_LAUNCH(be, xent_fwd_kernel<P1>, (unsigned)N, XENT_THREADS, 0, losses, lse, logits,
                  targets, V, Vp);
}

template <typename T>
static void xent_bwd_run(gk_backend *be, T *dlogits, const T *logits, const float *lse,
                         const int *targets, float dloss, int N, int V, int Vp)
{
    typedef op_cfg<T, 16 / sizeof(T)> PV;
    typedef op_cfg<T, 1> P1;
    if (Vp % PV::V == 0 && aligned16(dlogits) && aligned16(logits))
        CU_LAUNCH(be, xent_bwd_kernel<PV>, (unsigned)N, XENT_THREADS, 0, dlogits, logits, lse,
                  targets, dloss, V, Vp);
    else
        CU_LAUNCH(be, xent_bwd_kernel<P1>, (unsigned)N, XENT_THREADS, 0, dlogits, logits, lse,
                  targets, dloss, V, Vp);
}

void cu_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits, const int *targets,
                 int N, int V, int Vp)
{
    CU_BEGIN(be);
    if (N <= 0) return;
    if (be->act == GK_BF16) xent_fwd_run(be, losses, lse, (const bf16 *)logits, targets, N, V, Vp);
    else xent_fwd_run(be, losses, lse, (const float *)logits, targets, N, V, Vp);
}

void cu_xent_bwd(gk_backend *be, void *dlogits, const void *logits, const float *lse,
                 const int *targets, float dloss, int N, int V, int Vp)
{
    CU_BEGIN(be);
    if (N <= 0) return;
    if (be->act == GK_BF16)
        xent_bwd_run(be, (bf16 *)dlogits, (const bf16 *)logits, lse, targets, dloss, N, V, Vp);
    else xent_bwd_run(be, (float *)dlogits, (const float *)logits, lse, targets, dloss, N, V, Vp);
}
