/* cpu_infer.c: the CPU backend's inference ops: attention of new query rows over a KV cache
 * (attention_fwd_at), and cpu_gemm_rows, a matrix-vector style gemm for a few rows (decoding:
 * M = batch size), where OpenBLAS' sgemm packs the whole weight matrix for one row and runs at a
 * third of the memory bandwidth. Each output element is computed by one thread in a fixed order,
 * so results do not depend on the thread count. The narrow-weight gemms' shared driver too:
 * cpu_gemm16 (bf16, fp16 over a cpu_kern16 of kernels), cpu_gemm_panels (widened panels +
 * sgemm, also int8's), cpu_scale_c. References: ref.c. */
#include "kernels/cpu/cpu_infer.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/host_mem.h"
#include "kernels/ref/ref.h"

/* ---- attention over a KV cache ---- */

/* dot of two hs-vectors */
GK_CLONES static float dot(const float *restrict a, const float *restrict b, int hs)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < hs; i++) s += a[i] * b[i];
    return s;
}

/* s[0..n) = softmax(s) (max subtracted first) */
GK_CLONES static void softmax_inplace(float *restrict s, int n)
{
    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int u = 0; u < n; u++) mx = s[u] > mx ? s[u] : mx;
#pragma omp simd reduction(+ : sum)
    for (int u = 0; u < n; u++) {
        s[u] = gk_vexpf(s[u] - mx);
        sum += s[u];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int u = 0; u < n; u++) s[u] *= inv;
}

/* A head's keys and values in the cache are hs-wide pieces of rows 3C apart (9 KB on GPT-2 124M),
 * a pattern the hardware prefetcher barely follows: each loop over them asks for the piece
 * ATT_AHEAD rows ahead (one Zen 4 core, 12 layers at 145 positions: 1.3 ms a token without,
 * 1.0 with; 4 to 16 rows ahead do about as well, a whole row of all heads worse). */
#define ATT_AHEAD 8

static inline void prefetch_piece(const float *p, int hs)
{
    for (int i = 0; i < hs; i += 16) __builtin_prefetch(p + i);
}

/* o[0..hs) = sum_u w[u] * v_u, v rows at stride ld */
GK_CLONES static void combine(float *restrict o, const float *restrict w, const float *restrict v,
                              int n, int hs, size_t ld)
{
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int u = 0; u < n; u++) {
        float wu = w[u];
        const float *r = v + (size_t)u * ld;
        if (u + ATT_AHEAD < n) prefetch_piece(r + ATT_AHEAD * ld, hs);
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += wu * r[i];
    }
}

// qkv cache (B,Tc,3C), new rows t0..t0+n-1 -> out (B,n,C)
void cpu_attention_fwd_at(gk_backend *be, void *out_, void *cache, const void *qkv_new, int B,
                          int Tc, const int *t0p, int n, int C, int NH)
{
    float *out = out_;
    const float *qkv = cache;
    int nt = CPU(be)->nthreads, hs = C / NH;
    size_t per = (size_t)Tc; /* scores of one row, per thread */
    float *scr = cpu_scratch(be, (size_t)nt * per);
    if (!scr) {
        gk_ref_ops.attention_fwd_at(be, out, cache, qkv_new, B, Tc, t0p, n, C, NH);
        return;
    }
    int t0 = host_cache_store(be, "cpu", cache, qkv_new, B, Tc, t0p, n, C);
    if (t0 < 0) return;
    float scale = 1.0f / sqrtf((float)hs);
    size_t ld = 3 * (size_t)C;
    int tasks = B * NH * n;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int task = 0; task < tasks; task++) {
        int i = task % n, bh = task / n, b = bh / NH, h = bh % NH, t = t0 + i;
        const float *base = qkv + (size_t)b * Tc * ld + (size_t)h * hs;
        const float *q = base + (size_t)t * ld, *k = base + C, *v = base + 2 * C;
        float *s = scr + (size_t)omp_get_thread_num() * per;
        for (int u = 0; u <= t; u++) {
            if (u + ATT_AHEAD <= t) prefetch_piece(k + (size_t)(u + ATT_AHEAD) * ld, hs);
            s[u] = dot(q, k + (size_t)u * ld, hs) * scale;
        }
        softmax_inplace(s, t + 1);
        combine(out + ((size_t)b * n + i) * C + (size_t)h * hs, s, v, t + 1, hs, ld);
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

int cpu_rows_ksplit(gk_backend *be, cpu_part_fn part, int M, int N, int K, float alpha,
                    const float *A, int lda, const void *B, int ldb, float beta, float *C, int ldc)
{
    float *acc = cpu_scratch(be, (size_t)CPU_ROWS_PARTS * M * N);
    if (!acc) return 0;
    int nt = CPU(be)->nthreads, per = ((N + nt - 1) / nt + 15) / 16 * 16;
#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static)
        for (int p = 0; p < CPU_ROWS_PARTS; p++)
            part(acc + (size_t)p * M * N, A, lda, B, ldb, M, N, (int)((int64_t)K * p / CPU_ROWS_PARTS),
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
 * rows interleaved (streams of one row each) read half as fast on a Zen 4, and software
 * prefetch made it worse (one core: 17 GB/s against 7-8 for bf16). */
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
int cpu_rows_slabs(gk_backend *be, int N)
{
    (void)N;
    return CPU(be)->nthreads;
}

int cpu_gemm_rows(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (ta || M > CPU_GEMM_ROWS_MAX) return 0;
    if (alpha == 0.0f) return 0;
    if (!tb) return cpu_rows_ksplit(be, part_nn, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int ns = cpu_rows_slabs(be, N), per = ((N + ns - 1) / ns + 15) / 16 * 16;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (int s = 0; s < ns; s++) {
        int j0 = s * per, j1 = j0 + per < N ? j0 + per : N;
        if (j0 >= j1) continue;
        rows_nt(C, ldc, A, lda, B, ldb, M, K, j0, j1, alpha, beta);
    }
    return 1;
}

void cpu_scale_c(int M, int N, float beta, float *C, int ldc)
{
    for (int r = 0; r < M; r++)
        for (int j = 0; j < N; j++) {
            float *c = C + (size_t)r * ldc + j;
            *c = beta == 0.0f ? 0.0f : beta * *c;
        }
}

int cpu_gemm_panels(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                    int lda, const void *B, int ldb, cpu_widen_fn widen, const void *arg,
                    float beta, float *C, int ldc)
{
    int nt = CPU(be)->nthreads;
    size_t per_thread = (size_t)CPU_BF16_PANEL * K;
    float *scr = cpu_scratch(be, (size_t)nt * per_thread);
    if (!scr) return 0;
    int np = (N + CPU_BF16_PANEL - 1) / CPU_BF16_PANEL;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int p = 0; p < np; p++) {
        int j0 = p * CPU_BF16_PANEL, w = N - j0 < CPU_BF16_PANEL ? N - j0 : CPU_BF16_PANEL;
        float *panel = scr + (size_t)omp_get_thread_num() * per_thread;
        widen(panel, B, ldb, tb, K, j0, w, arg);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, w, K, alpha,
                    A, lda, panel, tb ? K : w, beta, C + j0, ldc);
    }
    return 1;
}

/* cpu_gemm_panels' widen for 16-bit weights (arg: the cpu_kern16): tb, w rows of K from row j0;
 * else K rows of w from column j0 */
static void widen16_panel(float *panel, const void *Bv, int ldb, int tb, int K, int j0, int w,
                          const void *arg)
{
    const cpu_kern16 *k = arg;
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

void cpu_gemm16(gk_backend *be, const cpu_kern16 *k, int tb, int M, int N, int K, float alpha,
                const float *A, int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    if (alpha == 0.0f) {
        cpu_scale_c(M, N, beta, C, ldc);
        return;
    }
    if (M <= CPU_GEMM_ROWS_MAX && !tb
        && cpu_rows_ksplit(be, k->part_nn, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    if (M <= CPU_GEMM_ROWS_MAX) {
        int ns = cpu_rows_slabs(be, N), per = ((N + ns - 1) / ns + 15) / 16 * 16;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
        for (int s = 0; s < ns; s++) {
            int j0 = s * per, j1 = j0 + per < N ? j0 + per : N;
            if (j0 >= j1) continue;
            if (tb) k->rows_nt(C, ldc, A, lda, B, ldb, M, K, j0, j1, alpha, beta);
            else rows16_nn_slow(k->t, M, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc);
        }
        return;
    }
    if (!cpu_gemm_panels(be, tb, M, N, K, alpha, A, lda, B, ldb, widen16_panel, k, beta, C, ldc))
        gk_ref_ops.gemm(be, 0, tb, M, N, K, alpha, A, GK_F32, lda, B, k->t, ldb, beta, C, GK_F32,
                        ldc, NULL, NULL);
}
