/* attention.c: causal self-attention on the CPU, one (batch, head) per task, RB query rows at a
 * time: a block's scores live in an (RB,Tp) scratch, the (B,NH,T,T) tensor never exists. The
 * head's K and V are first transposed into (hs,Tp) scratch (Tp = T rounded up to VW floats, zero
 * padded) so that the score loops run along contiguous rows in whole vectors, without tails; the
 * RB rows of a block share every load of K, V, dK and dV. Scores are computed up to the block's
 * last key rounded up to VW; entries past a row's own position get probability 0. The backward
 * recomputes probabilities from the saved log-sum-exp (flash-attention style). A head is done by
 * one thread in a fixed order, so results do not depend on the thread count. (Small OpenBLAS
 * calls from inside OpenMP threads are many times slower, tests/bench/cpu-results.md: the
 * pthread OpenBLAS build serializes them.)
 * The decode step (attention_fwd_at) attends new query rows over the KV cache. References:
 * kernels/ref/attention.c. */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/host_mem.h"
#include "kernels/rng.h"

#define VW CPU_LANES /* floats per vector chunk (16: one AVX-512 register) */
#define RB 4  /* query rows per block */

static int round_vw(int n) { return (n + VW - 1) / VW * VW; }

/* Per thread: kt, vt (hs,Tp); two (RB,Tp) score blocks; one spare output row (hs). */
size_t gk_cpu_attn_scratch(int T, int hs)
{
    size_t Tp = (size_t)round_vw(T);
    return 2 * Tp * ((size_t)hs + RB) + (size_t)round_vw(hs);
}

/* x (T rows at stride ld, hs wide) -> xt (hs,Tp), columns T..Tp-1 zero */
static void transpose(float *restrict xt, const float *restrict x, int T, int Tp, int hs, int ld)
{
    for (int t = 0; t < T; t++)
        for (int i = 0; i < hs; i++) xt[(size_t)i * Tp + t] = x[(size_t)t * ld + i];
    for (int i = 0; i < hs; i++)
        for (int t = T; t < Tp; t++) xt[(size_t)i * Tp + t] = 0.0f;
}

/* s[r][0..nv) = scale * sum_i a[r][i] * xt[i][0..nv), r < RB (s rows at stride Tp, xt rows of
 * Tp floats); nv a multiple of VW. */
GK_CLONES static void block_scores(float *restrict s, const float *const a[RB],
                                   const float *restrict xt, int nv, int hs, int Tp, float scale)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    for (int c = 0; c < nv; c += VW) {
        float s0[VW] = {0}, s1[VW] = {0}, s2[VW] = {0}, s3[VW] = {0};
        for (int i = 0; i < hs; i++) {
            const float *x = xt + (size_t)i * Tp + c;
            float b0 = a0[i], b1 = a1[i], b2 = a2[i], b3 = a3[i];
#pragma omp simd
            for (int j = 0; j < VW; j++) {
                s0[j] += b0 * x[j];
                s1[j] += b1 * x[j];
                s2[j] += b2 * x[j];
                s3[j] += b3 * x[j];
            }
        }
#pragma omp simd
        for (int j = 0; j < VW; j++) {
            s[c + j] = s0[j] * scale;
            s[(size_t)Tp + c + j] = s1[j] * scale;
            s[2 * (size_t)Tp + c + j] = s2[j] * scale;
            s[3 * (size_t)Tp + c + j] = s3[j] * scale;
        }
    }
}

/* o[r][0..hs) = sum_{u<n} w[r][u] x_u for r < RB (w rows at stride Tp, x rows at stride ldx). */
GK_CLONES static void block_comb(float *const o[RB], const float *restrict w, int Tp,
                                 const float *restrict x, int ldx, int n, int hs)
{
    const float *w0 = w, *w1 = w + Tp, *w2 = w + 2 * (size_t)Tp, *w3 = w + 3 * (size_t)Tp;
    int i0 = 0;
    for (; i0 + VW <= hs; i0 += VW) {
        float o0[VW] = {0}, o1[VW] = {0}, o2[VW] = {0}, o3[VW] = {0};
        for (int u = 0; u < n; u++) {
            const float *r = x + (size_t)u * ldx + i0;
            float c0 = w0[u], c1 = w1[u], c2 = w2[u], c3 = w3[u];
#pragma omp simd
            for (int j = 0; j < VW; j++) {
                o0[j] += c0 * r[j];
                o1[j] += c1 * r[j];
                o2[j] += c2 * r[j];
                o3[j] += c3 * r[j];
            }
        }
        for (int j = 0; j < VW; j++) {
            o[0][i0 + j] = o0[j];
            o[1][i0 + j] = o1[j];
            o[2][i0 + j] = o2[j];
            o[3][i0 + j] = o3[j];
        }
    }
    for (int i = i0; i < hs; i++) { /* head sizes that are not a multiple of VW */
        float o0 = 0.0f, o1 = 0.0f, o2 = 0.0f, o3 = 0.0f;
        for (int u = 0; u < n; u++) {
            float r = x[(size_t)u * ldx + i];
            o0 += w0[u] * r, o1 += w1[u] * r, o2 += w2[u] * r, o3 += w3[u] * r;
        }
        o[0][i] = o0, o[1][i] = o1, o[2][i] = o2, o[3][i] = o3;
    }
}

/* x_u[0..hs) += sum_r w[r][u] a[r] for u < u0, = for u0 <= u < n (rows first reached by this
 * block: no zeroing pass). x rows at stride ldx, w rows at stride Tp. */
GK_CLONES static void block_rank(float *restrict x, int ldx, const float *restrict w, int Tp,
                                 const float *const a[RB], int u0, int n, int hs)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    for (int u = 0; u < n; u++) {
        float c0 = w[u], c1 = w[Tp + u], c2 = w[2 * (size_t)Tp + u], c3 = w[3 * (size_t)Tp + u];
        float *r = x + (size_t)u * ldx;
        if (u < u0) {
#pragma omp simd
            for (int i = 0; i < hs; i++)
                r[i] += ((c0 * a0[i] + c1 * a1[i]) + c2 * a2[i]) + c3 * a3[i];
        } else {
#pragma omp simd
            for (int i = 0; i < hs; i++)
                r[i] = ((c0 * a0[i] + c1 * a1[i]) + c2 * a2[i]) + c3 * a3[i];
        }
    }
}

/* Row pointers of a block: rows t0..t0+RB-1 of x (stride ld); rows past T repeat row T-1 (read)
 * or go to spare (written). */
static void block_rows(const float *rows[RB], const float *x, int ld, int t0, int T)
{
    for (int r = 0; r < RB; r++) rows[r] = x + (size_t)(t0 + r < T ? t0 + r : T - 1) * ld;
}
static void block_out(float *rows[RB], float *x, int ld, int t0, int T, float *spare)
{
    for (int r = 0; r < RB; r++) rows[r] = t0 + r < T ? x + (size_t)(t0 + r) * ld : spare;
}

/* One query row's probabilities from its scores s[0..n) (n <= nv, nv a multiple of VW): returns
 * lse; s[0..n) = softmax * dropout, s[n..nv) = 0. */
GK_CLONES static float softmax_row(float *restrict s, int n, int nv, float p, uint64_t key,
                                   size_t ctr0)
{
    float lm[VW], ls[VW];
    for (int j = 0; j < VW; j++) lm[j] = -INFINITY, ls[j] = 0.0f;
    for (int u0 = 0; u0 < nv; u0 += VW)
#pragma omp simd
        for (int j = 0; j < VW; j++) {
            float x = u0 + j < n ? s[u0 + j] : -INFINITY;
            lm[j] = x > lm[j] ? x : lm[j];
        }
    float mx = cpu_lanes_max(lm);
    for (int u0 = 0; u0 < nv; u0 += VW)
#pragma omp simd
        for (int j = 0; j < VW; j++) {
            int u = u0 + j;
            float e = gk_vexpf(s[u] - mx);
            s[u] = u < n ? e : 0.0f;
            ls[j] += s[u];
        }
    float sum = cpu_lanes_sum(ls), inv = 1.0f / sum;
#pragma omp simd
    for (int u = 0; u < nv; u++) s[u] *= inv;
    if (p > 0)
        for (int u = 0; u < n; u++) s[u] *= gk_rng_dropout(key, ctr0 + u, p);
    return mx + logf(sum);
}

/* One head: q, k, v rows at stride ld (3C) -> o rows at stride C, lse (T). */
static void attn_fwd_head(float *o, float *lse, const float *q, const float *k, const float *v,
                          float *scr, int T, int hs, int ld, int C, float p, uint64_t key,
                          size_t row0)
{
    int Tp = round_vw(T);
    float scale = 1.0f / sqrtf((float)hs), *kt = scr, *s = kt + 2 * (size_t)hs * Tp;
    float *spare = s + 2 * (size_t)RB * Tp;
    const float *qr[RB];
    float *orow[RB];
    transpose(kt, k, T, Tp, hs, ld);
    for (int t0 = 0; t0 < T; t0 += RB) {
        int n = t0 + RB < T ? t0 + RB : T, nv = round_vw(n);
        block_rows(qr, q, ld, t0, T);
        block_out(orow, o, C, t0, T, spare);
        block_scores(s, qr, kt, nv, hs, Tp, scale);
        for (int r = 0; r < RB; r++) {
            float z = softmax_row(s + (size_t)r * Tp, t0 + r < T ? t0 + r + 1 : n, nv, p, key,
                                  (row0 + t0 + r) * T);
            if (t0 + r < T) lse[t0 + r] = z;
        }
        block_comb(orow, s, Tp, v, ld, n, hs);
    }
}

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T)
void gk_cpu_attention_fwd(gk_backend *be, void *out_, float *lse, const void *qkv_, int B, int T,
                          int C, int NH, float p, uint64_t key)
{
    float *out = out_;
    const float *qkv = qkv_;
    int nt = CPU(be)->nthreads, hs = C / NH;
    size_t per = gk_cpu_attn_scratch(T, hs); /* per thread */
    float *scr = gk_cpu_scratch_need(be, nt * per, "attention_fwd");
    if (!scr) return;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *base = qkv + (size_t)b * T * 3 * C + h * hs;
        attn_fwd_head(out + (size_t)b * T * C + h * hs, lse + (size_t)bh * T, base, base + C,
                      base + 2 * C, scr + omp_get_thread_num() * per, T, hs, 3 * C, C, p, key,
                      (size_t)bh * T);
    }
}

/* Row r of a block's backward, n keys (n <= nv): pr = scores -> P (times the dropout mask);
 * dp = dO Vt -> dS = P (dp - D) scale, D = sum P dp; both 0 from n to nv. */
GK_CLONES static void bwd_row(float *restrict pr, float *restrict dp, int n, int nv, float z,
                              float scale, float p, uint64_t key, size_t ctr0)
{
    float lD[VW] = {0};
    if (p > 0)
        for (int u = 0; u < n; u++) dp[u] *= gk_rng_dropout(key, ctr0 + u, p);
    for (int u0 = 0; u0 < nv; u0 += VW)
#pragma omp simd
        for (int j = 0; j < VW; j++) {
            int u = u0 + j;
            float e = gk_vexpf(pr[u] - z);
            pr[u] = u < n ? e : 0.0f;
            lD[j] += pr[u] * dp[u];
        }
    float D = cpu_lanes_sum(lD);
#pragma omp simd
    for (int u = 0; u < nv; u++) dp[u] = u < n ? pr[u] * (dp[u] - D) * scale : 0.0f;
    if (p > 0)
        for (int u = 0; u < n; u++) pr[u] *= gk_rng_dropout(key, ctr0 + u, p);
}

/* One head's backward: dq, dk, dv rows at stride ld (=), from dO rows at stride C. */
static void attn_bwd_head(float *dq, float *dk, float *dv, const float *dO, const float *q,
                          const float *k, const float *v, const float *lse, float *scr, int T,
                          int hs, int ld, int C, float p, uint64_t key, size_t row0)
{
    int Tp = round_vw(T);
    float scale = 1.0f / sqrtf((float)hs);
    float *kt = scr, *vt = kt + (size_t)hs * Tp, *pr = vt + (size_t)hs * Tp;
    float *dp = pr + (size_t)RB * Tp, *spare = dp + (size_t)RB * Tp;
    const float *qr[RB], *dOr[RB];
    float *dqr[RB];
    transpose(kt, k, T, Tp, hs, ld);
    transpose(vt, v, T, Tp, hs, ld);
    for (int t0 = 0; t0 < T; t0 += RB) {
        int n = t0 + RB < T ? t0 + RB : T, nv = round_vw(n);
        block_rows(qr, q, ld, t0, T);
        block_rows(dOr, dO, C, t0, T);
        block_out(dqr, dq, ld, t0, T, spare);
        block_scores(pr, qr, kt, nv, hs, Tp, scale);
        block_scores(dp, dOr, vt, nv, hs, Tp, 1.0f);
        for (int r = 0; r < RB; r++) {
            float *pr_r = pr + (size_t)r * Tp, *dp_r = dp + (size_t)r * Tp;
            if (t0 + r < T) {
                bwd_row(pr_r, dp_r, t0 + r + 1, nv, lse[t0 + r], scale, p, key,
                        (row0 + t0 + r) * T);
            } else {
                for (int u = 0; u < nv; u++) pr_r[u] = dp_r[u] = 0.0f;
            }
        }
        block_rank(dv, ld, pr, Tp, dOr, t0, n, hs); // dV_u += sum_r P_ru dO_r
        block_comb(dqr, dp, Tp, k, ld, n, hs);      // dQ_r = sum_u dS_ru K_u
        block_rank(dk, ld, dp, Tp, qr, t0, n, hs);  // dK_u += sum_r dS_ru Q_r
    }
}

// dout (B,T,C) -> dqkv (B,T,3C) =
void gk_cpu_attention_bwd(gk_backend *be, void *dqkv_, const void *dout_, const void *qkv_,
                          const void *out_, const float *lse, int B, int T, int C, int NH, float p,
                          uint64_t key)
{
    float *dqkv = dqkv_;
    const float *dout = dout_;
    const float *qkv = qkv_;
    (void)out_; /* the probabilities are recomputed from lse */
    int nt = CPU(be)->nthreads, hs = C / NH;
    size_t per = gk_cpu_attn_scratch(T, hs);
    float *scr = gk_cpu_scratch_need(be, nt * per, "attention_bwd");
    if (!scr) return;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        size_t off = (size_t)b * T * 3 * C + h * hs;
        attn_bwd_head(dqkv + off, dqkv + off + C, dqkv + off + 2 * C,
                      dout + (size_t)b * T * C + h * hs, qkv + off, qkv + off + C,
                      qkv + off + 2 * C, lse + (size_t)bh * T, scr + omp_get_thread_num() * per,
                      T, hs, 3 * C, C, p, key, (size_t)bh * T);
    }
}

/* ---- attention over a KV cache (decoding) ---- */

/* dot of two hs-vectors */
GK_CLONES static float dot(const float *restrict a, const float *restrict b, int hs)
{
    float l[CPU_LANES] = {0};
    int h16 = hs / CPU_LANES * CPU_LANES;
    for (int i0 = 0; i0 < h16; i0 += CPU_LANES)
#pragma omp simd
        for (int j = 0; j < CPU_LANES; j++) l[j] += a[i0 + j] * b[i0 + j];
    for (int i = h16; i < hs; i++) l[i - h16] += a[i] * b[i];
    return cpu_lanes_sum(l);
}

/* s[0..n) = softmax(s) (max subtracted first) */
GK_CLONES static void softmax_inplace(float *restrict s, int n)
{
    float mx = cpu_row_max(s, n), l[CPU_LANES] = {0};
    int n16 = n / CPU_LANES * CPU_LANES;
    for (int u0 = 0; u0 < n16; u0 += CPU_LANES)
#pragma omp simd
        for (int j = 0; j < CPU_LANES; j++) {
            s[u0 + j] = gk_vexpf(s[u0 + j] - mx);
            l[j] += s[u0 + j];
        }
    for (int u = n16; u < n; u++) {
        s[u] = gk_vexpf(s[u] - mx);
        l[u - n16] += s[u];
    }
    float inv = 1.0f / cpu_lanes_sum(l);
#pragma omp simd
    for (int u = 0; u < n; u++) s[u] *= inv;
}

/* A head's keys and values in the cache are hs-wide pieces of rows 3C apart (9 KB on GPT-2 124M),
 * a pattern the hardware prefetcher barely follows: each loop over them asks for the piece
 * ATT_AHEAD rows ahead, which shortens a decoded token (tests/bench/cpu-results.md); 4 to 16
 * rows ahead do about as well, a whole row of all heads worse. */
#define ATT_AHEAD 8

static inline void prefetch_piece(const float *p, int hs)
{
    for (int i = 0; i < hs; i += 16) __builtin_prefetch(p + i);
}

/* o[0..hs) = sum_u w[u] * v_u, v rows at stride ld */
GK_CLONES static void combine(float *restrict o, const float *restrict w, const float *restrict v,
                              int n, int hs, size_t ld)
{
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int u = 0; u < n; u++) {
        float wu = w[u];
        const float *r = v + (size_t)u * ld;
        if (u + ATT_AHEAD < n) prefetch_piece(r + ATT_AHEAD * ld, hs);
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += wu * r[i];
    }
}

// qkv cache (B,Tc,3C), new rows t0..t0+n-1 -> out (B,n,C)
void gk_cpu_attention_fwd_at(gk_backend *be, void *out_, void *cache, const void *qkv_new, int B,
                             int Tc, const int *t0p, int n, int C, int NH)
{
    float *out = out_;
    const float *qkv = cache;
    int nt = CPU(be)->nthreads, hs = C / NH;
    size_t per = (size_t)Tc; /* scores of one row, per thread */
    float *scr = gk_cpu_scratch_need(be, (size_t)nt * per, "attention_fwd_at");
    if (!scr) return;
    int t0 = gk_host_cache_store(be, "cpu", cache, qkv_new, B, Tc, t0p, n, C);
    if (t0 < 0) return;
    float scale = 1.0f / sqrtf((float)hs);
    size_t ld = 3 * (size_t)C;
    int tasks = B * NH * n;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int task = 0; task < tasks; task++) {
        int i = task % n, bh = task / n, b = bh / NH, h = bh % NH, t = t0 + i;
        const float *base = qkv + (size_t)b * Tc * ld + (size_t)h * hs;
        const float *q = base + (size_t)t * ld, *k = base + C, *v = base + 2 * C;
        float *s = scr + (size_t)omp_get_thread_num() * per;
        for (int u = 0; u <= t; u++) {
            if (u + ATT_AHEAD <= t) prefetch_piece(k + (size_t)(u + ATT_AHEAD) * ld, hs);
            s[u] = dot(q, k + (size_t)u * ld, hs) * scale;
        }
        softmax_inplace(s, t + 1);
        combine(out + ((size_t)b * n + i) * C + (size_t)h * hs, s, v, t + 1, hs, ld);
    }
}
