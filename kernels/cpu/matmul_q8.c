/* matmul_q8.c: the CPU backend's int8-weight ops (see matmul.h). Decoding (a few rows) reads each
 * weight once, as llama.cpp's Q8_0 x Q8_0 dot products: the activations are quantized per block
 * of 32 (scale max|x| / 127), each block's products summed exactly in int32 and scaled by both
 * blocks' scales. Three paths, picked per backend by gk_cpu_impl.isa: portable C, AVX2 (32
 * products a step with _mm256_maddubs_epi16, which multiplies unsigned by signed bytes: the
 * weights' absolute values times the activations carrying the weights' signs, |q| <= 127 so no
 * pair saturates), and AVX-512 VNNI (vpdpbusd: the same products, summed in one instruction).
 * Longer batches (prompts, gpt-evalppl) widen panels of weights into fp32 and run sgemm, with
 * the activations exact. Slabs are cut by shape, never by thread count.
 * References: kernels/ref/matmul.c (gk_elt_get of GK_Q8, activations exact);
 * tests/unit/test_infer_q8.c also checks each path against a scalar version of these quantized
 * products. */
#include "kernels/cpu/matmul.h"

#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"

#if defined(__x86_64__) && !defined(GK_NO_CLONES)
#include <immintrin.h>
#define Q8_AVX2 1
#define AVX2_FN __attribute__((target("avx2,fma,f16c")))
#endif

/* C (M, j0..j1) = alpha * (a . row j of B) + beta C; a: M rows of kb_n blocks */
typedef void (*q8_rows_fn)(float *C, int ldc, const gk_cpu_q8_act *a, int kb_n, const uint8_t *B,
                           int M, int j0, int j1, float alpha, float beta);

static inline float out_of(float s, float alpha, float beta, const float *c)
{
    return alpha * s + (beta == 0.0f ? 0.0f : beta * *c);
}

static inline float wscale(const uint8_t *blk)
{
    uint16_t d;
    memcpy(&d, blk, 2);
    return gk_f16f(d);
}

/* Each q is roundf(v * id) (halves away from zero), written as a truncation and a step so that
 * it vectorizes: |v * id| <= 127.x, so (int) truncates exactly and y - t is exact. (A call to
 * roundf per activation took 2% of a token.) */
GK_CLONES void gk_cpu_q8_quantize_act(gk_cpu_q8_act *out, const float *x, int K)
{
    for (int b = 0; b < K / GK_Q8_BLOCK; b++) {
        const float *v = x + (size_t)b * GK_Q8_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < GK_Q8_BLOCK; i++) amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
        float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        out[b].d = d;
#pragma omp simd
        for (int i = 0; i < GK_Q8_BLOCK; i++) {
            float y = v[i] * id;
            int t = (int)y;
            float r = y - (float)t;
            out[b].q[i] = (int8_t)(t + (r >= 0.5f) - (r <= -0.5f));
        }
    }
}

/* ---- portable C ---- */

static void scalar_rows(float *restrict Cm, int ldc, const gk_cpu_q8_act *restrict a, int kb_n,
                        const uint8_t *restrict B, int M, int j0, int j1, float alpha, float beta)
{
    for (int j = j0; j < j1; j++) {
        const uint8_t *w = B + (size_t)j * kb_n * GK_Q8_BLOCK_BYTES;
        for (int r = 0; r < M; r++) {
            const gk_cpu_q8_act *x = a + (size_t)r * kb_n;
            float s = 0.0f;
            for (int b = 0; b < kb_n; b++) {
                const uint8_t *blk = w + (size_t)b * GK_Q8_BLOCK_BYTES;
                int32_t acc = 0;
                for (int i = 0; i < GK_Q8_BLOCK; i++) acc += (int8_t)blk[2 + i] * x[b].q[i];
                s += wscale(blk) * x[b].d * (float)acc;
            }
            float *c = Cm + (size_t)r * ldc + j;
            *c = out_of(s, alpha, beta, c);
        }
    }
}

/* ---- AVX2 ---- */
#ifdef Q8_AVX2

static inline AVX2_FN float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* the 32 products of a weight block w (int8) and activations x, as 8 int32 sums, to fp32 */
static inline AVX2_FN __m256 dot32(__m256i w, __m256i x)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* A few-row kernel (q8_rows_fn) for a block product DOT32(w, x) -> 8 fp32 lanes: one weight
 * row at a time, each dotted with the M activation rows (the row stays in L1 for them), two
 * sums over alternate blocks. One row at a time, a thread's slab is read as one sequential
 * stream, which the hardware prefetcher follows at the memory's speed: four rows interleaved
 * (816-byte streams that each stop after 24 blocks), with or without software prefetch, read
 * several times slower (tests/bench/cpu-results.md). */
#define Q8_ROWS(NAME, ATTR, DOT32)                                                                \
    static inline ATTR __m256 NAME##_blk(const uint8_t *blk, const gk_cpu_q8_act *x, __m256 s)    \
    {                                                                                             \
        uint16_t h;                                                                               \
        memcpy(&h, blk, 2);                                                                       \
        __m256 d = _mm256_set1_ps(_cvtsh_ss(h) * x->d); /* F16C */                                \
        __m256i wq = _mm256_loadu_si256((const __m256i *)(blk + 2));                              \
        __m256i xq = _mm256_loadu_si256((const __m256i *)x->q);                                   \
        return _mm256_fmadd_ps(d, DOT32(wq, xq), s);                                              \
    }                                                                                             \
    static ATTR void NAME(float *restrict Cm, int ldc, const gk_cpu_q8_act *restrict a, int kb_n, \
                          const uint8_t *restrict B, int M, int j0, int j1, float alpha,          \
                          float beta)                                                             \
    {                                                                                             \
        size_t rb = (size_t)kb_n * GK_Q8_BLOCK_BYTES; /* bytes per weight row */                  \
        for (int j = j0; j < j1; j++) {                                                           \
            const uint8_t *w = B + (size_t)j * rb;                                                \
            for (int r = 0; r < M; r++) {                                                         \
                const gk_cpu_q8_act *x = a + (size_t)r * kb_n;                                    \
                __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();                        \
                int b = 0;                                                                        \
                for (; b + 2 <= kb_n; b += 2) {                                                   \
                    s0 = NAME##_blk(w + (size_t)b * GK_Q8_BLOCK_BYTES, x + b, s0);                \
                    s1 = NAME##_blk(w + (size_t)(b + 1) * GK_Q8_BLOCK_BYTES, x + b + 1, s1);      \
                }                                                                                 \
                if (b < kb_n) s0 = NAME##_blk(w + (size_t)b * GK_Q8_BLOCK_BYTES, x + b, s0);      \
                float *c = Cm + (size_t)r * ldc + j;                                              \
                *c = out_of(hsum8(_mm256_add_ps(s0, s1)), alpha, beta, c);                        \
            }                                                                                     \
        }                                                                                         \
    }

Q8_ROWS(avx2_rows, AVX2_FN, dot32)

/* AVX-512 VNNI (on 256-bit vectors, AVX512VL): one vpdpbusd for the 32 products of a block,
 * summed in int32 without the int16 step of maddubs (the same sums: no pair saturates). */
#define VNNI_FN __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
static inline VNNI_FN __m256 dot32_vnni(__m256i w, __m256i x)
{
    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w),
                                    _mm256_sign_epi8(x, w));
    return _mm256_cvtepi32_ps(p);
}

Q8_ROWS(vnni_rows, VNNI_FN, dot32_vnni)
#endif

static q8_rows_fn rows_of(gk_backend *be)
{
#ifdef Q8_AVX2
    if (CPU(be)->isa >= CPU_ISA_AVX512VNNI) return vnni_rows;
    if (CPU(be)->isa >= CPU_ISA_AVX2) return avx2_rows;
#endif
    (void)be;
    return scalar_rows;
}

/* ---- the ops ---- */

/* dst (K) = one Q8_0 row of K / 32 blocks, widened */
static void widen_row(float *restrict dst, const uint8_t *restrict row, int K)
{
    for (int b = 0; b < K / GK_Q8_BLOCK; b++) {
        const uint8_t *blk = row + (size_t)b * GK_Q8_BLOCK_BYTES;
        float d = wscale(blk);
        for (int i = 0; i < GK_Q8_BLOCK; i++)
            dst[b * GK_Q8_BLOCK + i] = d * (float)(int8_t)blk[2 + i];
    }
}

/* gk_cpu_gemm_panels' widen: w Q8_0 rows of K from row j0 (always transposed; ldb unused) */
static void widen_panel(float *panel, const void *B, int ldb, int tb, int K, int j0, int w,
                        const void *arg)
{
    size_t rb = (size_t)K / GK_Q8_BLOCK * GK_Q8_BLOCK_BYTES;
    (void)ldb, (void)tb, (void)arg;
    for (int i = 0; i < w; i++)
        widen_row(panel + (size_t)i * K, (const uint8_t *)B + (size_t)(j0 + i) * rb, K);
}

void gk_cpu_gemm_q8(gk_backend *be, int M, int N, int K, float alpha, const float *A, int lda,
                    const uint8_t *B, float beta, float *C, int ldc)
{
    int nt = CPU(be)->nthreads, kb_n = K / GK_Q8_BLOCK;
    if (alpha == 0.0f) {
        gk_cpu_scale_c(M, N, beta, C, ldc);
        return;
    }
    size_t qa_floats = ((size_t)M * kb_n * sizeof(gk_cpu_q8_act) + 3) / 4;
    gk_cpu_q8_act *qa = M <= CPU_GEMM_ROWS_MAX ? (gk_cpu_q8_act *)cpu_scratch(be, qa_floats) : NULL;
    if (qa) {
        for (int r = 0; r < M; r++)
            gk_cpu_q8_quantize_act(qa + (size_t)r * kb_n, A + (size_t)r * lda, K);
        q8_rows_fn rows = rows_of(be);
        int ns = gk_cpu_rows_slabs(be, N), per = ((N + ns - 1) / ns + 15) / 16 * 16;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int s = 0; s < ns; s++) {
            int j0 = s * per, j1 = j0 + per < N ? j0 + per : N;
            if (j0 < j1) rows(C, ldc, qa, kb_n, B, M, j0, j1, alpha, beta);
        }
        return;
    }
    gk_cpu_gemm_panels(be, 1, M, N, K, alpha, A, lda, B, K, widen_panel, NULL, beta, C, ldc);
}

void gk_cpu_encoder_fwd_q8(gk_backend *be, float *out, const int *tokens, const uint8_t *wte,
                           const float *wpe, int B, int T, int C)
{
    int N = B * T;
    size_t rb = (size_t)C / GK_Q8_BLOCK * GK_Q8_BLOCK_BYTES;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static) if (N > 1)
    for (int i = 0; i < N; i++) {
        const float *p = wpe + (size_t)(i % T) * C;
        float *o = out + (size_t)i * C;
        widen_row(o, wte + (size_t)tokens[i] * rb, C);
        for (int c = 0; c < C; c++) o[c] += p[c];
    }
}
