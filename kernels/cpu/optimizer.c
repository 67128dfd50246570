/* optimizer.c: the CPU backend's optimizer ops: sum of squares (grad norm), scale, add, AdamW (one
 * tensor, or a table of them as a loop), zeroing a table of ranges. Elementwise ops split freely
 * across threads; sumsq uses a fixed split so it is deterministic. References:
 * kernels/ref/optimizer.c */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <omp.h>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_internal.h"

#define SUMSQ_CHUNKS 64

GK_CLONES static double sumsq_range(const float *restrict x, size_t lo, size_t hi)
{
    double s = 0.0;
    /* blocks of 1024 in float (vectorized), each block added in double */
    for (size_t b = lo; b < hi; b += 1024) {
        size_t e = b + 1024 < hi ? b + 1024 : hi;
        float f = 0.0f;
#pragma omp simd reduction(+ : f)
        for (size_t i = b; i < e; i++) f += x[i] * x[i];
        s += f;
    }
    return s;
}

void gk_cpu_sumsq(gk_backend *be, double *out, const float *x, size_t n)
{
    double part[SUMSQ_CHUNKS];
    size_t per = (n + SUMSQ_CHUNKS - 1) / SUMSQ_CHUNKS;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (int k = 0; k < SUMSQ_CHUNKS; k++) {
        size_t lo = (size_t)k * per < n ? (size_t)k * per : n, hi = lo + per < n ? lo + per : n;
        part[k] = sumsq_range(x, lo, hi);
    }
    double s = 0.0;
    for (int k = 0; k < SUMSQ_CHUNKS; k++) s += part[k];
    *out = s;
}

void gk_cpu_scale(gk_backend *be, float *x, float s, size_t n)
{
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void gk_cpu_add(gk_backend *be, float *restrict y, const float *restrict x, size_t n)
{
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* Vectorized only when built with -fno-math-errno: otherwise sqrtf's errno branch (negative
 * input) keeps GCC from vectorizing the loop at all, and neither the optimize attribute nor
 * pragma lifts it for a target_clones function (GCC 12). vsqrtps is exactly rounded like sqrtf,
 * so the result is the same either way; vectorized, AdamW takes about half the time
 * (tests/bench/cpu-results.md). */
GK_CLONES static void adamw_range(float *restrict param, const float *restrict grad,
                                  float *restrict m, float *restrict v, size_t lo, size_t hi,
                                  float b1, float b2, float eps, float decay, float step_size,
                                  float bc2_sqrt, float gscale)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        float g = grad[i] * gscale;
        float pi = param[i] * decay;
        float mi = m[i] * b1 + (1.0f - b1) * g;
        float vi = v[i] * b2 + (1.0f - b2) * (g * g);
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        param[i] = pi + -step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}

/* Same operations, in the same order, as ref_adamw (torch.optim.AdamW). */
void gk_cpu_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int t, float gscale,
                  void *copy, gk_elt tcopy)
{
    float step_size = (float)(lr / (1.0 - pow(b1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
    float decay = (float)(1.0 - (double)lr * wd);
    int nt = CPU(be)->nthreads;
    if (n < 8192) nt = 1; /* below this a parallel region costs more than it saves */
    size_t per = (n + nt - 1) / nt;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int k = 0; k < nt; k++) {
        size_t lo = (size_t)k * per < n ? (size_t)k * per : n, hi = lo + per < n ? lo + per : n;
        adamw_range(param, grad, m, v, lo, hi, b1, b2, eps, decay, step_size, bc2_sqrt, gscale);
        if (copy)
            gk_cpu_cast(be, (char *)copy + lo * gk_elt_size(tcopy), tcopy, param + lo, GK_F32,
                        hi - lo);
    }
}

void gk_cpu_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float b1,
                        float b2, float eps, float wd, int t, float gscale, gk_elt tcopy)
{
    for (int i = 0; i < count; i++)
        be->ops->adamw(be, ts[i].param, ts[i].grad, ts[i].m, ts[i].v, ts[i].n, lr, b1, b2, eps,
                       ts[i].decay ? wd : 0.0f, t, gscale, ts[i].copy, tcopy);
}

void gk_cpu_zero_multi(gk_backend *be, const gk_span *sp, int count)
{
    for (int i = 0; i < count; i++) be->ops->zero(be, sp[i].p, sp[i].n);
}
