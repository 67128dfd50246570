/* cpu_attn.c: causal self-attention on the CPU, one (batch, head) per task, one query row at a
 * time: a row's scores live in a T-float scratch, the (B,NH,T,T) tensor never exists. The head's
 * K and V are first transposed into (hs,T) scratch so that every inner loop runs along a
 * contiguous row (vectorized, no horizontal sums). The backward recomputes probabilities from the
 * saved log-sum-exp (flash-attention style). A head is done by one thread in a fixed order, so
 * results do not depend on the thread count. (Small OpenBLAS calls from inside OpenMP threads
 * were measured 20x slower here: the pthread OpenBLAS build serializes them.) */
#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/ref.h"
#include "kernels/rng.h"

/* x (T rows at stride ld, hs wide) -> xt (hs,T) */
static void transpose(float *restrict xt, const float *restrict x, int T, int hs, int ld)
{
    for (int t = 0; t < T; t++)
        for (int i = 0; i < hs; i++) xt[(size_t)i * T + t] = x[(size_t)t * ld + i];
}

/* s[0..n) = sum_i a[i] * xt[i][0..n) (xt rows of length T) */
GK_CLONES static void vecmat(float *restrict s, const float *restrict a, const float *restrict xt,
                             int n, int hs, int T)
{
    for (int u = 0; u < n; u++) s[u] = 0.0f;
    for (int i = 0; i < hs; i++) {
        float ai = a[i];
        const float *r = xt + (size_t)i * T;
#pragma omp simd
        for (int u = 0; u < n; u++) s[u] += ai * r[u];
    }
}

/* One query row's probabilities from its scores s[0..n): returns lse; s = softmax(s) * dropout. */
GK_CLONES static float softmax_row(float *restrict s, int n, float p, uint64_t key, size_t ctr0)
{
    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int u = 0; u < n; u++) mx = s[u] > mx ? s[u] : mx;
#pragma omp simd reduction(+ : sum)
    for (int u = 0; u < n; u++) {
        s[u] = gk_vexpf(s[u] - mx);
        sum += s[u];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int u = 0; u < n; u++) s[u] *= inv;
    if (p > 0)
        for (int u = 0; u < n; u++) s[u] *= gk_rng_dropout(key, ctr0 + u, p);
    return mx + logf(sum);
}

/* o[0..hs) = sum_u w[u] * x_u, x rows at stride ld */
GK_CLONES static void rowcomb(float *restrict o, const float *restrict w, const float *restrict x,
                              int n, int hs, int ld)
{
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int u = 0; u < n; u++) {
        float wu = w[u];
        const float *r = x + (size_t)u * ld;
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += wu * r[i];
    }
}

/* One head: q, k, v rows at stride ld (3C) -> o rows at stride C, lse (T).
 * scratch: kt (hs,T), s (T). */
static void attn_fwd_head(float *o, float *lse, const float *q, const float *k, const float *v,
                          float *scr, int T, int hs, int ld, int C, float p, uint64_t key,
                          size_t row0)
{
    float scale = 1.0f / sqrtf((float)hs), *kt = scr, *s = scr + (size_t)hs * T;
    transpose(kt, k, T, hs, ld);
    for (int t = 0; t < T; t++) {
        vecmat(s, q + (size_t)t * ld, kt, t + 1, hs, T);
        for (int u = 0; u <= t; u++) s[u] *= scale;
        lse[t] = softmax_row(s, t + 1, p, key, (row0 + t) * T);
        rowcomb(o + (size_t)t * C, s, v, t + 1, hs, ld);
    }
}

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T)
void cpu_attention_fwd(gk_backend *be, float *out, float *lse, const float *qkv, int B, int T,
                       int C, int NH, float p, uint64_t key)
{
    int nt = CPU(be)->nthreads, hs = C / NH;
    size_t per = 2 * (size_t)T * (hs + 1); /* per thread */
    float *scr = cpu_scratch(be, nt * per);
    if (!scr) {
        gk_ref_ops.attention_fwd(be, out, lse, qkv, B, T, C, NH, p, key);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *base = qkv + (size_t)b * T * 3 * C + h * hs;
        attn_fwd_head(out + (size_t)b * T * C + h * hs, lse + (size_t)bh * T, base, base + C,
                      base + 2 * C, scr + omp_get_thread_num() * per, T, hs, 3 * C, C, p, key,
                      (size_t)bh * T);
    }
}

/* Row t of the backward: pr = recomputed scores -> P; dp = dO Vt -> dS (scaled); D = sum P dP. */
GK_CLONES static void bwd_row(float *restrict pr, float *restrict dp, int n, float z, float scale,
                              float p, uint64_t key, size_t ctr0)
{
    float D = 0.0f;
    if (p > 0)
        for (int u = 0; u < n; u++) dp[u] *= gk_rng_dropout(key, ctr0 + u, p);
#pragma omp simd reduction(+ : D)
    for (int u = 0; u < n; u++) {
        pr[u] = gk_vexpf(pr[u] * scale - z);
        D += pr[u] * dp[u];
    }
#pragma omp simd
    for (int u = 0; u < n; u++) dp[u] = pr[u] * (dp[u] - D) * scale;
    if (p > 0)
        for (int u = 0; u < n; u++) pr[u] *= gk_rng_dropout(key, ctr0 + u, p);
}

/* x_u (rows at stride ld) += w[u] * a, for u < n */
GK_CLONES static void rank1(float *x, const float *restrict w, const float *restrict a, int n,
                            int hs, int ld)
{
    for (int u = 0; u < n; u++) {
        float wu = w[u];
        float *r = x + (size_t)u * ld;
#pragma omp simd
        for (int i = 0; i < hs; i++) r[i] += wu * a[i];
    }
}

/* One head's backward: dq, dk, dv rows at stride ld (=), from dO rows at stride C.
 * scratch: kt, vt (hs,T), pr, dp (T). */
static void attn_bwd_head(float *dq, float *dk, float *dv, const float *dO, const float *q,
                          const float *k, const float *v, const float *lse, float *scr, int T,
                          int hs, int ld, int C, float p, uint64_t key, size_t row0)
{
    float scale = 1.0f / sqrtf((float)hs);
    float *kt = scr, *vt = kt + (size_t)hs * T, *pr = vt + (size_t)hs * T, *dp = pr + T;
    transpose(kt, k, T, hs, ld);
    transpose(vt, v, T, hs, ld);
    for (int t = 0; t < T; t++) {
        float *a = dk + (size_t)t * ld, *b = dv + (size_t)t * ld;
        for (int i = 0; i < hs; i++) a[i] = b[i] = 0.0f;
    }
    for (int t = 0; t < T; t++) {
        const float *qt = q + (size_t)t * ld, *dOt = dO + (size_t)t * C;
        vecmat(pr, qt, kt, t + 1, hs, T);
        vecmat(dp, dOt, vt, t + 1, hs, T);
        bwd_row(pr, dp, t + 1, lse[t], scale, p, key, (row0 + t) * T);
        rank1(dv, pr, dOt, t + 1, hs, ld);               // dV_u += P_tu * dO_t
        rowcomb(dq + (size_t)t * ld, dp, k, t + 1, hs, ld); // dQ_t = sum_u dS_tu K_u
        rank1(dk, dp, qt, t + 1, hs, ld);                // dK_u += dS_tu * Q_t
    }
}

// dout (B,T,C) -> dqkv (B,T,3C) =
void cpu_attention_bwd(gk_backend *be, float *dqkv, const float *dout, const float *qkv,
                       const float *out, const float *lse, int B, int T, int C, int NH, float p,
                       uint64_t key)
{
    int nt = CPU(be)->nthreads, hs = C / NH;
    size_t per = 2 * (size_t)T * (hs + 1);
    float *scr = cpu_scratch(be, nt * per);
    if (!scr) {
        gk_ref_ops.attention_bwd(be, dqkv, dout, qkv, out, lse, B, T, C, NH, p, key);
        return;
    }
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
