/* cpu_ops.h: the CPU backend's fused elementwise and row ops (cpu_ops.c), as in gk_ops.
 * Owns nothing: each call works on the caller's buffers and the backend's scratch.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_OPS_H
#define GK_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

void cpu_bias_add(gk_backend *be, float *x, const float *bias, int N, int C);
void cpu_bias_bwd(gk_backend *be, float *dbias, const float *dout, int N, int C);
void cpu_encoder_fwd(gk_backend *be, float *out, const int *tokens, const float *wte,
                     const float *wpe, int B, int T, int C, float p, uint64_t key);
void cpu_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const float *dout,
                     const int *tokens, int B, int T, int C, float p, uint64_t key);
void cpu_layernorm_fwd(gk_backend *be, float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C);
void cpu_layernorm_bwd(gk_backend *be, float *dinp, float *dweight, float *dbias,
                       const float *dout, const float *inp, const float *weight,
                       const float *mean, const float *rstd, int N, int C);
void cpu_gelu_fwd(gk_backend *be, float *out, float *x, const float *bias, int N, int C);
void cpu_gelu_bwd(gk_backend *be, float *dinp, const float *x, const float *dout, int N, int C);
void cpu_residual_fwd(gk_backend *be, float *out, const float *res, const float *x,
                      const float *bias, int N, int C, float p, uint64_t key);
void cpu_dropout_bwd(gk_backend *be, float *dinp, const float *dout, size_t n, float p,
                     uint64_t key);
void cpu_xent_fwd(gk_backend *be, float *losses, float *lse, const float *logits,
                  const int *targets, int N, int V, int Vp);
void cpu_xent_bwd(gk_backend *be, float *dlogits, const float *logits, const float *lse,
                  const int *targets, float dloss, int N, int V, int Vp);

#endif
