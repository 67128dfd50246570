/* attention.cu: causal self-attention on the CUDA backend: the ops (cu_attention_fwd, _bwd,
 * _fwd_at, cu_attention_scratch), the choice between the paths, the fused paths' D =
 * rowsum(dO * O), and the plain path.
 * The fused kernels (bf16 on tensor cores) live in attention_flash.cu and attention_fa2*.cu, what
 * they share with this file in attention.h; the plain path here serves fp32 activations, head
 * sizes flash does not take, the KV-cache decode, and is the reference the flash kernels are
 * tested against. The backend's attention setting (cu_ctx's
 * attention, gk_attention in backend.h) picks: cudnn first offers the call to cuDNN
 * (attention_cudnn.cpp, which hands back a shape it has no plan for), plain forces the plain
 * path, flash takes the wmma flash kernels (attention_flash.cu) wherever they apply (bf16, head
 * sizes 16, 32, 64, 128, 16-byte aligned buffers), and auto, fa2 (and cudnn's hand-backs) take
 * the FlashAttention-2 kernels where flash applies: attention_fa2.cu's forward (mma.sync, the
 * softmax in registers) and attention_fa2_bwd.cu's backward (faster than flash's:
 * tests/bench/gpu-results.md).
 * Plain path: one block per (batch, head, query row) computes that row's scores into shared
 * memory (one warp per key), its softmax, and the weighted sum of values; the backward runs one
 * block per query row (D = sum P dP and dQ) then one block per key row (dK, dV), each output
 * summed in a fixed order by one block: deterministic, no atomics, no (T,T) buffer.
 * KV-cache decode: the same row kernel, or, for few new rows over a long cache, a split over
 * chunks of keys (partial max, sum and weighted values per chunk in scratch, merged in chunk
 * order by the row's last block to finish, in the same launch) so that a single row runs on
 * many blocks. */
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/rng.h"

#define ROW_THREADS 128
#define ROW_WARPS (ROW_THREADS / 32)

/* ---- block-wide helpers (every thread of the block must call them) ---- */

/* Dot product of a (shared, fp32) with x (n elements of E) by one warp; every lane gets it. */
template <typename E>
__device__ __forceinline__ float warp_dot(const float *a, const E *x, int n)
{
    float s = 0.0f;
    for (int i = threadIdx.x % 32; i < n; i += 32) s += a[i] * cu_f(x[i]);
    return warp_sum(s);
}

/* out[i] = sum_u w[u] * x_u[i] for i < hs, u < n (x_u = x + u * ld), summed by the block in a
 * fixed order: G = ROW_THREADS / hs groups each take every G-th u, then thread i adds the G
 * partials. part holds max(hs, ROW_THREADS) floats. Result to out (stride 1, type O). */
template <typename O, typename E>
__device__ void block_comb(O *out, const float *w, const E *x, size_t ld, int n, int hs,
                           float *part)
{
    int G = ROW_THREADS / hs > 1 ? ROW_THREADS / hs : 1;
    for (int idx = threadIdx.x; idx < G * hs; idx += ROW_THREADS) {
        int g = idx / hs, i = idx % hs;
        float s = 0.0f;
        for (int u = g; u < n; u += G) s += w[u] * cu_f(x[(size_t)u * ld + i]);
        part[idx] = s;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hs; i += ROW_THREADS) {
        float s = part[i];
        for (int g = 1; g < G; g++) s += part[g * hs + i];
        out[i] = cu_to<O>(s);
    }
    __syncthreads(); /* part is reused by the caller */
}

static __host__ __device__ size_t row_part_floats(int hs)
{
    return (size_t)(hs > ROW_THREADS ? hs : ROW_THREADS);
}

/* ---- forward (also the KV-cache decode): one block per (query row i, head, batch) ---- */

/* The first new row of a KV-cache op: *t0p (0 when NULL), clamped so that rows t0..t0+n-1 lie
 * in a cache of Tc (the host cannot check a value that the device reads). */
__device__ __forceinline__ int cache_t0(const int *t0p, int Tc, int n)
{
    int t0 = t0p ? *t0p : 0;
    return t0 > Tc - n ? Tc - n : t0 < 0 ? 0 : t0;
}

/* qkv (B,Tc,3C); query rows t0 + i for i < n (t0 = cache_t0) attend to rows 0..t0+i -> out
 * (B,n,C), lse ((b*NH + h)*Tc + t) when not NULL (then t0 = 0, n = Tc). Dropout p on the
 * probabilities. Shared: q (hs), scores (Tc), part, red. */
template <typename E>
__global__ void __launch_bounds__(ROW_THREADS)
    attn_rows_fwd(E *out, float *lse, const E *qkv, int Tc, const int *t0p, int n, int C, int NH,
                  float p, uint64_t key)
{
    GK_DYN_SMEM(float, sm);
    int i = n - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z; /* long rows first */
    int hs = C / NH, t = cache_t0(t0p, Tc, n) + i, nk = t + 1, warp = threadIdx.x / 32;
    size_t ld = 3 * (size_t)C;
    const E *qb = qkv + (size_t)b * Tc * ld + (size_t)h * hs;
    float *q = sm, *s = q + hs, *part = s + Tc, *red = part + row_part_floats(hs);
    float scale = 1.0f / sqrtf((float)hs);

    for (int k = threadIdx.x; k < hs; k += ROW_THREADS) q[k] = cu_f(qb[(size_t)t * ld + k]);
    __syncthreads();
    float mx = -INFINITY;
    for (int u = warp; u < nk; u += ROW_WARPS) {
        float d = warp_dot(q, qb + (size_t)u * ld + C, hs) * scale;
        if (threadIdx.x % 32 == 0) s[u] = d;
        mx = fmaxf(mx, d);
    }
    mx = block_max<ROW_WARPS>(mx, red);
    float sum = 0.0f;
    for (int u = threadIdx.x; u < nk; u += ROW_THREADS) {
        float e = expf(s[u] - mx);
        s[u] = e;
        sum += e;
    }
    sum = block_sum<ROW_WARPS>(sum, red); /* its barriers also publish s */
    size_t row = ((size_t)b * NH + h) * Tc + t;
    if (lse && threadIdx.x == 0) lse[row] = mx + logf(sum);
    float inv = 1.0f / sum;
    for (int u = threadIdx.x; u < nk; u += ROW_THREADS)
        s[u] *= p > 0.0f ? inv * gk_rng_dropout(key, row * Tc + u, p) : inv;
    __syncthreads();
    block_comb(out + ((size_t)b * n + i) * C + (size_t)h * hs, s, qb + 2 * C, ld, nk, hs, part);
}

static size_t rows_fwd_smem(int hs, int nkeys)
{
    return sizeof(float) * ((size_t)hs + nkeys + row_part_floats(hs) + ROW_WARPS);
}

/* Launches attn_rows_fwd for activations of type E; 0 or the error recorded. */
template <typename E>
static void rows_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int Tc,
                     const int *t0, int n, int C, int NH, float p, uint64_t key)
{
    size_t smem = rows_fwd_smem(C / NH, Tc);
    if (smem > 48 * 1024) {
        if (smem > CU(be)->smem_optin) {
            GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda attention: %d keys do not fit in shared memory",
                            Tc);
            return;
        }
        if (CU_CHECK(be, cudaFuncSetAttribute(attn_rows_fwd<E>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)smem)))
            return;
    }
    dim3 grid((unsigned)n, (unsigned)NH, (unsigned)B);
    CU_LAUNCH(be, attn_rows_fwd<E>, grid, ROW_THREADS, smem, (E *)out, lse, (const E *)qkv, Tc,
              t0, n, C, NH, p, key);
}

/* ---- KV-cache decode split over the keys (few new rows over a long cache) ---- */

#define DEC_KEYS 64 /* keys per block */

/* Row bi, head h's output from the partials of its first `live` chunks (pp, read past L1: other
 * blocks wrote them), merged in chunk order. */
template <typename E>
__device__ void decode_merge(E *out, const float *pp, int live, int hs)
{
    float M = -INFINITY, L = 0.0f;
    for (int c = 0; c < live; c++) M = fmaxf(M, __ldcg(pp + c * (hs + 2)));
    for (int c = 0; c < live; c++)
        L += __ldcg(pp + c * (hs + 2) + 1) * expf(__ldcg(pp + c * (hs + 2)) - M);
    for (int k = threadIdx.x; k < hs; k += blockDim.x) {
        float o = 0.0f;
        for (int c = 0; c < live; c++)
            o += __ldcg(pp + c * (hs + 2) + 2 + k) * expf(__ldcg(pp + c * (hs + 2)) - M);
        out[k] = cu_to<E>(o / L);
    }
}

/* grid (key chunks, NH, B*n): the softmax of query row t0 + i (t0 = cache_t0) over the keys of
 * chunk c alone:
 * part[((bi*NH + h)*nch + c)*(hs+2) ...] = max m, sum l of exp(s - m), o[hs] = sum exp(s - m) v
 * (bi = b*n + i), then the last of the row's live chunks (those holding keys up to t; the others
 * leave at once) to arrive at count[bi*NH + h] merges them into out (decode_merge): one launch.
 * Shared as attn_rows_fwd's, DEC_KEYS scores. fresh (B,1,3C), with n = 1: the new row, which the
 * block whose chunk holds it stores into the cache (head h's q, k and v) before reading it, while
 * every block takes q from fresh: no other block reads that row's k and v, so the store needs no
 * launch of its own. */
template <typename E>
__global__ void __launch_bounds__(ROW_THREADS)
    attn_decode(E *out, float *part, unsigned *count, E *qkv, const E *fresh, int Tc,
                const int *t0p, int n, int C, int NH, int nch)
{
    GK_DYN_SMEM(float, sm);
    __shared__ unsigned last;
    int c = blockIdx.x, h = blockIdx.y, bi = blockIdx.z, b = bi / n;
    int t = cache_t0(t0p, Tc, n) + bi % n;
    int hs = C / NH, warp = threadIdx.x / 32, u0 = c * DEC_KEYS;
    int nk = t + 1 - u0 < DEC_KEYS ? t + 1 - u0 : DEC_KEYS;
    if (nk <= 0) return; /* the whole block: past this row's last key */
    size_t ld = 3 * (size_t)C;
    const E *qb = qkv + (size_t)b * Tc * ld + (size_t)h * hs;
    const E *qrow = fresh ? fresh + (size_t)b * ld + (size_t)h * hs : qb + (size_t)t * ld;
    float *pp = part + ((size_t)bi * NH + h) * nch * (hs + 2), *dst = pp + (size_t)c * (hs + 2);
    float *q = sm, *s = q + hs, *cpart = s + DEC_KEYS, *red = cpart + row_part_floats(hs);
    float scale = 1.0f / sqrtf((float)hs);

    if (fresh && t < u0 + DEC_KEYS) { /* the new row's chunk (the same for the whole block) */
        E *row = qkv + ((size_t)b * Tc + t) * ld + (size_t)h * hs;
        for (int k = threadIdx.x; k < 3 * hs; k += ROW_THREADS)
            row[(size_t)(k / hs) * C + k % hs] = qrow[(size_t)(k / hs) * C + k % hs];
        __syncthreads(); /* the block's stores are seen by its reads below */
    }
    for (int k = threadIdx.x; k < hs; k += ROW_THREADS) q[k] = cu_f(qrow[k]);
    __syncthreads();
    float mx = -INFINITY;
    for (int j = warp; j < nk; j += ROW_WARPS) {
        float d = warp_dot(q, qb + (size_t)(u0 + j) * ld + C, hs) * scale;
        if (threadIdx.x % 32 == 0) s[j] = d;
        mx = fmaxf(mx, d);
    }
    mx = block_max<ROW_WARPS>(mx, red);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < nk; j += ROW_THREADS) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    sum = block_sum<ROW_WARPS>(sum, red);
    if (threadIdx.x == 0) dst[0] = mx, dst[1] = sum;
    block_comb(dst + 2, s, qb + (size_t)u0 * ld + 2 * C, ld, nk, hs, cpart);
    int live = t / DEC_KEYS + 1;
    unsigned *cnt = count + (size_t)bi * NH + h;
    if (!block_arrive_last(cnt, (unsigned)live, &last)) return;
    decode_merge(out + (size_t)bi * C + (size_t)h * hs, pp, live, hs);
    if (threadIdx.x == 0) *cnt = 0;
}

/* The split decode when a cache of Tc has more than one chunk and their partials fit in the
 * reserved scratch; returns 0 when it did not run (the caller takes attn_rows_fwd). The choice
 * and the grid depend on Tc, not on t0, which the kernel reads (chunks past a row's last key
 * leave at once), so that a recorded step replays at any position. fresh: the new row (n = 1)
 * that attn_decode stores into the cache, or NULL (already stored). The arrival counters
 * (B n NH) come from reserve (cu_attention_counters), so that a recorded step never grows them. */
template <typename E>
static int decode_split(gk_backend *be, void *out, void *qkv, const void *fresh, int B, int Tc,
                        const int *t0, int n, int C, int NH)
{
    int hs = C / NH, nch = (Tc + DEC_KEYS - 1) / DEC_KEYS;
    size_t need = sizeof(float) * (size_t)B * n * NH * nch * (hs + 2);
    if (nch < 2 || need > CU(be)->scratch_bytes || (size_t)B * n > 65535) return 0;
    float *part = (float *)cu_scratch(be, need, "attention_fwd_at");
    unsigned *count = part ? cu_col_counters(be, (size_t)B * n * NH) : NULL;
    if (!count) return 1;
    CU_LAUNCH(be, attn_decode<E>, dim3((unsigned)nch, (unsigned)NH, (unsigned)(B * n)),
              ROW_THREADS, rows_fwd_smem(hs, DEC_KEYS), (E *)out, part, count, (E *)qkv,
              n == 1 ? (const E *)fresh : NULL, Tc, t0, n, C, NH, nch);
    return 1;
}

/* ---- backward ---- */

/* One block per (query row t, head, batch): P and dP of the row, D = sum_u P dP (to dsum), and
 * dQ = sum_u dS_u K_u into dqkv. Shared: q, dO (hs each), P, dS (T each), part, red. */
template <typename E>
__global__ void __launch_bounds__(ROW_THREADS)
    attn_rows_bwd(E *dqkv, float *dsum, const E *dout, const E *qkv, const float *lse, int T,
                  int C, int NH, float p, uint64_t key)
{
    GK_DYN_SMEM(float, sm);
    int t = T - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int hs = C / NH, nk = t + 1, warp = threadIdx.x / 32;
    size_t ld = 3 * (size_t)C, row = ((size_t)b * NH + h) * T + t;
    const E *qb = qkv + (size_t)b * T * ld + (size_t)h * hs;
    const E *dO = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
    float *q = sm, *g = q + hs, *pr = g + hs, *ds = pr + T, *part = ds + T;
    float *red = part + row_part_floats(hs);
    float scale = 1.0f / sqrtf((float)hs), z = lse[row];

    for (int k = threadIdx.x; k < hs; k += ROW_THREADS) {
        q[k] = cu_f(qb[(size_t)t * ld + k]);
        g[k] = cu_f(dO[k]);
    }
    __syncthreads();
    float D = 0.0f;
    for (int u = warp; u < nk; u += ROW_WARPS) {
        float s = warp_dot(q, qb + (size_t)u * ld + C, hs) * scale;
        float dp = warp_dot(g, qb + (size_t)u * ld + 2 * C, hs);
        if (p > 0.0f) dp *= gk_rng_dropout(key, row * T + u, p);
        float P = expf(s - z);
        if (threadIdx.x % 32 == 0) pr[u] = P, ds[u] = dp;
        D += P * dp;
    }
    D = block_sum<ROW_WARPS>(threadIdx.x % 32 == 0 ? D : 0.0f, red);
    if (threadIdx.x == 0) dsum[row] = D;
    for (int u = threadIdx.x; u < nk; u += ROW_THREADS) ds[u] = pr[u] * (ds[u] - D) * scale;
    __syncthreads();
    block_comb(dqkv + ((size_t)b * T + t) * ld + (size_t)h * hs, ds, qb + C, ld, nk, hs, part);
}

/* One block per (key row u, head, batch): dV_u = sum_t P_tu m_tu dO_t and dK_u = sum_t dS_tu Q_t
 * over queries t >= u, from lse and D (dsum) of each query row. Shared: k, v (hs each), the two
 * coefficient rows (T - u each), part, red. */
template <typename E>
__global__ void __launch_bounds__(ROW_THREADS)
    attn_cols_bwd(E *dqkv, const float *dsum, const E *dout, const E *qkv, const float *lse,
                  int T, int C, int NH, float p, uint64_t key)
{
    GK_DYN_SMEM(float, sm);
    int u = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int hs = C / NH, nq = T - u, warp = threadIdx.x / 32;
    size_t ld = 3 * (size_t)C, row0 = ((size_t)b * NH + h) * T;
    const E *qb = qkv + (size_t)b * T * ld + (size_t)h * hs;
    const E *dOb = dout + (size_t)b * T * C + (size_t)h * hs;
    float *k = sm, *v = k + hs, *a = v + hs, *c = a + nq, *part = c + nq;
    float scale = 1.0f / sqrtf((float)hs);

    for (int i = threadIdx.x; i < hs; i += ROW_THREADS) {
        k[i] = cu_f(qb[(size_t)u * ld + C + i]);
        v[i] = cu_f(qb[(size_t)u * ld + 2 * C + i]);
    }
    __syncthreads();
    for (int j = warp; j < nq; j += ROW_WARPS) {
        int t = u + j;
        float s = warp_dot(k, qb + (size_t)t * ld, hs) * scale;
        float dp = warp_dot(v, dOb + (size_t)t * C, hs);
        float m = p > 0.0f ? gk_rng_dropout(key, (row0 + t) * T + u, p) : 1.0f;
        float P = expf(s - lse[row0 + t]);
        if (threadIdx.x % 32 == 0) a[j] = P * m, c[j] = P * (dp * m - dsum[row0 + t]) * scale;
    }
    __syncthreads();
    E *du = dqkv + ((size_t)b * T + u) * ld + (size_t)h * hs;
    block_comb(du + 2 * C, a, dOb + (size_t)u * C, (size_t)C, nq, hs, part);
    block_comb(du + C, c, qb + (size_t)u * ld, ld, nq, hs, part);
}

template <typename E>
static void rows_bwd(gk_backend *be, void *dqkv, float *dsum, const void *dout, const void *qkv,
                     const float *lse, int B, int T, int C, int NH, float p, uint64_t key)
{
    int hs = C / NH;
    size_t smem =
        sizeof(float) * (2 * (size_t)hs + 2 * (size_t)T + row_part_floats(hs) + ROW_WARPS);
    if (smem > 48 * 1024) {
        if (smem > CU(be)->smem_optin) {
            GK_BACKEND_FAIL(be, GK_EUSAGE,
                            "cuda attention_bwd: T = %d does not fit in shared memory", T);
            return;
        }
        if (CU_CHECK(be, cudaFuncSetAttribute(attn_rows_bwd<E>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)smem)) ||
            CU_CHECK(be,
                     cudaFuncSetAttribute(attn_cols_bwd<E>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
            return;
    }
    dim3 grid((unsigned)T, (unsigned)NH, (unsigned)B);
    CU_LAUNCH(be, attn_rows_bwd<E>, grid, ROW_THREADS, smem, (E *)dqkv, dsum, (const E *)dout,
              (const E *)qkv, lse, T, C, NH, p, key);
    CU_LAUNCH(be, attn_cols_bwd<E>, grid, ROW_THREADS, smem, (E *)dqkv, (const float *)dsum,
              (const E *)dout, (const E *)qkv, lse, T, C, NH, p, key);
}

/* ---- the fused paths' D = rowsum(dO * O) ---- */

/* dsum (B,NH,T) = rowsum(dO * O) per head, fp32: one warp per (b, t, h), each lane a strided
 * share of the head's elements, then the warp's by warp_sum. PAIRS: a lane adds two adjacent
 * products at a time (the fa2 path's order) rather than one (the flash path's): the two orders
 * round differently, and each path keeps its own bits. */
template <bool PAIRS>
__global__ void attn_dsum(float *dsum, const bf16 *dout, const bf16 *out, int B, int T, int C,
                          int NH)
{
    size_t w = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (w >= (size_t)B * T * NH) return; /* whole warps leave together */
    int hs = C / NH, h = (int)(w % NH);
    size_t bt = w / NH, b = bt / T, t = bt % T;
    const bf16 *g = dout + bt * C + (size_t)h * hs, *o = out + bt * C + (size_t)h * hs;
    float s = 0.0f;
    if constexpr (PAIRS) {
        for (int i = threadIdx.x % 32 * 2; i < hs; i += 64)
            s += __bfloat162float(g[i]) * __bfloat162float(o[i]) +
                 __bfloat162float(g[i + 1]) * __bfloat162float(o[i + 1]);
    } else {
        for (int i = threadIdx.x % 32; i < hs; i += 32)
            s += __bfloat162float(g[i]) * __bfloat162float(o[i]);
    }
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) dsum[(b * NH + h) * T + t] = s;
}

template <bool PAIRS>
static void dsum_launch(gk_backend *be, float *dsum, const void *dout, const void *out, int B,
                        int T, int C, int NH)
{
    size_t warps = (size_t)B * T * NH;
    CU_LAUNCH(be, attn_dsum<PAIRS>, cu_blocks(warps, 8), 256, 0, dsum, (const bf16 *)dout,
              (const bf16 *)out, B, T, C, NH);
}

/* ---- the ops ---- */

/* The scratch of attention_bwd: its D = rowsum(dO * O) per (b, h, t), fp32; the forward needs
 * none (cuDNN keeps its own workspace; the split decode runs where its partials fit, else not). */
static size_t bwd_scratch(int B, int NH, int T) { return sizeof(float) * (size_t)B * NH * T; }

/* Flash unless attention = plain, for bf16 activations and the head sizes it takes; a, b, c must
 * be 16-byte aligned for its 128-bit copies. */
static int use_flash(gk_backend *be, int hs, const void *a, const void *b, const void *c)
{
    if (CU(be)->attention == GK_ATTN_PLAIN) return 0;
    if (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 16) return 0;
    return be->act == GK_BF16 && cu_attn_fused_head(hs);
}
/* The fa2 kernels where flash applies, unless attention = flash or plain. */
static int use_fa2(gk_backend *be, int hs, const void *a, const void *b, const void *c)
{
    return CU(be)->attention != GK_ATTN_FLASH && use_flash(be, hs, a, b, c);
}

static int bad_shape(gk_backend *be, const char *op, int B, int T, int C, int NH)
{
    if (B >= 1 && T >= 1 && NH >= 1 && C % NH == 0 && NH <= 65535 && B <= 65535) return 0;
    GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda %s: bad shape B=%d T=%d C=%d NH=%d", op, B, T, C, NH);
    return 1;
}

void cu_attention_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C,
                      int NH, float p, uint64_t key)
{
    CU_BEGIN(be);
    if (bad_shape(be, "attention_fwd", B, T, C, NH)) return;
    if (cu_cudnn_attn_fwd(be, out, lse, qkv, B, T, C, NH, p)) return; /* cuDNN ran it, or failed */
    if (use_fa2(be, C / NH, qkv, out, out))
        cu_fa2_attn_fwd(be, (bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH, p, key);
    else if (use_flash(be, C / NH, qkv, out, out))
        cu_flash_attn_fwd(be, (bf16 *)out, lse, (const bf16 *)qkv, B, T, C, NH, p, key);
    else if (be->act == GK_BF16)
        rows_fwd<bf16>(be, out, lse, qkv, B, T, NULL, T, C, NH, p, key);
    else
        rows_fwd<float>(be, out, lse, qkv, B, T, NULL, T, C, NH, p, key);
}

void cu_attention_bwd(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                      const void *out, const float *lse, int B, int T, int C, int NH, float p,
                      uint64_t key)
{
    CU_BEGIN(be);
    if (bad_shape(be, "attention_bwd", B, T, C, NH)) return;
    if (cu_cudnn_attn_bwd(be, dqkv, dout, qkv, out, lse, B, T, C, NH, p)) return;
    float *dsum = (float *)cu_scratch(be, bwd_scratch(B, NH, T), "attention_bwd");
    if (!dsum) return;
    if (use_fa2(be, C / NH, qkv, dout, dqkv)) {
        dsum_launch<true>(be, dsum, dout, out, B, T, C, NH);
        cu_fa2_attn_bwd(be, (bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv, lse, dsum, B, T, C,
                        NH, p, key);
    } else if (use_flash(be, C / NH, qkv, dout, dqkv)) {
        dsum_launch<false>(be, dsum, dout, out, B, T, C, NH);
        cu_flash_attn_bwd(be, (bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv, lse, dsum, B, T,
                          C, NH, p, key);
    } else if (be->act == GK_BF16)
        rows_bwd<bf16>(be, dqkv, dsum, dout, qkv, lse, B, T, C, NH, p, key);
    else
        rows_bwd<float>(be, dqkv, dsum, dout, qkv, lse, B, T, C, NH, p, key);
}

/* cache (B,Tc,row) rows t0..t0+n-1 of each batch row = new (B,n,row), t0 = cache_t0. */
template <typename E>
__global__ void cache_store(E *cache, const E *fresh, const int *t0p, int B, int Tc, int n, int row)
{
    int t0 = cache_t0(t0p, Tc, n);
    size_t per = (size_t)n * row;
    GRID_STRIDE(k, (size_t)B * per)
    {
        size_t b = k / per, r = k - b * per;
        cache[(b * Tc + t0) * row + r] = fresh[k];
    }
}

/* The KV-cache step for activations of type E: one new row (decoding) in the split kernels alone
 * (they store it), else the store, then the split or the row kernel. */
template <typename E>
static void fwd_at(gk_backend *be, void *out, void *cache, const void *qkv_new, int B, int Tc,
                   const int *t0, int n, int C, int NH)
{
    if (n == 1 && decode_split<E>(be, out, cache, qkv_new, B, Tc, t0, n, C, NH)) return;
    if (qkv_new) {
        size_t total = (size_t)B * n * 3 * C;
        unsigned grid = cu_blocks(total, 256),
                 cap = (unsigned)(CU(be)->sm_count > 0 ? CU(be)->sm_count : 132) * 8;
        CU_LAUNCH(be, cache_store<E>, grid < cap ? grid : cap, 256, 0, (E *)cache,
                  (const E *)qkv_new, t0, B, Tc, n, 3 * C);
    }
    if (!decode_split<E>(be, out, cache, NULL, B, Tc, t0, n, C, NH))
        rows_fwd<E>(be, out, NULL, cache, B, Tc, t0, n, C, NH, 0.0f, 0);
}

void cu_attention_fwd_at(gk_backend *be, void *out, void *cache, const void *qkv_new, int B,
                         int Tc, const int *t0, int n, int C, int NH)
{
    CU_BEGIN(be);
    if (bad_shape(be, "attention_fwd_at", B, Tc, C, NH)) return;
    if (n < 1 || n > Tc) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda attention_fwd_at: %d rows in a cache of %d", n, Tc);
        return;
    }
    if (be->act == GK_BF16)
        fwd_at<bf16>(be, out, cache, qkv_new, B, Tc, t0, n, C, NH);
    else
        fwd_at<float>(be, out, cache, qkv_new, B, Tc, t0, n, C, NH);
}

/* The counters for reserve: the KV-cache decode's, one a (row, head) of rows x cols. */
size_t cu_attention_counters(size_t rows, size_t cols, int head_size)
{
    return rows * (cols / (size_t)head_size > 0 ? cols / (size_t)head_size : 1);
}

/* The scratch for reserve: attention_bwd's of B sequences of T over rows x cols. */
size_t cu_attention_scratch(size_t rows, size_t cols, int head_size, int T)
{
    /* B sequences of T; the widest row holds at most cols / head_size heads */
    int B = (int)(rows / (size_t)T > 0 ? rows / (size_t)T : 1);
    int NH = (int)(cols / (size_t)head_size > 0 ? cols / (size_t)head_size : 1);
    return bwd_scratch(B, NH, T);
}
