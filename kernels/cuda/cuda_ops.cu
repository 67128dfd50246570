/* cuda_ops.cu: the CUDA backend's element-wise ops and column reductions: bias backward, GELU
 * forward (the recompute of gemm's epilogue) and backward, dropout backward, and the optimizer's
 * sum of squares, scale and AdamW. Row-wise ops (the embedding, layernorm and the residual add
 * fused with it, softmax cross-entropy) are in cuda_ops_rows.cu.
 * Every kernel is a template on one parameter P (an op_cfg: the activation type T and the pack
 * width V), so that CU_LAUNCH's macro arguments hold no comma. A pack is V consecutive elements
 * moved by 16-byte loads; V = 1 is the fallback when a row length or a pointer is not aligned.
 * Reductions are deterministic: fixed splits that depend on the shapes only, per-block partials in
 * the backend's scratch, and a second pass that sums them in a fixed order. */
#include "kernels/cuda/cuda_pack.h"

/* Packs of 16 bytes when every pointer allows it, else single elements. */
template <typename T> static inline int pack_width(bool ok) { return ok ? (int)(16 / sizeof(T)) : 1; }

/* Blocks for a grid-stride loop over `items` (enough to fill the device, no more). */
static unsigned grid_for(gk_backend *be, size_t items, unsigned threads)
{
    size_t cap = (size_t)(CU(be)->sm_count > 0 ? CU(be)->sm_count : 132) * 16;
    size_t b = (items + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b < cap ? b : cap);
}

/* ---- bias backward: column sums, partials per chunk of rows ---- */

#define COL_TX 32 /* packs of columns per block */
#define COL_TY 8  /* rows read in parallel per block */
#define COL_CHUNKS_MAX 256

/* Row chunks of a column reduction over N rows: a function of N only (fixed split). */
static int col_rows_per_chunk(int N)
{
    int chunks = (N + 31) / 32 < COL_CHUNKS_MAX ? (N + 31) / 32 : COL_CHUNKS_MAX;
    return (N + chunks - 1) / chunks;
}

/* part (chunks, C) = column sums of dout over each chunk of rows. grid (col tiles, chunks). */
template <class P>
static __global__ void bias_partial_kernel(float *part, const typename P::T *dout, int N, int C, int rows)
{
    constexpr int V = P::V;
    __shared__ float red[COL_TY][V][COL_TX];
    int tx = threadIdx.x, ty = threadIdx.y, cp = blockIdx.x * COL_TX + tx;
    int r0 = blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
    float acc[V] = {};
    if (cp < C / V)
        for (int r = r0 + ty; r < r1; r += COL_TY) {
            float d[V];
            load_f<V>(d, dout + (size_t)r * C + (size_t)cp * V);
            for (int j = 0; j < V; j++) acc[j] += d[j];
        }
    for (int j = 0; j < V; j++) red[ty][j][tx] = acc[j];
    __syncthreads();
    if (ty != 0 || cp >= C / V) return;
    for (int j = 0; j < V; j++) {
        float s = 0.0f;
        for (int y = 0; y < COL_TY; y++) s += red[y][j][tx];
        acc[j] = s;
    }
    store_f<V>(part + (size_t)blockIdx.y * C + (size_t)cp * V, acc);
}

/* dst (C) += sum over k of part[k*stride + c], k = 0..chunks-1 in order. */
static __global__ void col_final_kernel(float *dst, const float *part, int chunks, size_t stride, int C)
{
    GRID_STRIDE(c, (size_t)C)
    {
        float s = 0.0f;
        for (int k = 0; k < chunks; k++) s += part[(size_t)k * stride + c];
        dst[c] += s;
    }
}

template <typename T, int V> static void bias_bwd_run(gk_backend *be, float *dbias, const T *dout, int N, int C)
{
    typedef op_cfg<T, V> P;
    int rows = col_rows_per_chunk(N), chunks = (N + rows - 1) / rows;
    float *part = (float *)cu_scratch(be, (size_t)chunks * C * sizeof(float), "bias_bwd");
    if (!part) return;
    dim3 grid((unsigned)((C / V + COL_TX - 1) / COL_TX), (unsigned)chunks), block(COL_TX, COL_TY);
    CU_LAUNCH(be, bias_partial_kernel<P>, grid, block, 0, part, dout, N, C, rows);
    CU_LAUNCH(be, col_final_kernel, grid_for(be, (size_t)C, 256), 256, 0, dbias, part, chunks, (size_t)C, C);
}

void cu_bias_bwd(gk_backend *be, float *dbias, const void *dout, int N, int C)
{
    CU_BEGIN(be);
    if (N <= 0 || C <= 0) return;
    if (be->act == GK_BF16) {
        if (C % 8 == 0 && aligned16(dout)) bias_bwd_run<bf16, 8>(be, dbias, (const bf16 *)dout, N, C);
        else bias_bwd_run<bf16, 1>(be, dbias, (const bf16 *)dout, N, C);
    } else {
        if (C % 4 == 0 && aligned16(dout)) bias_bwd_run<float, 4>(be, dbias, (const float *)dout, N, C);
        else bias_bwd_run<float, 1>(be, dbias, (const float *)dout, N, C);
    }
}

/* ---- element-wise: GELU forward and backward, dropout backward ---- */

#define EW_THREADS 256
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

static __device__ __forceinline__ float gelu_grad(float x)
{
    float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

/* gelu_fwd: x (n) -> out (n) = gelu(x) in fp32, rounded to T (as gemm's GELU epilogue). */
template <int V, typename T> static __device__ __forceinline__ void gelu_fwd_at(T *out, const T *x, size_t i)
{
    float a[V];
    load_f<V>(a, x + i);
    for (int j = 0; j < V; j++) a[j] = gelu_tanh(a[j]);
    store_f<V>(out + i, a);
}
/* n elements: packs first, then the n % V tail one by one. */
template <class P> static __global__ void gelu_fwd_kernel(typename P::T *out, const typename P::T *x, size_t n)
{
    constexpr int V = P::V;
    GRID_STRIDE(k, n / V) gelu_fwd_at<V>(out, x, k * V);
    GRID_STRIDE(k, n % V) gelu_fwd_at<1>(out, x, n / V * V + k);
}

template <typename T> static void gelu_fwd_run(gk_backend *be, T *out, const T *x, size_t n)
{
    if (aligned16(out) && aligned16(x)) {
        typedef op_cfg<T, 16 / sizeof(T)> P;
        CU_LAUNCH(be, gelu_fwd_kernel<P>, grid_for(be, n / P::V, EW_THREADS), EW_THREADS, 0, out, x, n);
    } else {
        typedef op_cfg<T, 1> P;
        CU_LAUNCH(be, gelu_fwd_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, out, x, n);
    }
}

void cu_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C)
{
    CU_BEGIN(be);
    size_t n = (size_t)(N > 0 ? N : 0) * (size_t)(C > 0 ? C : 0);
    if (n == 0) return;
    if (be->act == GK_BF16) gelu_fwd_run<bf16>(be, (bf16 *)out, (const bf16 *)x, n);
    else gelu_fwd_run<float>(be, (float *)out, (const float *)x, n);
}

template <int V, typename T> static __device__ __forceinline__ void gelu_bwd_at(T *dinp, const T *x, const T *dout, size_t i)
{
    float a[V], d[V];
    load_f<V>(a, x + i);
    load_f<V>(d, dout + i);
    for (int j = 0; j < V; j++) d[j] *= gelu_grad(a[j]);
    store_f<V>(dinp + i, d);
}
/* n elements: packs first, then the n % V tail one by one. */
template <class P> static __global__ void gelu_bwd_kernel(typename P::T *dinp, const typename P::T *x, const typename P::T *dout, size_t n)
{
    constexpr int V = P::V;
    GRID_STRIDE(k, n / V) gelu_bwd_at<V>(dinp, x, dout, k * V);
    GRID_STRIDE(k, n % V) gelu_bwd_at<1>(dinp, x, dout, n / V * V + k);
}

template <typename T> static void gelu_bwd_run(gk_backend *be, T *dinp, const T *x, const T *dout, size_t n)
{
    if (aligned16(dinp) && aligned16(x) && aligned16(dout)) {
        typedef op_cfg<T, 16 / sizeof(T)> P;
        CU_LAUNCH(be, gelu_bwd_kernel<P>, grid_for(be, n / P::V, EW_THREADS), EW_THREADS, 0, dinp, x, dout, n);
    } else {
        typedef op_cfg<T, 1> P;
        CU_LAUNCH(be, gelu_bwd_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, dinp, x, dout, n);
    }
}

void cu_gelu_bwd(gk_backend *be, void *dinp, const void *x, const void *dout, int N, int C)
{
    CU_BEGIN(be);
    size_t n = (size_t)(N > 0 ? N : 0) * (size_t)(C > 0 ? C : 0);
    if (n == 0) return;
    if (be->act == GK_BF16) gelu_bwd_run<bf16>(be, (bf16 *)dinp, (const bf16 *)x, (const bf16 *)dout, n);
    else gelu_bwd_run<float>(be, (float *)dinp, (const float *)x, (const float *)dout, n);
}

template <int V, typename T> static __device__ __forceinline__ void dropout_at(T *dinp, const T *dout, size_t i, float p, uint64_t key)
{
    float d[V];
    load_f<V>(d, dout + i);
    for (int j = 0; j < V; j++) d[j] *= gk_rng_dropout(key, i + j, p);
    store_f<V>(dinp + i, d);
}
template <class P> static __global__ void dropout_bwd_kernel(typename P::T *dinp, const typename P::T *dout, size_t n, float p, uint64_t key)
{
    constexpr int V = P::V;
    GRID_STRIDE(k, n / V) dropout_at<V>(dinp, dout, k * V, p, key);
    GRID_STRIDE(k, n % V) dropout_at<1>(dinp, dout, n / V * V + k, p, key);
}

template <typename T> static void dropout_bwd_run(gk_backend *be, T *dinp, const T *dout, size_t n, float p, uint64_t key)
{
    if (aligned16(dinp) && aligned16(dout)) {
        typedef op_cfg<T, 16 / sizeof(T)> P;
        CU_LAUNCH(be, dropout_bwd_kernel<P>, grid_for(be, n / P::V, EW_THREADS), EW_THREADS, 0, dinp, dout, n, p, key);
    } else {
        typedef op_cfg<T, 1> P;
        CU_LAUNCH(be, dropout_bwd_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, dinp, dout, n, p, key);
    }
}

void cu_dropout_bwd(gk_backend *be, void *dinp, const void *dout, size_t n, float p, uint64_t key)
{
    CU_BEGIN(be);
    if (n == 0) return;
    size_t bytes = n * gk_elt_size(be->act);
    if (!(p > 0.0f)) { /* no dropout: a copy, or nothing in place */
        if (dinp != dout) CU_CHECK(be, cudaMemcpyAsync(dinp, dout, bytes, cudaMemcpyDeviceToDevice, CU(be)->stream));
        return;
    }
    if (be->act == GK_BF16) dropout_bwd_run<bf16>(be, (bf16 *)dinp, (const bf16 *)dout, n, p, key);
    else dropout_bwd_run<float>(be, (float *)dinp, (const float *)dout, n, p, key);
}

/* ---- optimizer: sum of squares (double), scale, AdamW ---- */

#define SUMSQ_BLOCKS 512 /* at most; fewer for small n (a function of n only: a fixed split) */
#define SUMSQ_THREADS 256
#define SUMSQ_QUADS 8 /* quads per thread before another block is worth it */

static unsigned sumsq_blocks(size_t n)
{
    size_t b = (n / 4 + (size_t)SUMSQ_THREADS * SUMSQ_QUADS - 1) / ((size_t)SUMSQ_THREADS * SUMSQ_QUADS);
    return (unsigned)(b < 1 ? 1 : b > SUMSQ_BLOCKS ? SUMSQ_BLOCKS : b);
}

/* Quad k (elements 4k..4k+3, fewer at the end) is summed by thread k % (blocks*threads) whatever
 * the alignment, so aligned and unaligned calls give the same bits. */
template <int ALIGNED> static __global__ void sumsq_partial_kernel(double *part, const float *x, size_t n)
{
    __shared__ double red[SUMSQ_THREADS];
    double s = 0.0;
    GRID_STRIDE(k, n / 4)
    {
        float f[4];
        if (ALIGNED) load_f<4>(f, x + 4 * k);
        else
            for (int j = 0; j < 4; j++) f[j] = x[4 * k + j];
        for (int j = 0; j < 4; j++) s += (double)f[j] * f[j];
    }
    size_t tail = n / 4 * 4;
    if ((size_t)blockIdx.x * blockDim.x + threadIdx.x == (tail / 4) % ((size_t)gridDim.x * blockDim.x))
        for (size_t i = tail; i < n; i++) s += (double)x[i] * x[i];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int h = SUMSQ_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = red[0];
}

/* part[SUMSQ_BLOCKS] = the sum of part[0..parts), in a fixed tree; one block. */
static __global__ void sumsq_final_kernel(double *part, int parts)
{
    __shared__ double red[SUMSQ_THREADS];
    double s = 0.0;
    for (int i = threadIdx.x; i < parts; i += SUMSQ_THREADS) s += part[i];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int h = SUMSQ_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[SUMSQ_BLOCKS] = red[0];
}

void cu_sumsq(gk_backend *be, double *host_out, const float *x, size_t n)
{
    CU_BEGIN(be);
    double *part = (double *)cu_scratch(be, (SUMSQ_BLOCKS + 1) * sizeof(double), "sumsq");
    if (!part) return;
    unsigned blocks = sumsq_blocks(n);
    if (aligned16(x)) CU_LAUNCH(be, sumsq_partial_kernel<1>, blocks, SUMSQ_THREADS, 0, part, x, n);
    else CU_LAUNCH(be, sumsq_partial_kernel<0>, blocks, SUMSQ_THREADS, 0, part, x, n);
    CU_LAUNCH(be, sumsq_final_kernel, 1, SUMSQ_THREADS, 0, part, (int)blocks);
    double sum;
    if (CU_CHECK(be, cudaMemcpyAsync(&sum, part + SUMSQ_BLOCKS, sizeof sum, cudaMemcpyDeviceToHost, CU(be)->stream))) return;
    if (CU_CHECK(be, cudaStreamSynchronize(CU(be)->stream))) return;
    if (!be->err.code) *host_out = sum;
}

template <int V> static __device__ __forceinline__ void scale_at(float *x, float s, size_t i)
{
    float f[V];
    load_f<V>(f, x + i);
    for (int j = 0; j < V; j++) f[j] *= s;
    store_f<V>(x + i, f);
}
template <int V> static __global__ void scale_kernel(float *x, float s, size_t n)
{
    GRID_STRIDE(k, n / V) scale_at<V>(x, s, k * V);
    GRID_STRIDE(k, n % V) scale_at<1>(x, s, n / V * V + k);
}

void cu_scale(gk_backend *be, float *x, float s, size_t n)
{
    CU_BEGIN(be);
    if (n == 0) return;
    if (aligned16(x)) CU_LAUNCH(be, scale_kernel<4>, grid_for(be, n / 4, EW_THREADS), EW_THREADS, 0, x, s, n);
    else CU_LAUNCH(be, scale_kernel<1>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, x, s, n);
}

/* AdamW's per-call constants, computed on the host in torch's order (see ref.c). */
typedef struct adamw_k {
    float beta1, beta2, eps, decay, step_size, bc2_sqrt, grad_scale;
} adamw_k;

/* Elements i..i+V-1; copy (type E) written when not NULL. */
template <int V, typename E>
static __device__ __forceinline__ void adamw_at(float *param, const float *grad, float *m, float *v, E *copy, const adamw_k &k, size_t i)
{
    float p[V], g[V], mm[V], vv[V];
    load_f<V>(p, param + i);
    load_f<V>(g, grad + i);
    load_f<V>(mm, m + i);
    load_f<V>(vv, v + i);
    for (int j = 0; j < V; j++) {
        float gj = g[j] * k.grad_scale;
        p[j] *= k.decay;
        mm[j] = mm[j] * k.beta1 + (1.0f - k.beta1) * gj;
        vv[j] = vv[j] * k.beta2 + (1.0f - k.beta2) * (gj * gj);
        float denom = sqrtf(vv[j]) / k.bc2_sqrt + k.eps;
        p[j] = p[j] + -k.step_size * (mm[j] / denom);
    }
    store_f<V>(param + i, p);
    store_f<V>(m + i, mm);
    store_f<V>(v + i, vv);
    if (copy) store_f<V>(copy + i, p);
}
/* P::T is the copy's type. */
template <class P>
static __global__ void adamw_kernel(float *param, const float *grad, float *m, float *v, typename P::T *copy, size_t n, adamw_k k)
{
    constexpr int V = P::V;
    GRID_STRIDE(i, n / V) adamw_at<V>(param, grad, m, v, copy, k, i * V);
    GRID_STRIDE(i, n % V) adamw_at<1>(param, grad, m, v, copy, k, n / V * V + i);
}

template <typename E>
static void adamw_run(gk_backend *be, float *param, const float *grad, float *m, float *v, E *copy, size_t n, const adamw_k &k)
{
    /* 4 floats per pack: 16 bytes of each fp32 array, 4 copy elements (8 bytes for bf16) */
    bool ok = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v) && ((uintptr_t)copy & (4 * sizeof(E) - 1)) == 0;
    if (ok) {
        typedef op_cfg<E, 4> P;
        CU_LAUNCH(be, adamw_kernel<P>, grid_for(be, n / 4, EW_THREADS), EW_THREADS, 0, param, grad, m, v, copy, n, k);
    } else {
        typedef op_cfg<E, 1> P;
        CU_LAUNCH(be, adamw_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, param, grad, m, v, copy, n, k);
    }
}

void cu_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2,
              float eps, float wd, int t, float grad_scale, void *copy, gk_elt tcopy)
{
    CU_BEGIN(be);
    if (copy && tcopy != GK_F32 && tcopy != GK_BF16) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda adamw: copy type %d", (int)tcopy);
        return;
    }
    if (n == 0) return;
    adamw_k k;
    k.beta1 = beta1, k.beta2 = beta2, k.eps = eps, k.grad_scale = grad_scale;
    k.step_size = (float)(lr / (1.0 - pow(beta1, t)));
    k.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, t));
    k.decay = (float)(1.0 - (double)lr * wd);
    if (copy && tcopy == GK_BF16) adamw_run<bf16>(be, param, grad, m, v, (bf16 *)copy, n, k);
    else adamw_run<float>(be, param, grad, m, v, (float *)copy, n, k);
}
