/* attention_fa2_bwd.cu: the causal attention backward as FlashAttention-2 does it, for bf16
 * activations, on the warp-level primitives of mma.h (attention_fa2_tile.h); attention.cu decides
 * when it runs (attention = fa2, with attention_fa2.cu's forward, whose lse it reads; flash's lse
 * is the same). After D = rowsum(dO * O) per (b, h, t) (attention.cu's attn_dsum), two launches,
 * each output summed by one warp in a fixed order (deterministic, no atomics):
 * - fa2_bwd_kv: a block per (key tile of 64, head, batch), 4 warps of 16 keys, walking the query
 *   tiles from the diagonal to the end, Q and dO double-buffered by cp.async (with the tile's lse
 *   and D staged beside them). Each warp works transposed, 16 queries at a time, all in
 *   registers: S^T = K Q^T and dP^T = V dO^T in mma accumulators (K and V fragments by ldmatrix,
 *   kept in registers up to D = 64), P^T = exp2(S^T log2e / sqrt(D) - lse log2e), dS^T = P^T (dP^T
 *   - D) / sqrt(D), then both packed to bf16 straight into A fragments: dV += P^T dO, dK += dS^T Q
 *   (dO and Q by ldmatrix.trans);
 * - fa2_bwd_q: a block per query tile, K and V double-buffered, walking the key tiles up to the
 *   diagonal: S = Q K^T, dP = dO V^T, dS as above, dQ += dS K, Q and dO fragments in registers up
 *   to D = 64.
 * Dropout: P and dP carry the mask of element (b h t, u) as the other paths key it (kv and q
 * kernels of their own, DROP, so that those without hold none of its state). Causal chunks
 * past the diagonal are skipped per warp; the diagonal tile masks keys past the query, and rows
 * past T (zero-filled by cp.async) are masked and never stored. Head sizes 16, 32, 64, 128. */
#include "kernels/cuda/attention_fa2_tile.h"

#include <stdint.h>

#include "kernels/rng.h"

/* K and V tiles, then two buffers of (Q tile, dO tile); the kv kernel adds two buffers of 64 lse
 * (times log2 e) and 64 D. */
template <int D> static constexpr size_t fa2_bwd_smem(int kv)
{
    return sizeof(bf16) * (size_t)6 * FA_BK * fa_ld(D) + (kv ? sizeof(float) * 4 * FA_BQ : 0);
}

/* Stores a warp's 16 rows (this lane's: row, row + 8, where < T) of acc (16, D) fp32 as bf16 to
 * dst (row stride ld, column 0 at dst). */
template <int D>
__device__ __forceinline__ void store_acc(bf16 *dst, size_t ld, int row, int T,
                                          float (&acc)[D / 8][4])
{
    int tq = threadIdx.x % 4;
    for (int r = 0; r < 2; r++) {
        int t = row + 8 * r;
        if (t >= T) continue;
        bf16 *d = dst + (size_t)t * ld + 2 * tq;
        for (int j = 0; j < D / 8; j++)
            *(uint32_t *)(d + j * 8) = pack_bf16x2(acc[j][2 * r], acc[j][2 * r + 1]);
    }
}

/* Knobs for measuring on a GPU (tests/bench/gpu_session.sh): the K and V fragments of the kv
 * kernel stay in registers up to head size FB_KV_REG_D, the Q and dO fragments of the q kernel up
 * to FB_Q_REG_D; past it they are read again from shared memory (ldmatrix) for each chunk. The
 * default holds K and V at D = 64: more registers and fewer blocks an SM, yet the backward was
 * faster so (tests/bench/gpu-results.md, 2026-11-27 on the H200: fa2 with FB_KV_REG_D=64). */
#ifndef FB_KV_REG_D
#define FB_KV_REG_D 64
#endif
#ifndef FB_Q_REG_D
#define FB_Q_REG_D 64
#endif

/* Blocks an SM asked of ptxas, as for the forward (attention_fa2.cu's fa2_fwd_blocks): 4 up to
 * D = 64 (shared memory allows 4 at 64: 55 KiB a block), which caps registers at 128 a thread;
 * the kv kernel holding K and V at D = 64 fits them with one 8-byte spill outside its loop
 * without dropout, and takes 3 with it (ptxas's counts: tests/bench/gpu-results.md); no bound at
 * D = 128. */
template <int D, bool DROP> static constexpr int fa2_bwd_blocks(int kv)
{
    return D > 64 ? 1 : kv && DROP && D == 64 && D <= FB_KV_REG_D ? 3 : 4;
}

/* grid (key tiles, NH, B), FA_THREADS, fa2_bwd_smem<D>(1): dK, dV of one key tile into dqkv. */
template <int D, bool DROP>
__global__ void __launch_bounds__(FA_THREADS, fa2_bwd_blocks<D, DROP>(1))
    fa2_bwd_kv(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse, const float *dsum,
               int T, int C, int NH, float p, uint64_t key)
{
    GK_DYN_SMEM(bf16, sm);
    int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, nt = gridDim.x; /* long columns first */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    size_t ld = 3 * (size_t)C, bh = (size_t)b * NH + h;
    const bf16 *qb = qkv + (size_t)b * T * ld + (size_t)h * D;
    const bf16 *gb = dout + (size_t)b * T * C + (size_t)h * D;
    constexpr int tile = FA_BK * fa_ld(D);
    constexpr bool regs = D <= FB_KV_REG_D;
    bf16 *ks = sm, *vs = sm + tile, *qg = sm + 2 * tile; /* qg: two buffers of (Q tile, dO tile) */
    float *zd = (float *)(sm + 6 * tile); /* two buffers of (lse log2 e, D) of a query tile */
    const float scale = 1.0f / sqrtf((float)D), sl2 = FA_LOG2E * scale;
    int u = kt * FA_BK + warp * 16 + g; /* this lane's keys: u, u + 8 */

    async_tile<D, FA_BK>(ks, qb + C, ld, kt * FA_BK, T);
    async_tile<D, FA_BK>(vs, qb + 2 * C, ld, kt * FA_BK, T);
    async_tile<D, FA_BQ>(qg, qb, ld, kt * FA_BK, T);
    async_tile<D, FA_BQ>(qg + tile, gb, (size_t)C, kt * FA_BK, T);
    cp_async_commit();
    { /* threads 0..63 stage lse, 64..127 D */
        int t = kt * FA_BK + threadIdx.x % FA_BQ;
        zd[threadIdx.x] = t >= T                ? 0.0f
                          : threadIdx.x < FA_BQ ? lse[bh * T + t] * FA_LOG2E
                                                : dsum[bh * T + t];
    }

    uint32_t kf[regs ? D / 16 : 1][4], vf[regs ? D / 16 : 1][4];
    float dk[D / 8][4], dv[D / 8][4];
    for (int j = 0; j < D / 8; j++)
        for (int i = 0; i < 4; i++) dk[j][i] = dv[j][i] = 0.0f;
    for (int qt = kt; qt < nt; qt++) {
        int buf = (qt - kt) & 1;
        const bf16 *qs = qg + buf * 2 * tile, *gs = qs + tile;
        const float *z2 = zd + buf * 2 * FA_BQ, *dd = z2 + FA_BQ;
        float next = 0.0f; /* this thread's lse or D of tile qt + 1 */
        if (qt + 1 < nt) { /* into the other buffers, which every warp is done with */
            bf16 *qn = qg + (buf ^ 1) * 2 * tile;
            int t = (qt + 1) * FA_BQ + threadIdx.x % FA_BQ;
            async_tile<D, FA_BQ>(qn, qb, ld, (qt + 1) * FA_BQ, T);
            async_tile<D, FA_BQ>(qn + tile, gb, (size_t)C, (qt + 1) * FA_BQ, T);
            cp_async_commit();
            if (t < T) next = threadIdx.x < FA_BQ ? lse[bh * T + t] * FA_LOG2E : dsum[bh * T + t];
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); /* tile qt (at qt = kt also K and V) is in, from every thread */
        if (regs && qt == kt)
            for (int kk = 0; kk < (regs ? D / 16 : 0); kk++) {
                frag_a<D>(kf[kk], ks, warp * 16, kk * 16);
                frag_a<D>(vf[kk], vs, warp * 16, kk * 16);
            }
        int edge = qt == kt || (qt + 1) * FA_BQ > T; /* a tile with masked elements */

        for (int c = 0; c < FA_BQ / 16; c++) { /* queries qt*64 + 16c .. +16 */
            if (qt == kt && c < warp) continue; /* every query before every key of this warp */
            float s[2][4], dp[2][4];
            for (int n = 0; n < 2; n++)
                for (int i = 0; i < 4; i++) s[n][i] = dp[n][i] = 0.0f;
            for (int kk = 0; kk < D / 16; kk++) { /* S^T = K Q^T, dP^T = V dO^T */
                uint32_t bq[4], bg[4], ka[4], va[4];
                const uint32_t *kp = kf[regs ? kk : 0], *vp = vf[regs ? kk : 0];
                if (!regs) {
                    frag_a<D>(ka, ks, warp * 16, kk * 16);
                    frag_a<D>(va, vs, warp * 16, kk * 16);
                    kp = ka, vp = va;
                }
                frag_b_nk<D>(bq, qs, c * 16, kk * 16);
                frag_b_nk<D>(bg, gs, c * 16, kk * 16);
                mma_16816(s[0], kp, bq, s[0]);
                mma_16816(s[1], kp, bq + 2, s[1]);
                mma_16816(dp[0], vp, bg, dp[0]);
                mma_16816(dp[1], vp, bg + 2, dp[1]);
            }
            /* element i of n8 tile n: key u + 8*(i/2), query (in the tile) j = 16c + 8n + 2tq +
             * i%2 */
            for (int n = 0; n < 2; n++)
                for (int i = 0; i < 4; i++) {
                    int j = c * 16 + n * 8 + 2 * tq + i % 2, t = qt * FA_BQ + j,
                        uk = u + 8 * (i / 2);
                    float P = fa_exp2(s[n][i] * sl2 - z2[j]), g_ = dp[n][i];
                    if (edge && (uk > t || t >= T)) P = 0.0f;
                    if (DROP && P != 0.0f) {
                        float mk = gk_rng_dropout(key, (bh * T + t) * T + uk, p);
                        g_ *= mk;
                        s[n][i] = P * mk;
                    } else {
                        s[n][i] = P;
                    }
                    dp[n][i] = P * (g_ - dd[j]) * scale;
                }
            uint32_t pa[4], da[4];
            acc_to_a(pa, s[0], s[1]);
            acc_to_a(da, dp[0], dp[1]);
            for (int dn = 0; dn < D / 16; dn++) { /* dV += P^T dO, dK += dS^T Q */
                uint32_t bt[4];
                frag_b_kn<D>(bt, gs, c * 16, dn * 16);
                mma_16816(dv[2 * dn], pa, bt, dv[2 * dn]);
                mma_16816(dv[2 * dn + 1], pa, bt + 2, dv[2 * dn + 1]);
                frag_b_kn<D>(bt, qs, c * 16, dn * 16);
                mma_16816(dk[2 * dn], da, bt, dk[2 * dn]);
                mma_16816(dk[2 * dn + 1], da, bt + 2, dk[2 * dn + 1]);
            }
        }
        if (qt + 1 < nt) zd[(buf ^ 1) * 2 * FA_BQ + threadIdx.x] = next;
        __syncthreads(); /* every warp is done with this buffer before the loads of qt + 2 */
    }
    bf16 *du = dqkv + (size_t)b * T * ld + (size_t)h * D;
    store_acc<D>(du + C, ld, u, T, dk);
    store_acc<D>(du + 2 * C, ld, u, T, dv);
}

/* grid (query tiles, NH, B), FA_THREADS, fa2_bwd_smem<D>(0): dQ of one query tile into dqkv. */
template <int D, bool DROP>
__global__ void __launch_bounds__(FA_THREADS, fa2_bwd_blocks<D, DROP>(0))
    fa2_bwd_q(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse, const float *dsum,
              int T, int C, int NH, float p, uint64_t key)
{
    GK_DYN_SMEM(bf16, sm);
    int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z; /* long rows first */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    size_t ld = 3 * (size_t)C, bh = (size_t)b * NH + h;
    const bf16 *qb = qkv + (size_t)b * T * ld + (size_t)h * D;
    constexpr int tile = FA_BK * fa_ld(D);
    constexpr bool regs = D <= FB_Q_REG_D;
    bf16 *qs = sm, *gs = sm + tile, *kv = sm + 2 * tile; /* kv: two buffers of (K tile, V tile) */
    const float scale = 1.0f / sqrtf((float)D), sl2 = FA_LOG2E * scale;
    int row = qt * FA_BQ + warp * 16 + g; /* this lane's rows: row, row + 8 */

    async_tile<D, FA_BQ>(qs, qb, ld, qt * FA_BQ, T);
    async_tile<D, FA_BQ>(gs, dout + (size_t)b * T * C + (size_t)h * D, (size_t)C, qt * FA_BQ, T);
    async_kv<D>(kv, qb, ld, C, 0, T);
    cp_async_commit();
    float z2[2], dd[2];
    for (int r = 0; r < 2; r++) {
        int t = row + 8 * r;
        z2[r] = t < T ? lse[bh * T + t] * FA_LOG2E : 0.0f;
        dd[r] = t < T ? dsum[bh * T + t] : 0.0f;
    }

    uint32_t qf[regs ? D / 16 : 1][4], gf[regs ? D / 16 : 1][4];
    float dq[D / 8][4];
    for (int j = 0; j < D / 8; j++)
        for (int i = 0; i < 4; i++) dq[j][i] = 0.0f;
    for (int kt = 0; kt <= qt; kt++) {
        const bf16 *ks = kv + (kt & 1) * 2 * tile, *vs = ks + tile;
        async_kv_next<D>(kv, qb, ld, C, kt, qt, T);
        __syncthreads(); /* tile kt (at kt = 0 also Q and dO) is in, from every thread */
        if (regs && kt == 0)
            for (int kk = 0; kk < (regs ? D / 16 : 0); kk++) {
                frag_a<D>(qf[kk], qs, warp * 16, kk * 16);
                frag_a<D>(gf[kk], gs, warp * 16, kk * 16);
            }

        for (int c = 0; c < FA_BK / 16; c++) { /* keys kt*64 + 16c .. +16 */
            if (kt == qt && c > warp) break; /* every key past every row of this warp */
            float s[2][4], dp[2][4];
            for (int n = 0; n < 2; n++)
                for (int i = 0; i < 4; i++) s[n][i] = dp[n][i] = 0.0f;
            for (int kk = 0; kk < D / 16; kk++) { /* S = Q K^T, dP = dO V^T */
                uint32_t bk[4], bv[4], qa[4], ga[4];
                const uint32_t *qp = qf[regs ? kk : 0], *gp = gf[regs ? kk : 0];
                if (!regs) {
                    frag_a<D>(qa, qs, warp * 16, kk * 16);
                    frag_a<D>(ga, gs, warp * 16, kk * 16);
                    qp = qa, gp = ga;
                }
                frag_b_nk<D>(bk, ks, c * 16, kk * 16);
                frag_b_nk<D>(bv, vs, c * 16, kk * 16);
                mma_16816(s[0], qp, bk, s[0]);
                mma_16816(s[1], qp, bk + 2, s[1]);
                mma_16816(dp[0], gp, bv, dp[0]);
                mma_16816(dp[1], gp, bv + 2, dp[1]);
            }
            /* element i of n8 tile n: row row + 8*(i/2), key kt*64 + 16c + 8n + 2tq + i%2 */
            for (int n = 0; n < 2; n++)
                for (int i = 0; i < 4; i++) {
                    int uk = kt * FA_BK + c * 16 + n * 8 + 2 * tq + i % 2, t = row + 8 * (i / 2);
                    float P = fa_exp2(s[n][i] * sl2 - z2[i / 2]), g_ = dp[n][i];
                    if (kt == qt && (uk > t || t >= T)) P = 0.0f;
                    if (DROP && P != 0.0f) g_ *= gk_rng_dropout(key, (bh * T + t) * T + uk, p);
                    dp[n][i] = P * (g_ - dd[i / 2]) * scale;
                }
            uint32_t da[4];
            acc_to_a(da, dp[0], dp[1]);
            for (int dn = 0; dn < D / 16; dn++) { /* dQ += dS K */
                uint32_t bt[4];
                frag_b_kn<D>(bt, ks, c * 16, dn * 16);
                mma_16816(dq[2 * dn], da, bt, dq[2 * dn]);
                mma_16816(dq[2 * dn + 1], da, bt + 2, dq[2 * dn + 1]);
            }
        }
        __syncthreads(); /* every warp is done with this buffer before the loads of kt + 2 */
    }
    store_acc<D>(dqkv + (size_t)b * T * ld + (size_t)h * D, ld, row, T, dq);
}

/* ---- host side ---- */

template <int D, bool DROP>
static void bwd(gk_backend *be, bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
                const float *dsum, int B, int T, int C, int NH, float p, uint64_t key)
{
    if (cu_attn_smem_optin(be, fa2_bwd_kv<D, DROP>, fa2_bwd_smem<D>(1), "fa2 attention_bwd") ||
        cu_attn_smem_optin(be, fa2_bwd_q<D, DROP>, fa2_bwd_smem<D>(0), "fa2 attention_bwd"))
        return;
    dim3 grid((unsigned)((T + FA_BQ - 1) / FA_BQ), (unsigned)NH, (unsigned)B);
    CU_LAUNCH(be, (fa2_bwd_kv<D, DROP>), grid, FA_THREADS, fa2_bwd_smem<D>(1), dqkv, dout, qkv, lse,
              dsum, T, C, NH, p, key);
    CU_LAUNCH(be, (fa2_bwd_q<D, DROP>), grid, FA_THREADS, fa2_bwd_smem<D>(0), dqkv, dout, qkv, lse,
              dsum, T, C, NH, p, key);
}

template <int D>
static void bwd(gk_backend *be, bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
                const float *dsum, int B, int T, int C, int NH, float p, uint64_t key)
{
    if (p > 0.0f) bwd<D, true>(be, dqkv, dout, qkv, lse, dsum, B, T, C, NH, p, key);
    else bwd<D, false>(be, dqkv, dout, qkv, lse, dsum, B, T, C, NH, p, key);
}

/* dqkv (B,T,3C) from dout (B,T,C), qkv, lse of the forward and dsum (B,NH,T): D = rowsum(dO * O),
 * attention.cu's. Head sizes as cu_attn_fused_head; bf16, 16-byte aligned rows (attention.cu
 * checks). */
void cu_fa2_attn_bwd(gk_backend *be, bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                     const float *lse, const float *dsum, int B, int T, int C, int NH, float p,
                     uint64_t key)
{
    if (cu_attn_by_head(C / NH, [&](auto d) {
            bwd<decltype(d)::value>(be, dqkv, dout, qkv, lse, dsum, B, T, C, NH, p, key);
        }))
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda fa2 attention_bwd: head size %d", C / NH);
}
