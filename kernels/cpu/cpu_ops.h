/* cpu_ops.h: the CPU backend's fused elementwise and row ops (cpu_ops.c), as in gk_ops.
 * Owns nothing: each call works on the caller's buffers and the backend's scratch.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_OPS_H
#define GK_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* The gemm epilogues (cpu.c), not vtable slots: x (N,C) += bias (C); and x (N,C) += bias (C or
 * NULL) in place, out (N,C) = gelu(x) (the same GELU as cpu_gelu_fwd, bit for bit). */
void cpu_bias_add(gk_backend *be, float *x, const float *bias, int N, int C);
void cpu_bias_gelu(gk_backend *be, float *out, float *x, const float *bias, int N, int C);

void cpu_bias_bwd(gk_backend *be, float *dbias, const void *dout, int N, int C);
void cpu_encoder_fwd(gk_backend *be, void *out, const int *tokens, const void *wte, gk_elt tw,
                     const float *wpe, const int *t0, int B, int T, int C, float p, uint64_t key);
void cpu_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout,
                     const int *tokens, int B, int T, int C, float p, uint64_t key);
void cpu_layernorm_fwd(gk_backend *be, void *out, float *mean, float *rstd, const void *inp,
                       const float *weight, const float *bias, int N, int C);
void cpu_layernorm_bwd(gk_backend *be, void *dinp, float *dweight, float *dbias,
                       const void *dout, const void *inp, const float *weight,
                       const float *mean, const float *rstd, int N, int C);
void cpu_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C);
void cpu_gelu_bwd(gk_backend *be, void *dinp, const void *x, const void *dout, int N, int C);
void cpu_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
                                float *rstd, const void *res, const void *x, const float *bias,
                                float p, uint64_t key, const float *ln_weight,
                                const float *ln_bias, int N, int C);
void cpu_dropout_bwd(gk_backend *be, void *dinp, const void *dout, size_t n, float p,
                     uint64_t key);
void cpu_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits,
                  const int *targets, int N, int V, int Vp);
void cpu_xent_bwd(gk_backend *be, void *dlogits, const void *logits, const float *lse,
                  const int *targets, float dloss, int N, int V, int Vp);

#endif
