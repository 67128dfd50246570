/* matmul_rows.cu: the few-row matmul of decoding: C (M,N) = alpha A (M,K) op(W) with M at most
 * GV_ROWS, everything bf16, the fp32 bias and the GELU epilogue in the same launch. Sampling one
 * stream runs 48 such products a token for GPT-2 124M, where cuBLASLt took a bias cast and one or
 * two kernels a product (their times under ncu: tests/bench/gpu-results.md): with M
 * this small the product is a pass over the weights, bounded by memory and by how many loads are
 * in flight, so the kernels spread every matrix over many blocks and issue 16-byte loads.
 * Owns the two layouts gk_ops.gemm passes for it (cu_gemv, called by cu_gemm first):
 * - NN, W (K,N) row-major (the blocks' Conv1D weights): a block takes GV_COLS columns; each thread
 *   8 adjacent columns (one 16-byte load a row) of every GV_KSTEP-th row, so one pass of the block
 *   reads GV_KSTEP rows at once; a warp's rows are summed by shuffles, the warps' sums in shared
 *   memory, in warp order.
 * - NT, W (N,K) row-major (the tied lm_head, wte): a warp per output column, its lanes on 16-byte
 *   chunks of the column's row, summed by shuffles.
 * Sums in fp32 in a fixed order (the same bits every run); the bias is added in fp32 before the
 * one rounding to bf16 (cuBLASLt's bias is rounded to bf16 first: the two differ by a rounding).
 * Taken: M <= GV_ROWS, no transposed A, beta 0, K and N multiples of 8, the leading dimensions
 * too, 16-byte aligned pointers; anything else goes to cuBLASLt. */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

#ifndef GV_ROWS /* CUDA_DEFS=-DGV_ROWS=0 builds a library without these kernels, to compare */
#define GV_ROWS 4 /* at most this many rows of A (4 at most) */
#endif
#define GV_THREADS 256                   /* 8 warps */
#define GV_COLS 16                       /* NN: columns a block takes, 8 a thread */
#define GV_GROUPS (GV_COLS / 8)          /* NN: threads that share one row */
#define GV_KWARP (32 / GV_GROUPS)        /* NN: rows a warp reads at once */
#define GV_KSTEP (GV_THREADS / GV_GROUPS) /* NN: rows a block reads at once */
/* Loop unrolling by a count, so that several rows' loads are in flight at once (nvcc; g++ for the
 * emulator takes the same hint). */
#if defined(__CUDACC__)
#define GV_UNROLL(n) _Pragma(GV_STR(unroll n))
#else
#define GV_UNROLL(n) _Pragma(GV_STR(GCC unroll n))
#endif
#define GV_STR(x) #x

/* grid (N / GV_COLS rounded up), GV_THREADS. Thread (warp w, lane l): columns n0 + 8 (l % G)
 * .. + 7, rows k = w GV_KWARP + l / G + i GV_KSTEP (G = GV_GROUPS). */
template <int M>
__global__ void __launch_bounds__(GV_THREADS)
    gemv_nn(bf16 *C, bf16 *pre, const bf16 *A, int lda, const bf16 *W, int ldb, const float *bias,
            float alpha, int N, int K, int ldc)
{
    __shared__ float red[GV_THREADS / 32][M][GV_COLS];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane % GV_GROUPS;
    int n = (int)blockIdx.x * GV_COLS + 8 * g;
    float acc[M][8] = {};
    if (n < N) {
        GV_UNROLL(4)
        for (int k = warp * GV_KWARP + lane / GV_GROUPS; k < K; k += GV_KSTEP) {
            float w[8];
            load_f<8>(w, W + (size_t)k * ldb + n);
            GK_UNROLL
            for (int m = 0; m < M; m++) {
                float a = cu_f(A[(size_t)m * lda + k]);
                GK_UNROLL
                for (int j = 0; j < 8; j++) acc[m][j] += a * w[j];
            }
        }
    }
    GK_UNROLL
    for (int m = 0; m < M; m++)
        GK_UNROLL
        for (int j = 0; j < 8; j++)
            /* over the lanes of a column group */
            acc[m][j] = xor_reduce<GV_GROUPS, 16>(acc[m][j], cu_add());
    if (lane < GV_GROUPS)
        GK_UNROLL
        for (int m = 0; m < M; m++)
            GK_UNROLL
            for (int j = 0; j < 8; j++) red[warp][m][8 * g + j] = acc[m][j];
    __syncthreads();
    if (threadIdx.x < M * GV_COLS) {
        int m = threadIdx.x / GV_COLS, c = threadIdx.x % GV_COLS,
            col = (int)blockIdx.x * GV_COLS + c;
        /* the warps' sums in order (a loop of its own: strided_sum interleaves the loads) */
        float s = 0.0f;
        for (int w = 0; w < GV_THREADS / 32; w++) s += red[w][m][c];
        if (col < N) cu_gemm_store(alpha * s, (size_t)m * ldc + col, col, C, bias, pre);
    }
}

/* grid (N / 8 rounded up), GV_THREADS: warp w of block x computes column n = 8 x + w, its lanes
 * the chunks k = 8 l + 256 i of W's row n and of A's rows. */
template <int M>
__global__ void __launch_bounds__(GV_THREADS)
    gemv_nt(bf16 *C, bf16 *pre, const bf16 *A, int lda, const bf16 *W, int ldb, const float *bias,
            float alpha, int N, int K, int ldc)
{
    int n = (int)(blockIdx.x * (GV_THREADS / 32) + threadIdx.x / 32), lane = threadIdx.x % 32;
    if (n >= N) return; /* the whole warp: no shuffle below misses a lane */
    float acc[M] = {};
    GV_UNROLL(2)
    for (int k = 8 * lane; k < K; k += 256) {
        float w[8], a[8];
        load_f<8>(w, W + (size_t)n * ldb + k);
        GK_UNROLL
        for (int m = 0; m < M; m++) {
            load_f<8>(a, A + (size_t)m * lda + k);
            GK_UNROLL
            for (int j = 0; j < 8; j++) acc[m] += a[j] * w[j];
        }
    }
    GK_UNROLL
    for (int m = 0; m < M; m++)
        acc[m] = warp_sum(acc[m]);
    if (lane == 0)
        GK_UNROLL
    for (int m = 0; m < M; m++) cu_gemm_store(alpha * acc[m], (size_t)m * ldc + n, n, C, bias, pre);
}

template <int M>
static void gemv_launch(gk_backend *be, int tb, int N, int K, float alpha, const bf16 *A, int lda,
                        const bf16 *W, int ldb, bf16 *C, int ldc, const float *bias, bf16 *pre)
{
    if (tb)
        CU_LAUNCH(be, gemv_nt<M>, cu_blocks((size_t)N, GV_THREADS / 32), GV_THREADS, 0, C, pre, A,
                  lda, W, ldb, bias, alpha, N, K, ldc);
    else
        CU_LAUNCH(be, gemv_nn<M>, cu_blocks((size_t)N, GV_COLS), GV_THREADS, 0, C, pre, A, lda,
                  W, ldb, bias, alpha, N, K, ldc);
}

int cu_gemv(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha, const void *A,
            gk_elt tA, int lda, const void *B, gk_elt tB, int ldb, float beta, void *C, gk_elt tC,
            int ldc, const float *bias, void *pre)
{
    const void *ptrs[] = {A, B, C, pre};
    int ok = !ta && M >= 1 && M <= GV_ROWS && K >= 1 && beta == 0.0f && tA == GK_BF16 &&
             tB == GK_BF16 && tC == GK_BF16 && N % 8 == 0 && K % 8 == 0 && lda % 8 == 0 &&
             ldb % 8 == 0 && ldc % 8 == 0;
    for (int i = 0; i < 4 && ok; i++) ok = !ptrs[i] || aligned16(ptrs[i]);
    if (!ok) return 0;
    const bf16 *a = (const bf16 *)A, *w = (const bf16 *)B;
    bf16 *c = (bf16 *)C, *p = (bf16 *)pre;
    switch (M) {
    case 1: gemv_launch<1>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p); break;
    case 2: gemv_launch<2>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p); break;
    case 3: gemv_launch<3>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p); break;
    case 4: gemv_launch<4>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p); break;
    default: return 0; /* GV_ROWS is at most 4 */
    }
    return 1;
}
