/* matmul_f16.c: the CPU backend's fp16-weight ops (gemm_f16, encoder_fwd_f16; see backend.h), laid
 * out as matmul_bf16.c's: a few rows (decoding) stream the weights once and widen them in
 * registers, more rows widen panels of CPU_BF16_PANEL weight columns into per-thread scratch and
 * run sgemm.
 * Each step has two paths, picked per backend by gk_cpu_impl.isa (CPUID at create): portable C
 * (the bit conversion of bf16.h), and AVX2 + FMA + F16C (vcvtph2ps, 8 halves at a time, fused
 * multiply-adds). The paths round differently (FMA, lane order) and each is checked against the
 * reference (tests/unit/test_infer_f16.c). Slabs and parts are cut by shape, never by thread
 * count: results do not depend on it. The driver is matmul.c's gk_cpu_gemm16; this file owns
 * each path's kernels (a gk_cpu_kern16). References: kernels/ref/matmul.c (gk_elt_get of
 * GK_F16). */
#include "kernels/cpu/matmul.h"

#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"

#if defined(__x86_64__) && !defined(GK_NO_CLONES)
#include <immintrin.h>
#define F16_AVX2 1
#define AVX2_FN __attribute__((target("avx2,fma,f16c")))
#endif

static inline float out_of(float s, float alpha, float beta, const float *c)
{
    return alpha * s + (beta == 0.0f ? 0.0f : beta * *c);
}

/* ---- portable C ---- */

static void scalar_part_nn(float *restrict acc, const float *restrict A, int lda,
                           const void *restrict Bv, int ldb, int M, int N, int k0, int k1)
{
    const uint16_t *Bm = Bv;
    for (size_t i = 0; i < (size_t)M * N; i++) acc[i] = 0.0f;
    for (int kk = k0; kk < k1; kk++) {
        const uint16_t *brow = Bm + (size_t)kk * ldb;
        for (int j = 0; j < N; j++) {
            float w = gk_f16f(brow[j]);
            for (int r = 0; r < M; r++) acc[(size_t)r * N + j] += A[(size_t)r * lda + kk] * w;
        }
    }
}

static void scalar_rows_nt(float *restrict Cm, int ldc, const float *restrict A, int lda,
                           const uint16_t *restrict Bm, int ldb, int M, int K, int j0, int j1,
                           float alpha, float beta)
{
    for (int j = j0; j < j1; j++) {
        const uint16_t *b = Bm + (size_t)j * ldb;
        for (int r = 0; r < M; r++) {
            const float *a = A + (size_t)r * lda;
            float s = 0.0f;
            for (int kk = 0; kk < K; kk++) s += a[kk] * gk_f16f(b[kk]);
            float *c = Cm + (size_t)r * ldc + j;
            *c = out_of(s, alpha, beta, c);
        }
    }
}

static void scalar_widen(float *restrict dst, const uint16_t *restrict src, int n)
{
    for (int i = 0; i < n; i++) dst[i] = gk_f16f(src[i]);
}

static const gk_cpu_kern16 k_scalar = {GK_F16, scalar_part_nn, scalar_rows_nt, scalar_widen};

/* ---- AVX2 + FMA + F16C ---- */
#ifdef F16_AVX2

static inline AVX2_FN __m256 cvt8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline AVX2_FN float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One weight row at a time, widened once per 8 columns and added into all M rows of acc
 * (M <= CPU_GEMM_ROWS_MAX): the part is one sequential stream (see matmul_bf16.c's part_nn; four
 * rows at a time, four streams, read slower: tests/bench/cpu-results.md). */
static AVX2_FN void avx2_part_nn(float *restrict acc, const float *restrict A, int lda,
                                 const void *restrict Bv, int ldb, int M, int N, int k0, int k1)
{
    const uint16_t *Bm = Bv;
    int N8 = N & ~7;
    for (size_t i = 0; i < (size_t)M * N; i++) acc[i] = 0.0f;
    for (int kk = k0; kk < k1; kk++) {
        const uint16_t *b0 = Bm + (size_t)kk * ldb;
        __m256 a[CPU_GEMM_ROWS_MAX];
        for (int r = 0; r < M; r++) a[r] = _mm256_set1_ps(A[(size_t)r * lda + kk]);
        for (int j = 0; j < N8; j += 8) {
            __m256 w = cvt8(b0 + j);
            for (int r = 0; r < M; r++) {
                float *c = acc + (size_t)r * N + j;
                _mm256_storeu_ps(c, _mm256_fmadd_ps(a[r], w, _mm256_loadu_ps(c)));
            }
        }
        for (int j = N8; j < N; j++)
            for (int r = 0; r < M; r++) {
                float *c = acc + (size_t)r * N + j;
                *c = fmaf(A[(size_t)r * lda + kk], gk_f16f(b0[j]), *c);
            }
    }
}

/* One weight row at a time, dotted with the M rows of A while it is in L1 (matmul.c's
 * rows_nt: a sequential stream), four independent 8-lane sums hiding the add latency. */
static AVX2_FN void avx2_rows_nt(float *restrict Cm, int ldc, const float *restrict A, int lda,
                                 const uint16_t *restrict Bm, int ldb, int M, int K, int j0,
                                 int j1, float alpha, float beta)
{
    int K32 = K & ~31;
    for (int j = j0; j < j1; j++) {
        const uint16_t *b = Bm + (size_t)j * ldb;
        for (int r = 0; r < M; r++) {
            const float *a = A + (size_t)r * lda;
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            for (int kk = 0; kk < K32; kk += 32) {
                s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + kk), cvt8(b + kk), s0);
                s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + kk + 8), cvt8(b + kk + 8), s1);
                s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + kk + 16), cvt8(b + kk + 16), s2);
                s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + kk + 24), cvt8(b + kk + 24), s3);
            }
            float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
            for (int kk = K32; kk < K; kk++) s = fmaf(a[kk], gk_f16f(b[kk]), s);
            float *c = Cm + (size_t)r * ldc + j;
            *c = out_of(s, alpha, beta, c);
        }
    }
}

static AVX2_FN void avx2_widen(float *restrict dst, const uint16_t *restrict src, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, cvt8(src + i));
    for (; i < n; i++) dst[i] = gk_f16f(src[i]);
}

static const gk_cpu_kern16 k_avx2 = {GK_F16, avx2_part_nn, avx2_rows_nt, avx2_widen};
#endif

static const gk_cpu_kern16 *kern_of(gk_backend *be)
{
#ifdef F16_AVX2
    if (CPU(be)->isa >= CPU_ISA_AVX2) return &k_avx2;
#endif
    (void)be;
    return &k_scalar;
}

/* ---- the ops ---- */

void gk_cpu_gemm_f16(gk_backend *be, int tb, int M, int N, int K, float alpha, const float *A,
                     int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    gk_cpu_gemm16(be, kern_of(be), tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gk_cpu_encoder_fwd_f16(gk_backend *be, float *out, const int *tokens, const uint16_t *wte,
                            const float *wpe, int B, int T, int C)
{
    int N = B * T;
    const gk_cpu_kern16 *k = kern_of(be);
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static) if (N > 1)
    for (int i = 0; i < N; i++) {
        const float *p = wpe + (size_t)(i % T) * C;
        float *o = out + (size_t)i * C;
        k->widen(o, wte + (size_t)tokens[i] * C, C);
        for (int c = 0; c < C; c++) o[c] += p[c];
    }
}
