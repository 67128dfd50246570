/* cpu_ops.c: the CPU backend's fused elementwise and row ops. Each op is a row kernel (compiled
 * per ISA, GK_CLONES) plus an OpenMP driver over rows; reductions across rows use GK_NCHUNK fixed
 * chunks so the thread count never changes a result. References: the same names in ref.c. */
#include "kernels/cpu/cpu_ops.h"

#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_f16.h"
#include "kernels/cpu/cpu_q8.h"

#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/ref/ref.h"
#include "kernels/rng.h"

#define NT(be) num_threads(CPU(be)->nthreads)
/* The forward row ops a decoding step runs on one row (batch 1) run it on the calling thread:
 * waking the team for one row of a few microseconds' work cost more than the work (a token runs
 * about 50 of them), and under load a descheduled thread held the whole step at the barrier. */
#define ROWS(N) if ((N) > 1)

/* ---- bias ---- */

// x (N,C) += bias (C)
void cpu_bias_add(gk_backend *be, float *x, const float *bias, int N, int C)
{
#pragma omp parallel for NT(be) schedule(static) ROWS(N)
    for (int i = 0; i < N; i++) {
        float *r = x + (size_t)i * C;
#pragma omp simd
        for (int j = 0; j < C; j++) r[j] += bias[j];
    }
}

/* Column sums of rows [r0,r1) of a (N,C) into acc (C) (=), in row order. */
GK_CLONES static void colsum_rows(float *restrict acc, const float *restrict a, int r0, int r1, int C)
{
    for (int j = 0; j < C; j++) acc[j] = 0.0f;
    for (int i = r0; i < r1; i++) {
        const float *r = a + (size_t)i * C;
#pragma omp simd
        for (int j = 0; j < C; j++) acc[j] += r[j];
    }
}

// dout (N,C) -> dbias (C) +=
void cpu_bias_bwd(gk_backend *be, float *dbias, const void *dout_, int N, int C)
{
    const float *dout = dout_;
    float *part = cpu_scratch(be, (size_t)GK_NCHUNK * C);
    if (!part) {
        gk_ref_ops.bias_bwd(be, dbias, dout, N, C);
        return;
    }
    int per = (N + GK_NCHUNK - 1) / GK_NCHUNK;
#pragma omp parallel NT(be)
    {
#pragma omp for schedule(static)
        for (int k = 0; k < GK_NCHUNK; k++) {
            int r0 = k * per < N ? k * per : N, r1 = r0 + per < N ? r0 + per : N;
            colsum_rows(part + (size_t)k * C, dout, r0, r1, C);
        }
#pragma omp for schedule(static)
        for (int j = 0; j < C; j++) {
            float s = 0.0f;
            for (int k = 0; k < GK_NCHUNK; k++) s += part[(size_t)k * C + j];
            dbias[j] += s;
        }
    }
}

/* ---- embedding ---- */

// tokens (B,T) -> out (B,T,C)
void cpu_encoder_fwd(gk_backend *be, void *out_, const int *tok, const void *wte_, gk_elt tw,
                     const float *wpe, const int *t0, int B, int T, int C, float p, uint64_t key)
{
    float *out = out_;
    const float *wte = wte_;
    if (t0) wpe += (size_t)*t0 * C;
    if (tw != GK_F32) { /* 16-bit and int8 weights are for inference: no dropout */
        if (p > 0) {
            GK_BACKEND_FAIL(be, GK_EUSAGE, "cpu encoder_fwd: dropout with 16-bit or int8 weights");
            return;
        }
        if (tw == GK_F16) cpu_encoder_fwd_f16(be, out, tok, wte_, wpe, B, T, C);
        else if (tw == GK_Q8) cpu_encoder_fwd_q8(be, out, tok, wte_, wpe, B, T, C);
        else cpu_encoder_fwd_bf16(be, out, tok, wte_, wpe, B, T, C);
        return;
    }
#pragma omp parallel for NT(be) schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        const float *e = wte + (size_t)tok[bt] * C, *q = wpe + (size_t)(bt % T) * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = e[c] + q[c];
        if (p > 0)
            for (int c = 0; c < C; c++) o[c] *= gk_rng_dropout(key, (size_t)bt * C + c, p);
    }
}

// dout (B,T,C) -> dwte (V,C) +=, dwpe (T,C) +=. Threads own column ranges, rows go in order.
void cpu_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout_,
                     const int *tok, int B, int T, int C, float p, uint64_t key)
{
    const float *dout = dout_;
    int nb = (C + 63) / 64;
#pragma omp parallel for NT(be) schedule(static)
    for (int cb = 0; cb < nb; cb++) {
        int c0 = cb * 64, c1 = c0 + 64 < C ? c0 + 64 : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C;
            float *we = dwte + (size_t)tok[bt] * C, *wp = dwpe + (size_t)(bt % T) * C;
            for (int c = c0; c < c1; c++) {
                float g = p > 0 ? d[c] * gk_rng_dropout(key, (size_t)bt * C + c, p) : d[c];
                we[c] += g;
                wp[c] += g;
            }
        }
    }
}

/* ---- layernorm ---- */

GK_CLONES static void ln_fwd_row(float *restrict o, float *mean, float *rstd, const float *restrict x,
                                 const float *restrict w, const float *restrict b, int C)
{
    float m = 0.0f, v = 0.0f;
#pragma omp simd reduction(+ : m)
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    v /= C;
    float rs = 1.0f / sqrtf(v + 1e-5f);
    if (b) {
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * rs * w[c] + b[c];
    } else {
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * rs * w[c];
    }
    *mean = m;
    *rstd = rs;
}

// inp (N,C) -> out (N,C), mean (N), rstd (N)
void cpu_layernorm_fwd(gk_backend *be, void *out_, float *mean, float *rstd, const void *inp_,
                       const float *w, const float *b, int N, int C)
{
    float *out = out_;
    const float *inp = inp_;
#pragma omp parallel for NT(be) schedule(static) ROWS(N)
    for (int i = 0; i < N; i++)
        ln_fwd_row(out + (size_t)i * C, mean + i, rstd + i, inp + (size_t)i * C, w, b, C);
}

/* Rows [r0,r1): dinp +=, and the chunk's partial dweight, dbias (=) in pw, pb. */
GK_CLONES static void ln_bwd_rows(float *restrict dinp, float *restrict pw, float *restrict pb,
                                  const float *restrict dout, const float *restrict inp,
                                  const float *restrict w, const float *mean, const float *rstd,
                                  int r0, int r1, int C)
{
    for (int c = 0; c < C; c++) pw[c] = pb[c] = 0.0f;
    for (int i = r0; i < r1; i++) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        float *di = dinp + (size_t)i * C;
        float m = mean[i], rs = rstd[i], a = 0.0f, bsum = 0.0f;
#pragma omp simd reduction(+ : a, bsum)
        for (int c = 0; c < C; c++) {
            float dn = d[c] * w[c];
            a += dn;
            bsum += dn * ((x[c] - m) * rs);
        }
        a /= C;
        bsum /= C;
#pragma omp simd
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * rs, dn = d[c] * w[c];
            di[c] += (dn - a - norm * bsum) * rs;
            pw[c] += d[c] * norm;
            pb[c] += d[c];
        }
    }
}

// dout (N,C) -> dinp (N,C) +=, dweight (C) +=, dbias (C) +=
void cpu_layernorm_bwd(gk_backend *be, void *dinp_, float *dw, float *db, const void *dout_,
                       const void *inp_, const float *w, const float *mean, const float *rstd,
                       int N, int C)
{
    float *dinp = dinp_;
    const float *dout = dout_;
    const float *inp = inp_;
    float *part = cpu_scratch(be, (size_t)GK_NCHUNK * 2 * C);
    if (!part) {
        gk_ref_ops.layernorm_bwd(be, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
        return;
    }
    int per = (N + GK_NCHUNK - 1) / GK_NCHUNK;
#pragma omp parallel NT(be)
    {
#pragma omp for schedule(static)
        for (int k = 0; k < GK_NCHUNK; k++) {
            int r0 = k * per < N ? k * per : N, r1 = r0 + per < N ? r0 + per : N;
            ln_bwd_rows(dinp, part + (size_t)k * 2 * C, part + (size_t)k * 2 * C + C, dout, inp,
                        w, mean, rstd, r0, r1, C);
        }
#pragma omp for schedule(static)
        for (int j = 0; j < C; j++) {
            float sw = 0.0f, sb = 0.0f;
            for (int k = 0; k < GK_NCHUNK; k++) {
                sw += part[(size_t)k * 2 * C + j];
                sb += part[(size_t)k * 2 * C + C + j];
            }
            dw[j] += sw;
            if (db) db[j] += sb;
        }
    }
}

/* ---- GELU (tanh) ----
 * 0.5 x (1 + tanh(u)) == x * sigmoid(2u) exactly, and the sigmoid form needs only exp, without
 * the cancellation of 1 + tanh(u) for u << 0. u = sqrt(2/pi) (x + 0.044715 x^3). */

#define GELU_K 0.7978845608028654f

/* o (C) = gelu(x (C)): the one GELU of the backend (gemm's epilogue and gelu_fwd both call it, so
 * they agree bit for bit). */
GK_CLONES static void gelu_fwd_row(float *restrict o, const float *restrict x, int C)
{
#pragma omp simd
    for (int c = 0; c < C; c++) {
        float xi = x[c], u = GELU_K * (xi + 0.044715f * xi * xi * xi);
        o[c] = xi / (1.0f + gk_vexpf(-2.0f * u));
    }
}
GK_CLONES static void bias_add_row(float *restrict x, const float *restrict b, int C)
{
#pragma omp simd
    for (int c = 0; c < C; c++) x[c] += b[c];
}

// x (N,C) += bias; out (N,C) = gelu(x)
void cpu_bias_gelu(gk_backend *be, float *out, float *x, const float *bias, int N, int C)
{
#pragma omp parallel for NT(be) schedule(static) ROWS(N)
    for (int i = 0; i < N; i++) {
        if (bias) bias_add_row(x + (size_t)i * C, bias, C);
        gelu_fwd_row(out + (size_t)i * C, x + (size_t)i * C, C);
    }
}

// x (N,C) -> out (N,C) = gelu(x)
void cpu_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C)
{
#pragma omp parallel for NT(be) schedule(static)
    for (int i = 0; i < N; i++)
        gelu_fwd_row((float *)out + (size_t)i * C, (const float *)x + (size_t)i * C, C);
}

GK_CLONES static void gelu_bwd_row(float *di, const float *restrict x, const float *d, int C)
{
#pragma omp simd
    for (int c = 0; c < C; c++) {
        float xi = x[c], u = GELU_K * (xi + 0.044715f * xi * xi * xi);
        float s = 1.0f / (1.0f + gk_vexpf(-2.0f * u)); /* (1 + tanh u) / 2 */
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * xi * xi);
        di[c] = (s + xi * 2.0f * s * (1.0f - s) * du) * d[c];
    }
}

// dout (N,C) -> dinp (N,C) =
void cpu_gelu_bwd(gk_backend *be, void *dinp_, const void *x_, const void *dout_, int N, int C)
{
    float *dinp = dinp_;
    const float *x = x_;
    const float *dout = dout_;
#pragma omp parallel for NT(be) schedule(static)
    for (int i = 0; i < N; i++)
        gelu_bwd_row(dinp + (size_t)i * C, x + (size_t)i * C, dout + (size_t)i * C, C);
}

/* ---- residual + layernorm / dropout ---- */

/* o (C) = r + dropout(x + bias) for row i of a (N,C) tensor (o may alias r or x). */
GK_CLONES static void residual_row(float *o, const float *r, const float *x,
                                   const float *restrict bias, size_t i, int C, float p,
                                   uint64_t key)
{
    size_t o0 = i * C;
    if (p > 0) {
        for (int c = 0; c < C; c++)
            o[c] = r[c] + (x[c] + (bias ? bias[c] : 0.0f)) * gk_rng_dropout(key, o0 + c, p);
    } else if (bias) {
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = r[c] + (x[c] + bias[c]);
    } else {
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = r[c] + x[c];
    }
}

// res (N,C), x (N,C) -> res_out (N,C) = res + dropout(x + bias), then its layernorm ln_out (N,C),
// mean (N), rstd (N): each row's layernorm runs while the row it just wrote is in cache.
void cpu_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
                                float *rstd, const void *res_, const void *x_, const float *bias,
                                float p, uint64_t key, const float *w, const float *b, int N,
                                int C)
{
    float *out = res_out, *ln = ln_out;
    const float *res = res_;
    const float *x = x_;
#pragma omp parallel for NT(be) schedule(static) ROWS(N)
    for (int i = 0; i < N; i++) {
        size_t o = (size_t)i * C;
        residual_row(out + o, res + o, x + o, bias, (size_t)i, C, p, key);
        ln_fwd_row(ln + o, mean + i, rstd + i, out + o, w, b, C);
    }
}

// dout (n) -> dinp (n)
void cpu_dropout_bwd(gk_backend *be, void *dinp_, const void *dout_, size_t n, float p,
                     uint64_t key)
{
    float *dinp = dinp_;
    const float *dout = dout_;
#pragma omp parallel for NT(be) schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] = p > 0 ? dout[i] * gk_rng_dropout(key, i, p) : dout[i];
}

/* ---- softmax + cross-entropy ---- */

GK_CLONES static float row_lse(const float *restrict l, int V)
{
    float mx = -INFINITY, s = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < V; j++) mx = l[j] > mx ? l[j] : mx;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < V; j++) s += gk_vexpf(l[j] - mx);
    return mx + logf(s);
}

// logits (N,Vp), targets (N) -> losses (N), lse (N)
void cpu_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits_,
                  const int *targets, int N, int V, int Vp)
{
    const float *logits = logits_;
#pragma omp parallel for NT(be) schedule(static)
    for (int i = 0; i < N; i++) {
        const float *l = logits + (size_t)i * Vp;
        float z = row_lse(l, V);
        lse[i] = z;
        losses[i] = targets[i] >= 0 ? z - l[targets[i]] : 0.0f;
    }
}

GK_CLONES static void xent_bwd_row(float *dl, const float *l, float z, int tgt, float dloss, int V,
                                   int Vp)
{
    if (tgt < 0) {
        for (int j = 0; j < Vp; j++) dl[j] = 0.0f;
        return;
    }
#pragma omp simd
    for (int j = 0; j < V; j++) dl[j] = gk_vexpf(l[j] - z) * dloss;
    for (int j = V; j < Vp; j++) dl[j] = 0.0f;
    dl[tgt] -= dloss;
}

// -> dlogits (N,Vp) = (softmax - onehot) * dloss
void cpu_xent_bwd(gk_backend *be, void *dlogits_, const void *logits_, const float *lse,
                  const int *targets, float dloss, int N, int V, int Vp)
{
    float *dlogits = dlogits_;
    const float *logits = logits_;
#pragma omp parallel for NT(be) schedule(static)
    for (int i = 0; i < N; i++)
        xent_bwd_row(dlogits + (size_t)i * Vp, logits + (size_t)i * Vp, lse[i], targets[i], dloss,
                     V, Vp);
}
