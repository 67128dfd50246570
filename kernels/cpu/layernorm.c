/* layernorm.c: the CPU backend's layernorm, forward (alone, or fused with the residual add
 * (+ bias, dropout) that feeds it) and backward, whose weight and bias gradients are summed in
 * GK_NCHUNK fixed chunks so the thread count never changes a result. References:
 * kernels/ref/layernorm.c */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/rng.h"

GK_CLONES static void ln_fwd_row(float *restrict o, float *mean, float *rstd,
                                 const float *restrict x, const float *restrict w,
                                 const float *restrict b, int C)
{
    float lm[CPU_LANES] = {0}, lv[CPU_LANES] = {0};
    int C16 = C / CPU_LANES * CPU_LANES;
    for (int c0 = 0; c0 < C16; c0 += CPU_LANES)
#pragma omp simd
        for (int j = 0; j < CPU_LANES; j++) lm[j] += x[c0 + j];
    for (int c = C16; c < C; c++) lm[c - C16] += x[c];
    float m = cpu_lanes_sum(lm) / C;
    for (int c0 = 0; c0 < C16; c0 += CPU_LANES)
#pragma omp simd
        for (int j = 0; j < CPU_LANES; j++) lv[j] += (x[c0 + j] - m) * (x[c0 + j] - m);
    for (int c = C16; c < C; c++) lv[c - C16] += (x[c] - m) * (x[c] - m);
    float v = cpu_lanes_sum(lv) / C;
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
void gk_cpu_layernorm_fwd(gk_backend *be, void *out_, float *mean, float *rstd, const void *inp_,
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
    int C16 = C / CPU_LANES * CPU_LANES;
    for (int c = 0; c < C; c++) pw[c] = pb[c] = 0.0f;
    for (int i = r0; i < r1; i++) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        float *di = dinp + (size_t)i * C;
        float m = mean[i], rs = rstd[i], la[CPU_LANES] = {0}, lb[CPU_LANES] = {0};
        for (int c0 = 0; c0 < C16; c0 += CPU_LANES)
#pragma omp simd
            for (int j = 0; j < CPU_LANES; j++) {
                float dn = d[c0 + j] * w[c0 + j];
                la[j] += dn;
                lb[j] += dn * ((x[c0 + j] - m) * rs);
            }
        for (int c = C16; c < C; c++) {
            float dn = d[c] * w[c];
            la[c - C16] += dn;
            lb[c - C16] += dn * ((x[c] - m) * rs);
        }
        float a = cpu_lanes_sum(la) / C, bsum = cpu_lanes_sum(lb) / C;
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
void gk_cpu_layernorm_bwd(gk_backend *be, void *dinp_, float *dw, float *db, const void *dout_,
                          const void *inp_, const float *w, const float *mean, const float *rstd,
                          int N, int C)
{
    float *dinp = dinp_;
    const float *dout = dout_;
    const float *inp = inp_;
    float *part = gk_cpu_scratch_need(be, (size_t)GK_NCHUNK * 2 * C, "layernorm_bwd");
    if (!part) return;
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
void gk_cpu_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
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
