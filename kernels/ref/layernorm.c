/* layernorm.c: the reference layernorm, forward and backward, and the fused residual add
 * (+ bias, dropout) before it. */
#include "kernels/ref/ref_internal.h"

#include <math.h>

#include "kernels/rng.h"

// inp (N,C) -> out (N,C), mean (N), rstd (N)
void gk_ref_layernorm_fwd(gk_backend *be, void *out_, float *mean, float *rstd,
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
void gk_ref_layernorm_bwd(gk_backend *be, void *dinp_, float *dw, float *db, const void *dout_,
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

// res (N,C), x (N,C) -> res_out (N,C) = res + dropout(x + bias); then the layernorm of res_out:
// ln_out (N,C), mean (N), rstd (N). The two steps one after the other.
void gk_ref_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
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
    gk_ref_layernorm_fwd(be, ln_out, mean, rstd, out, w, b, N, C);
}
