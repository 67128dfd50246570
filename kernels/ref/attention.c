/* attention.c: the reference causal self-attention: forward (with the log-sum-exp),
 * backward from it, and the incremental forward over a KV cache (decoding). */
#include "kernels/ref/ref_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/host_mem.h"
#include "kernels/rng.h"

// qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T)
void gk_ref_attention_fwd(gk_backend *be, void *out_, float *lse, const void *qkv_, int B,
                          int T, int C, int NH, float p, uint64_t key)
{
    float *out = out_;
    const float *qkv = qkv_;
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *s = malloc(sizeof(double) * (size_t)T);
    if (!s) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "ref attention_fwd: malloc(%zu)",
                        sizeof(double) * (size_t)T);
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
void gk_ref_attention_bwd(gk_backend *be, void *dqkv_, const void *dout_, const void *qkv_,
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
        GK_BACKEND_FAIL(be, GK_ENOMEM, "ref attention_bwd: malloc(%zu)",
                        sizeof(double) * (size_t)T);
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
                    for (int i = 0; i < hs; i++)
                        d += (double)q[i] * k[i], g += (double)dO[i] * v[i];
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

// qkv cache (B,Tc,3C), new rows t0..t0+n-1 -> out (B,n,C)
void gk_ref_attention_fwd_at(gk_backend *be, void *out_, void *cache, const void *qkv_new,
                             int B, int Tc, const int *t0p, int n, int C, int NH)
{
    float *out = out_;
    const float *qkv = cache;
    int t0 = gk_host_cache_store(be, "ref", cache, qkv_new, B, Tc, t0p, n, C);
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
                        o += exp(s[u] - mx) / sum *
                             qkv[((size_t)b * Tc + u) * 3 * C + 2 * C + h * hs + j];
                    out[((size_t)b * n + i) * C + h * hs + j] = (float)o;
                }
            }
    free(s);
}
