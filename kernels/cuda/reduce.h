/* reduce.h: the warp and block reductions of the CUDA backend's kernels (read by nvcc and g++).
 * Owns: the xor butterfly over a warp's lanes (xor_reduce, and by name warp_sum, warp_max over
 * all 32 lanes, quad_sum, quad_max over the 4 lanes of a quad), the block reductions built on it
 * (block_sum, block_max: every thread gets the result; block_reduce_warp0: warp 0's lanes get it),
 * the halving tree over a block's threads in shared memory (block_tree_sum), the column sum of
 * a block's partials (strided_sum) and the blocks' arrival at a counter (block_arrive_last).
 * Bits: a float sum depends on the order of its additions, and each helper fixes its order: the
 * butterfly from offset 16 down to 1 adds lanes 16 apart first, from 1 up to 16 neighbours first
 * (not the same bits). A kernel keeps the order it was written with; moving one to another order
 * changes its results (the op tests compare some paths bit for bit: tests/unit/ops_harness.h).
 * Every lane of the warp (every thread of the block, for the block forms) must call them. */
#ifndef GK_CUDA_REDUCE_H
#define GK_CUDA_REDUCE_H

#include "kernels/cuda/dialect.h"

#define CU_FULL_MASK 0xffffffffu

/* The combiners: op(own, the other lane's), in that order. */
struct cu_add {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct cu_fmax {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* The value v of the lane whose index is this lane's xor o; a kernel with a state of its own
 * (classifier.cu's log-sum-exp pair) adds an overload for it. */
__device__ __forceinline__ float cu_shfl_xor(float v, int o)
{
    return __shfl_xor_sync(CU_FULL_MASK, v, o);
}

/* The butterfly: for o = FROM, then halving down to TO (FROM >= TO) or doubling up to TO (FROM <
 * TO), v = op(v, v of lane ^ o). Every lane ends with v combined over the lanes that differ from
 * it in the bits of those offsets (FROM 16, TO 1: the whole warp). */
template <int FROM, int TO, typename T, typename Op>
__device__ __forceinline__ T xor_reduce(T v, Op op)
{
    if constexpr (FROM >= TO) {
        for (int o = FROM; o >= TO; o >>= 1) v = op(v, cu_shfl_xor(v, o));
    } else {
        for (int o = FROM; o <= TO; o <<= 1) v = op(v, cu_shfl_xor(v, o));
    }
    return v;
}

/* Over the 32 lanes of the warp, offsets 16 down to 1. */
__device__ __forceinline__ float warp_sum(float v) { return xor_reduce<16, 1>(v, cu_add()); }
__device__ __forceinline__ float warp_max(float v) { return xor_reduce<16, 1>(v, cu_fmax()); }
/* Over the 4 lanes of a quad (the lanes that hold one row of an mma accumulator), offsets 1 then
 * 2. */
__device__ __forceinline__ float quad_sum(float v) { return xor_reduce<1, 2>(v, cu_add()); }
__device__ __forceinline__ float quad_max(float v) { return xor_reduce<1, 2>(v, cu_fmax()); }

/* v combined by op over a block of WARPS warps, in a fixed order: each warp's over its lanes
 * (offsets 16 down to 1), then warp 0's, 1's, ... in order by every thread, which all get the
 * result. red: WARPS floats of shared memory, reusable by the next call (its first barrier waits
 * for this call's reads). */
template <int WARPS, typename Op>
__device__ __forceinline__ float block_allreduce(float v, float *red, Op op)
{
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    v = xor_reduce<16, 1>(v, op);
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < WARPS; w++) r = op(r, red[w]);
    return r;
}
template <int WARPS> __device__ __forceinline__ float block_sum(float v, float *red)
{
    return block_allreduce<WARPS>(v, red, cu_add());
}
template <int WARPS> __device__ __forceinline__ float block_max(float v, float *red)
{
    return block_allreduce<WARPS>(v, red, cu_fmax());
}

/* v combined by op over the block (at most 32 warps): each warp's over its lanes (offsets 16 down
 * to 1), then warp 0 combines the warps' (lane w takes warp w's, lanes past the last warp id) the
 * same way. The result in every lane of warp 0; the other warps get id. red: 32 T of shared
 * memory, used once. */
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce_warp0(T v, T *red, T id, Op op)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = xor_reduce<16, 1>(v, op);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp != 0) return id;
    v = lane < warps ? red[lane] : id;
    return xor_reduce<16, 1>(v, op);
}

/* v summed over a block of THREADS threads (a power of 2) by a fixed tree in shared memory:
 * thread i adds i + h for h = THREADS / 2 down to 1. The sum in thread 0 (the others get partial
 * sums). red: THREADS T of shared memory. */
template <int THREADS, typename T>
__device__ __forceinline__ T block_tree_sum(T v, T *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int h = THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
        __syncthreads();
    }
    return red[0];
}

/* p[0] + p[stride] + ... + p[(n - 1) stride], from 0.0f in that order: one thread's column of a
 * block's partials (the caller syncs the block before). */
__device__ __forceinline__ float strided_sum(const float *p, int n, size_t stride)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += p[(size_t)i * stride];
    return s;
}

/* Whether this block arrives last of n at *count (device memory; the caller resets *count to 0
 * once it has used what the others wrote): the arrival counters of a reduction that finishes in
 * the launch that made its partials (cu_col_counters). Every block's writes are visible
 * device-wide before it counts, and to the last block after (read them past L1: __ldcg). last:
 * a shared word the block may reuse after the call. */
__device__ __forceinline__ bool block_arrive_last(unsigned *count, unsigned n, unsigned *last)
{
    __threadfence(); /* this block's writes are visible before the count says so */
    __syncthreads();
    if (threadIdx.x == 0) *last = atomicAdd(count, 1u) == n - 1;
    __syncthreads();
    bool l = *last;
    __syncthreads(); /* every thread has read last before a later call writes it */
    if (l) __threadfence();
    return l;
}

#endif
