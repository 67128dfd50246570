/* cpu_bf16.h: the CPU backend's bf16-weight ops, gemm_bf16 and encoder_fwd_bf16 (cpu_bf16.c).
 * Owns nothing: panels are widened into the backend's scratch.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_BF16_H
#define GK_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* gemm_bf16 with more than CPU_GEMM_ROWS_MAX rows widens panels of this many weight columns
 * into scratch (reserve() provides nthreads * CPU_BF16_PANEL * cols floats) */
#define CPU_BF16_PANEL 256
void cpu_gemm_bf16(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                   int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
void cpu_encoder_fwd_bf16(gk_backend *be, float *out, const int *tokens, const uint16_t *wte,
                          const float *wpe, int B, int T, int C);

#endif
