/* test_infer_f16.c: fp16 weights (GK_GPT2_F16, the CPU backend's matmul_f16.c), on every
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
#include "infer_harness.h"
#include "kernels/bf16.h"

enum { ISA_MAX = 2 }; /* the highest path (gk_cpu_set_isa; fp16 takes AVX2's at 2) */

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
                    fprintf(stderr, "f32 %a: 0x%04x, common/io 0x%04x\n", f, gk_f2f16(f),
                            gk_f32_to_f16(f));
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
static void test_f16_ops(void) { check_ops16(GK_F16, gk_f32_to_f16, ISA_MAX, "fp16"); }

/* fp16 weights vs fp32 weights, same init: logits of a prompt and of single steps. Bound: RNE
 * rounding moves each weight by at most 2^-11 relative; a logit passes through 4 matrices per
 * layer and the lm_head (13 here), whose independent errors add in quadrature: sqrt(13) 2^-11 =
 * 1.8e-3 relative; twice that as margin: 2^-8. */
static void test_f16_logits(void) { check_narrow_logits(GK_GPT2_F16, 8, 0x1p-8, ISA_MAX, "fp16"); }

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
    for (size_t i = 0; i < p->numel; i++)
        bad += !same_bits(y[i], gk_f16_to_f32(gk_f32_to_f16(x[i])));
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
    CHECK(strstr(e.msg, "CPU backends only, cpu and ref") != NULL);
    CHECK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_F16 | GK_GPT2_BF16, &mem, &e) ==
          GK_EUSAGE);
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
