/* cpu_q8.h: the CPU backend's int8-weight ops (cpu_q8.c): gemm with llama.cpp's Q8_0 weights
 * (backend.h GK_Q8) and the embedding from a Q8_0 wte, with a portable path and an AVX2 one,
 * taken by the backend's cpu_impl.isa; and the activation quantizer their few-row path uses.
 * Owns nothing: quantized activations and widened panels live in the backend's scratch.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_Q8_H
#define GK_CPU_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* One block of 32 quantized activations: x[i] ~ d * q[i] (gk_q8_quantize_block's rule, with the
 * scale kept in fp32). */
typedef struct cpu_q8_act {
    float d;
    int8_t q[GK_Q8_BLOCK];
} cpu_q8_act;
/* x (K, a multiple of 32) -> K / 32 blocks at out */
void cpu_q8_quantize_act(cpu_q8_act *out, const float *x, int K);

/* C (M,N) = alpha A (M,K) @ B^T + beta C, B (N,K) Q8_0 rows of K / 32 blocks (tb must be 1, ldb
 * K, K a multiple of 32). Up to CPU_GEMM_ROWS_MAX rows: A quantized per block of 32 and int8 dot
 * products; more: B widened to fp32 in panels and sgemm (A exact). */
void cpu_gemm_q8(gk_backend *be, int M, int N, int K, float alpha, const float *A, int lda,
                 const uint8_t *B, float beta, float *C, int ldc);
// tokens (B,T) -> out (B,T,C) = wte[token] (Q8_0 rows of C) + wpe[t]
void cpu_encoder_fwd_q8(gk_backend *be, float *out, const int *tokens, const uint8_t *wte,
                        const float *wpe, int B, int T, int C);

#endif
