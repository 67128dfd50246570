/* cpu_attn.h: the CPU backend's causal self-attention, forward and backward (cpu_attn.c).
 * Owns nothing: per-thread scratch comes from the backend, cpu_attn_scratch floats per thread.
 * Thread safety: one host thread drives a backend; the ops use its OpenMP team. */
#ifndef GK_CPU_ATTN_H
#define GK_CPU_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* floats of scratch per thread for sequence length T and head size hs */
size_t cpu_attn_scratch(int T, int hs);
void cpu_attention_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T,
                       int C, int NH, float p, uint64_t key);
void cpu_attention_bwd(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                       const void *out, const float *lse, int B, int T, int C, int NH,
                       float p, uint64_t key);

#endif
