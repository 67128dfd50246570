/* elementwise.c: the CPU backend's elementwise ops and the bias gradient: bias add and bias
 * + GELU (gemm's epilogues), GELU forward and backward, dropout backward, the bias gradient (a
 * column sum in GK_NCHUNK fixed chunks, so the thread count never changes a result). Each op is
 * a row kernel (compiled per ISA, GK_CLONES) plus an OpenMP driver over rows. References:
 * kernels/ref/elementwise.c */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/rng.h"

// x (N,C) += bias (C)
void gk_cpu_bias_add(gk_backend *be, float *x, const float *bias, int N, int C)
{
#pragma omp parallel for NT(be) schedule(static) ROWS(N)
    for (int i = 0; i < N; i++) {
        float *r = x + (size_t)i * C;
#pragma omp simd
        for (int j = 0; j < C; j++) r[j] += bias[j];
    }
}

/* Column sums of rows [r0,r1) of a (N,C) into acc (C) (=), in row order. */
GK_CLONES static void colsum_rows(float *restrict acc, const float *restrict a, int r0, int r1,
                                  int C)
{
    for (int j = 0; j < C; j++) acc[j] = 0.0f;
    for (int i = r0; i < r1; i++) {
        const float *r = a + (size_t)i * C;
#pragma omp simd
        for (int j = 0; j < C; j++) acc[j] += r[j];
    }
}

// dout (N,C) -> dbias (C) +=
void gk_cpu_bias_bwd(gk_backend *be, float *dbias, const void *dout_, int N, int C)
{
    const float *dout = dout_;
    float *part = gk_cpu_scratch_need(be, (size_t)GK_NCHUNK * C, "bias_bwd");
    if (!part) return;
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
void gk_cpu_bias_gelu(gk_backend *be, float *out, float *x, const float *bias, int N, int C)
{
#pragma omp parallel for NT(be) schedule(static) ROWS(N)
    for (int i = 0; i < N; i++) {
        if (bias) bias_add_row(x + (size_t)i * C, bias, C);
        gelu_fwd_row(out + (size_t)i * C, x + (size_t)i * C, C);
    }
}

// x (N,C) -> out (N,C) = gelu(x)
void gk_cpu_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C)
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
void gk_cpu_gelu_bwd(gk_backend *be, void *dinp_, const void *x_, const void *dout_, int N, int C)
{
    float *dinp = dinp_;
    const float *x = x_;
    const float *dout = dout_;
#pragma omp parallel for NT(be) schedule(static)
    for (int i = 0; i < N; i++)
        gelu_bwd_row(dinp + (size_t)i * C, x + (size_t)i * C, dout + (size_t)i * C, C);
}

// dout (n) -> dinp (n)
void gk_cpu_dropout_bwd(gk_backend *be, void *dinp_, const void *dout_, size_t n, float p,
                        uint64_t key)
{
    float *dinp = dinp_;
    const float *dout = dout_;
#pragma omp parallel for NT(be) schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] = p > 0 ? dout[i] * gk_rng_dropout(key, i, p) : dout[i];
}
