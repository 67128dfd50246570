/* ref.c: the reference backend. Each op is the textbook loop, with double accumulators; it is the
 * oracle of tests/unit/test_kernels.c, so it must stay obvious rather than fast. Build it without
 * -ffast-math. Pairs side by side: forward, then backward, with the shapes of backend.h. */
#include "kernels/cpu/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/comm/comm.h"
#include "kernels/cpu/host_mem.h"
#include "kernels/rng.h"

/* ---- memory ---- */

static int ref_reserve(gk_backend *be, size_t rows, size_t cols, int head_size, int T, gk_err *err)
{
    (void)be, (void)rows, (void)cols, (void)head_size, (void)T, (void)err;
    return 0;
}

/* ---- dense ---- */

static double gelu(double x);

/* Any types: elements are widened to double, the result rounded to tc (bf16 weights and
 * activations included, so this is the oracle of every gemm combination). */
static void ref_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                     const void *A, gk_elt tA, int lda, const void *B, gk_elt tB, int ldb,
                     float beta, void *C, gk_elt tC, int ldc, const float *bias, void *pre_gelu)
{
    if (pre_gelu && beta != 0.0f) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "ref gemm: the GELU epilogue needs beta 0");
        return;
    }
    size_t sak = ta ? (size_t)lda : 1, sai = ta ? 1 : (size_t)lda; /* strides of A's k and i */
    size_t sbk = tb ? 1 : (size_t)ldb, sbj = tb ? (size_t)ldb : 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)gk_elt_get(A, tA, i * sai + k * sak) * gk_elt_get(B, tB, k * sbk + j * sbj);
            size_t c = (size_t)i * ldc + j;
            double r = alpha * s + (beta == 0.0f ? 0.0 : (double)beta * gk_elt_get(C, tC, c));
            if (bias) r += bias[j];
            if (pre_gelu) {
                gk_elt_put(pre_gelu, tC, c, (float)r);
                r = gelu(gk_elt_get(pre_gelu, tC, c)); /* from the stored pre-activation */
            }
            gk_elt_put(C, tC, c, (float)r);
        }
}

// dout (N,C) -> dbias (C) +=
static void ref_bias_bwd(gk_backend *be, float *dbias, const void *dout_, int N, int C)
{
    const float *dout = dout_;
    (void)be;
    for (int j = 0; j < C; j++) {
        double s = 0;
        for (int i = 0; i < N; i++) s += dout[(size_t)i * C + j];
        dbias[j] += (float)s;
    }
}

/* ---- embedding ---- */

// tokens (B,T) -> out (B,T,C)
static void ref_encoder_fwd(gk_backend *be, void *out_, const int *tok, const void *wte,
                            gk_elt tw, const float *wpe, const int *t0, int B, int T, int C,
                            float p, uint64_t key)
{
    float *out = out_;
    (void)be;
    if (t0) wpe += (size_t)*t0 * C;
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)bt * C + c;
            float x = gk_elt_get(wte, tw, (size_t)tok[bt] * C + c) + wpe[(size_t)(bt % T) * C + c];
            out[i] = p > 0 ? x * gk_rng_dropout(key, i, p) : x;
        }
}
// dout (B,T,C) -> dwte (V,C) +=, dwpe (T,C) +=
static void ref_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout_,
                            const int *tok, int B, int T, int C, float p, uint64_t key)
{
    const float *dout = dout_;
    (void)be;
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)bt * C + c;
            float d = p > 0 ? dout[i] * gk_rng_dropout(key, i, p) : dout[i];
            dwte[(size_t)tok[bt] * C + c] += d;
            dwpe[(size_t)(bt % T) * C + c] += d;
        }
}

/* ---- layernorm ---- */

// inp (N,C) -> out (N,C), mean (N), rstd (N)
static void ref_layernorm_fwd(gk_backend *be, void *out_, float *mean, float *rstd,
                              const void *inp_, const float *w, const float *b, int N, int C)
{
    float *out = out_;
    const float *inp = inp_;
    (void)be;
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        double rs = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = (float)((x[c] - m) * rs * w[c] + (b ? b[c] : 0.0f));
        mean[i] = (float)m;
        rstd[i] = (float)rs;
    }
}
// dout (N,C) -> dinp (N,C) +=, dweight (C) +=, dbias (C) +=
static void ref_layernorm_bwd(gk_backend *be, void *dinp_, float *dw, float *db, const void *dout_,
                              const void *inp_, const float *w, const float *mean,
                              const float *rstd, int N, int C)
{
    float *dinp = dinp_;
    const float *dout = dout_;
    const float *inp = inp_;
    (void)be;
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        double dn_mean = 0, dn_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            double norm = (x[c] - (double)mean[i]) * rstd[i];
            double dn = (double)d[c] * w[c];
            dn_mean += dn;
            dn_norm_mean += dn * norm;
        }
        dn_mean /= C;
        dn_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            double norm = (x[c] - (double)mean[i]) * rstd[i];
            double dn = (double)d[c] * w[c];
            dinp[(size_t)i * C + c] += (float)((dn - dn_mean - norm * dn_norm_mean) * rstd[i]);
            dw[c] += (float)(d[c] * norm);
            if (db) db[c] += d[c];
        }
    }
}

/* ---- attention ---- */

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T)
static void ref_attention_fwd(gk_backend *be, void *out_, float *lse, const void *qkv_, int B,
                              int T, int C, int NH, float p, uint64_t key)
{
    float *out = out_;
    const float *qkv = qkv_;
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *s = malloc(sizeof(double) * (size_t)T);
    if (!s) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "ref attention_fwd: malloc(%zu)", sizeof(double) * (size_t)T);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += (double)q[i] * k[i];
                    s[u] = d * scale;
                    if (s[u] > mx) mx = s[u];
                }
                for (int u = 0; u <= t; u++) sum += exp(s[u] - mx);
                size_t row = ((size_t)b * NH + h) * T + t;
                lse[row] = (float)(mx + log(sum));
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int u = 0; u <= t; u++) {
                        double pr = exp(s[u] - mx) / sum;
                        if (p > 0) pr *= gk_rng_dropout(key, row * T + u, p);
                        o += pr * qkv[((size_t)b * T + u) * 3 * C + 2 * C + h * hs + i];
                    }
                    out[((size_t)b * T + t) * C + h * hs + i] = (float)o;
                }
            }
    free(s);
}
// dout (B,T,C) -> dqkv (B,T,3C)
static void ref_attention_bwd(gk_backend *be, void *dqkv_, const void *dout_, const void *qkv_,
                              const void *out_, const float *lse, int B, int T, int C, int NH,
                              float p, uint64_t key)
{
    float *dqkv = dqkv_;
    const float *dout = dout_;
    const float *qkv = qkv_;
    const float *out = out_;
    (void)out;
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *dp = malloc(sizeof(double) * (size_t)T), *pr = malloc(sizeof(double) * (size_t)T);
    if (!dp || !pr) {
        free(dp);
        free(pr);
        GK_BACKEND_FAIL(be, GK_ENOMEM, "ref attention_bwd: malloc(%zu)", sizeof(double) * (size_t)T);
        return;
    }
    memset(dqkv, 0, sizeof(float) * (size_t)B * T * 3 * C);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                size_t row = ((size_t)b * NH + h) * T + t;
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                const float *dO = dout + ((size_t)b * T + t) * C + h * hs;
                double D = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    const float *v = k + C;
                    double d = 0, g = 0;
                    for (int i = 0; i < hs; i++) d += (double)q[i] * k[i], g += (double)dO[i] * v[i];
                    double m = p > 0 ? gk_rng_dropout(key, row * T + u, p) : 1.0;
                    pr[u] = exp(d * scale - lse[row]);
                    dp[u] = g * m;           /* d loss / d P (before dropout) */
                    D += pr[u] * dp[u];
                    float *dv = dqkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) dv[i] += (float)(pr[u] * m * dO[i]);
                }
                float *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
                for (int u = 0; u <= t; u++) {
                    double ds = pr[u] * (dp[u] - D) * scale;
                    const float *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    float *dk = dqkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += (float)(ds * k[i]);
                        dk[i] += (float)(ds * q[i]);
                    }
                }
            }
    free(dp);
    free(pr);
}

/* ---- GELU (tanh) ---- */

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

// gemm's GELU epilogue
static double gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(GELU_K * (x + 0.044715 * x * x * x)));
}
// x (N,C) -> out (N,C) = gelu(x), as gemm's epilogue rounds it
static void ref_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C)
{
    (void)be;
    for (size_t i = 0; i < (size_t)N * C; i++) ((float *)out)[i] = (float)gelu(((const float *)x)[i]);
}
// dout (N,C) -> dinp (N,C) =
static void ref_gelu_bwd(gk_backend *be, void *dinp_, const void *x_, const void *dout_, int N,
                         int C)
{
    float *dinp = dinp_;
    const float *x = x_;
    const float *dout = dout_;
    (void)be;
    for (size_t i = 0; i < (size_t)N * C; i++) {
        double xi = x[i], u = GELU_K * (xi + 0.044715 * xi * xi * xi);
        double th = tanh(u), sech2 = 1.0 - th * th;
        double g = 0.5 * (1.0 + th) + 0.5 * xi * sech2 * GELU_K * (1.0 + 3.0 * 0.044715 * xi * xi);
        dinp[i] = (float)(g * dout[i]);
    }
}

/* ---- residual + layernorm / dropout ---- */

// res (N,C), x (N,C) -> res_out (N,C) = res + dropout(x + bias); then the layernorm of res_out:
// ln_out (N,C), mean (N), rstd (N). The two steps one after the other.
static void ref_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
                                       float *rstd, const void *res_, const void *x_,
                                       const float *bias, float p, uint64_t key, const float *w,
                                       const float *b, int N, int C)
{
    float *out = res_out;
    const float *res = res_;
    const float *x = x_;
    for (size_t i = 0; i < (size_t)N * C; i++) {
        float y = x[i] + (bias ? bias[i % C] : 0.0f);
        if (p > 0) y *= gk_rng_dropout(key, i, p);
        out[i] = res[i] + y;
    }
    ref_layernorm_fwd(be, ln_out, mean, rstd, out, w, b, N, C);
}
// dout (n) -> dinp (n)
static void ref_dropout_bwd(gk_backend *be, void *dinp_, const void *dout_, size_t n, float p,
                            uint64_t key)
{
    float *dinp = dinp_;
    const float *dout = dout_;
    (void)be;
    for (size_t i = 0; i < n; i++) dinp[i] = p > 0 ? dout[i] * gk_rng_dropout(key, i, p) : dout[i];
}

/* ---- softmax + cross-entropy ---- */

// logits (N,Vp), targets (N) -> losses (N), lse (N)
static void ref_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits_,
                         const int *targets, int N, int V, int Vp)
{
    const float *logits = logits_;
    (void)be;
    for (int i = 0; i < N; i++) {
        const float *l = logits + (size_t)i * Vp;
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < V; j++) mx = l[j] > mx ? l[j] : mx;
        for (int j = 0; j < V; j++) s += exp(l[j] - mx);
        double z = mx + log(s);
        lse[i] = (float)z;
        losses[i] = targets[i] >= 0 ? (float)(z - l[targets[i]]) : 0.0f;
    }
}
// -> dlogits (N,Vp) =
static void ref_xent_bwd(gk_backend *be, void *dlogits_, const void *logits_, const float *lse,
                         const int *targets, float dloss, int N, int V, int Vp)
{
    float *dlogits = dlogits_;
    const float *logits = logits_;
    (void)be;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < Vp; j++) {
            size_t k = (size_t)i * Vp + j;
            double g = 0;
            if (targets[i] >= 0 && j < V)
                g = (exp((double)logits[k] - lse[i]) - (j == targets[i])) * dloss;
            dlogits[k] = (float)g;
        }
}

/* ---- optimizer ---- */

static void ref_sumsq(gk_backend *be, double *out, const float *x, size_t n)
{
    (void)be;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    *out = s;
}
static void ref_scale(gk_backend *be, float *x, float s, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) x[i] *= s;
}
static void ref_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
                      float lr, float b1, float b2, float eps, float wd, int t, float gscale,
                      void *copy, gk_elt tcopy)
{
    (void)be;
    /* the operation order of torch.optim.AdamW (1.13, single tensor), in float like it */
    float step_size = (float)(lr / (1.0 - pow(b1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
    float decay = (float)(1.0 - (double)lr * wd);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * gscale;
        param[i] *= decay;
        m[i] = m[i] * b1 + (1.0f - b1) * g;
        v[i] = v[i] * b2 + (1.0f - b2) * (g * g);
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        param[i] = param[i] + -step_size * (m[i] / denom);
        if (copy) gk_elt_put(copy, tcopy, i, param[i]);
    }
}

/* One adamw call per tensor, through the table (a test may wrap its adamw). */
static void ref_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float b1,
                            float b2, float eps, float wd, int t, float gscale, gk_elt tcopy)
{
    for (int i = 0; i < count; i++)
        be->ops->adamw(be, ts[i].param, ts[i].grad, ts[i].m, ts[i].v, ts[i].n, lr, b1, b2, eps,
                       ts[i].decay ? wd : 0.0f, t, gscale, ts[i].copy, tcopy);
}
static void ref_zero_multi(gk_backend *be, const gk_span *sp, int count)
{
    for (int i = 0; i < count; i++) be->ops->zero(be, sp[i].p, sp[i].n);
}

static void ref_cast(gk_backend *be, void *dst, gk_elt td, const void *src, gk_elt ts, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) gk_elt_put(dst, td, i, gk_elt_get(src, ts, i));
}

/* at the end of this file */
static void ref_attention_fwd_at(gk_backend *be, void *out, void *cache, const void *qkv_new,
                                 int B, int Tc, const int *t0, int n, int C, int NH);

const gk_ops gk_ref_ops = {
    .name = "ref",
    .alloc = host_alloc, .free = host_free, .to_device = host_copy, .to_host = host_copy,
    .copy = host_copy, .zero = host_zero, .sync = host_sync, .reserve = ref_reserve,
    .cast = ref_cast, .gemm = ref_gemm, .bias_bwd = ref_bias_bwd,
    .encoder_fwd = ref_encoder_fwd, .encoder_bwd = ref_encoder_bwd,
    .layernorm_fwd = ref_layernorm_fwd, .layernorm_bwd = ref_layernorm_bwd,
    .attention_fwd = ref_attention_fwd, .attention_bwd = ref_attention_bwd,
    .gelu_fwd = ref_gelu_fwd, .gelu_bwd = ref_gelu_bwd,
    .residual_layernorm_fwd = ref_residual_layernorm_fwd, .dropout_bwd = ref_dropout_bwd,
    .xent_fwd = ref_xent_fwd, .xent_bwd = ref_xent_bwd,
    .sumsq = ref_sumsq, .scale = ref_scale, .adamw = ref_adamw,
    .adamw_multi = ref_adamw_multi, .zero_multi = ref_zero_multi,
    .attention_fwd_at = ref_attention_fwd_at,
    .comm_open = gk_comm_gloo_open, /* Gloo: kernels/comm/comm_gloo.cc */
    .mem_info = host_mem_info, .host_memory = 1,
};

static void ref_destroy(gk_backend *be) { free(be); }

int gk_ref_create(gk_backend **out, gk_err *err)
{
    gk_backend *be = calloc(1, sizeof *be);
    if (!be) return gk_errf(err, GK_ENOMEM, "reference backend: out of memory");
    be->ops = &gk_ref_ops;
    be->act = GK_F32;
    snprintf(be->what, sizeof be->what, "ref");
    host_props(be, GK_KIND_REF);
    be->destroy = ref_destroy;
    *out = be;
    return 0;
}

/* ---- inference: attention over a KV cache ---- */

// qkv cache (B,Tc,3C), new rows t0..t0+n-1 -> out (B,n,C)
static void ref_attention_fwd_at(gk_backend *be, void *out_, void *cache, const void *qkv_new,
                                 int B, int Tc, const int *t0p, int n, int C, int NH)
{
    float *out = out_;
    const float *qkv = cache;
    int t0 = host_cache_store(be, "ref", cache, qkv_new, B, Tc, t0p, n, C);
    if (t0 < 0) return;
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *s = malloc(sizeof(double) * (size_t)(t0 + n));
    if (!s) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "ref attention_fwd_at: malloc(%zu)",
                        sizeof(double) * (size_t)(t0 + n));
        return;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < n; i++) {
                int t = t0 + i;
                const float *q = qkv + ((size_t)b * Tc + t) * 3 * C + h * hs;
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * Tc + u) * 3 * C + C + h * hs;
                    double d = 0;
                    for (int j = 0; j < hs; j++) d += (double)q[j] * k[j];
                    s[u] = d * scale;
                    if (s[u] > mx) mx = s[u];
                }
                for (int u = 0; u <= t; u++) sum += exp(s[u] - mx);
                for (int j = 0; j < hs; j++) {
                    double o = 0;
                    for (int u = 0; u <= t; u++)
                        o += exp(s[u] - mx) / sum * qkv[((size_t)b * Tc + u) * 3 * C + 2 * C + h * hs + j];
                    out[((size_t)b * n + i) * C + h * hs + j] = (float)o;
                }
            }
    free(s);
}
