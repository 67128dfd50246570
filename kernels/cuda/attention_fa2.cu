/* attention_fa2.cu: the causal attention forward as FlashAttention-2 does it, for bf16
 * activations, on the warp-level primitives of mma.h (mma.sync m16n8k16, ldmatrix, cp.async);
 * attention.cu decides when it runs (the fa2 path); the lse written here is the natural-log one
 * that both backwards read: attention_fa2_bwd.cu's (the fa2 path's) and attention_flash.cu's.
 * Tile helpers shared with the backward: attention_fa2_tile.h.
 * A block is 4 warps over a tile of 64 query rows (16 rows a warp; 128 and 32 with FA_FWD_MT=2)
 * and walks the key tiles of 64 up to the diagonal, K and V double-buffered in shared memory by
 * cp.async (tile kt+1 loads while tile kt computes). Everything after the loads stays in
 * registers: the warp's Q fragments
 * (ldmatrix once), S = Q K^T in mma accumulators (K by ldmatrix), the online softmax on those
 * accumulators (each row is held by the 4 lanes of a quad: row max and sum by two shuffles), P
 * packed to bf16 straight into A fragments (the m16n8k16 accumulator layout of two adjacent n8
 * tiles is the A layout of a 16-wide k slice), O += P V by mma with V by ldmatrix.trans, O in
 * fp32 accumulators. Exponentials in base 2 with the scale folded in (fa_exp2(s log2e / sqrt(D) -
 * m): one fused multiply-add and one ex2.approx); lse = m ln 2 + log(l). Causal tiles past the
 * diagonal are never loaded; the diagonal tiles mask keys past the row and past T (rows and keys
 * past T are zero-filled by cp.async and never stored). Dropout as the other paths key it, in a
 * kernel of its own. Head sizes 16, 32, 64, 128. */
#include "kernels/cuda/attention_fa2_tile.h"

#include <stdint.h>

#include "kernels/rng.h"

/* Knob for measuring on a GPU (tests/bench/gpu_session.sh): FA_FWD_MT m16 row tiles a warp up to
 * head size 64, 1 (16 rows a warp, 64 a block, the default) or 2 (32 and 128, as
 * FlashAttention-2 does at head size 64: each K and V fragment read from shared memory feeds
 * twice the mma, for about twice the registers: 2 blocks an SM at D = 64; ptxas's counts are in
 * tests/bench/gpu-results.md). D = 128 keeps 1 (2 would spill). */
#ifndef FA_FWD_MT
#define FA_FWD_MT 1
#endif
template <int D> static __host__ __device__ constexpr int fa2_fwd_mt()
{
    return D <= 64 ? FA_FWD_MT : 1;
}
/* query rows a block */
template <int D> static __host__ __device__ constexpr int fa2_fwd_bq()
{
    return FA_WARPS * 16 * fa2_fwd_mt<D>();
}

/* Q tile, then two buffers of (K tile, V tile). */
template <int D> static constexpr size_t fa2_fwd_smem()
{
    return sizeof(bf16) * (size_t)(fa2_fwd_bq<D>() + 4 * FA_BK) * fa_ld(D);
}

/* Blocks an SM asked of ptxas: 4 up to D = 64, as shared memory allows (46 KiB a block at 64),
 * which caps registers at 128 a thread (left alone it takes a few more at D = 64, scheduling the
 * exponentials ahead, and 3 blocks would run); 3 with dropout at 64 (at 4 it would spill); no
 * bound at D = 128 (2 blocks by shared memory) or with 2 row tiles a warp. */
template <int D, bool DROP> static constexpr int fa2_fwd_blocks()
{
    return D > 64 || fa2_fwd_mt<D>() > 1 ? 1 : DROP && D == 64 ? 3 : 4;
}

/* grid (query tiles, NH, B), FA_THREADS, fa2_fwd_smem<D>(). qkv (B,T,3C) -> out (B,T,C), lse
 * (B,NH,T) when not NULL. DROP: p > 0 (a kernel apart, so that the other holds no dropout state).
 * Row tile mt of warp w is rows (mt FA_WARPS + w) 16.. of the block's, so that the masked corner
 * of the diagonal spreads over the warps. */
template <int D, bool DROP>
__global__ void __launch_bounds__(FA_THREADS, fa2_fwd_blocks<D, DROP>())
    fa2_fwd(bf16 *out, float *lse, const bf16 *qkv, int T, int C, int NH, float p, uint64_t key)
{
    constexpr int MT = fa2_fwd_mt<D>(), BQ = fa2_fwd_bq<D>();
    GK_DYN_SMEM(bf16, sm);
    int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z; /* long rows first */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    size_t ld = 3 * (size_t)C, bh = (size_t)b * NH + h;
    const bf16 *qb = qkv + (size_t)b * T * ld + (size_t)h * D;
    constexpr int tile = FA_BK * fa_ld(D);
    bf16 *qs = sm, *kv = sm + BQ * fa_ld(D);
    const float sl2 = FA_LOG2E / sqrtf((float)D); /* log2(e) / sqrt(D) */
    int r0[MT], row[MT];                           /* a row tile's first row; this
                                                    * lane's: row, row + 8 */
    for (int mt = 0; mt < MT; mt++)
        r0[mt] = qt * BQ + (mt * FA_WARPS + warp) * 16, row[mt] = r0[mt] + g;
    int last = (min(qt * BQ + BQ, T) - 1) / FA_BK; /* the key tile of the block's last row */

    async_tile<D, BQ>(qs, qb, ld, qt * BQ, T);
    async_kv<D>(kv, qb, ld, C, 0, T);
    cp_async_commit();

    uint32_t qf[MT][D / 16][4];
    float o[MT][D / 8][4], m[MT][2], l[MT][2];
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
        for (int j = 0; j < D / 8; j++)
            for (int i = 0; i < 4; i++) o[mt][j][i] = 0.0f;
    }
    for (int kt = 0; kt <= last; kt++) {
        const bf16 *ks = kv + (kt & 1) * 2 * tile, *vs = ks + tile;
        async_kv_next<D>(kv, qb, ld, C, kt, last, T);
        __syncthreads(); /* tile kt (and at kt = 0 the Q tile) is in, from every thread */
        if (kt == 0)
            for (int mt = 0; mt < MT; mt++)
                for (int kk = 0; kk < D / 16; kk++)
                    frag_a<D>(qf[mt][kk], qs, (mt * FA_WARPS + warp) * 16, kk * 16);

        /* S (16, FA_BK) = Q K^T a row tile: n8 tiles 2n, 2n+1 from one ldmatrix.x4 of 16 keys x
         * 16 dims, which every row tile of the warp takes */
        float s[MT][FA_BK / 8][4];
        for (int mt = 0; mt < MT; mt++)
            for (int n = 0; n < FA_BK / 8; n++)
                for (int i = 0; i < 4; i++) s[mt][n][i] = 0.0f;
        for (int kk = 0; kk < D / 16; kk++)
            for (int n = 0; n < FA_BK / 16; n++) {
                uint32_t kf[4];
                frag_b_nk<D>(kf, ks, n * 16, kk * 16);
                for (int mt = 0; mt < MT; mt++) {
                    mma_16816(s[mt][2 * n], qf[mt][kk], kf, s[mt][2 * n]);
                    mma_16816(s[mt][2 * n + 1], qf[mt][kk], kf + 2, s[mt][2 * n + 1]);
                }
            }

        /* online softmax in base 2 on the accumulators: element i of tile n is row row + 8*(i/2),
         * key kt*FA_BK + 8n + 2tq + i%2; only a key tile reaching past a row tile's first row or
         * past T has masked keys (the diagonal's, with MT = 1). The row max is taken of the raw
         * scores and m kept scaled (sl2 > 0 keeps the order), so that the scale is the multiply
         * of one fused multiply-add with the exponent's - m */
        GK_UNROLL
        for (int mt = 0; mt < MT; mt++) {
            /* a branch of the warp's (inside the max loop ptxas predicated the mask on every
             * tile) */
            if (kt * FA_BK + FA_BK - 1 > r0[mt] || kt * FA_BK + FA_BK > T)
                for (int n = 0; n < FA_BK / 8; n++)
                    for (int i = 0; i < 4; i++) {
                        int u = kt * FA_BK + n * 8 + 2 * tq + i % 2, t = row[mt] + 8 * (i / 2);
                        if (u > t || u >= T) s[mt][n][i] = -INFINITY;
                    }
            float mx[2] = {-INFINITY, -INFINITY};
            for (int n = 0; n < FA_BK / 8; n++)
                for (int i = 0; i < 4; i++) mx[i / 2] = fmaxf(mx[i / 2], s[mt][n][i]);
            for (int r = 0; r < 2; r++) {
                /* finite: key 0 is in every row's first tile; a row tile all masked keeps m */
                float mnew = fmaxf(m[mt][r], quad_max(mx[r]) * sl2);
                float alpha = fa_exp2(m[mt][r] - mnew);
                m[mt][r] = mnew;
                l[mt][r] *= alpha;
                for (int j = 0; j < D / 8; j++)
                    o[mt][j][2 * r] *= alpha, o[mt][j][2 * r + 1] *= alpha;
            }
            for (int n = 0; n < FA_BK / 8; n++)
                for (int i = 0; i < 4; i++) {
                    float e = fa_exp2(s[mt][n][i] * sl2 - m[mt][i / 2]);
                    l[mt][i / 2] += e; /* this lane's columns; the quad's sum at the end */
                    if (DROP && e != 0.0f) {
                        int u = kt * FA_BK + n * 8 + 2 * tq + i % 2, t = row[mt] + 8 * (i / 2);
                        e *= gk_rng_dropout(key, (bh * T + t) * T + u, p);
                    }
                    s[mt][n][i] = e;
                }
        }

        /* O += P V: P's 16-key slice c is the A fragment of tiles 2c, 2c+1; V (16 keys x 16 dims)
         * by ldmatrix.x4.trans gives the B fragments of dims 16dn..+8 and +8..+16 */
        for (int c = 0; c < FA_BK / 16; c++) {
            uint32_t pa[MT][4];
            for (int mt = 0; mt < MT; mt++) acc_to_a(pa[mt], s[mt][2 * c], s[mt][2 * c + 1]);
            for (int dn = 0; dn < D / 16; dn++) {
                uint32_t vf[4];
                frag_b_kn<D>(vf, vs, c * 16, dn * 16);
                for (int mt = 0; mt < MT; mt++) {
                    mma_16816(o[mt][2 * dn], pa[mt], vf, o[mt][2 * dn]);
                    mma_16816(o[mt][2 * dn + 1], pa[mt], vf + 2, o[mt][2 * dn + 1]);
                }
            }
        }
        __syncthreads(); /* every warp is done with this buffer before the loads of kt + 2 */
    }

    for (int mt = 0; mt < MT; mt++)
        for (int r = 0; r < 2; r++) {
            int t = row[mt] + 8 * r;
            float sum = quad_sum(l[mt][r]), inv = 1.0f / sum;
            if (t >= T) continue;
            if (lse && tq == 0) lse[bh * T + t] = m[mt][r] * 0.6931471805599453f + logf(sum);
            bf16 *dst = out + ((size_t)b * T + t) * C + (size_t)h * D + 2 * tq;
            for (int j = 0; j < D / 8; j++)
                *(uint32_t *)(dst + j * 8) =
                    pack_bf16x2(o[mt][j][2 * r] * inv, o[mt][j][2 * r + 1] * inv);
        }
}

/* ---- host side ---- */

template <int D, bool DROP>
static void fwd(gk_backend *be, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C,
                int NH, float p, uint64_t key)
{
    size_t smem = fa2_fwd_smem<D>();
    if (cu_attn_smem_optin(be, fa2_fwd<D, DROP>, smem, "fa2 attention")) return;
    dim3 grid((unsigned)((T + fa2_fwd_bq<D>() - 1) / fa2_fwd_bq<D>()), (unsigned)NH, (unsigned)B);
    CU_LAUNCH(be, (fa2_fwd<D, DROP>), grid, FA_THREADS, smem, out, lse, qkv, T, C, NH, p, key);
}

template <int D>
static void fwd(gk_backend *be, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C,
                int NH, float p, uint64_t key)
{
    if (p > 0.0f) fwd<D, true>(be, out, lse, qkv, B, T, C, NH, p, key);
    else fwd<D, false>(be, out, lse, qkv, B, T, C, NH, p, key);
}

void cu_fa2_attn_fwd(gk_backend *be, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C,
                     int NH, float p, uint64_t key)
{
    if (cu_attn_by_head(C / NH, [&](auto d) {
            fwd<decltype(d)::value>(be, out, lse, qkv, B, T, C, NH, p, key);
        }))
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda fa2 attention: head size %d", C / NH);
}
