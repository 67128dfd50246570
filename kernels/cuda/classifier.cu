/* classifier.cu: the CUDA backend's softmax cross-entropy over the vocabulary, forward
 * (each row's loss and log-sum-exp) and backward (dlogits from the saved log-sum-exp): one block
 * per row, online max and sum in fp32, templates on an op_cfg P (activation type T, pack width
 * V; see cuda_pack.h), packs of 16-byte loads, V = 1 when a row or pointer is not aligned. */
#include "kernels/cuda/cuda_pack.h"

/* ---- softmax + cross-entropy: a block per row ---- */

#define XENT_THREADS 512

/* (m, s) <- the log-sum-exp state of both (max, sum of exp(x - max)). */
static __device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2)
{
    float M = fmaxf(m, m2);
    if (M == -INFINITY) return;
    s = s * expf(m - M) + s2 * expf(m2 - M);
    m = M;
}

/* Packs cover the first V columns (the last one partly: its columns >= V are skipped). */
template <class P>
static __global__ void xent_fwd_kernel(float *losses, float *lse, const typename P::T *logits, const int *targets, int Vn, int Vp)
{
    constexpr int V = P::V;
    __shared__ float s_m[XENT_THREADS / 32], s_s[XENT_THREADS / 32];
    const typename P::T *l = logits + (size_t)blockIdx.x * Vp;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
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
    for (int o = 16; o > 0; o >>= 1) lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) s_m[warp] = m, s_s[warp] = s;
    __syncthreads();
    if (warp != 0) return;
    m = lane < warps ? s_m[lane] : -INFINITY;
    s = lane < warps ? s_s[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane != 0) return;
    float z = m + logf(s);
    int t = targets[blockIdx.x];
    lse[blockIdx.x] = z;
    losses[blockIdx.x] = t >= 0 ? z - cu_f(l[t]) : 0.0f;
}

template <class P>
static __global__ void xent_bwd_kernel(typename P::T *dlogits, const typename P::T *logits, const float *lse, const int *targets, float dloss,
                                int Vn, int Vp)
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
static void xent_fwd_run(gk_backend *be, float *losses, float *lse, const T *logits, const int *targets, int N, int V, int Vp)
{
    typedef op_cfg<T, 16 / sizeof(T)> PV;
    typedef op_cfg<T, 1> P1;
    if (Vp % PV::V == 0 && aligned16(logits))
        CU_LAUNCH(be, xent_fwd_kernel<PV>, (unsigned)N, XENT_THREADS, 0, losses, lse, logits, targets, V, Vp);
    else CU_LAUNCH(be, xent_fwd_kernel<P1>, (unsigned)N, XENT_THREADS, 0, losses, lse, logits, targets, V, Vp);
}

template <typename T>
static void xent_bwd_run(gk_backend *be, T *dlogits, const T *logits, const float *lse, const int *targets, float dloss, int N, int V,
                         int Vp)
{
    typedef op_cfg<T, 16 / sizeof(T)> PV;
    typedef op_cfg<T, 1> P1;
    if (Vp % PV::V == 0 && aligned16(dlogits) && aligned16(logits))
        CU_LAUNCH(be, xent_bwd_kernel<PV>, (unsigned)N, XENT_THREADS, 0, dlogits, logits, lse, targets, dloss, V, Vp);
    else CU_LAUNCH(be, xent_bwd_kernel<P1>, (unsigned)N, XENT_THREADS, 0, dlogits, logits, lse, targets, dloss, V, Vp);
}

void cu_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits, const int *targets, int N, int V, int Vp)
{
    CU_BEGIN(be);
    if (N <= 0) return;
    if (be->act == GK_BF16) xent_fwd_run(be, losses, lse, (const bf16 *)logits, targets, N, V, Vp);
    else xent_fwd_run(be, losses, lse, (const float *)logits, targets, N, V, Vp);
}

void cu_xent_bwd(gk_backend *be, void *dlogits, const void *logits, const float *lse, const int *targets, float dloss, int N, int V, int Vp)
{
    CU_BEGIN(be);
    if (N <= 0) return;
    if (be->act == GK_BF16) xent_bwd_run(be, (bf16 *)dlogits, (const bf16 *)logits, lse, targets, dloss, N, V, Vp);
    else xent_bwd_run(be, (float *)dlogits, (const float *)logits, lse, targets, dloss, N, V, Vp);
}
