/* elementwise.cu: the CUDA backend's element-wise ops and column reductions: bias backward, GELU
 * forward (the recompute of gemm's epilogue) and backward, dropout backward. The residual add is
 * fused with the layernorm after it (layernorm.cu).
 * Every kernel is a template on one parameter P (an op_cfg: the activation type T and the pack
 * width V), so that CU_LAUNCH's macro arguments hold no comma. A pack is V consecutive elements
 * moved by 16-byte loads; V = 1 is the fallback when a row length or a pointer is not aligned.
 * Reductions are deterministic: fixed splits that depend on the shapes only, per-block partials in
 * the backend's scratch, and a second pass that sums them in a fixed order. */
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

/* ---- bias backward: column sums in one launch, partials per chunk of rows ---- */

#define COL_TX 32 /* packs of columns per block */
#define COL_TY 8  /* rows read in parallel per block */
#define COL_UNROLL 4 /* rows a thread loads before it adds them */

/* Row chunks of a column reduction over N rows: a function of N only (fixed split). */
static int col_rows_per_chunk(int N)
{
    int chunks = (N + 31) / 32 < CU_COL_CHUNKS ? (N + 31) / 32 : CU_COL_CHUNKS;
    return (N + chunks - 1) / chunks;
}

/* acc[0..V) += the column sums of pack cp over rows r, r + COL_TY, ... < r1, in that order;
 * COL_UNROLL rows loaded before they are added, so that their loads are in flight together. */
template <int V, typename T>
static __device__ __forceinline__ void col_rows(float *acc, const T *dout, int C, int cp, int r,
                                                int r1)
{
    for (; r + (COL_UNROLL - 1) * COL_TY < r1; r += COL_UNROLL * COL_TY) {
        float d[COL_UNROLL][V];
        GK_UNROLL
        for (int u = 0; u < COL_UNROLL; u++)
            load_f<V>(d[u], dout + (size_t)(r + u * COL_TY) * C + (size_t)cp * V);
        GK_UNROLL
        for (int u = 0; u < COL_UNROLL; u++)
            for (int j = 0; j < V; j++) acc[j] += d[u][j];
    }
    for (; r < r1; r += COL_TY) {
        float d[V];
        load_f<V>(d, dout + (size_t)r * C + (size_t)cp * V);
        for (int j = 0; j < V; j++) acc[j] += d[j];
    }
}

/* f[0..V) = p[0..V) read past L1 (written by other blocks), in 16-byte loads where V allows. */
template <int V> static __device__ __forceinline__ void load_cg(float *f, const float *p)
{
    if constexpr (V % 4 == 0) {
        for (int k = 0; k < V; k += 4) {
            float4 q = __ldcg(reinterpret_cast<const float4 *>(p + k));
            f[k] = q.x, f[k + 1] = q.y, f[k + 2] = q.z, f[k + 3] = q.w;
        }
    } else {
        for (int k = 0; k < V; k++) f[k] = __ldcg(p + k);
    }
}

/* Thread (tx, ty) of a block: the sum over y of red[y][0..V)[tx], y in order, into s (ty == 0). */
template <int V>
static __device__ __forceinline__ void red_rows(float *s, float (*red)[V][COL_TX], int tx)
{
    for (int j = 0; j < V; j++) s[j] = strided_sum(&red[0][j][tx], COL_TY, V * COL_TX);
}

/* grid (column tiles, chunks). Block (x, y) writes part (chunks, C) row y = the column sums of
 * dout over chunk y of the rows, for tile x's columns. The block of a tile that arrives last
 * (count[x], back to 0 after it) sums the chunks for the tile: thread row ty takes chunks ty,
 * ty + COL_TY, ... in order, then the rows are added in order and the result to dbias. A fixed
 * order whichever block is last: the same bits every time. */
template <class P>
static __global__ void bias_bwd_kernel(float *dbias, float *part, unsigned *count,
                                       const typename P::T *dout, int N, int C, int rows)
{
    constexpr int V = P::V;
    __shared__ float red[COL_TY][V][COL_TX];
    __shared__ int last;
    int tx = threadIdx.x, ty = threadIdx.y, cp = blockIdx.x * COL_TX + tx;
    int r0 = blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
    float acc[V] = {};
    if (cp < C / V) col_rows<V>(acc, dout, C, cp, r0 + ty, r1);
    for (int j = 0; j < V; j++) red[ty][j][tx] = acc[j];
    __syncthreads();
    if (ty == 0 && cp < C / V) {
        red_rows<V>(acc, red, tx);
        store_f<V>(part + (size_t)blockIdx.y * C + (size_t)cp * V, acc);
    }
    __threadfence(); /* the partials are visible device-wide before the count says so */
    __syncthreads();
    if (tx == 0 && ty == 0) last = atomicAdd(&count[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int j = 0; j < V; j++) acc[j] = 0.0f;
    if (cp < C / V)
        for (unsigned k = ty; k < gridDim.y; k += COL_TY) {
            float d[V];
            load_cg<V>(d, part + (size_t)k * C + (size_t)cp * V);
            for (int j = 0; j < V; j++) acc[j] += d[j];
        }
    for (int j = 0; j < V; j++) red[ty][j][tx] = acc[j]; /* the barriers above end the first use */
    __syncthreads();
    if (ty == 0 && cp < C / V) {
        red_rows<V>(acc, red, tx);
        for (int j = 0; j < V; j++) dbias[(size_t)cp * V + j] += acc[j];
    }
    if (tx == 0 && ty == 0) count[blockIdx.x] = 0;
}

template <typename T, int V>
static void bias_bwd_run(gk_backend *be, float *dbias, const T *dout, int N, int C)
{
    typedef op_cfg<T, V> P;
    int rows = col_rows_per_chunk(N), chunks = (N + rows - 1) / rows;
    unsigned tiles = (unsigned)((C / V + COL_TX - 1) / COL_TX);
    float *part = (float *)cu_scratch(be, (size_t)chunks * C * sizeof(float), "bias_bwd");
    unsigned *count = part ? cu_col_counters(be, tiles) : NULL;
    if (!count) return;
    dim3 grid(tiles, (unsigned)chunks), block(COL_TX, COL_TY);
    CU_LAUNCH(be, bias_bwd_kernel<P>, grid, block, 0, dbias, part, count, dout, N, C, rows);
}

/* At most min(rows, CU_COL_CHUNKS) chunks' fp32 partials of cols columns (bias_bwd_run's). */
size_t cu_bias_bwd_scratch(size_t rows, size_t cols)
{
    size_t chunks = rows < CU_COL_CHUNKS ? rows : CU_COL_CHUNKS;
    return chunks * cols * sizeof(float);
}

void cu_bias_bwd(gk_backend *be, float *dbias, const void *dout, int N, int C)
{
    CU_BEGIN(be);
    if (N <= 0 || C <= 0) return;
    if (be->act == GK_BF16) {
        if (C % 8 == 0 && aligned16(dout))
            bias_bwd_run<bf16, 8>(be, dbias, (const bf16 *)dout, N, C);
        else bias_bwd_run<bf16, 1>(be, dbias, (const bf16 *)dout, N, C);
    } else {
        if (C % 4 == 0 && aligned16(dout))
            bias_bwd_run<float, 4>(be, dbias, (const float *)dout, N, C);
        else bias_bwd_run<float, 1>(be, dbias, (const float *)dout, N, C);
    }
}

/* ---- element-wise: GELU forward and backward, dropout backward ---- */

#define EW_THREADS 256
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

static __device__ __forceinline__ float gelu_grad(float x)
{
    float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) +
           0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

/* gelu_fwd: x (n) -> out (n) = gelu(x) in fp32, rounded to T (as gemm's GELU epilogue). */
template <int V, typename T>
static __device__ __forceinline__ void gelu_fwd_at(T *out, const T *x, size_t i)
{
    float a[V];
    load_f<V>(a, x + i);
    for (int j = 0; j < V; j++) a[j] = gelu_tanh(a[j]);
    store_f<V>(out + i, a);
}
/* n elements: packs first, then the n % V tail one by one. */
template <class P>
static __global__ void gelu_fwd_kernel(typename P::T *out, const typename P::T *x, size_t n)
{
    constexpr int V = P::V;
    GRID_STRIDE(k, n / V) gelu_fwd_at<V>(out, x, k * V);
    GRID_STRIDE(k, n % V) gelu_fwd_at<1>(out, x, n / V * V + k);
}

template <typename T> static void gelu_fwd_run(gk_backend *be, T *out, const T *x, size_t n)
{
    if (aligned16(out) && aligned16(x)) {
        typedef op_cfg<T, 16 / sizeof(T)> P;
        CU_LAUNCH(be, gelu_fwd_kernel<P>, grid_for(be, n / P::V, EW_THREADS), EW_THREADS, 0, out, x,
                  n);
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

template <int V, typename T>
static __device__ __forceinline__ void gelu_bwd_at(T *dinp, const T *x, const T *dout, size_t i)
{
    float a[V], d[V];
    load_f<V>(a, x + i);
    load_f<V>(d, dout + i);
    for (int j = 0; j < V; j++) d[j] *= gelu_grad(a[j]);
    store_f<V>(dinp + i, d);
}
/* n elements: packs first, then the n % V tail one by one. */
template <class P>
static __global__ void gelu_bwd_kernel(typename P::T *dinp, const typename P::T *x,
                                       const typename P::T *dout, size_t n)
{
    constexpr int V = P::V;
    GRID_STRIDE(k, n / V) gelu_bwd_at<V>(dinp, x, dout, k * V);
    GRID_STRIDE(k, n % V) gelu_bwd_at<1>(dinp, x, dout, n / V * V + k);
}

template <typename T>
static void gelu_bwd_run(gk_backend *be, T *dinp, const T *x, const T *dout, size_t n)
{
    if (aligned16(dinp) && aligned16(x) && aligned16(dout)) {
        typedef op_cfg<T, 16 / sizeof(T)> P;
        CU_LAUNCH(be, gelu_bwd_kernel<P>, grid_for(be, n / P::V, EW_THREADS), EW_THREADS, 0, dinp,
                  x, dout, n);
    } else {
        typedef op_cfg<T, 1> P;
        CU_LAUNCH(be, gelu_bwd_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, dinp, x, dout,
                  n);
    }
}

void cu_gelu_bwd(gk_backend *be, void *dinp, const void *x, const void *dout, int N, int C)
{
    CU_BEGIN(be);
    size_t n = (size_t)(N > 0 ? N : 0) * (size_t)(C > 0 ? C : 0);
    if (n == 0) return;
    if (be->act == GK_BF16)
        gelu_bwd_run<bf16>(be, (bf16 *)dinp, (const bf16 *)x, (const bf16 *)dout, n);
    else gelu_bwd_run<float>(be, (float *)dinp, (const float *)x, (const float *)dout, n);
}

template <int V, typename T>
static __device__ __forceinline__ void dropout_at(T *dinp, const T *dout, size_t i, float p,
                                                  uint64_t key)
{
    float d[V];
    load_f<V>(d, dout + i);
    for (int j = 0; j < V; j++) d[j] *= gk_rng_dropout(key, i + j, p);
    store_f<V>(dinp + i, d);
}
template <class P>
static __global__ void dropout_bwd_kernel(typename P::T *dinp, const typename P::T *dout, size_t n,
                                          float p, uint64_t key)
{
    constexpr int V = P::V;
    GRID_STRIDE(k, n / V) dropout_at<V>(dinp, dout, k * V, p, key);
    GRID_STRIDE(k, n % V) dropout_at<1>(dinp, dout, n / V * V + k, p, key);
}

template <typename T>
static void dropout_bwd_run(gk_backend *be, T *dinp, const T *dout, size_t n, float p, uint64_t key)
{
    if (aligned16(dinp) && aligned16(dout)) {
        typedef op_cfg<T, 16 / sizeof(T)> P;
        CU_LAUNCH(be, dropout_bwd_kernel<P>, grid_for(be, n / P::V, EW_THREADS), EW_THREADS, 0,
                  dinp, dout, n, p, key);
    } else {
        typedef op_cfg<T, 1> P;
        CU_LAUNCH(be, dropout_bwd_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, dinp, dout,
                  n, p, key);
    }
}

void cu_dropout_bwd(gk_backend *be, void *dinp, const void *dout, size_t n, float p, uint64_t key)
{
    CU_BEGIN(be);
    if (n == 0) return;
    size_t bytes = n * gk_elt_size(be->act);
    if (!(p > 0.0f)) { /* no dropout: a copy, or nothing in place */
        if (dinp != dout)
            CU_CHECK(be,
                     cudaMemcpyAsync(dinp, dout, bytes, cudaMemcpyDeviceToDevice, CU(be)->stream));
        return;
    }
    if (be->act == GK_BF16) dropout_bwd_run<bf16>(be, (bf16 *)dinp, (const bf16 *)dout, n, p, key);
    else dropout_bwd_run<float>(be, (float *)dinp, (const float *)dout, n, p, key);
}
