/* cpu_f16.h: the CPU backend's fp16-weight ops, gemm_f16 and encoder_fwd_f16 (cpu_f16.c), with a
 * portable path and an AVX2 + F16C one, taken by the backend's cpu_impl.isa.
 * Owns nothing: panels are widened into the backend's scratch (as cpu_bf16.h's, CPU_BF16_PANEL).
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_F16_H
#define GK_CPU_F16_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* C (M,N) = alpha A (M,K) @ op(B) + beta C, B IEEE fp16 (K,N) at stride ldb, or (N,K) with tb */
void cpu_gemm_f16(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
// tokens (B,T) -> out (B,T,C) = wte[token] (fp16) + wpe[t]
void cpu_encoder_fwd_f16(gk_backend *be, float *out, const int *tokens, const uint16_t *wte,
                         const float *wpe, int B, int T, int C);

#endif
