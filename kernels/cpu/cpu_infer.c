/* cpu_infer.c: the CPU backend's inference ops: attention of new query rows over a KV cache
 * (attention_fwd_at), and cpu_gemm_rows, a matrix-vector style gemm for a few rows (decoding:
 * M = batch size), where OpenBLAS' sgemm packs the whole weight matrix for one row and runs at a
 * third of the memory bandwidth. Each output element is computed by one thread in a fixed order,
 * so results do not depend on the thread count. References: ref.c. */
#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/ref.h"

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

/* o[0..hs) = sum_u w[u] * v_u, v rows at stride ld */
GK_CLONES static void combine(float *restrict o, const float *restrict w, const float *restrict v,
                              int n, int hs, size_t ld)
{
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int u = 0; u < n; u++) {
        float wu = w[u];
        const float *r = v + (size_t)u * ld;
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += wu * r[i];
    }
}

// qkv cache (B,Tc,3C), new rows t0..t0+n-1 -> out (B,n,C)
void cpu_attention_fwd_at(gk_backend *be, float *out, const float *qkv, int B, int Tc, int t0,
                          int n, int C, int NH)
{
    int nt = CPU(be)->nthreads, hs = C / NH;
    size_t per = (size_t)Tc; /* scores of one row, per thread */
    float *scr = cpu_scratch(be, (size_t)nt * per);
    if (!scr) {
        gk_ref_ops.attention_fwd_at(be, out, qkv, B, Tc, t0, n, C, NH);
        return;
    }
    float scale = 1.0f / sqrtf((float)hs);
    size_t ld = 3 * (size_t)C;
    int tasks = B * NH * n;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int task = 0; task < tasks; task++) {
        int i = task % n, bh = task / n, b = bh / NH, h = bh % NH, t = t0 + i;
        const float *base = qkv + (size_t)b * Tc * ld + (size_t)h * hs;
        const float *q = base + (size_t)t * ld, *k = base + C, *v = base + 2 * C;
        float *s = scr + (size_t)omp_get_thread_num() * per;
        for (int u = 0; u <= t; u++) s[u] = dot(q, k + (size_t)u * ld, hs) * scale;
        softmax_inplace(s, t + 1);
        combine(out + ((size_t)b * n + i) * C + (size_t)h * hs, s, v, t + 1, hs, ld);
    }
}

/* ---- gemm for a few rows ---- */

/* out (M, j0..j1) = A (M,K) @ B (K, j0..j1), B rows at stride ldb (Conv1D weights [in, out]):
 * every weight row segment is streamed once for all M rows; out is the accumulator. */
GK_CLONES static void rows_nn(float *restrict Cm, int ldc, const float *restrict A, int lda,
                              const float *restrict Bm, int ldb, int M, int K, int j0, int j1,
                              float alpha, float beta)
{
    int w = j1 - j0;
    for (int r = 0; r < M; r++) {
        float *c = Cm + (size_t)r * ldc + j0;
        if (beta == 0.0f)
            for (int j = 0; j < w; j++) c[j] = 0.0f;
        else
            for (int j = 0; j < w; j++) c[j] *= beta / alpha;
    }
    for (int kk = 0; kk < K; kk++) {
        const float *brow = Bm + (size_t)kk * ldb + j0;
        for (int r = 0; r < M; r++) {
            float a = A[(size_t)r * lda + kk];
            float *c = Cm + (size_t)r * ldc + j0;
#pragma omp simd
            for (int j = 0; j < w; j++) c[j] += a * brow[j];
        }
    }
    if (alpha != 1.0f)
        for (int r = 0; r < M; r++) {
            float *c = Cm + (size_t)r * ldc + j0;
            for (int j = 0; j < w; j++) c[j] *= alpha;
        }
}

/* out (M, j0..j1) = A (M,K) @ B^T, B (N,K) rows at stride ldb (the tied lm_head: wte (V,C)). */
GK_CLONES static void rows_nt(float *restrict Cm, int ldc, const float *restrict A, int lda,
                              const float *restrict Bm, int ldb, int M, int K, int j0, int j1,
                              float alpha, float beta)
{
    for (int j = j0; j < j1; j++) {
        const float *brow = Bm + (size_t)j * ldb;
        for (int r = 0; r < M; r++) {
            const float *a = A + (size_t)r * lda;
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int kk = 0; kk < K; kk++) s += a[kk] * brow[kk];
            float *c = Cm + (size_t)r * ldc + j;
            *c = alpha * s + (beta == 0.0f ? 0.0f : beta * *c);
        }
    }
}

int cpu_gemm_rows(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (ta || M > CPU_GEMM_ROWS_MAX) return 0;
    /* columns cut into one slab per thread: every output element is still summed over k in the
     * same order by one thread, so the cut does not change any result */
    int ns = CPU(be)->nthreads, per = ((N + ns - 1) / ns + 15) / 16 * 16;
    if (alpha == 0.0f) return 0;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (int s = 0; s < ns; s++) {
        int j0 = s * per, j1 = j0 + per < N ? j0 + per : N;
        if (j0 >= j1) continue;
        if (tb)
            rows_nt(C, ldc, A, lda, B, ldb, M, K, j0, j1, alpha, beta);
        else
            rows_nn(C, ldc, A, lda, B, ldb, M, K, j0, j1, alpha, beta);
    }
    return 1;
}
