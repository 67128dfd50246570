/* optimizer.c: the reference optimizer ops: sum of squares (gradient norm), scale, add, AdamW in
 * torch.optim.AdamW's operation order (one tensor, or a table of them), zeroing a table of
 * ranges. */
#include "kernels/ref/ref_internal.h"

#include <math.h>

#include "kernels/bf16.h"

void gk_ref_sumsq(gk_backend *be, double *out, const float *x, size_t n)
{
    (void)be;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    *out = s;
}

void gk_ref_scale(gk_backend *be, float *x, float s, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void gk_ref_add(gk_backend *be, float *y, const float *x, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void gk_ref_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
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
void gk_ref_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float b1,
                        float b2, float eps, float wd, int t, float gscale, gk_elt tcopy)
{
    for (int i = 0; i < count; i++)
        be->ops->adamw(be, ts[i].param, ts[i].grad, ts[i].m, ts[i].v, ts[i].n, lr, b1, b2, eps,
                       ts[i].decay ? wd : 0.0f, t, gscale, ts[i].copy, tcopy);
}

void gk_ref_zero_multi(gk_backend *be, const gk_span *sp, int count)
{
    for (int i = 0; i < count; i++) be->ops->zero(be, sp[i].p, sp[i].n);
}
