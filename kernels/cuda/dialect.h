/* dialect.h: the one header every kernels/cuda/ source includes first, read by nvcc and by g++.
 * Owns: the only three things kernel code writes differently from plain CUDA:
 * - GK_LAUNCH(kernel, grid, block, smem_bytes, stream, args...) instead of
 *   kernel<<<grid, block, smem_bytes, stream>>>(args...). grid and block are dim3 or integers;
 *   write dim3(x, y) with parentheses, not braces (a macro argument), and put a template kernel
 *   in parentheses: GK_LAUNCH((k<float, 4>), ...). Check cudaGetLastError() after it as usual.
 * - GK_DYN_SMEM(type, name); inside a kernel declares `type *name` pointing at the block's dynamic
 *   shared memory (16-byte aligned) instead of `extern __shared__ type name[];`.
 * - GK_UNROLL before a loop of constant trip count over a register array instead of
 *   `#pragma unroll` (g++ spells it otherwise): unrolled, so that the array stays in registers (a
 *   run-time index would move it to local memory).
 * Under nvcc (__CUDACC__) it includes the real CUDA and NCCL headers; with g++ -DGK_CUDA_EMU it
 * includes the emulator (kernels/emu/emu.h, emu_cublaslt.h, emu_nccl.h); kernels/emu/README.md
 * lists the CUDA subset kernels may use. */
#ifndef GK_CUDA_DIALECT_H
#define GK_CUDA_DIALECT_H

#if defined(__CUDACC__)

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#ifndef GK_NO_NCCL /* built without NCCL's header: comm_nccl.cu refuses several ranks */
#include <nccl.h>
#endif

#define GK_LAUNCH(kernel, grid, block, smem_bytes, stream, ...) \
    kernel<<<(grid), (block), (smem_bytes), (stream)>>>(__VA_ARGS__)
#define GK_DYN_SMEM(type, name)                                       \
    extern __shared__ __align__(16) unsigned char gk_dyn_smem_raw_[]; \
    type *name = reinterpret_cast<type *>(gk_dyn_smem_raw_)
#define GK_UNROLL _Pragma("unroll")

#elif defined(GK_CUDA_EMU)

#include "kernels/emu/emu.h"
#include "kernels/emu/emu_cublaslt.h"
#include "kernels/emu/emu_nccl.h"

#define GK_LAUNCH(kernel, grid, block, smem_bytes, stream, ...) \
    ::gk_emu::launcher(#kernel, kernel, (grid), (block), (smem_bytes), (stream))(__VA_ARGS__)
#define GK_DYN_SMEM(type, name) type *name = static_cast<type *>(::gk_emu::dyn_smem())
#define GK_UNROLL _Pragma("GCC unroll 64")

#else
#error "kernels/cuda/dialect.h: compile with nvcc, or with g++ -DGK_CUDA_EMU for the emulator"
#endif

#endif
