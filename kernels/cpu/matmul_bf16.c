/* matmul_bf16.c: the CPU backend's bf16-weight ops (gemm_bf16, encoder_fwd_bf16; see backend.h).
 * Decoding (M <= CPU_GEMM_ROWS_MAX rows) streams the bf16 weights once and widens them in
 * registers (a 16-bit shift; the AVX-512 and AVX2 clones vectorize it), so a token reads half
 * the bytes of the fp32 path. More rows (prompts, gpt-evalppl windows) widen panels of
 * CPU_BF16_PANEL weight columns into per-thread scratch and run sgemm on each. Panels and slabs
 * are cut by shape, never by thread count: results do not depend on it. The driver is
 * matmul.c's gk_cpu_gemm16; this file owns the bf16 kernels it runs. References:
 * kernels/ref/matmul.c. */
#include "kernels/cpu/matmul.h"

#include <omp.h>

#include "kernels/cpu/cpu_internal.h"

/* ---- a few rows: weights widened on the fly ---- */

/* acc (M,N) = A (M, k0..k1) @ B (k0..k1, N), B bf16 rows at stride ldb (gk_cpu_rows_ksplit): the
 * part's rows are one sequential stream, which the hardware prefetcher follows (software
 * prefetch a few rows ahead made it slower: tests/bench/cpu-results.md) */
GK_CLONES static void bf16_part_nn(float *restrict acc, const float *restrict A, int lda,
                                   const void *restrict Bv, int ldb, int M, int N, int k0, int k1)
{
    const uint16_t *Bm = Bv;
    for (size_t i = 0; i < (size_t)M * N; i++) acc[i] = 0.0f;
    for (int kk = k0; kk < k1; kk++) {
        const uint16_t *brow = Bm + (size_t)kk * ldb;
        for (int r = 0; r < M; r++) {
            float a = A[(size_t)r * lda + kk];
            float *c = acc + (size_t)r * N;
#pragma omp simd
            for (int j = 0; j < N; j++) c[j] += a * gk_bf16f(brow[j]);
        }
    }
}

/* out (M, j0..j1) = A (M,K) @ B^T, B (N,K) bf16 rows at stride ldb (the tied lm_head): one
 * weight row at a time, so the slab is one sequential stream (see matmul.c's rows_nt) */
GK_CLONES static void bf16_rows_nt(float *restrict Cm, int ldc, const float *restrict A,
                                   int lda, const uint16_t *restrict Bm, int ldb, int M, int K,
                                   int j0, int j1, float alpha, float beta)
{
    for (int j = j0; j < j1; j++) {
        const uint16_t *b = Bm + (size_t)j * ldb;
        for (int r = 0; r < M; r++) {
            const float *a = A + (size_t)r * lda;
            float s0[16] = {0}, s1[16] = {0}, s2[16] = {0}, s3[16] = {0}, t = 0.0f;
            int kk = 0;
            for (; kk + 64 <= K; kk += 64)
                for (int i = 0; i < 16; i++) {
                    s0[i] += a[kk + i] * gk_bf16f(b[kk + i]);
                    s1[i] += a[kk + 16 + i] * gk_bf16f(b[kk + 16 + i]);
                    s2[i] += a[kk + 32 + i] * gk_bf16f(b[kk + 32 + i]);
                    s3[i] += a[kk + 48 + i] * gk_bf16f(b[kk + 48 + i]);
                }
            for (; kk < K; kk++) t += a[kk] * gk_bf16f(b[kk]);
            float s = cpu_sum4x16(s0, s1, s2, s3) + t, *c = Cm + (size_t)r * ldc + j;
            *c = alpha * s + (beta == 0.0f ? 0.0f : beta * *c);
        }
    }
}

/* ---- many rows: widened panels + sgemm ---- */

/* dst (n) = src (n) widened */
GK_CLONES static void bf16_widen(float *restrict dst, const uint16_t *restrict src, int n)
{
#pragma omp simd
    for (int j = 0; j < n; j++) dst[j] = gk_bf16f(src[j]);
}

static const gk_cpu_kern16 k_bf16 = {GK_BF16, bf16_part_nn, bf16_rows_nt, bf16_widen};

void gk_cpu_gemm_bf16(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                      int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    gk_cpu_gemm16(be, &k_bf16, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// tokens (B,T) -> out (B,T,C) = wte[token] + wpe[t]
void gk_cpu_encoder_fwd_bf16(gk_backend *be, float *out, const int *tokens, const uint16_t *wte,
                             const float *wpe, int B, int T, int C)
{
    int N = B * T;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static) if (N > 1)
    for (int i = 0; i < N; i++) {
        const uint16_t *w = wte + (size_t)tokens[i] * C;
        const float *p = wpe + (size_t)(i % T) * C;
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = gk_bf16f(w[c]) + p[c];
    }
}
