/* elementwise.c: the reference elementwise ops: GELU (tanh) forward and backward, the bias
 * gradient (a column sum), dropout backward. */
#include "kernels/ref/ref_internal.h"

#include <math.h>

#include "kernels/rng.h"

// dout (N,C) -> dbias (C) +=
void gk_ref_bias_bwd(gk_backend *be, float *dbias, const void *dout_, int N, int C)
{
    const float *dout = dout_;
    (void)be;
    for (int j = 0; j < C; j++) {
        double s = 0;
        for (int i = 0; i < N; i++) s += dout[(size_t)i * C + j];
        dbias[j] += (float)s;
    }
}

// x (N,C) -> out (N,C) = gelu(x), as gemm's epilogue rounds it
void gk_ref_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C)
{
    (void)be;
    const float *xf = x;
    for (size_t i = 0; i < (size_t)N * C; i++) ((float *)out)[i] = (float)gk_ref_gelu(xf[i]);
}

// dout (N,C) -> dinp (N,C) =
void gk_ref_gelu_bwd(gk_backend *be, void *dinp_, const void *x_, const void *dout_, int N,
                     int C)
{
    float *dinp = dinp_;
    const float *x = x_;
    const float *dout = dout_;
    (void)be;
    for (size_t i = 0; i < (size_t)N * C; i++) {
        double xi = x[i], u = GK_REF_GELU_K * (xi + 0.044715 * xi * xi * xi);
        double th = tanh(u), sech2 = 1.0 - th * th;
        double du = GK_REF_GELU_K * (1.0 + 3.0 * 0.044715 * xi * xi);
        double g = 0.5 * (1.0 + th) + 0.5 * xi * sech2 * du;
        dinp[i] = (float)(g * dout[i]);
    }
}

// dout (n) -> dinp (n)
void gk_ref_dropout_bwd(gk_backend *be, void *dinp_, const void *dout_, size_t n, float p,
                        uint64_t key)
{
    float *dinp = dinp_;
    const float *dout = dout_;
    (void)be;
    for (size_t i = 0; i < n; i++) dinp[i] = p > 0 ? dout[i] * gk_rng_dropout(key, i, p) : dout[i];
}
