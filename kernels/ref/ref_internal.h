/* ref_internal.h: the reference backend's ops, one file per op family in kernels/ref/ (the same
 * stems as kernels/cpu/ and kernels/cuda/, and as gk_ops's groups, in their order), gathered into
 * gk_ref_ops by ref.c. Each op is the textbook loop with double accumulators, the oracle of the
 * op tests (tests/unit/ops/), so it must stay obvious rather than fast: built without
 * -ffast-math. Shapes as in backend.h. */
#ifndef GK_REF_INTERNAL_H
#define GK_REF_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "kernels/backend.h"

/* GELU (tanh form): the elementwise op and gemm's epilogue. */
#define GK_REF_GELU_K 0.7978845608028654 /* sqrt(2/pi) */
static inline double gk_ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(GK_REF_GELU_K * (x + 0.044715 * x * x * x)));
}

/* cast.c */
void gk_ref_cast(gk_backend *be, void *dst, gk_elt td, const void *src, gk_elt ts, size_t n);
/* matmul.c (gemm_bwd: kernels/backend_compose.c) */
void gk_ref_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                 const void *A, gk_elt tA, int lda, const void *B, gk_elt tB, int ldb,
                 float beta, void *C, gk_elt tC, int ldc, const float *bias, void *pre_gelu);
/* elementwise.c */
void gk_ref_bias_bwd(gk_backend *be, float *dbias, const void *dout_, int N, int C);
void gk_ref_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C);
void gk_ref_gelu_bwd(gk_backend *be, void *dinp_, const void *x_, const void *dout_, int N,
                     int C);
void gk_ref_dropout_bwd(gk_backend *be, void *dinp_, const void *dout_, size_t n, float p,
                        uint64_t key);
/* encoder.c */
void gk_ref_encoder_fwd(gk_backend *be, void *out_, const int *tok, const void *wte,
                        gk_elt tw, const float *wpe, const int *t0, int B, int T, int C,
                        float p, uint64_t key);
void gk_ref_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout_,
                        const int *tok, int B, int T, int C, float p, uint64_t key);
/* layernorm.c */
void gk_ref_layernorm_fwd(gk_backend *be, void *out_, float *mean, float *rstd,
                          const void *inp_, const float *w, const float *b, int N, int C);
void gk_ref_layernorm_bwd(gk_backend *be, void *dinp_, float *dw, float *db, const void *dout_,
                          const void *inp_, const float *w, const float *mean,
                          const float *rstd, int N, int C);
void gk_ref_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
                                   float *rstd, const void *res_, const void *x_,
                                   const float *bias, float p, uint64_t key, const float *w,
                                   const float *b, int N, int C);
/* attention.c */
void gk_ref_attention_fwd(gk_backend *be, void *out_, float *lse, const void *qkv_, int B,
                          int T, int C, int NH, float p, uint64_t key);
void gk_ref_attention_bwd(gk_backend *be, void *dqkv_, const void *dout_, const void *qkv_,
                          const void *out_, const float *lse, int B, int T, int C, int NH,
                          float p, uint64_t key);
void gk_ref_attention_fwd_at(gk_backend *be, void *out_, void *cache, const void *qkv_new,
                             int B, int Tc, const int *t0p, int n, int C, int NH);
/* classifier.c */
void gk_ref_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits_,
                     const int *targets, int N, int V, int Vp);
void gk_ref_xent_bwd(gk_backend *be, void *dlogits_, const void *logits_, const float *lse,
                     const int *targets, float dloss, int N, int V, int Vp);
/* optimizer.c */
void gk_ref_sumsq(gk_backend *be, double *out, const float *x, size_t n);
void gk_ref_scale(gk_backend *be, float *x, float s, size_t n);
void gk_ref_add(gk_backend *be, float *y, const float *x, size_t n);
void gk_ref_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int t, float gscale,
                  void *copy, gk_elt tcopy);
void gk_ref_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float b1,
                        float b2, float eps, float wd, int t, float gscale, gk_elt tcopy);
void gk_ref_zero_multi(gk_backend *be, const gk_span *sp, int count);

#endif
