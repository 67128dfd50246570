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
 * too, 16-byte aligned pointers; anything else goes to cuBLASLt.
 * Also the decode step's fused products (cu_matvec, gk_ops.matvec): A as the layernorm of x
 * (computed by each block into shared memory, a warp a row, with layernorm.cu's arithmetic and
 * rounding, so that the product reads the values layernorm_fwd would have stored) and the
 * residual add after it (rounded as the separate gemm's output, then res + (that + bias) as
 * residual_layernorm_fwd adds them): the same bits as those ops one after the other.
 * And the decode step's MLP in one launch (cu_mlp, gk_ops.mlp): each block's GV_COLS hidden
 * units as the fused first product stores them, their share of the second product summed by the
 * last blocks to arrive (a group's, then the groups'), then the residual add. */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

#ifndef GV_ROWS /* CUDA_DEFS=-DGV_ROWS=0 builds a library without these kernels, to compare */
#define GV_ROWS 4 /* at most this many rows of A (4 at most) */
#endif
#ifndef GV_MATVEC /* CUDA_DEFS=-DGV_MATVEC=0: no fused products (decoding on the separate ops) */
#define GV_MATVEC 1
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
#define LN_EPS 1e-5f /* layernorm.cu's */

/* With LN: xs (M,K) in shared memory = the layernorm of x's rows (bf16, row stride K) with w, b
 * (b may be NULL), rounded to bf16 as layernorm_fwd stores it; warp m takes row m, its lanes
 * the 8-wide packs lane, lane + 32, ... in layernorm.cu's order. Every thread calls it. */
template <int M, bool LN>
__device__ __forceinline__ void ln_rows(float *xs, const bf16 *x, int K, const float *w,
                                        const float *b)
{
    if (!LN) return;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, packs = K / 8;
    if (warp < M) {
        const bf16 *row = x + (size_t)warp * K;
        float v[8], s = 0.0f, q = 0.0f;
        for (int cp = lane; cp < packs; cp += 32) {
            load_f<8>(v, row + (size_t)cp * 8);
            for (int j = 0; j < 8; j++) s += v[j];
        }
        float m = warp_sum(s) / K;
        for (int cp = lane; cp < packs; cp += 32) {
            load_f<8>(v, row + (size_t)cp * 8);
            for (int j = 0; j < 8; j++) q += (v[j] - m) * (v[j] - m);
        }
        float rs = 1.0f / sqrtf(warp_sum(q) / K + LN_EPS);
        for (int cp = lane; cp < packs; cp += 32) {
            float wj[8], bj[8] = {};
            load_f<8>(v, row + (size_t)cp * 8);
            load_f<8>(wj, w + (size_t)cp * 8);
            if (b) load_f<8>(bj, b + (size_t)cp * 8);
            float *o = xs + (size_t)warp * K + cp * 8;
            for (int j = 0; j < 8; j++) o[j] = cu_f(cu_to<bf16>((v[j] - m) * rs * wj[j] + bj[j]));
        }
    }
    __syncthreads();
}

/* What the fused products store at C[c] (column j) for the sum r: without res, what
 * cu_gemm_store stores in C (bias, GELU when gelu); with res, res + (r rounded + bias), as
 * residual_layernorm_fwd adds the separate product's output. */
__device__ __forceinline__ void mv_store(float r, size_t c, int j, bf16 *C, const float *bias,
                                         const bf16 *res, int gelu)
{
    if (res) {
        C[c] = cu_to<bf16>(cu_f(res[c]) + (cu_f(cu_to<bf16>(r)) + (bias ? bias[j] : 0.0f)));
        return;
    }
    if (bias) r += bias[j];
    if (gelu) r = gelu_tanh(cu_f(cu_to<bf16>(r)));
    C[c] = cu_to<bf16>(r);
}

/* The fused products' extras (cu_matvec): the layernorm's weight and bias (LN), the residual
 * (res, or NULL) and the GELU. */
struct mv_extra {
    const float *lnw, *lnb;
    const bf16 *res;
    int gelu;
};

/* Block x's GV_COLS column sums of A W (NN: W (K,N) row-major; A as xs, the normalized rows, with
 * LN): thread (warp w, lane l) takes columns n0 + 8 (l % G) .. + 7 of rows k = w GV_KWARP + l / G +
 * i GV_KSTEP (G = GV_GROUPS), a warp's rows summed by shuffles, the warps' sums in red in warp
 * order. Returns thread m GV_COLS + c's (< M GV_COLS): row m, column n0 + c (0 past N). */
template <int M, bool LN>
__device__ __forceinline__ float nn_block_sum(float (*red)[M][GV_COLS], const float *xs,
                                              const bf16 *A, int lda, const bf16 *W, int ldb,
                                              int N, int K)
{
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
                float a = LN ? xs[(size_t)m * K + k] : cu_f(A[(size_t)m * lda + k]);
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
    float s = 0.0f;
    if (threadIdx.x < M * GV_COLS) {
        int m = threadIdx.x / GV_COLS, c = threadIdx.x % GV_COLS;
        /* the warps' sums in order (a loop of its own: strided_sum interleaves the loads) */
        for (int w = 0; w < GV_THREADS / 32; w++) s += red[w][m][c];
    }
    return s;
}

/* grid (N / GV_COLS rounded up), GV_THREADS: nn_block_sum's columns, stored. */
template <int M, bool LN, bool FUSED>
__global__ void __launch_bounds__(GV_THREADS)
    gemv_nn(bf16 *C, bf16 *pre, const bf16 *A, int lda, const bf16 *W, int ldb, const float *bias,
            float alpha, int N, int K, int ldc, mv_extra x)
{
    __shared__ float red[GV_THREADS / 32][M][GV_COLS];
    GK_DYN_SMEM(float, xs); /* LN: A's rows, normalized (M,K) */
    ln_rows<M, LN>(xs, A, K, x.lnw, x.lnb);
    float s = nn_block_sum<M, LN>(red, xs, A, lda, W, ldb, N, K);
    if (threadIdx.x < M * GV_COLS) {
        int m = threadIdx.x / GV_COLS, col = (int)blockIdx.x * GV_COLS + threadIdx.x % GV_COLS;
        size_t at = (size_t)m * ldc + col;
        if (col < N && FUSED) mv_store(alpha * s, at, col, C, bias, x.res, x.gelu);
        else if (col < N) cu_gemm_store(alpha * s, at, col, C, bias, pre);
    }
}

/* grid (N / 8 rounded up), GV_THREADS: warp w of block x computes column n = 8 x + w, its lanes
 * the chunks k = 8 l + 256 i of W's row n and of A's rows. */
template <int M, bool LN, bool FUSED>
__global__ void __launch_bounds__(GV_THREADS)
    gemv_nt(bf16 *C, bf16 *pre, const bf16 *A, int lda, const bf16 *W, int ldb, const float *bias,
            float alpha, int N, int K, int ldc, mv_extra x)
{
    GK_DYN_SMEM(float, xs); /* LN: A's rows, normalized (M,K) */
    ln_rows<M, LN>(xs, A, K, x.lnw, x.lnb);
    int n = (int)(blockIdx.x * (GV_THREADS / 32) + threadIdx.x / 32), lane = threadIdx.x % 32;
    if (n >= N) return; /* the whole warp: no shuffle below misses a lane */
    float acc[M] = {};
    GV_UNROLL(2)
    for (int k = 8 * lane; k < K; k += 256) {
        float w[8], a[8];
        load_f<8>(w, W + (size_t)n * ldb + k);
        GK_UNROLL
        for (int m = 0; m < M; m++) {
            if (LN)
                for (int j = 0; j < 8; j++) a[j] = xs[(size_t)m * K + k + j];
            else
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
    for (int m = 0; m < M; m++) {
        if (FUSED) mv_store(alpha * acc[m], (size_t)m * ldc + n, n, C, bias, x.res, x.gelu);
        else cu_gemm_store(alpha * acc[m], (size_t)m * ldc + n, n, C, bias, pre);
    }
}

template <int M, bool LN, bool FUSED>
static void gemv_launch(gk_backend *be, int tb, int N, int K, float alpha, const bf16 *A, int lda,
                        const bf16 *W, int ldb, bf16 *C, int ldc, const float *bias, bf16 *pre,
                        mv_extra x)
{
    size_t smem = LN ? sizeof(float) * M * (size_t)K : 0;
    if (tb)
        CU_LAUNCH(be, (gemv_nt<M, LN, FUSED>), cu_blocks((size_t)N, GV_THREADS / 32), GV_THREADS,
                  smem, C, pre, A, lda, W, ldb, bias, alpha, N, K, ldc, x);
    else
        CU_LAUNCH(be, (gemv_nn<M, LN, FUSED>), cu_blocks((size_t)N, GV_COLS), GV_THREADS, smem, C,
                  pre, A, lda, W, ldb, bias, alpha, N, K, ldc, x);
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
    mv_extra x = {};
    if (M == 1) gemv_launch<1, false, false>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p,
                                             x);
    if (M == 2) gemv_launch<2, false, false>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p,
                                             x);
    if (M == 3) gemv_launch<3, false, false>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p,
                                             x);
    if (M == 4) gemv_launch<4, false, false>(be, tb, N, K, alpha, a, lda, w, ldb, c, ldc, bias, p,
                                             x);
    return 1;
}

/* M's fused launch, with or without the layernorm. */
template <int M>
static void matvec_launch(gk_backend *be, int tb, int N, int K, const bf16 *x, const bf16 *W,
                          bf16 *out, const float *bias, mv_extra e)
{
    int ldw = tb ? K : N;
    if (e.lnw)
        gemv_launch<M, true, true>(be, tb, N, K, 1.0f, x, K, W, ldw, out, N, bias, NULL, e);
    else
        gemv_launch<M, false, true>(be, tb, N, K, 1.0f, x, K, W, ldw, out, N, bias, NULL, e);
}

/* ---- the MLP block of a few rows (cu_mlp): both products in one launch ---- */

#ifndef GV_MLP /* CUDA_DEFS=-DGV_MLP=0: the MLP on two matvec launches */
#define GV_MLP 1
#endif
#define MLP_GROUP 16 /* blocks whose partials the last of them sums */

/* The scratch and counters of cu_mlp for M rows: the blocks' partials, then the groups'. */
static size_t mlp_scratch(int M, int C, int Cm)
{
    size_t blocks = (size_t)(Cm + GV_COLS - 1) / GV_COLS;
    return (blocks + (blocks + MLP_GROUP - 1) / MLP_GROUP) * M * C * sizeof(float);
}

/* part[k0 ..+ n) (rows of M C floats) summed in order at i, read past L1 (other blocks wrote
 * them). */
__device__ __forceinline__ float mlp_rows_sum(const float *part, size_t k0, unsigned n,
                                              size_t MC, size_t i)
{
    float s = 0.0f;
    for (unsigned k = 0; k < n; k++) s += __ldcg(part + (k0 + k) * MC + i);
    return s;
}

/* grid (Cm / GV_COLS), GV_THREADS: block x's GV_COLS hidden units h = GELU(x' W1 + b1) as
 * gemv_nn's fused product stores them (x' the layernorm of x), their share of h W2 (M,C) to
 * part, then the last of each MLP_GROUP blocks sums the group's shares, the last group the
 * groups' and stores out = x + (the sum rounded + b2) (mv_store). */
template <int M>
__global__ void __launch_bounds__(GV_THREADS)
    mlp_rows(bf16 *out, float *part, unsigned *count, const bf16 *x, mv_extra e, const bf16 *W1,
             const float *b1, const bf16 *W2, const float *b2, int C, int Cm)
{
    __shared__ float red[GV_THREADS / 32][M][GV_COLS];
    __shared__ float h[M][GV_COLS];
    __shared__ unsigned last;
    GK_DYN_SMEM(float, xs); /* x's rows, normalized (M,C) */
    ln_rows<M, true>(xs, x, C, e.lnw, e.lnb);
    float s = nn_block_sum<M, true>(red, xs, x, C, W1, Cm, Cm, C);
    int n0 = (int)blockIdx.x * GV_COLS, nh = Cm - n0 < GV_COLS ? Cm - n0 : GV_COLS;
    if (threadIdx.x < M * GV_COLS) {
        int m = threadIdx.x / GV_COLS, c = threadIdx.x % GV_COLS;
        bf16 v = cu_to<bf16>(0.0f);
        if (c < nh) mv_store(s, 0, n0 + c, &v, b1, NULL, 1);
        h[m][c] = cu_f(v);
    }
    __syncthreads();
    size_t MC = (size_t)M * C;
    for (int cp = threadIdx.x; cp < C / 8; cp += GV_THREADS) { /* 8 columns of h W2 */
        float acc[M][8] = {};
        for (int j = 0; j < nh; j++) {
            float w[8];
            load_f<8>(w, W2 + (size_t)(n0 + j) * C + cp * 8);
            GK_UNROLL
            for (int m = 0; m < M; m++)
                GK_UNROLL
                for (int i = 0; i < 8; i++) acc[m][i] += h[m][j] * w[i];
        }
        for (int m = 0; m < M; m++)
            for (int i = 0; i < 8; i++)
                part[blockIdx.x * MC + (size_t)m * C + cp * 8 + i] = acc[m][i];
    }
    unsigned g = blockIdx.x / MLP_GROUP, groups = (gridDim.x + MLP_GROUP - 1) / MLP_GROUP,
             g0 = g * MLP_GROUP, gn = gridDim.x - g0 < MLP_GROUP ? gridDim.x - g0 : MLP_GROUP;
    if (!block_arrive_last(&count[g], gn, &last)) return;
    float *gpart = part + (size_t)gridDim.x * MC;
    for (size_t i = threadIdx.x; i < MC; i += GV_THREADS)
        gpart[g * MC + i] = mlp_rows_sum(part, g0, gn, MC, i);
    if (threadIdx.x == 0) count[g] = 0;
    if (!block_arrive_last(&count[groups], groups, &last)) return;
    for (size_t i = threadIdx.x; i < MC; i += GV_THREADS)
        mv_store(mlp_rows_sum(gpart, 0, groups, MC, i), i, (int)(i % C), out, b2, x, 0);
    if (threadIdx.x == 0) count[groups] = 0;
}

int cu_mlp_built(void) { return GV_MLP && cu_matvec_built(); }

size_t cu_mlp_scratch(size_t rows, size_t cols)
{
    /* cols: the MLP's width, 4 C in GPT-2 (the widest row reserve is given) */
    return GV_MLP ? mlp_scratch(rows < GV_ROWS ? (int)rows : GV_ROWS, (int)(cols / 4),
                                (int)cols)
                  : 0;
}

void cu_mlp(gk_backend *be, void *out, const void *x, const float *ln_w, const float *ln_b,
            const void *W1, const float *b1, const void *W2, const float *b2, int M, int C,
            int Cm)
{
    CU_BEGIN(be);
    size_t need = mlp_scratch(M, C, Cm);
    const void *ptrs[] = {out, x, W1, W2, ln_w, ln_b};
    int ok = be->act == GK_BF16 && M >= 1 && M <= GV_ROWS && C % 8 == 0 && Cm % 8 == 0 && C > 0 &&
             Cm > 0 && ln_w && sizeof(float) * (size_t)M * C <= 48 * 1024 && out != x;
    for (int i = 0; i < 6 && ok; i++) ok = !ptrs[i] || aligned16(ptrs[i]);
    if (!ok) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda mlp: %d rows of %d, %d hidden (bf16, at most %d rows, "
                        "multiples of 8, aligned, a layernorm) out of its reach", M, C, Cm,
                        GV_ROWS);
        return;
    }
    int blocks = (Cm + GV_COLS - 1) / GV_COLS, groups = (blocks + MLP_GROUP - 1) / MLP_GROUP;
    if (need > CU(be)->scratch_bytes || (size_t)groups + 1 > CU(be)->col_count_n) {
        /* the two products apart (what the scratch or the counters reserved cannot hold) */
        void *h = cu_scratch(be, sizeof(bf16) * (size_t)M * Cm, "mlp");
        if (!h) return;
        cu_matvec(be, h, x, ln_w, ln_b, W1, 0, b1, 1, NULL, M, Cm, C);
        cu_matvec(be, out, h, NULL, NULL, W2, 0, b2, 0, x, M, C, Cm);
        return;
    }
    float *part = (float *)cu_scratch(be, need, "mlp");
    unsigned *count = cu_col_counters(be, (size_t)groups + 1);
    mv_extra e = {ln_w, ln_b, NULL, 0};
    size_t smem = sizeof(float) * (size_t)M * C;
    const bf16 *a = (const bf16 *)x, *w1 = (const bf16 *)W1, *w2 = (const bf16 *)W2;
    bf16 *o = (bf16 *)out;
#define MLP_LAUNCH(m)                                                                        \
    CU_LAUNCH(be, mlp_rows<m>, dim3((unsigned)blocks), GV_THREADS, smem, o, part, count, a, e, \
              w1, b1, w2, b2, C, Cm)
    switch (M) {
    case 1: MLP_LAUNCH(1); break;
    case 2: MLP_LAUNCH(2); break;
    case 3: MLP_LAUNCH(3); break;
    default: MLP_LAUNCH(4); break;
    }
#undef MLP_LAUNCH
}

int cu_matvec_built(void) { return GV_MATVEC && GV_ROWS == 4; }

void cu_matvec(gk_backend *be, void *out, const void *x, const float *ln_w, const float *ln_b,
               const void *W, int transW, const float *bias, int gelu, const void *res, int M,
               int N, int K)
{
    CU_BEGIN(be);
    const void *ptrs[] = {out, x, W, res, ln_w, ln_b};
    int ok = be->act == GK_BF16 && M >= 1 && M <= GV_ROWS && N % 8 == 0 && K % 8 == 0 && K > 0 &&
             (!ln_w || sizeof(float) * (size_t)M * K <= 48 * 1024) && !(res && gelu);
    for (int i = 0; i < 6 && ok; i++) ok = !ptrs[i] || aligned16(ptrs[i]);
    if (!ok) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda matvec: %d x %d x %d (bf16, at most %d rows, "
                        "multiples of 8, aligned) out of its reach", M, N, K, GV_ROWS);
        return;
    }
    mv_extra e = {ln_w, ln_b, (const bf16 *)res, gelu};
    const bf16 *a = (const bf16 *)x, *w = (const bf16 *)W;
    bf16 *o = (bf16 *)out;
    switch (M) {
    case 1: matvec_launch<1>(be, transW, N, K, a, w, o, bias, e); break;
    case 2: matvec_launch<2>(be, transW, N, K, a, w, o, bias, e); break;
    case 3: matvec_launch<3>(be, transW, N, K, a, w, o, bias, e); break;
    default: matvec_launch<4>(be, transW, N, K, a, w, o, bias, e); break;
    }
}
