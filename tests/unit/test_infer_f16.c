/* test_infer_f16.c: fp16 weights (GK_GPT2_F16, the CPU backend's cpu_f16.c), on every
 * instruction-set path this machine runs (gk_cpu_set_isa; a path it cannot run is named on
 * stderr, not checked):
 * - the host conversions of kernels/bf16.h equal common/io's (an independent bit-level version)
 *   for all 65536 halves and for floats around every rounding boundary, plus hand-checked pairs;
 * - gemm with fp16 weights (few rows with either layout, panels) and encoder_fwd with an fp16 wte
 *   equal the reference backend (which widens exactly and sums in double): normalized error per
 *   call below 1e-6, fp32 summation over K = 70;
 * - a model with fp16 weights gives logits within fp16 rounding of the fp32 model's (bound
 *   derived in test_f16_logits), and greedy decoding picks the same tokens unless two logits are
 *   within that error; its parameters read back as the fp16-rounded values;
 * - fp16 weights are refused with bf16 activations and together with bf16 weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/safetensors.h"
#include "kernels/bf16.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/ref.h"
#include "kernels/gpt2.h"
#include "kernels/rng.h"
#include "test.h"

enum { ISA_MAX = 2 }; /* the highest path (gk_cpu_set_isa; fp16 takes AVX2's at 2) */

static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0 ? s : 1));
}

static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t key = gk_rng_key(seed, 0, 0, 7);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * gk_rng_uniform(key, i) - 1.0f;
}

/* Puts be on path isa; 0 when this machine cannot run it (said on stderr). */
static int use_isa(gk_backend *be, int isa)
{
    gk_err e = {0};
    if (gk_cpu_set_isa(be, isa, &e) == 0) return 1;
    fprintf(stderr, "%s: path %s not checked here: %s\n", t_cur_name, gk_cpu_isa_name(isa), e.msg);
    return 0;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static void test_f16_conversions(void)
{
    for (uint32_t h = 0; h < 65536; h++)
        CHECKF(same_bits(gk_f16f((uint16_t)h), gk_f16_to_f32((uint16_t)h)), "half 0x%04x", h);
    /* each finite half, its neighbours in fp32, and the midpoints to the next half */
    int bad = 0;
    for (uint32_t h = 0; h < 0x7c00 && bad < 5; h++) {
        float x = gk_f16_to_f32((uint16_t)h), y = gk_f16_to_f32((uint16_t)(h + 1));
        float probes[] = {x, nextafterf(x, 1e9f), nextafterf(x, -1e9f), (x + y) / 2,
                          nextafterf((x + y) / 2, 1e9f), nextafterf((x + y) / 2, -1e9f)};
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
                float f = s ? -probes[i] : probes[i];
                if (gk_f2f16(f) != gk_f32_to_f16(f)) {
                    fprintf(stderr, "f32 %a: 0x%04x, common/io 0x%04x\n", f, gk_f2f16(f), gk_f32_to_f16(f));
                    bad++;
                }
            }
    }
    CHECK(bad == 0);
    /* hand-checked: 1, the largest half, the smallest subnormal, overflow, ties to even */
    CHECK(gk_f2f16(1.0f) == 0x3c00 && gk_f2f16(65504.0f) == 0x7bff && gk_f2f16(0x1p-24f) == 0x0001);
    CHECK(gk_f2f16(65520.0f) == 0x7c00 && gk_f2f16(-INFINITY) == 0xfc00);
    CHECK(gk_f2f16(1.0f + 0x1p-11f) == 0x3c00 && gk_f2f16(1.0f + 3 * 0x1p-11f) == 0x3c02);
    CHECK(isnan(gk_f16f(gk_f2f16(NAN))));
}

/* gemm with fp16 weights and encoder_fwd with an fp16 wte: CPU = reference on each path. */
static void test_f16_ops(void)
{
    gk_backend *be = NULL, *ref = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    CHECK_OK(gk_ref_create(&ref, &e), &e);
    if (!be || !ref) goto out;
    int K = 70, N = 300, Mmax = 20; /* neither a multiple of 8: the vector tails run */
    CHECK_OK(be->ops->reserve(be, Mmax, K > N ? K : N, 16, 16, &e), &e);
    float *A = malloc(sizeof(float) * Mmax * K), *W = malloc(sizeof(float) * K * N);
    uint16_t *H = malloc(sizeof(uint16_t) * K * N);
    float *c1 = malloc(sizeof(float) * Mmax * N), *c2 = malloc(sizeof(float) * Mmax * N);
    fill(A, (size_t)Mmax * K, 1);
    fill(W, (size_t)K * N, 2);
    for (int i = 0; i < K * N; i++) H[i] = gk_f32_to_f16(W[i]);
    int Ms[] = {1, 3, 8, 20};
    for (int isa = 0; isa <= ISA_MAX; isa++) {
        if (!use_isa(be, isa)) continue;
        for (int mi = 0; mi < 4; mi++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int M = Ms[mi], ldb = tb ? K : N;
                    fill(c1, (size_t)Mmax * N, 5);
                    fill(c2, (size_t)Mmax * N, 5);
                    be->ops->gemm(be, 0, tb, M, N, K, 0.5f, A, GK_F32, K, H, GK_F16, ldb,
                                  (float)beta, c1, GK_F32, N, NULL, NULL);
                    ref->ops->gemm(ref, 0, tb, M, N, K, 0.5f, A, GK_F32, K, H, GK_F16, ldb,
                                   (float)beta, c2, GK_F32, N, NULL, NULL);
                    double d = rel_err(c1, c2, (size_t)M * N);
                    CHECKF(d < 1e-6, "gemm_f16 %s M=%d tb=%d beta=%d: %.3e", gk_cpu_isa_name(isa),
                           M, tb, beta, d);
                }
        // the embedding: the first 10 rows of 30 of H as a table
        int tokens[6] = {0, 9, 3, 3, 7, 1};
        float wpe[3 * 30];
        fill(wpe, 90, 8);
        be->ops->encoder_fwd(be, c1, tokens, H, GK_F16, wpe, NULL, 2, 3, 30, 0.0f, 0);
        ref->ops->encoder_fwd(ref, c2, tokens, H, GK_F16, wpe, NULL, 2, 3, 30, 0.0f, 0);
        CHECKF(rel_err(c1, c2, 180) < 1e-7, "encoder_f16 %s", gk_cpu_isa_name(isa));
        fprintf(stderr, "fp16 ops: path %s checked\n", gk_cpu_isa_name(isa));
    }
    CHECK_OK(gk_backend_status(be, &e), &e);
    free(A);
    free(W);
    free(H);
    free(c1);
    free(c2);
out:
    gk_backend_free(be);
    gk_backend_free(ref);
}

/* fp16 weights vs fp32 weights, same init: logits of a prompt and of single steps. Bound: RNE
 * rounding moves each weight by at most 2^-11 relative; a logit passes through 4 matrices per
 * layer and the lm_head (13 here), whose independent errors add in quadrature: sqrt(13) 2^-11 =
 * 1.8e-3 relative; twice that as margin: 2^-8. */
static void f16_logits_on(gk_backend *be, int isa)
{
    gk_err e = {0};
    gk_gpt2_config cfg = {3, 4, 64, 32, 100, 1, 0.0f};
    gk_gpt2 *f = NULL, *h = NULL;
    CHECK_OK(gk_gpt2_create_ex(&f, &cfg, be, 1, cfg.block_size, GK_GPT2_INFERENCE, &e), &e);
    CHECK_OK(gk_gpt2_create_ex(&h, &cfg, be, 1, cfg.block_size, GK_GPT2_F16, &e), &e);
    if (!f || !h) goto out;
    CHECK_OK(gk_gpt2_init(f, 3, &e), &e);
    CHECK_OK(gk_gpt2_init(h, 3, &e), &e);
    CHECK(gk_gpt2_param(h, 0)->data == NULL && gk_gpt2_param(h, 0)->copy != NULL);
    int Vp = gk_gpt2_padded_vocab(f), V = cfg.vocab_size;
    float *lf = malloc(sizeof(float) * 8 * Vp), *lh = malloc(sizeof(float) * 8 * Vp);
    int prompt[8] = {5, 17, 42, 99, 0, 63, 7, 21}, tf = 0, th = 0, diverged = 0;
    double worst = 0;
    for (int t = 0; t < 20 && !diverged; t++) {
        int n = t == 0 ? 8 : 1, pos = t == 0 ? 0 : 7 + t;
        CHECK_OK(gk_gpt2_forward_at(f, t == 0 ? prompt : &tf, 1, pos, n, &e), &e);
        CHECK_OK(gk_gpt2_forward_at(h, t == 0 ? prompt : &th, 1, pos, n, &e), &e);
        gk_gpt2_logits_host(f, 0, n, Vp, lf, NULL);
        gk_gpt2_logits_host(h, 0, n, Vp, lh, NULL);
        for (int r = 0; r < n; r++) {
            double d = rel_err(lh + (size_t)r * Vp, lf + (size_t)r * Vp, V);
            if (d > worst) worst = d;
        }
        const float *a = lf + (size_t)(n - 1) * Vp, *b = lh + (size_t)(n - 1) * Vp;
        tf = th = 0;
        for (int j = 1; j < V; j++) {
            if (a[j] > a[tf]) tf = j;
            if (b[j] > b[th]) th = j;
        }
        if (tf != th) {
            double norm = 0;
            for (int j = 0; j < V; j++) norm += (double)a[j] * a[j];
            CHECKF(fabs(a[tf] - a[th]) < 0x1p-8 * sqrt(norm), "greedy step %d: %d vs %d, gap %.3e",
                   t, tf, th, fabs(a[tf] - a[th]));
            fprintf(stderr, "fp16 greedy (%s): near-tie at step %d\n", gk_cpu_isa_name(isa), t);
            diverged = 1;
        }
    }
    if (!diverged) fprintf(stderr, "fp16 greedy (%s): 20 steps equal to fp32\n", gk_cpu_isa_name(isa));
    fprintf(stderr, "fp16 vs fp32 logits (%s): worst row relative error %.2e (bound %.2e)\n",
            gk_cpu_isa_name(isa), worst, 0x1p-8);
    CHECKF(worst < 0x1p-8, "fp16 logits: relative error %.3e", worst);
    free(lf);
    free(lh);
out:
    gk_gpt2_free(f);
    gk_gpt2_free(h);
}

static void test_f16_logits(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    for (int isa = 0; be && isa <= ISA_MAX; isa++)
        if (use_isa(be, isa)) f16_logits_on(be, isa);
    gk_backend_free(be);
}

/* Parameters set into an fp16 model read back rounded to fp16; the reference backend runs it. */
static void test_f16_params(void)
{
    gk_backend *ref = NULL;
    gk_err e = {0};
    CHECK_OK(gk_ref_create(&ref, &e), &e);
    gk_gpt2_config cfg = {1, 2, 16, 8, 40, 1, 0.0f};
    gk_gpt2 *m = NULL;
    CHECK_OK(gk_gpt2_create_ex(&m, &cfg, ref, 1, 8, GK_GPT2_F16, &e), &e);
    if (!m) goto out;
    const gk_param *p = gk_gpt2_param(m, 0); /* wte (40, 16) */
    float *x = malloc(sizeof(float) * p->numel), *y = malloc(sizeof(float) * p->numel);
    fill(x, p->numel, 4);
    x[0] = 1.0f + 0x1p-11f; /* a tie: to 1 */
    CHECK_OK(gk_gpt2_tensor_set(m, 0, GK_TENSOR_PARAM, x, &e), &e);
    CHECK_OK(gk_gpt2_tensor_get(m, 0, GK_TENSOR_PARAM, y, &e), &e);
    int bad = 0;
    for (size_t i = 0; i < p->numel; i++) bad += !same_bits(y[i], gk_f16_to_f32(gk_f32_to_f16(x[i])));
    CHECK(bad == 0 && y[0] == 1.0f);
    int tok[3] = {1, 2, 3};
    CHECK_OK(gk_gpt2_forward_at(m, tok, 1, 0, 3, &e), &e);
    free(x);
    free(y);
out:
    gk_gpt2_free(m);
    gk_backend_free(ref);
}

static void test_f16_refused(void)
{
    gk_err e = {0};
    gk_gpt2_config cfg = {1, 2, 16, 8, 40, 1, 0.0f};
    gk_gpt2_mem mem;
    CHECK(gk_gpt2_mem_estimate(&cfg, GK_BF16, 1, 8, GK_GPT2_F16, &mem, &e) == GK_EUSAGE);
    CHECK(strstr(e.msg, "cpu backend") != NULL);
    CHECK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_F16 | GK_GPT2_BF16, &mem, &e) == GK_EUSAGE);
    /* fp16 weight matrices take half the bytes of fp32 ones */
    gk_gpt2_mem m32, m16;
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_INFERENCE, &m32, &e), &e);
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_F16, &m16, &e), &e);
    CHECK(m16.params < m32.params && m16.params > m32.params / 2);
}

int main(void)
{
    RUN(test_f16_conversions);
    RUN(test_f16_ops);
    RUN(test_f16_logits);
    RUN(test_f16_params);
    RUN(test_f16_refused);
    return TEST_END();
}
