/* layernorm.cu: the CUDA backend's layernorm: forward (alone, or fused with the residual add
 * that feeds it) and backward. Kernels are templates on one parameter P (an op_cfg: activation
 * type T, pack width V; see cuda_pack.h), packs are 16-byte loads, V = 1 when a row or pointer is
 * not aligned. The backward's reductions over rows have a fixed split (a function of the shapes
 * only) with per-block partials in the backend's scratch, summed in a fixed order in the same
 * launch by the blocks that arrive last. */
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

/* ---- layernorm, alone or fused with the residual add before it ---- */

#define LN_FWD_THREADS 256 /* a warp per row */
#define LN_EPS 1e-5f
#define LN_REG_FLOATS 32   /* values of its row a lane keeps in registers (vector packs) */

/* The values v (V) of the pack at flat index i (column c) of a row: with x, res + dropout(x + bias)
 * in fp32, stored to res_out rounded to T, and v = the rounded values (what layernorm_fwd would
 * read back); without x, v = res. */
template <int V, typename T>
static __device__ __forceinline__ void res_ln_take(float *v, T *res_out, const T *res, const T *x,
                                                   const float *bias, size_t i, int c, float p,
                                                   uint64_t key)
{
    load_f<V>(v, res + i);
    if (!x) return;
    float a[V], b[V] = {};
    load_f<V>(a, x + i);
    if (bias) load_f<V>(b, bias + c);
    for (int j = 0; j < V; j++) v[j] += (a[j] + b[j]) * dropout_of(key, i + j, p);
    store_f<V>(res_out + i, v);
    for (int j = 0; j < V; j++) v[j] = cu_f(cu_to<T>(v[j]));
}

/* o[cp*V ..) = (f - m) * rs * weight + lnb, pack cp of a row (f is clobbered). */
template <int V, typename T>
static __device__ __forceinline__ void ln_put(T *o, float *f, int cp, float m, float rs,
                                              const float *weight, const float *lnb)
{
    float w[V], b[V] = {};
    load_f<V>(w, weight + (size_t)cp * V);
    if (lnb) load_f<V>(b, lnb + (size_t)cp * V);
    for (int j = 0; j < V; j++) f[j] = (f[j] - m) * rs * w[j] + b[j];
    store_f<V>(o + (size_t)cp * V, f);
}

/* A warp per row: v = res + dropout(x + bias) -> res_out (rounded to T) when x is not NULL, else
 * v = res; then out = layernorm(v) with weight, lnb (or NULL), mean, rstd (or NULL). Lane l takes
 * packs l, l+32, ...; its first K packs stay in registers, the rest are read back (from res_out,
 * which this lane wrote, or res). Sums run in pack order, so the fused op rounds exactly as the
 * residual add and then the plain layernorm. res_out may alias res or x: each element is read
 * before the same thread writes it. */
template <class P>
static __global__ void res_ln_fwd_kernel(typename P::T *res_out, typename P::T *out, float *mean,
                                         float *rstd, const typename P::T *res,
                                         const typename P::T *x, const float *bias, float p,
                                         uint64_t key, const float *weight, const float *lnb, int N,
                                         int C)
{
    typedef typename P::T T;
    constexpr int V = P::V, K = V > 1 ? LN_REG_FLOATS / V : 8;
    int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32,
        row_packs = C / V;
    if (row >= N) return; /* the whole warp */
    size_t base = (size_t)row * C;
    const T *back = x ? res_out : res; /* where packs past the registers are read again */
    float v[K][V] = {}, f[V], s = 0.0f, q = 0.0f;
    GK_UNROLL
    for (int k = 0; k < K; k++) {
        int cp = lane + 32 * k;
        if (cp >= row_packs) break;
        res_ln_take<V>(v[k], res_out, res, x, bias, base + (size_t)cp * V, cp * V, p, key);
        for (int j = 0; j < V; j++) s += v[k][j];
    }
    for (int cp = lane + 32 * K; cp < row_packs; cp += 32) {
        res_ln_take<V>(f, res_out, res, x, bias, base + (size_t)cp * V, cp * V, p, key);
        for (int j = 0; j < V; j++) s += f[j];
    }
    float m = warp_sum(s) / C;
    GK_UNROLL
    for (int k = 0; k < K; k++) {
        if (lane + 32 * k >= row_packs) break;
        for (int j = 0; j < V; j++) q += (v[k][j] - m) * (v[k][j] - m);
    }
    for (int cp = lane + 32 * K; cp < row_packs; cp += 32) {
        load_f<V>(f, back + base + (size_t)cp * V);
        for (int j = 0; j < V; j++) q += (f[j] - m) * (f[j] - m);
    }
    float rs = 1.0f / sqrtf(warp_sum(q) / C + LN_EPS);
    GK_UNROLL
    for (int k = 0; k < K; k++) {
        int cp = lane + 32 * k;
        if (cp >= row_packs) break;
        ln_put<V>(out + base, v[k], cp, m, rs, weight, lnb);
    }
    for (int cp = lane + 32 * K; cp < row_packs; cp += 32) {
        load_f<V>(f, back + base + (size_t)cp * V);
        ln_put<V>(out + base, f, cp, m, rs, weight, lnb);
    }
    if (lane == 0 && mean) mean[row] = m;
    if (lane == 0 && rstd) rstd[row] = rs;
}

template <typename T>
static void res_ln_fwd_run(gk_backend *be, T *res_out, T *out, float *mean, float *rstd,
                           const T *res, const T *x, const float *bias, float p, uint64_t key,
                           const float *w, const float *b, int N, int C)
{
    typedef op_cfg<T, 16 / sizeof(T)> PV;
    typedef op_cfg<T, 1> P1;
    unsigned grid = cu_blocks((size_t)N, LN_FWD_THREADS / 32);
    if (C % PV::V == 0 && aligned16(res_out) && aligned16(out) && aligned16(res) && aligned16(x) &&
        aligned16(bias) && aligned16(w) && aligned16(b))
        CU_LAUNCH(be, res_ln_fwd_kernel<PV>, grid, LN_FWD_THREADS, 0, res_out, out, mean, rstd, res,
                  x, bias, p, key, w, b, N, C);
    else
        CU_LAUNCH(be, res_ln_fwd_kernel<P1>, grid, LN_FWD_THREADS, 0, res_out, out, mean, rstd, res,
                  x, bias, p, key, w, b, N, C);
}

void cu_layernorm_fwd(gk_backend *be, void *out, float *mean, float *rstd, const void *inp,
                      const float *weight, const float *bias, int N, int C)
{
    CU_BEGIN(be);
    if (N <= 0 || C <= 0) return;
    if (be->act == GK_BF16)
        res_ln_fwd_run<bf16>(be, NULL, (bf16 *)out, mean, rstd, (const bf16 *)inp, NULL, NULL, 0.0f,
                             0, weight, bias, N, C);
    else
        res_ln_fwd_run<float>(be, NULL, (float *)out, mean, rstd, (const float *)inp, NULL, NULL,
                              0.0f, 0, weight, bias, N, C);
}

void cu_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
                               float *rstd, const void *res, const void *x, const float *bias,
                               float p, uint64_t key, const float *ln_weight, const float *ln_bias,
                               int N, int C)
{
    CU_BEGIN(be);
    if (N <= 0 || C <= 0) return;
    if (be->act == GK_BF16)
        res_ln_fwd_run<bf16>(be, (bf16 *)res_out, (bf16 *)ln_out, mean, rstd, (const bf16 *)res,
                             (const bf16 *)x, bias, p, key, ln_weight, ln_bias, N, C);
    else
        res_ln_fwd_run<float>(be, (float *)res_out, (float *)ln_out, mean, rstd, (const float *)res,
                              (const float *)x, bias, p, key, ln_weight, ln_bias, N, C);
}

/* Backward in one launch: a warp per row (rows dealt round-robin to the warps of at most
 * LN_BWD_BLOCKS blocks: a split that depends on N and C only). Each warp adds its rows' dweight,
 * dbias terms to its own slice of shared memory (no two warps share a slot); the block then sums
 * its warps in order into part (2 rows of C per block). Blocks come in groups of LN_GROUP: the
 * block of a group that arrives last (an atomic count per group, reset by that block) sums the
 * group's blocks in order into a group row; the block that completes the last group (one more
 * count) sums the group rows in order into dweight, dbias. A fixed order whichever blocks arrive
 * last: the same bits every run. */
#define LN_BWD_BLOCKS CU_COL_CHUNKS
#define LN_BWD_WARPS 8
#define LN_GROUP 16 /* blocks a group's last block sums */
#define LN_GROUPS_MAX ((LN_BWD_BLOCKS + LN_GROUP - 1) / LN_GROUP)
#define LN_SMEM_DEFAULT 49152

/* Warps per block: each holds 2*C floats of shared memory, within the default 48 KiB if it can. */
static int ln_bwd_warps(int C)
{
    int w = LN_SMEM_DEFAULT / (2 * (int)sizeof(float) * C);
    return w < 1 ? 1 : w > LN_BWD_WARPS ? LN_BWD_WARPS : w;
}

/* dinp += the row gradients of rows row0, row0 + stride, ...; this warp's acc slice (dweight |
 * dbias, [j * row_packs + cp]: lanes on consecutive banks) += their column terms. */
template <class P>
static __device__ __forceinline__ void ln_bwd_rows(float *dw, typename P::T *dinp,
                                                   const typename P::T *dout,
                                                   const typename P::T *inp, const float *weight,
                                                   const float *mean, const float *rstd, int N,
                                                   int C, int row0, int stride)
{
    constexpr int V = P::V;
    int lane = threadIdx.x % 32, row_packs = C / V;
    float *db = dw + C, d[V], x[V], w[V], di[V];
    for (int row = row0; row < N; row += stride) {
        size_t base = (size_t)row * C;
        float m = mean[row], rs = rstd[row], a = 0.0f, b = 0.0f;
        for (int cp = lane; cp < row_packs; cp += 32) {
            load_f<V>(d, dout + base + (size_t)cp * V);
            load_f<V>(x, inp + base + (size_t)cp * V);
            load_f<V>(w, weight + (size_t)cp * V);
            /* d w rounded (__fmul_rn) here and below, never contracted into the sum or the
             * difference: with C = 1, d w - a is then 0, as in exact arithmetic */
            for (int j = 0; j < V; j++) {
                float dn = __fmul_rn(d[j], w[j]);
                a += dn, b += dn * ((x[j] - m) * rs);
            }
        }
        a = warp_sum(a) / C, b = warp_sum(b) / C;
        for (int cp = lane; cp < row_packs; cp += 32) {
            size_t off = base + (size_t)cp * V;
            load_f<V>(d, dout + off);
            load_f<V>(x, inp + off);
            load_f<V>(w, weight + (size_t)cp * V);
            load_f<V>(di, dinp + off);
            for (int j = 0; j < V; j++) {
                float norm = (x[j] - m) * rs;
                di[j] += (__fmul_rn(d[j], w[j]) - a - norm * b) * rs;
                dw[j * row_packs + cp] += d[j] * norm;
                db[j * row_packs + cp] += d[j];
            }
            store_f<V>(dinp + off, di);
        }
    }
}

/* part rows [k0, k0 + n) of 2C, summed in order, read past L1 (written by other blocks). */
static __device__ __forceinline__ float ln_rows_sum(const float *part, size_t k0, unsigned n, int C,
                                                    int i)
{
    float s = 0.0f;
    for (unsigned k = 0; k < n; k++) s += __ldcg(part + (k0 + k) * 2 * C + i);
    return s;
}

/* part: gridDim.x rows of 2C (the blocks' sums), then one row per group; count: the groups'
 * counts, then the count of completed groups; all zero on entry and on return. */
template <class P>
static __global__ void layernorm_bwd_kernel(typename P::T *dinp, float *dweight, float *dbias,
                                            float *part, unsigned *count, const typename P::T *dout,
                                            const typename P::T *inp, const float *weight,
                                            const float *mean, const float *rstd, int N, int C)
{
    constexpr int V = P::V;
    GK_DYN_SMEM(float, acc); /* [warp][dweight | dbias][j * row_packs + cp] */
    int warp = threadIdx.x / 32, warps = blockDim.x / 32, row_packs = C / V;
    for (int i = threadIdx.x; i < warps * 2 * C; i += blockDim.x) acc[i] = 0.0f;
    __syncthreads();
    ln_bwd_rows<P>(acc + (size_t)warp * 2 * C, dinp, dout, inp, weight, mean, rstd, N, C,
                   blockIdx.x * warps + warp, gridDim.x * warps);
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) {
        int half = i / C, k = i - half * C, j = k / row_packs, cp = k - j * row_packs;
        float s = strided_sum(acc + i, warps, (size_t)2 * C);
        part[((size_t)blockIdx.x * 2 + half) * C + (size_t)cp * V + j] = s;
    }
    unsigned g = blockIdx.x / LN_GROUP, groups = (gridDim.x + LN_GROUP - 1) / LN_GROUP,
             g0 = g * LN_GROUP;
    unsigned gn = gridDim.x - g0 < LN_GROUP ? gridDim.x - g0 : LN_GROUP;
    /* acc is read: the barrier in block_arrive_last */
    unsigned *last = reinterpret_cast<unsigned *>(acc);
    if (!block_arrive_last(&count[g], gn, last)) return;
    float *gpart = part + (size_t)gridDim.x * 2 * C;
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x)
        gpart[(size_t)g * 2 * C + i] = ln_rows_sum(part, g0, gn, C, i);
    if (threadIdx.x == 0) count[g] = 0;
    if (!block_arrive_last(&count[LN_GROUPS_MAX], groups, last)) return;
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) {
        float s = ln_rows_sum(gpart, 0, groups, C, i);
        if (i < C) dweight[i] += s;
        else if (dbias) dbias[i - C] += s;
    }
    if (threadIdx.x == 0) count[LN_GROUPS_MAX] = 0;
}

template <typename T, int V>
static void layernorm_bwd_run(gk_backend *be, T *dinp, float *dweight, float *dbias, const T *dout,
                              const T *inp, const float *weight, const float *mean,
                              const float *rstd, int N, int C)
{
    typedef op_cfg<T, V> P;
    int warps = ln_bwd_warps(C), blocks = (N + warps - 1) / warps;
    blocks = blocks < LN_BWD_BLOCKS ? blocks : LN_BWD_BLOCKS;
    int groups = (blocks + LN_GROUP - 1) / LN_GROUP;
    size_t smem = (size_t)warps * 2 * C * sizeof(float);
    float *part =
        (float *)cu_scratch(be, (size_t)(blocks + groups) * 2 * C * sizeof(float), "layernorm_bwd");
    unsigned *count = part ? cu_col_counters(be, LN_GROUPS_MAX + 1) : NULL;
    if (!count) return;
    if (smem > LN_SMEM_DEFAULT) {
        if (smem > CU(be)->smem_optin) {
            GK_BACKEND_FAIL(be, GK_EUSAGE,
                            "cuda layernorm_bwd: C = %d needs %zu bytes of shared memory", C, smem);
            return;
        }
        if (CU_CHECK(be,
                     cudaFuncSetAttribute(layernorm_bwd_kernel<P>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
            return;
    }
    CU_LAUNCH(be, layernorm_bwd_kernel<P>, (unsigned)blocks, (unsigned)warps * 32, smem, dinp,
              dweight, dbias, part, count, dout, inp, weight, mean, rstd, N, C);
}

/* At most min(rows, LN_BWD_BLOCKS) blocks' rows of 2 cols fp32 partials and one row a group of
 * them (layernorm_bwd_run's). */
size_t cu_layernorm_scratch(size_t rows, size_t cols)
{
    size_t blocks = rows < LN_BWD_BLOCKS ? rows : LN_BWD_BLOCKS;
    return (blocks + (blocks + LN_GROUP - 1) / LN_GROUP) * 2 * cols * sizeof(float);
}

void cu_layernorm_bwd(gk_backend *be, void *dinp, float *dweight, float *dbias, const void *dout,
                      const void *inp, const float *weight, const float *mean, const float *rstd,
                      int N, int C)
{
    CU_BEGIN(be);
    if (N <= 0 || C <= 0) return;
    bool ok = aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    if (be->act == GK_BF16) {
        if (ok && C % 8 == 0)
            layernorm_bwd_run<bf16, 8>(be, (bf16 *)dinp, dweight, dbias, (const bf16 *)dout,
                                       (const bf16 *)inp, weight, mean, rstd, N, C);
        else
            layernorm_bwd_run<bf16, 1>(be, (bf16 *)dinp, dweight, dbias, (const bf16 *)dout,
                                       (const bf16 *)inp, weight, mean, rstd, N, C);
    } else {
        if (ok && C % 4 == 0)
            layernorm_bwd_run<float, 4>(be, (float *)dinp, dweight, dbias, (const float *)dout,
                                        (const float *)inp, weight, mean, rstd, N, C);
        else
            layernorm_bwd_run<float, 1>(be, (float *)dinp, dweight, dbias, (const float *)dout,
                                        (const float *)inp, weight, mean, rstd, N, C);
    }
}
