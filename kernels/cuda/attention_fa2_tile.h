/* attention_fa2_tile.h: the tile helpers the FlashAttention-2 kernels share (attention_fa2.cu, the
 * forward;
 * attention_fa2_bwd.cu, the backward), on the warp primitives of mma.h.
 * Owns:
 * - FA_BQ, FA_BK, FA_WARPS, FA_THREADS: 64-row tiles, 4 warps of 16 rows each;
 * - fa_ld(D): the padded b16 row stride of a shared tile; async_tile: a tile of rows by cp.async;
 *   async_kv, async_kv_next: a key tile's K and V, and the double-buffered walk over key tiles;
 * - (quad_max, quad_sum, a value reduced over the 4 lanes of a quad that hold one accumulator row:
 *   reduce.h's);
 * - fragment loads from a row-major shared tile (row stride fa_ld(D)) by ldmatrix.x4:
 *   frag_a: the A fragment of the 16x16 block at (r0, c0);
 *   frag_b_nk: the B fragments (16 k x 8 n, two n8 tiles) of a tile stored n-major, B^T at rows
 *   n0..n0+15, columns k0..k0+15 (keys as rows for Q K^T);
 *   frag_b_kn: the same from a tile stored k-major, B at rows k0..k0+15, columns n0..n0+15 (by
 *   .trans; values as rows for P V);
 *   r[0..1] are the n8 tile n0..n0+7, r[2..3] n0+8..n0+15;
 * - acc_to_a(c0, c1): two adjacent n8 accumulators packed to bf16 as the A fragment of their
 *   16-wide k slice;
 * - fa_exp2(x): the softmax's 2^x, ex2.approx.ftz in one instruction (mma.h's ex2_ftz), or with
 *   FA_FAST_EXP=0 libm's exp2f, which wraps it in a subnormal range fix (3 more instructions an
 *   element: a knob for measuring on a GPU). */
#ifndef GK_CUDA_FA2_TILE_H
#define GK_CUDA_FA2_TILE_H

#include "kernels/cuda/attention.h"
#include "kernels/cuda/mma.h"
#include "kernels/cuda/reduce.h"

#define FA_BQ 64 /* query rows per block: FA_WARPS x 16 */
#define FA_BK 64 /* keys per tile */
#define FA_WARPS 4
#define FA_THREADS (32 * FA_WARPS)
#define FA_LOG2E 1.4426950408889634f
#ifndef FA_FAST_EXP
#define FA_FAST_EXP 1
#endif

/* b16 per shared row: 16 bytes of padding, so that the 8 rows of an ldmatrix fall on distinct
 * banks */
static __host__ __device__ constexpr int fa_ld(int D) { return D + 8; }

/* dst (ROWS, fa_ld(D)) <- rows row0.. of src (row stride ld) by cp.async; rows >= T are zeros
 * (read from row 0, which exists, with 0 source bytes). Every thread of the block takes part,
 * 16 bytes of a row at a time, in a constant ROWS / step passes that nvcc unrolls (a loop from
 * threadIdx.x by FA_THREADS to ROWS x D / 8, as it was, was left a loop of about 40 instructions
 * a copy); the caller commits the group. */
template <int D, int ROWS>
__device__ __forceinline__ void async_tile(bf16 *dst, const bf16 *src, size_t ld, int row0, int T)
{
    constexpr int per_row = D / 8, step = FA_THREADS / per_row; /* rows a pass covers */
    static_assert(FA_THREADS % per_row == 0 && ROWS % step == 0,
                  "a tile is whole passes of the block");
    int r = threadIdx.x / per_row, k = threadIdx.x % per_row * 8;
    for (int i = 0; i < ROWS / step; i++, r += step) {
        int in = row0 + r < T;
        cp_async16(dst + r * fa_ld(D) + k, src + (size_t)(in ? row0 + r : 0) * ld + k, in ? 16 : 0);
    }
}

/* The K and V tiles of key tile kt (rows kt * FA_BK.. of the qkv block qb's K at + C, V at + 2C)
 * into kv[0..2 * FA_BK * fa_ld(D)) by cp.async (the caller commits the group). */
template <int D>
__device__ __forceinline__ void async_kv(bf16 *kv, const bf16 *qb, size_t ld, int C, int kt, int T)
{
    async_tile<D, FA_BK>(kv, qb + C, ld, kt * FA_BK, T);
    async_tile<D, FA_BK>(kv + FA_BK * fa_ld(D), qb + 2 * C, ld, kt * FA_BK, T);
}

/* The double-buffered walk over key tiles 0..last (buffer kt & 1 of kv, each 2 * FA_BK * fa_ld(D)):
 * starts tile kt + 1 into the other buffer, which every warp is done with, unless kt is the last,
 * then waits for this thread's copies of tile kt (the caller syncs the block). */
template <int D>
__device__ __forceinline__ void async_kv_next(bf16 *kv, const bf16 *qb, size_t ld, int C, int kt,
                                              int last, int T)
{
    if (kt < last) {
        async_kv<D>(kv + ((kt + 1) & 1) * 2 * FA_BK * fa_ld(D), qb, ld, C, kt + 1, T);
        cp_async_commit();
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
}

template <int D>
__device__ __forceinline__ void frag_a(uint32_t *r, const bf16 *tile, int r0, int c0)
{
    int lane = threadIdx.x % 32;
    ldmatrix<4, false>(r, tile + (r0 + lane % 16) * fa_ld(D) + c0 + lane / 16 * 8);
}
template <int D>
__device__ __forceinline__ void frag_b_nk(uint32_t *r, const bf16 *tile, int n0, int k0)
{
    int lane = threadIdx.x % 32;
    ldmatrix<4, false>(r,
                       tile + (n0 + lane / 16 * 8 + lane % 8) * fa_ld(D) + k0 + lane / 8 % 2 * 8);
}
template <int D>
__device__ __forceinline__ void frag_b_kn(uint32_t *r, const bf16 *tile, int k0, int n0)
{
    int lane = threadIdx.x % 32;
    ldmatrix<4, true>(r, tile + (k0 + lane / 8 % 2 * 8 + lane % 8) * fa_ld(D) + n0 + lane / 16 * 8);
}

__device__ __forceinline__ float fa_exp2(float x) { return FA_FAST_EXP ? ex2_ftz(x) : exp2f(x); }

__device__ __forceinline__ void acc_to_a(uint32_t *a, const float *c0, const float *c1)
{
    a[0] = pack_bf16x2(c0[0], c0[1]);
    a[1] = pack_bf16x2(c0[2], c0[3]);
    a[2] = pack_bf16x2(c1[0], c1[1]);
    a[3] = pack_bf16x2(c1[2], c1[3]);
}

#endif
