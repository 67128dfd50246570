/* emu.h: the CUDA emulator, a test harness that runs kernels/cuda/ on the CPU (C++17, g++).
 * Owns: the launcher behind GK_LAUNCH (kernels/cuda/dialect.h) and the list below, which is the
 * whole CUDA subset kernel code may use: kernels/cuda/ sources (.cu) are written in plain CUDA plus the
 * dialect header, and must compile with nvcc and with g++ -DGK_CUDA_EMU against this. The
 * Makefile compiles them with -mfma -ffp-contract=fast (GK_EMU_CONTRACT), so that a * b + c may be
 * one rounding here as on a GPU (nvcc contracts by default); __fmul_rn keeps a product rounded.
 *
 * Kernel side (emu_device.h, emu_bf16.h, emu_wmma.h):
 * - __global__ __device__ __host__ __forceinline__ __noinline__ __restrict__ __launch_bounds__(..)
 * - threadIdx blockIdx blockDim gridDim (.x .y .z), warpSize (32)
 * - __shared__ arrays of trivial types, inside kernels/device functions or at file scope, never
 *   initialized; dynamic shared memory only through GK_DYN_SMEM(type, name) (never extern __shared__)
 * - __syncthreads, __syncwarp(mask), __shfl_sync / _up / _down / _xor (with width), __ballot_sync,
 *   __any_sync, __all_sync, __activemask (the lanes that call it together), __threadfence(_block).
 *   Stricter than CUDA on sm_70+, which lets a mask name exited lanes (their shuffled values are
 *   undefined): here every lane of the mask must exist and arrive, so a full mask after an early
 *   return, or in a block whose size is not a multiple of 32, is an error.
 * - atomicAdd (float, double, int, unsigned, unsigned long long), atomicSub (int, unsigned),
 *   atomicMax/atomicMin (int, unsigned), atomicCAS (int, unsigned, unsigned long long),
 *   atomicExch (int, unsigned, unsigned long long, float)
 * - libm float math (expf logf sqrtf tanhf fabsf fmaxf fminf powf fmaf isnan isinf INFINITY NAN..),
 *   rsqrtf __expf __logf __fdividef __frcp_rn __fsqrt_rn __fmul_rn __saturatef, max/min (int, unsigned,
 *   long long, unsigned long long, float), __popc __ffs __clz, __float_as_int/uint and back,
 *   __ldg __ldcs __ldcg __stcs __stcg (plain loads and stores)
 * - float2 float3 float4 int2 int4 uint4 and make_*, uint3, dim3
 * - __nv_bfloat16 / __nv_bfloat162: see emu_bf16.h; nvcuda::wmma 16x16x16 bf16: see emu_wmma.h
 * - kernels/cuda/mma.h (inline PTX on a GPU, emu_mma.h here, with the PTX ISA's lane layouts):
 *   mma_16816 (mma.sync m16n8k16 bf16 -> fp32), ldmatrix<1|2|4, trans> (m8n8 b16), cp_async16
 *   with cp_async_commit / cp_async_wait<N> (here the destination is written at the thread's
 *   wait that covers the copy, so a read before it sees the old bytes), pack_bf16x2
 * Not there: __CUDA_ARCH__, __constant__, cooperative groups, textures, clock(), inline PTX (but mma.h),
 * __syncthreads_count/_and/_or, half precision, device-side malloc.
 * Host side (emu_runtime.h, emu_cublaslt.h, emu_nccl.h): the runtime, cuBLASLt and NCCL calls
 * listed there (NCCL's collectives between processes over loopback TCP), stream capture into
 * graphs and their replay (cudaStreamBeginCapture/EndCapture/IsCapturing, cudaGraphInstantiate,
 * cudaGraphLaunch, cudaGraphExecDestroy, cudaGraphDestroy: one stream per capture, no fork/join).
 *
 * How it runs: a launch runs to completion before it returns; on a capturing stream it is
 * recorded instead (with a copy of its arguments) and runs, as a launch made then, at each
 * cudaGraphLaunch (emu_graph.cpp). Blocks run on a pool of host threads (GK_EMU_THREADS, default
 * the number of cores; results do not depend on it except for the order of float atomics); a
 * block's threads are coroutines on one host thread, run in order of their linear id, each
 * straight through until it reaches __syncthreads or a warp collective.
 * GK_EMU_ORDER=reverse or shuffle starts and releases them in descending or in a shuffled order
 * (a new permutation per block and launch) and runs the blocks in reverse: a GPU promises no
 * order, so a kernel whose results change with it has a race (tests/cli/emu_orders.sh). Warps are
 * 32 consecutive linear thread ids (x fastest). These are launch errors naming the kernel, block and
 * thread (cudaGetErrorString of the code returns that message): a __syncthreads or warp collective
 * that not every thread it waits for reaches (exited, or waiting at another one that waits for
 * it too), a warp
 * collective whose mask leaves out the calling lane or names lanes past the block, a dynamic shared
 * memory access past its end (a guard page follows it; the check granularity is 16 bytes), a
 * thread stack overflow (GK_EMU_STACK_KB, default 128 per thread), a block of more than 1024 threads
 * or dims above (1024, 1024, 64), grid.y/z above 65535, dynamic shared memory above 48 KiB without
 * cudaFuncSetAttribute(MaxDynamicSharedMemorySize) or above 227 KiB, and a shared-memory race
 * (below). Static __shared__ sizes are not checked. GK_EMU_FAIL_LAUNCH=N makes the Nth launch
 * (counted from the first launch that sees this
 * value; a graph's launches count when it runs, not at capture) fail with cudaErrorLaunchFailure;
 * GK_EMU_LOSE_DEVICE=N makes it lose the device (cudaErrorDevicesUnavailable, which
 * cudaDeviceReset does not clear). GK_EMU_SM=XY makes the device report compute capability X.Y
 * (default 9.0); below 8.0 every launch fails with cudaErrorNoKernelImageForDevice, as on a GPU
 * that a library built for sm_80 and newer has no code for. GK_EMU_DRIVER=N is the CUDA version
 * the driver supports (cudaDriverGetVersion; 0: none installed); below 13000 cudaGetDeviceCount
 * fails with cudaErrorInsufficientDriver.
 *
 * Shared-memory races (emu_race.cpp, after compute-sanitizer's racecheck; always on in a build
 * without SAN=1, GK_EMU_RACECHECK=0 turns it off): the Makefile compiles the .cu sources with
 * -fsanitize=thread and links no libtsan: the emulator answers the instrumentation's calls
 * itself. Each byte of a block's shared memory (dynamic, and static __shared__) records which
 * threads read and wrote it since the block's last __syncthreads; a write of a byte that another
 * thread read or wrote there, or a read of one another thread wrote, is a launch error naming
 * the kernel, both threads and the offset (a static __shared__ variable by name): "shared memory
 * race: it writes dynamic shared memory at offset 0, which thread (31,0,0) read in the same
 * barrier interval". Except between lanes of one warp when a collective of both (__syncwarp, a
 * shuffle, a vote, wmma, mma.h) came between them. Not seen: atomics (never a race here),
 * memcpy/memset calls, and the accesses the emulator's .cpp makes for a kernel unless it reports
 * them (race_access: wmma loads and stores do). */
#ifndef GK_EMU_H
#define GK_EMU_H

#include <stdio.h>

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/emu/emu_bf16.h"
#include "kernels/emu/emu_device.h"
#include "kernels/emu/emu_runtime.h"
#include "kernels/emu/emu_wmma.h"

namespace gk_emu {
struct LaunchSpec {
    const char *name; /* the kernel as written in GK_LAUNCH */
    const void *func; /* its address: the key of cudaFuncSetAttribute */
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
typedef void (*BodyFn)(const void *closure);
typedef std::shared_ptr<const void> (*KeepFn)(const void *closure); /* a copy of it that owns its arguments */

/* Runs body(closure) once per thread of the grid; errors go where cudaGetLastError finds them.
 * On a capturing stream it records keep(closure) instead, for cudaGraphLaunch to run. */
GK_EMU_API void launch(const LaunchSpec &spec, BodyFn body, const void *closure, KeepFn keep);

/* GK_LAUNCH(k, grid, block, smem, stream, args...) is launcher(...)(args...): the arguments are
 * converted to the kernel's parameter types once, as by <<<...>>>, and every thread calls k with
 * copies of them (a captured launch keeps a heap copy of them for its replays). */
template <class... P> struct Launcher {
    LaunchSpec spec;
    void (*fn)(P...);
    template <class... A> void operator()(A &&...args) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
        struct Closure {
            void (*fn)(P...);
            std::tuple<typename std::decay<P>::type...> args;
        };
        const Closure c{fn, std::tuple<typename std::decay<P>::type...>(std::forward<A>(args)...)};
        launch(
            spec,
            [](const void *p) {
                const Closure *cl = static_cast<const Closure *>(p);
                std::apply(cl->fn, cl->args);
            },
            &c,
            [](const void *p) -> std::shared_ptr<const void> {
                return std::make_shared<Closure>(*static_cast<const Closure *>(p));
            });
    }
};
template <class... P>
inline Launcher<P...> launcher(const char *name, void (*fn)(P...), dim3 grid, dim3 block, size_t smem,
                               cudaStream_t stream)
{
    return Launcher<P...>{{name, reinterpret_cast<const void *>(fn), grid, block, smem, stream}, fn};
}
} // namespace gk_emu

#endif
