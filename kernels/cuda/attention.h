/* attention.h: what the CUDA attention files share (not part of any API): the entry points of
 * the fused paths that attention.cu picks from (attention_flash.cu's wmma kernels,
 * attention_fa2.cu's and attention_fa2_bwd.cu's FlashAttention-2 kernels), the head sizes they are
 * built for, the one switch from a head size to their template instances, and their opt-in to
 * shared memory. The backward's
 * D = rowsum(dO * O) that both fused paths read is attention.cu's (cu_attention_bwd computes it
 * before it calls them). bf16 activations, 16-byte aligned buffers: attention.cu checks. */
#ifndef GK_CUDA_ATTENTION_H
#define GK_CUDA_ATTENTION_H

#include "kernels/cuda/cuda_internal.h"

#include <type_traits>

/* The head sizes with a flash and an fa2 kernel. */
static inline int cu_attn_fused_head(int hs)
{
    return hs == 16 || hs == 32 || hs == 64 || hs == 128;
}

/* Calls f(std::integral_constant<int, D>()) with D = hs, one of cu_attn_fused_head's; returns 0,
 * or -1 without calling f for another head size. */
template <typename F> static int cu_attn_by_head(int hs, F &&f)
{
    switch (hs) {
    case 16: f(std::integral_constant<int, 16>()); return 0;
    case 32: f(std::integral_constant<int, 32>()); return 0;
    case 64: f(std::integral_constant<int, 64>()); return 0;
    case 128: f(std::integral_constant<int, 128>()); return 0;
    default: return -1;
    }
}

/* Opts a fused kernel into more than the default 48 KiB of dynamic shared memory; 0, or the error
 * recorded ("cuda WHAT: N bytes of shared memory" where the device has less). */
template <typename K>
static int cu_attn_smem_optin(gk_backend *be, K kernel, size_t smem, const char *what)
{
    if (smem <= 48 * 1024) return 0;
    if (smem > CU(be)->smem_optin)
        return GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda %s: %zu bytes of shared memory", what, smem);
    return CU_CHECK(be, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem));
}

/* attention_flash.cu: qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T); the backward from dout, qkv,
 * lse and dsum (B,NH,T: D) -> dqkv (B,T,3C). */
void cu_flash_attn_fwd(gk_backend *be, bf16 *out, float *lse, const bf16 *qkv, int B, int T,
                       int C, int NH, float p, uint64_t key);
void cu_flash_attn_bwd(gk_backend *be, bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                       const float *lse, const float *dsum, int B, int T, int C, int NH, float p,
                       uint64_t key);
/* attention_fa2.cu, attention_fa2_bwd.cu: the same for the fa2 kernels. */
void cu_fa2_attn_fwd(gk_backend *be, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C,
                     int NH, float p, uint64_t key);
void cu_fa2_attn_bwd(gk_backend *be, bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                     const float *lse, const float *dsum, int B, int T, int C, int NH, float p,
                     uint64_t key);

#endif
