/* mma.h: warp-level tensor-core primitives for kernels that hold their tiles in registers
 * (attention_fa2.cu), read by nvcc (inline PTX, sm_80 and newer) and by g++ -DGK_CUDA_EMU (the
 * emulator's kernels/emu/emu_mma.h, which implements them exactly with the same lane layouts).
 * Owns:
 * - mma_16816(d, a, b, c): mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, d[4] = a[4] b[2] +
 *   c[4]
 * - ldmatrix<N, TRANS>(r, row): ldmatrix.sync.aligned.m8n8.x<N>[.trans].shared.b16 into r[N]
 * - cp_async16(dst, src, src_bytes): cp.async.cg.shared.global 16 bytes (src_bytes copied, the rest
 *   zeroed), cp_async_commit(), cp_async_wait<N>() (all but the N most recent groups complete)
 * - pack_bf16x2(lo, hi): two floats rounded to bf16 in one b32 register (lo in the low half)
 * - ex2_ftz(x): ex2.approx.ftz.f32, 2^x in one MUFU instruction (exp2f adds a range check and two
 *   predicated multiplies around it for subnormal results, which softmax weights never need:
 *   results under 2^-126 are 0, -inf gives 0; at most 2 ulp from 2^x)
 * Lane layouts (lane = 4g + t; register i, half h; the PTX ISA's "Matrix Fragments for
 * mma.m16n8k16"):
 *   A 16x16: row g + 8*(i&1), column 2t + h + 8*(i>>1)     B 16x8: row 2t + h + 8*i, column g
 *   C, D 16x8 (fp32, element i): row g + 8*(i>>1), column 2t + (i&1)
 *   ldmatrix: matrix i's rows are at the addresses lanes 8i..8i+7 give; lane l gets row l/4,
 *   columns 2t, 2t+1 (.trans: column l/4, rows 2t, 2t+1).
 * mma and ldmatrix are warp collectives: all 32 lanes execute them together (converged). Under
 * the emulator cp.async writes its destination only at the wait that covers it, so that a
 * missing wait shows (emu_mma.cpp). */
#ifndef GK_CUDA_MMA_H
#define GK_CUDA_MMA_H

#include <stdint.h>

#include "kernels/cuda/dialect.h"

#if defined(GK_CUDA_EMU)
#include "kernels/emu/emu_mma.h"
#endif

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
#if defined(__CUDACC__)
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
#else
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16(lo)) |
           (uint32_t)__bfloat16_as_ushort(__float2bfloat16(hi)) << 16;
#endif
}

__device__ __forceinline__ float ex2_ftz(float x)
{
#if defined(__CUDACC__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
#else
    return gk_emu::ex2_ftz(x);
#endif
}

__device__ __forceinline__ void mma_16816(float *d, const uint32_t *a, const uint32_t *b,
                                          const float *c)
{
#if defined(__CUDACC__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
    gk_emu::mma_m16n8k16_bf16(d, a, b, c);
#endif
}

template <int N, bool TRANS>
__device__ __forceinline__ void ldmatrix(uint32_t *r, const void *row)
{
    static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(__CUDACC__)
    unsigned a = (unsigned)__cvta_generic_to_shared(row);
    if constexpr (N == 1 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                     : "=r"(r[0])
                     : "r"(a));
    if constexpr (N == 1 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                     : "=r"(r[0])
                     : "r"(a));
    if constexpr (N == 2 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(a));
    if constexpr (N == 2 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(a));
    if constexpr (N == 4 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    if constexpr (N == 4 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#else
    gk_emu::ldmatrix(N, TRANS, r, row);
#endif
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes)
{
#if defined(__CUDACC__)
    unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src),
                 "r"(src_bytes)
                 : "memory");
#else
    gk_emu::cp_async16(dst, src, src_bytes);
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
#if defined(__CUDACC__)
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
    gk_emu::cp_async_commit();
#endif
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if defined(__CUDACC__)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
    gk_emu::cp_async_wait(N);
#endif
}

#endif
