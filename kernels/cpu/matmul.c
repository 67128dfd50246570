/* matmul.c: the CPU backend's gemm (gk_ops.gemm) and the drivers its weight types share.
 * fp32 weights: OpenBLAS' sgemm in slabs, or for a few rows (decoding: M = batch size)
 * gk_cpu_gemm_rows, where sgemm packs the whole weight matrix for one row and runs at a third of
 * the memory bandwidth. 16-bit and int8 weights (matmul_bf16.c, matmul_f16.c, matmul_q8.c) run
 * on the drivers here: gk_cpu_gemm16 (a gk_cpu_kern16 of kernels), gk_cpu_rows_ksplit,
 * gk_cpu_gemm_panels (widened panels + sgemm), gk_cpu_scale_c. Each output element is computed
 * by one thread in a fixed order, so results do not depend on the thread count. References:
 * kernels/ref/matmul.c */
#include "kernels/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_ops.h"

/* ---- gemm ----
 * OpenBLAS runs single-threaded inside our OpenMP team. The larger of M and N (M on a tie) is cut
 * into slabs whose number comes from the shape and the machine's core count (gk_cpu_impl.ncores),
 * never from the thread count, and K is never cut; the threads share out the same slab calls, so
 * results are bit-identical for any thread count (OpenBLAS itself picks different kernels for
 * different sizes, e.g. its small-matrix path, so cutting by thread count would not be). Each
 * slab packs only its own part of the weight matrix. One slab per core (more slabs than cores
 * lose time to repacking and short panels: tests/bench/cpu-results.md), fewer when a slab would
 * be under 64 wide or 1 MFLOP. One thread pool: no spinning OpenBLAS threads competing with
 * OpenMP ones. */

static int gemm_slabs(int M, int N, int K, int ncores)
{
    int dim = M > N ? M : N, n = 1;
    while (n < ncores && n < 8 && dim / (2 * n) >= 64 && 2.0 * M * N * K / (2 * n) >= 1e6) n *= 2;
    return n;
}

static void sgemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    /* A few rows (decoding one token per sample): sgemm would pack all of B for each call. */
    if (M <= CPU_GEMM_ROWS_MAX &&
        gk_cpu_gemm_rows(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    int ns = gemm_slabs(M, N, K, CPU(be)->ncores);
    if (ns == 1) {
        cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int split_n = N > M, dim = split_n ? N : M;
    int per = ((dim + ns - 1) / ns + 15) / 16 * 16;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (int s = 0; s < ns; s++) {
        int lo = s * per, hi = lo + per < dim ? lo + per : dim;
        if (lo >= hi) continue;
        if (split_n) {
            const float *Bs = tb ? B + (size_t)lo * ldb : B + lo;
            cblas_sgemm(CblasRowMajor, TA, TB, M, hi - lo, K, alpha, A, lda, Bs, ldb, beta,
                        C + lo, ldc);
        } else {
            const float *As = ta ? A + lo : A + (size_t)lo * lda;
            cblas_sgemm(CblasRowMajor, TA, TB, hi - lo, N, K, alpha, As, lda, B, ldb, beta,
                        C + (size_t)lo * ldc, ldc);
        }
    }
}

/* backend.h's gemm: fp32 activations with fp32 (sgemm), bf16 (matmul_bf16.c), fp16 (matmul_f16.c)
 * or int8 weights (matmul_q8.c), then the epilogue in one more pass over C (bias; or bias +
 * GELU). */
void gk_cpu_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                 const void *A, gk_elt tA, int lda, const void *B, gk_elt tB, int ldb,
                 float beta, void *C, gk_elt tC, int ldc, const float *bias, void *pre_gelu)
{
    if (tA != GK_F32 || tC != GK_F32 || (tB != GK_F32 && ta) ||
        (tB == GK_Q8 && (!tb || ldb != K || K % GK_Q8_BLOCK))) {
        static const char *names[] = {"f32", "bf16", "f16", "q8"};
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cpu gemm: types %s x %s -> %s%s: not implemented",
                        names[tA & 3], names[tB & 3], names[tC & 3],
                        ta ? " with A transposed"
                           : tB == GK_Q8 ? " (q8: B transposed, K % 32 == 0)" : "");
        return;
    }
    if (pre_gelu && beta != 0.0f) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cpu gemm: the GELU epilogue needs beta 0");
        return;
    }
    float *out = pre_gelu ? pre_gelu : C;
    if (tB == GK_BF16)
        gk_cpu_gemm_bf16(be, tb, M, N, K, alpha, A, lda, B, ldb, beta, out, ldc);
    else if (tB == GK_F16)
        gk_cpu_gemm_f16(be, tb, M, N, K, alpha, A, lda, B, ldb, beta, out, ldc);
    else if (tB == GK_Q8)
        gk_cpu_gemm_q8(be, M, N, K, alpha, A, lda, B, beta, out, ldc);
    else
        sgemm(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, out, ldc);
    if (!bias && !pre_gelu) return;
    /* the epilogue helpers take contiguous rows: one call for the block, or one per row */
    int rows = ldc == N ? M : 1;
    for (int i = 0; i < M; i += rows) {
        float *c = (float *)C + (size_t)i * ldc, *o = out + (size_t)i * ldc;
        if (pre_gelu) gk_cpu_bias_gelu(be, c, o, bias, rows, N);
        else gk_cpu_bias_add(be, c, bias, rows, N);
    }
}

/* ---- gemm for a few rows ---- */

/* acc (M,N) = A (M, k0..k1) @ B (k0..k1, N), B rows at stride ldb (Conv1D weights [in, out]):
 * rows k0..k1 of the weights are one contiguous stream, read once for all M rows. */
GK_CLONES static void part_nn(float *restrict acc, const float *restrict A, int lda,
                              const void *restrict Bv, int ldb, int M, int N, int k0, int k1)
{
    const float *Bm = Bv;
    for (size_t i = 0; i < (size_t)M * N; i++) acc[i] = 0.0f;
    for (int kk = k0; kk < k1; kk++) {
        const float *brow = Bm + (size_t)kk * ldb;
        for (int r = 0; r < M; r++) {
            float a = A[(size_t)r * lda + kk];
            float *c = acc + (size_t)r * N;
#pragma omp simd
            for (int j = 0; j < N; j++) c[j] += a * brow[j];
        }
    }
}

/* C (M, j0..j1) = alpha * sum of the np partial products acc (np,M,N), in part order, + beta C */
GK_CLONES static void sum_parts(float *restrict Cm, int ldc, const float *restrict acc, int np,
                                int M, int N, int j0, int j1, float alpha, float beta)
{
    for (int r = 0; r < M; r++) {
        float *c = Cm + (size_t)r * ldc;
        const float *a0 = acc + (size_t)r * N;
#pragma omp simd
        for (int j = j0; j < j1; j++) {
            float s = a0[j];
            for (int p = 1; p < np; p++) s += a0[(size_t)p * M * N + j];
            c[j] = alpha * s + (beta == 0.0f ? 0.0f : beta * c[j]);
        }
    }
}

int gk_cpu_rows_ksplit(gk_backend *be, gk_cpu_part_fn part, int M, int N, int K, float alpha,
                       const float *A, int lda, const void *B, int ldb, float beta, float *C,
                       int ldc)
{
    float *acc = cpu_scratch(be, (size_t)CPU_ROWS_PARTS * M * N);
    if (!acc) return 0;
    int nt = CPU(be)->nthreads, per = ((N + nt - 1) / nt + 15) / 16 * 16;
#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static)
        for (int p = 0; p < CPU_ROWS_PARTS; p++)
            part(acc + (size_t)p * M * N, A, lda, B, ldb, M, N,
                 (int)((int64_t)K * p / CPU_ROWS_PARTS),
                 (int)((int64_t)K * (p + 1) / CPU_ROWS_PARTS));
#pragma omp for schedule(static)
        for (int t = 0; t < nt; t++) {
            int j0 = t * per, j1 = j0 + per < N ? j0 + per : N;
            if (j0 < j1) sum_parts(C, ldc, acc, CPU_ROWS_PARTS, M, N, j0, j1, alpha, beta);
        }
    }
    return 1;
}

/* out (M, j0..j1) = A (M,K) @ B^T, B (N,K) rows at stride ldb (the tied lm_head: wte (V,C)).
 * One weight row at a time (dotted with the M rows of A while it is in L1): a thread's slab is
 * then one sequential stream, which the hardware prefetcher follows at the memory's speed; four
 * rows interleaved (streams of one row each) read far slower, and software prefetch made it
 * worse (tests/bench/cpu-results.md). */
GK_CLONES static void rows_nt(float *restrict Cm, int ldc, const float *restrict A, int lda,
                              const float *restrict Bm, int ldb, int M, int K, int j0, int j1,
                              float alpha, float beta)
{
    for (int j = j0; j < j1; j++) {
        const float *b = Bm + (size_t)j * ldb;
        for (int r = 0; r < M; r++) {
            const float *a = A + (size_t)r * lda;
            float s0[16] = {0}, s1[16] = {0}, s2[16] = {0}, s3[16] = {0}, t = 0.0f;
            int kk = 0;
            for (; kk + 64 <= K; kk += 64)
                for (int i = 0; i < 16; i++) {
                    s0[i] += a[kk + i] * b[kk + i];
                    s1[i] += a[kk + 16 + i] * b[kk + 16 + i];
                    s2[i] += a[kk + 32 + i] * b[kk + 32 + i];
                    s3[i] += a[kk + 48 + i] * b[kk + 48 + i];
                }
            for (; kk < K; kk++) t += a[kk] * b[kk];
            float s = cpu_sum4x16(s0, s1, s2, s3) + t, *c = Cm + (size_t)r * ldc + j;
            *c = alpha * s + (beta == 0.0f ? 0.0f : beta * *c);
        }
    }
}

/* Columns cut into one slab per thread: every output element is still summed over k in the same
 * order by one thread, so the cut does not change any result. */
int gk_cpu_rows_slabs(gk_backend *be, int N)
{
    (void)N;
    return CPU(be)->nthreads;
}

int gk_cpu_gemm_rows(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc)
{
    if (ta || M > CPU_GEMM_ROWS_MAX) return 0;
    if (alpha == 0.0f) return 0;
    if (!tb) return gk_cpu_rows_ksplit(be, part_nn, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int ns = gk_cpu_rows_slabs(be, N), per = ((N + ns - 1) / ns + 15) / 16 * 16;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (int s = 0; s < ns; s++) {
        int j0 = s * per, j1 = j0 + per < N ? j0 + per : N;
        if (j0 >= j1) continue;
        rows_nt(C, ldc, A, lda, B, ldb, M, K, j0, j1, alpha, beta);
    }
    return 1;
}

void gk_cpu_scale_c(int M, int N, float beta, float *C, int ldc)
{
    for (int r = 0; r < M; r++)
        for (int j = 0; j < N; j++) {
            float *c = C + (size_t)r * ldc + j;
            *c = beta == 0.0f ? 0.0f : beta * *c;
        }
}

void gk_cpu_gemm_panels(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const void *B, int ldb, gk_cpu_widen_fn widen, const void *arg,
                       float beta, float *C, int ldc)
{
    int nt = CPU(be)->nthreads;
    size_t per_thread = (size_t)CPU_BF16_PANEL * K;
    float *scr = gk_cpu_scratch_need(be, (size_t)nt * per_thread, "gemm");
    if (!scr) return;
    int np = (N + CPU_BF16_PANEL - 1) / CPU_BF16_PANEL;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int p = 0; p < np; p++) {
        int j0 = p * CPU_BF16_PANEL, w = N - j0 < CPU_BF16_PANEL ? N - j0 : CPU_BF16_PANEL;
        float *panel = scr + (size_t)omp_get_thread_num() * per_thread;
        widen(panel, B, ldb, tb, K, j0, w, arg);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, w, K, alpha,
                    A, lda, panel, tb ? K : w, beta, C + j0, ldc);
    }
}

/* gk_cpu_gemm_panels' widen for 16-bit weights (arg: the gk_cpu_kern16): tb, w rows of K from row
 * j0;
 * else K rows of w from column j0 */
static void widen16_panel(float *panel, const void *Bv, int ldb, int tb, int K, int j0, int w,
                          const void *arg)
{
    const gk_cpu_kern16 *k = arg;
    const uint16_t *B = Bv;
    for (int i = 0, rows = tb ? w : K; i < rows; i++)
        k->widen(panel + (size_t)i * (tb ? K : w),
                 tb ? B + (size_t)(j0 + i) * ldb : B + (size_t)i * ldb + j0, tb ? K : w);
}

/* A few rows with untransposed weights but no scratch for the K split: each column a dot
 * product over strided weights (rare: reserve() provides the split), still exact */
static void rows16_nn_slow(gk_elt t, int M, int j0, int j1, int K, float alpha, const float *A,
                           int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    for (int r = 0; r < M; r++)
        for (int j = j0; j < j1; j++) {
            float s = 0.0f;
            for (int kk = 0; kk < K; kk++)
                s += A[(size_t)r * lda + kk] * gk_elt_get(B, t, (size_t)kk * ldb + j);
            float *c = C + (size_t)r * ldc + j;
            *c = alpha * s + (beta == 0.0f ? 0.0f : beta * *c);
        }
}

void gk_cpu_gemm16(gk_backend *be, const gk_cpu_kern16 *k, int tb, int M, int N, int K, float alpha,
                   const float *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                   int ldc)
{
    if (alpha == 0.0f) {
        gk_cpu_scale_c(M, N, beta, C, ldc);
        return;
    }
    if (M <= CPU_GEMM_ROWS_MAX && !tb
        && gk_cpu_rows_ksplit(be, k->part_nn, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    if (M <= CPU_GEMM_ROWS_MAX) {
        int ns = gk_cpu_rows_slabs(be, N), per = ((N + ns - 1) / ns + 15) / 16 * 16;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
        for (int s = 0; s < ns; s++) {
            int j0 = s * per, j1 = j0 + per < N ? j0 + per : N;
            if (j0 >= j1) continue;
            if (tb) k->rows_nt(C, ldc, A, lda, B, ldb, M, K, j0, j1, alpha, beta);
            else rows16_nn_slow(k->t, M, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc);
        }
        return;
    }
    gk_cpu_gemm_panels(be, tb, M, N, K, alpha, A, lda, B, ldb, widen16_panel, k, beta, C, ldc);
}
