/* emu_device.h: what kernel code sees of the emulated device (see kernels/emu/README.md for the
 * whole subset).
 * Owns: the qualifiers, threadIdx/blockIdx/blockDim/gridDim, __syncthreads and the warp
 * collectives, atomics, and the float math and load/store intrinsics. The collectives are
 * implemented in emu_sched.cpp / emu_warp.cpp; the rest is inline here. */
#ifndef GK_EMU_DEVICE_H
#define GK_EMU_DEVICE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "kernels/emu/emu_runtime.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
/* Static shared memory: one instance per host thread, and a block runs on one host thread. */
#define __shared__ static __thread

/* threadIdx is set by the scheduler each time one of a block's threads (a coroutine) runs.
 * blockDim and gridDim are uint3 here (dim3 on a GPU): only their .x/.y/.z are portable. */
extern __thread uint3 threadIdx GK_EMU_API;
extern __thread uint3 blockIdx GK_EMU_API;
extern __thread uint3 blockDim GK_EMU_API;
extern __thread uint3 gridDim GK_EMU_API;
static constexpr int warpSize = 32;

namespace gk_emu {
/* What one lane brings to a warp collective; the lane that completes the group fills result. */
struct WarpSlot {
    int kind;       /* WarpOp */
    unsigned mask;
    uint64_t value; /* the lane's operand, bits of a value up to 8 bytes */
    int param;      /* source lane, delta or lane mask */
    int width;
    void *ptr[4];   /* wmma: fragments */
    uint64_t result;
};
enum WarpOp {
    WOP_SYNCWARP, WOP_SHFL, WOP_SHFL_UP, WOP_SHFL_DOWN, WOP_SHFL_XOR,
    WOP_BALLOT, WOP_ANY, WOP_ALL, WOP_WMMA_LOAD, WOP_WMMA_STORE, WOP_WMMA_MMA, WOP_ACTIVEMASK,
    WOP_WARP_FN, /* emu_mma.cpp: value is a WarpFn that completes it, param names the operation */
};
/* Completes a WOP_WARP_FN collective once all lanes are there (slots by lane). */
typedef void (*WarpFn)(WarpSlot *const slots[32]);
/* Waits until every lane of slot->mask arrived at the same collective, then returns this lane's
 * result. A mask without the calling lane, lanes that exit first, or lanes at another collective
 * end the launch with an error. */
GK_EMU_API uint64_t warp_collective(WarpSlot *slot);
GK_EMU_API void *dyn_smem();

template <class T> inline uint64_t to_bits(T v)
{
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                  "warp shuffles take values of at most 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <class T> inline T from_bits(uint64_t u)
{
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}
template <class T> inline T shuffle(int kind, unsigned mask, T var, int param, int width)
{
    WarpSlot s{kind, mask, to_bits(var), param, width, {}, 0};
    return from_bits<T>(warp_collective(&s));
}
inline uint64_t vote(int kind, unsigned mask, int pred)
{
    WarpSlot s{kind, mask, pred != 0, 0, warpSize, {}, 0};
    return warp_collective(&s);
}
} // namespace gk_emu

GK_EMU_API void __syncthreads();
inline void __syncwarp(unsigned mask = 0xffffffffu) { gk_emu::vote(gk_emu::WOP_SYNCWARP, mask, 0); }
/* The lanes of the calling warp that call it together: it returns once every other lane of the
 * warp has called it too, exited, or waits at a barrier or another collective. */
GK_EMU_API unsigned __activemask();
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <class T> inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize)
{
    return gk_emu::shuffle(gk_emu::WOP_SHFL, mask, var, src_lane, width);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    return gk_emu::shuffle(gk_emu::WOP_SHFL_UP, mask, var, (int)delta, width);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    return gk_emu::shuffle(gk_emu::WOP_SHFL_DOWN, mask, var, (int)delta, width);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize)
{
    return gk_emu::shuffle(gk_emu::WOP_SHFL_XOR, mask, var, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int pred)
{
    return (unsigned)gk_emu::vote(gk_emu::WOP_BALLOT, mask, pred);
}
inline int __any_sync(unsigned mask, int pred)
{
    return (int)gk_emu::vote(gk_emu::WOP_ANY, mask, pred);
}
inline int __all_sync(unsigned mask, int pred)
{
    return (int)gk_emu::vote(gk_emu::WOP_ALL, mask, pred);
}

/* ---- atomics: real host atomics (blocks run in parallel on host threads) ---- */
template <class T, class F> inline T gk_emu_atomic_update(T *addr, F f)
{
    T old, next;
    __atomic_load(addr, &old, __ATOMIC_RELAXED);
    do {
        next = f(old);
    } while (
        !__atomic_compare_exchange(addr, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}
inline float atomicAdd(float *a, float v)
{
    return gk_emu_atomic_update(a, [v](float o) { return o + v; });
}
inline double atomicAdd(double *a, double v)
{
    return gk_emu_atomic_update(a, [v](double o) { return o + v; });
}
inline int atomicAdd(int *a, int v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }
inline unsigned atomicAdd(unsigned *a, unsigned v)
{
    return __atomic_fetch_add(a, v, __ATOMIC_RELAXED);
}
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v)
{
    return __atomic_fetch_add(a, v, __ATOMIC_RELAXED);
}
inline int atomicSub(int *a, int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
inline unsigned atomicSub(unsigned *a, unsigned v)
{
    return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED);
}
inline int atomicMax(int *a, int v)
{
    return gk_emu_atomic_update(a, [v](int o) { return o > v ? o : v; });
}
inline unsigned atomicMax(unsigned *a, unsigned v)
{
    return gk_emu_atomic_update(a, [v](unsigned o) { return o > v ? o : v; });
}
inline int atomicMin(int *a, int v)
{
    return gk_emu_atomic_update(a, [v](int o) { return o < v ? o : v; });
}
inline unsigned atomicMin(unsigned *a, unsigned v)
{
    return gk_emu_atomic_update(a, [v](unsigned o) { return o < v ? o : v; });
}
template <class T> inline T gk_emu_atomic_cas(T *a, T compare, T val)
{
    __atomic_compare_exchange_n(a, &compare, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare; /* the old value whether or not it was swapped */
}
inline int atomicCAS(int *a, int c, int v) { return gk_emu_atomic_cas(a, c, v); }
inline unsigned atomicCAS(unsigned *a, unsigned c, unsigned v)
{
    return gk_emu_atomic_cas(a, c, v);
}
inline unsigned long long atomicCAS(unsigned long long *a, unsigned long long c,
                                    unsigned long long v)
{
    return gk_emu_atomic_cas(a, c, v);
}
inline int atomicExch(int *a, int v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }
inline unsigned atomicExch(unsigned *a, unsigned v)
{
    return __atomic_exchange_n(a, v, __ATOMIC_RELAXED);
}
inline unsigned long long atomicExch(unsigned long long *a, unsigned long long v)
{
    return __atomic_exchange_n(a, v, __ATOMIC_RELAXED);
}
inline float atomicExch(float *a, float v)
{
    float old;
    __atomic_exchange(a, &v, &old, __ATOMIC_RELAXED);
    return old;
}

/* ---- math (libm for expf, logf, sqrtf, tanhf, fabsf, fmaxf, fminf, powf, fmaf, isnan, isinf)
 * ---- */
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
/* a product rounded on its own: never contracted into a fused multiply-add (the empty asm makes
 * the compiler treat the rounded value as opaque) */
inline float __fmul_rn(float a, float b)
{
    float r = a * b;
    __asm__("" : "+x"(r));
    return r;
}
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline float min(float a, float b) { return fminf(a, b); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __float_as_int(float x) { return gk_emu::from_bits<int>(gk_emu::to_bits(x)); }
inline float __int_as_float(int x) { return gk_emu::from_bits<float>(gk_emu::to_bits(x)); }
inline unsigned __float_as_uint(float x) { return gk_emu::from_bits<unsigned>(gk_emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return gk_emu::from_bits<float>(gk_emu::to_bits(x)); }

/* Cache-hinted loads and stores are plain ones. */
template <class T> inline T __ldg(const T *p) { return *p; }
template <class T> inline T __ldcs(const T *p) { return *p; }
template <class T> inline T __ldcg(const T *p) { return *p; }
template <class T> inline void __stcs(T *p, T v) { *p = v; }
template <class T> inline void __stcg(T *p, T v) { *p = v; }

#endif
