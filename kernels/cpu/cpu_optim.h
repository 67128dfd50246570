/* cpu_optim.h: the CPU backend's optimizer ops: sum of squares, scale, AdamW, the multi-tensor
 * AdamW and zeroing (cpu_optim.c).
 * Owns nothing: each call works on the caller's buffers.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_OPTIM_H
#define GK_CPU_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

void cpu_sumsq(gk_backend *be, double *host_out, const float *x, size_t n);
void cpu_scale(gk_backend *be, float *x, float s, size_t n);
void cpu_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
               float lr, float beta1, float beta2, float eps, float wd, int t, float grad_scale,
               void *copy, gk_elt tcopy);
/* One adamw (zero) call per tensor (range), through be->ops: the tensors are large enough for
 * each call to use every thread. */
void cpu_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float beta1,
                     float beta2, float eps, float wd, int t, float grad_scale, gk_elt tcopy);
void cpu_zero_multi(gk_backend *be, const gk_span *sp, int count);
/* dst (n, dt) = src (n, st) */
void cpu_cast(gk_backend *be, void *dst, gk_elt dt, const void *src, gk_elt st, size_t n);

#endif
