/* cpu_internal.h: what the CPU backend's files share (not part of the API).
 * Owns: cpu_impl (thread count + scratch; one per backend), the op declarations the vtable in
 * cpu.c points at, and gk_vexpf. Thread safety: scratch belongs to the op running on the backend. */
#ifndef GK_CPU_INTERNAL_H
#define GK_CPU_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "kernels/backend.h"

/* Hot loops are compiled for AVX-512, AVX2+FMA and baseline x86-64; the loader picks one (ifunc).
 * Each clone computes the same operations in the same order (no contraction: -std=c11). */
#if defined(__x86_64__) && !defined(GK_NO_CLONES)
#define GK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GK_CLONES
#endif

/* Reductions over rows use this many fixed chunks, whatever the thread count (determinism). */
#define GK_NCHUNK 16

typedef struct cpu_impl {
    int nthreads;
    int ncores;       /* processors of the machine (fixed per machine; never the thread count) */
    float *scratch;   /* reserve()d: max(GK_NCHUNK*2*cols, nthreads*cpu_attn_scratch(T,head_size),
                       * nthreads*CPU_BF16_PANEL*cols) */
    size_t scratch_n; /* in floats */
} cpu_impl;

#define CPU(be) ((cpu_impl *)(be)->impl)

/* Scratch of n floats, or NULL when reserve() did not provide that much (ops then fall back to
 * the reference op rather than allocate inside a step). */
static inline float *cpu_scratch(gk_backend *be, size_t n)
{
    return CPU(be)->scratch_n >= n ? CPU(be)->scratch : NULL;
}

/* exp(x) for x in [-87.3, 88.3] (clamped outside), branch-free so loops vectorize: Cephes' expf
 * polynomial after range reduction by ln 2; max relative error ~2 ulp. */
static inline float gk_vexpf(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.3f ? 88.3f : x;
    float t = x * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: round to nearest */
    float n = t - 12582912.0f;
    uint32_t ni;
    memcpy(&ni, &t, 4);
    ni -= 0x4B400000u;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t b;
    memcpy(&b, &p, 4);
    b += ni << 23;
    memcpy(&p, &b, 4);
    return p;
}

/* bf16 (the high half of an fp32) -> fp32, exact */
static inline float gk_bf16f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* cpu_ops.c */
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
/* cpu_attn.c; cpu_attn_scratch: floats of scratch per thread for T and a head size */
size_t cpu_attn_scratch(int T, int hs);
void cpu_attention_fwd(gk_backend *be, float *out, float *lse, const float *qkv, int B, int T,
                       int C, int NH, float p, uint64_t key);
void cpu_attention_bwd(gk_backend *be, float *dqkv, const float *dout, const float *qkv,
                       const float *out, const float *lse, int B, int T, int C, int NH,
                       float p, uint64_t key);
/* cpu_optim.c */
void cpu_sumsq(gk_backend *be, double *host_out, const float *x, size_t n);
void cpu_scale(gk_backend *be, float *x, float s, size_t n);
void cpu_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
               float lr, float beta1, float beta2, float eps, float wd, int t, float grad_scale);

/* cpu_infer.c */
void cpu_attention_fwd_at(gk_backend *be, float *out, const float *qkv, int B, int Tc, int t0,
                          int n, int C, int NH);
/* gemm for M <= CPU_GEMM_ROWS_MAX rows, !transA (decoding): returns 1 if done, 0 if the shape is
 * not one it takes (the caller then runs sgemm). */
#define CPU_GEMM_ROWS_MAX 8
int cpu_gemm_rows(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* Column slabs of a few-row gemm over N columns (any cut gives the same results). */
int cpu_rows_slabs(gk_backend *be, int N);
/* A few-row gemm with untransposed weights, C (M,N) = alpha A (M,K) @ B (K,N) + beta C: K is cut
 * into CPU_ROWS_PARTS fixed parts (each a contiguous stream of weight rows; the threads share
 * out the parts), part(acc, ...) writes acc (M,N) = A (M, k0..k1) @ B (k0..k1, N), and the
 * partial products are summed in part order. Returns 0 (nothing done) without the scratch. */
#define CPU_ROWS_PARTS 8
typedef void (*cpu_part_fn)(float *acc, const float *A, int lda, const void *B, int ldb, int M,
                            int N, int k0, int k1);
int cpu_rows_ksplit(gk_backend *be, cpu_part_fn part, int M, int N, int K, float alpha,
                    const float *A, int lda, const void *B, int ldb, float beta, float *C, int ldc);

/* cpu_bf16.c; gemm_bf16 with more than CPU_GEMM_ROWS_MAX rows widens panels of this many weight
 * columns into scratch (reserve() provides nthreads * CPU_BF16_PANEL * cols floats) */
#define CPU_BF16_PANEL 256
void cpu_gemm_bf16(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                   int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
void cpu_encoder_fwd_bf16(gk_backend *be, float *out, const int *tokens, const uint16_t *wte,
                          const float *wpe, int B, int T, int C);

#endif
