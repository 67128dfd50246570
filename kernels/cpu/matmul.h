/* matmul.h: the CPU backend's gemm (matmul.c: gk_ops.gemm, fp32 weights by sgemm or the
 * few-row kernels) and its weight types (matmul_bf16.c, matmul_f16.c, matmul_q8.c), with the
 * pieces they are built from: column slabs, the K split, widened panels + sgemm, C = beta C; and
 * the embeddings from 16-bit and int8 weights, which widen rows the same way.
 * Owns nothing: panels and quantized activations live in the backend's scratch.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_MATMUL_H
#define GK_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* gk_ops.gemm (backend.h): fp32 activations with fp32, bf16, fp16 or int8 weights */
void gk_cpu_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha, const void *A,
                 gk_elt tA, int lda, const void *B, gk_elt tB, int ldb, float beta, void *C,
                 gk_elt tC, int ldc, const float *bias, void *pre_gelu);
/* gemm for M <= CPU_GEMM_ROWS_MAX rows, !transA (decoding): returns 1 if done, 0 if the shape is
 * not one it takes (the caller then runs sgemm). */
#define CPU_GEMM_ROWS_MAX 8
int gk_cpu_gemm_rows(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc);
/* Column slabs of a few-row gemm over N columns (any cut gives the same results). */
int gk_cpu_rows_slabs(gk_backend *be, int N);
/* A few-row gemm with untransposed weights, C (M,N) = alpha A (M,K) @ B (K,N) + beta C: K is cut
 * into CPU_ROWS_PARTS fixed parts (each a contiguous stream of weight rows; the threads share
 * out the parts), part(acc, ...) writes acc (M,N) = A (M, k0..k1) @ B (k0..k1, N), and the
 * partial products are summed in part order. Returns 0 (nothing done) without the scratch. */
#define CPU_ROWS_PARTS 8
typedef void (*gk_cpu_part_fn)(float *acc, const float *A, int lda, const void *B, int ldb, int M,
                               int N, int k0, int k1);
int gk_cpu_rows_ksplit(gk_backend *be, gk_cpu_part_fn part, int M, int N, int K, float alpha,
                       const float *A, int lda, const void *B, int ldb, float beta, float *C,
                       int ldc);
/* C = beta C (alpha 0, as BLAS: C is not read where beta is 0). */
void gk_cpu_scale_c(int M, int N, float beta, float *C, int ldc);
/* A gemm with narrow weights for more rows, C (M,N) = alpha A (M,K) @ op(B) + beta C: panels of
 * CPU_BF16_PANEL weight columns, each widened to fp32 in the thread's scratch by widen (panel
 * (K, w) = columns j0..j0+w-1 of B (K, ldb) for !tb; panel (w, K) = rows j0.. of B (N, ldb) for
 * tb; arg is widen's own), then sgemm. Cut by shape: results do not depend on the thread count.
 * The scratch grows where the caller reserved less (gk_cpu_scratch_need; out of memory: the
 * backend's sticky error, nothing done). */
typedef void (*gk_cpu_widen_fn)(float *panel, const void *B, int ldb, int tb, int K, int j0, int w,
                                const void *arg);
void gk_cpu_gemm_panels(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const void *B, int ldb, gk_cpu_widen_fn widen, const void *arg,
                       float beta, float *C, int ldc);
/* The kernels of one path of a gemm with 16-bit weights (gk_cpu_gemm16). */
typedef struct gk_cpu_kern16 {
    gk_elt t;            /* GK_BF16 or GK_F16: the element type (the few-row slow path) */
    gk_cpu_part_fn part_nn; /* few rows, !tb: acc = A (M, k0..k1) @
                             * B (k0..k1, N) (gk_cpu_rows_ksplit) */
    /* few rows, tb: C (M, j0..j1) = alpha A (M,K) @ B^T + beta C, B (N,K) rows at stride ldb */
    void (*rows_nt)(float *C, int ldc, const float *A, int lda, const uint16_t *B, int ldb, int M,
                    int K, int j0, int j1, float alpha, float beta);
    void (*widen)(float *dst, const uint16_t *src, int n); /* dst (n) = src (n) widened */
} gk_cpu_kern16;
/* C (M,N) = alpha A (M,K) @ op(B) + beta C with 16-bit weights B (K, N) at stride ldb, or (N, K)
 * for tb, through k: a few rows (decoding) stream the weights once (k's part_nn over the K split,
 * or rows_nt over column slabs), more rows widen panels (gk_cpu_gemm_panels). */
void gk_cpu_gemm16(gk_backend *be, const gk_cpu_kern16 *k, int tb, int M, int N, int K, float alpha,
                   const float *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                   int ldc);

/* matmul_bf16.c */
/* gemm_bf16 with more than CPU_GEMM_ROWS_MAX rows widens panels of this many weight columns
 * into scratch (reserve() provides nthreads * CPU_BF16_PANEL * cols floats) */
#define CPU_BF16_PANEL 256
void gk_cpu_gemm_bf16(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                      int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
void gk_cpu_encoder_fwd_bf16(gk_backend *be, float *out, const int *tokens, const uint16_t *wte,
                             const float *wpe, int B, int T, int C);

/* matmul_f16.c */
/* C (M,N) = alpha A (M,K) @ op(B) + beta C, B IEEE fp16 (K,N) at stride ldb, or (N,K) with tb */
void gk_cpu_gemm_f16(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                     int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
// tokens (B,T) -> out (B,T,C) = wte[token] (fp16) + wpe[t]
void gk_cpu_encoder_fwd_f16(gk_backend *be, float *out, const int *tokens, const uint16_t *wte,
                            const float *wpe, int B, int T, int C);

/* matmul_q8.c */
/* One block of 32 quantized activations: x[i] ~ d * q[i] (gk_q8_quantize_block's rule, with the
 * scale kept in fp32). */
typedef struct gk_cpu_q8_act {
    float d;
    int8_t q[GK_Q8_BLOCK];
} gk_cpu_q8_act;
/* x (K, a multiple of 32) -> K / 32 blocks at out */
void gk_cpu_q8_quantize_act(gk_cpu_q8_act *out, const float *x, int K);

/* C (M,N) = alpha A (M,K) @ B^T + beta C, B (N,K) Q8_0 rows of K / 32 blocks (tb must be 1, ldb
 * K, K a multiple of 32). Up to CPU_GEMM_ROWS_MAX rows: A quantized per block of 32 and int8 dot
 * products; more: B widened to fp32 in panels and sgemm (A exact). */
void gk_cpu_gemm_q8(gk_backend *be, int M, int N, int K, float alpha, const float *A, int lda,
                    const uint8_t *B, float beta, float *C, int ldc);
// tokens (B,T) -> out (B,T,C) = wte[token] (Q8_0 rows of C) + wpe[t]
void gk_cpu_encoder_fwd_q8(gk_backend *be, float *out, const int *tokens, const uint8_t *wte,
                           const float *wpe, int B, int T, int C);

#endif
