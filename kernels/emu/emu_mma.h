/* emu_mma.h: the emulator's side of kernels/cuda/mma.h, the warp-level tensor-core primitives
 * that mma.h writes as inline PTX under nvcc (see kernels/emu/README.md for the whole subset).
 * Owns: mma.sync m16n8k16 (bf16 A and B, fp32 C and D), ldmatrix m8n8 .x1/.x2/.x4 (.trans) of b16,
 * cp.async 16 bytes shared <- global with its groups, and ex2.approx.ftz. mma and ldmatrix are
 * warp collectives (all 32 lanes of the warp, or the launch fails) that exchange the lanes'
 * registers with the lane layouts of the PTX ISA (emu_mma.cpp's top comment); cp.async writes
 * its destination only at the thread's wait that covers it (see there). */
#ifndef GK_EMU_MMA_H
#define GK_EMU_MMA_H

#include <math.h>
#include <stdint.h>

#include "kernels/emu/emu_runtime.h"

namespace gk_emu {
/* d[4] = a[4] b[2] + c[4] of the 32 lanes' fragments (each lane passes its own; d may be c). */
GK_EMU_API void mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c);
/* ldmatrix.sync.aligned.m8n8.x<n>[.trans].shared.b16: r[n] from the rows that lanes 0..8n-1
 * address (row, a 16-byte aligned address of 8 b16, as given by this lane). */
GK_EMU_API void ldmatrix(int n, bool trans, uint32_t *r, const void *row);
/* cp.async.{ca,cg}.shared.global [dst], [src], 16, src_bytes: src_bytes (0..16) copied, the rest
 * of the 16 zeroed; both addresses 16-byte aligned. dst is written at the cp_async_wait that
 * covers it (cp.async.commit_group closes a group; wait_group n completes all but the n newest). */
GK_EMU_API void cp_async16(void *dst, const void *src, int src_bytes);
GK_EMU_API void cp_async_commit();
GK_EMU_API void cp_async_wait(int n);
/* ex2.approx.ftz.f32: 2^x (libm's, within the instruction's 2 ulp), with a subnormal result
 * flushed to +0 as the instruction does (inputs that small give 1 either way). */
inline float ex2_ftz(float x)
{
    float y = exp2f(x);
    return y < 0x1p-126f ? 0.0f : y;
}
} // namespace gk_emu

#endif
