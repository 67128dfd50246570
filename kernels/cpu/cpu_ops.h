/* cpu_ops.h: the CPU backend's ops as in gk_ops, by op family file in gk_ops's group order: cast.c,
 * elementwise.c, encoder.c, layernorm.c, attention.c, classifier.c, optimizer.c (the gemm is
 * matmul.h's); cpu.c points the vtable at them.
 * Owns nothing: each call works on the caller's buffers and the backend's scratch.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_OPS_H
#define GK_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* cast.c: dst (n, dt) = src (n, st) */
void gk_cpu_cast(gk_backend *be, void *dst, gk_elt dt, const void *src, gk_elt st, size_t n);

/* elementwise.c */
/* The gemm epilogues, not vtable slots: x (N,C) += bias (C); and x (N,C) += bias (C or NULL) in
 * place, out (N,C) = gelu(x) (the same GELU as gk_cpu_gelu_fwd, bit for bit). */
void gk_cpu_bias_add(gk_backend *be, float *x, const float *bias, int N, int C);
void gk_cpu_bias_gelu(gk_backend *be, float *out, float *x, const float *bias, int N, int C);
void gk_cpu_bias_bwd(gk_backend *be, float *dbias, const void *dout, int N, int C);
void gk_cpu_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C);
void gk_cpu_gelu_bwd(gk_backend *be, void *dinp, const void *x, const void *dout, int N, int C);
void gk_cpu_dropout_bwd(gk_backend *be, void *dinp, const void *dout, size_t n, float p,
                        uint64_t key);

/* encoder.c (16-bit and Q8_0 tables: matmul.h) */
void gk_cpu_encoder_fwd(gk_backend *be, void *out, const int *tokens, const void *wte, gk_elt tw,
                        const float *wpe, const int *t0, int B, int T, int C, float p,
                        uint64_t key);
void gk_cpu_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout,
                        const int *tokens, int B, int T, int C, float p, uint64_t key);

/* layernorm.c */
void gk_cpu_layernorm_fwd(gk_backend *be, void *out, float *mean, float *rstd, const void *inp,
                          const float *weight, const float *bias, int N, int C);
void gk_cpu_layernorm_bwd(gk_backend *be, void *dinp, float *dweight, float *dbias,
                          const void *dout, const void *inp, const float *weight,
                          const float *mean, const float *rstd, int N, int C);
void gk_cpu_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
                                   float *rstd, const void *res, const void *x, const float *bias,
                                   float p, uint64_t key, const float *ln_weight,
                                   const float *ln_bias, int N, int C);

/* attention.c */
/* floats of scratch per thread for sequence length T and head size hs */
size_t gk_cpu_attn_scratch(int T, int hs);
void gk_cpu_attention_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T,
                          int C, int NH, float p, uint64_t key);
void gk_cpu_attention_bwd(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                          const void *out, const float *lse, int B, int T, int C, int NH,
                          float p, uint64_t key);
void gk_cpu_attention_fwd_at(gk_backend *be, void *out, void *cache, const void *qkv_new, int B,
                             int Tc, const int *t0, int n, int C, int NH);

/* classifier.c */
void gk_cpu_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits,
                     const int *targets, int N, int V, int Vp);
void gk_cpu_xent_bwd(gk_backend *be, void *dlogits, const void *logits, const float *lse,
                     const int *targets, float dloss, int N, int V, int Vp);

/* optimizer.c */
void gk_cpu_sumsq(gk_backend *be, double *host_out, const float *x, size_t n);
void gk_cpu_scale(gk_backend *be, float *x, float s, size_t n);
void gk_cpu_add(gk_backend *be, float *y, const float *x, size_t n);
void gk_cpu_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
                  float lr, float beta1, float beta2, float eps, float wd, int t, float grad_scale,
                  void *copy, gk_elt tcopy);
/* One adamw (zero) call per tensor (range), through be->ops: the tensors are large enough for
 * each call to use every thread. */
void gk_cpu_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float beta1,
                        float beta2, float eps, float wd, int t, float grad_scale, gk_elt tcopy);
void gk_cpu_zero_multi(gk_backend *be, const gk_span *sp, int count);

#endif
