/* cpu_infer.h: the CPU backend's inference ops (cpu_infer.c): attention over a KV cache and the
 * few-row gemm of decoding, with the pieces the narrow-weight gemms (cpu_bf16.c, cpu_f16.c,
 * cpu_q8.c) are built from: column slabs, the K split, widened panels + sgemm, C = beta C.
 * Owns nothing. Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_INFER_H
#define GK_CPU_INFER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

void cpu_attention_fwd_at(gk_backend *be, void *out, void *cache, const void *qkv_new, int B,
                          int Tc, const int *t0, int n, int C, int NH);
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
/* C = beta C (alpha 0, as BLAS: C is not read where beta is 0). */
void cpu_scale_c(int M, int N, float beta, float *C, int ldc);
/* A gemm with narrow weights for more rows, C (M,N) = alpha A (M,K) @ op(B) + beta C: panels of
 * CPU_BF16_PANEL weight columns, each widened to fp32 in the thread's scratch by widen (panel
 * (K, w) = columns j0..j0+w-1 of B (K, ldb) for !tb; panel (w, K) = rows j0.. of B (N, ldb) for
 * tb; arg is widen's own), then sgemm. Cut by shape: results do not depend on the thread count.
 * Returns 0 (nothing done) without the scratch. */
typedef void (*cpu_widen_fn)(float *panel, const void *B, int ldb, int tb, int K, int j0, int w,
                             const void *arg);
int cpu_gemm_panels(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                    int lda, const void *B, int ldb, cpu_widen_fn widen, const void *arg,
                    float beta, float *C, int ldc);
/* The kernels of one path of a gemm with 16-bit weights (cpu_gemm16). */
typedef struct cpu_kern16 {
    gk_elt t;            /* GK_BF16 or GK_F16: the element type (slow path, reference fallback) */
    cpu_part_fn part_nn; /* few rows, !tb: acc = A (M, k0..k1) @ B (k0..k1, N) (cpu_rows_ksplit) */
    /* few rows, tb: C (M, j0..j1) = alpha A (M,K) @ B^T + beta C, B (N,K) rows at stride ldb */
    void (*rows_nt)(float *C, int ldc, const float *A, int lda, const uint16_t *B, int ldb, int M,
                    int K, int j0, int j1, float alpha, float beta);
    void (*widen)(float *dst, const uint16_t *src, int n); /* dst (n) = src (n) widened */
} cpu_kern16;
/* C (M,N) = alpha A (M,K) @ op(B) + beta C with 16-bit weights B (K, N) at stride ldb, or (N, K)
 * for tb, through k: a few rows (decoding) stream the weights once (k's part_nn over the K split,
 * or rows_nt over column slabs), more rows widen panels (cpu_gemm_panels); the reference
 * backend's gemm where the scratch is missing. */
void cpu_gemm16(gk_backend *be, const cpu_kern16 *k, int tb, int M, int N, int K, float alpha,
                const float *A, int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);

#endif
