/* test_infer_q8.c: int8 weights (GK_GPT2_Q8, llama.cpp's Q8_0; the CPU backend's matmul_q8.c), on
 * every instruction-set path this machine runs (gk_cpu_set_isa; one it cannot run is named on
 * stderr, not checked):
 * - the block quantizer: a hand-checked block, requantizing d * q gives the same bytes back;
 *   the activations' quantizer rounds as roundf (halves away from zero; values next to them);
 * - gemm with Q8_0 weights, few rows (activations quantized, int8 dot products): against a
 *   scalar version of the same quantized products in double (normalized error below 1e-6), and
 *   against the reference backend (exact activations) within the worst case of the activations'
 *   rounding, sum over blocks of d_a / 2 * sum |w|; more rows (fp32 panels): the reference
 *   within 1e-6; the embedding from a Q8_0 wte equals the reference's;
 * - a model with int8 weights: parameters read back as quantized (the Conv1D matrices kept
 *   transposed), a prompt's logits equal the reference backend's, logits within the bound
 *   derived in test_q8_logits of fp32's, greedy decoding the same unless two logits are within it;
 * - refused with n_embd not a multiple of 32 and with bf16 activations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer_harness.h"
#include "kernels/bf16.h"
#include "kernels/cpu/matmul.h"

enum { ISA_MAX = 2 }; /* the highest path matmul_q8.c has (gk_cpu_set_isa) */

static void quantize(uint8_t *q, const float *x, size_t n)
{
    for (size_t b = 0; b < n / GK_Q8_BLOCK; b++)
        gk_q8_quantize_block(x + b * GK_Q8_BLOCK, q + b * GK_Q8_BLOCK_BYTES);
}

static void test_q8_block(void)
{
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) / 8.0f; /* -2 .. 1.875 */
    uint8_t q[34], r[34];
    gk_q8_quantize_block(x, q);
    uint16_t d;
    memcpy(&d, q, 2);
    CHECK(d == gk_f2f16(2.0f / 127.0f));
    /* 1.875*63.5 = 119.06 */
    CHECK((int8_t)q[2] == -127 && (int8_t)q[2 + 16] == 0 && (int8_t)q[2 + 31] == 119);
    CHECK((int8_t)q[2 + 17] == 8); /* 0.125 * 63.5 = 7.94 */
    float y[32];
    for (int i = 0; i < 32; i++) y[i] = gk_q8_get(q, (size_t)i);
    gk_q8_quantize_block(y, r);
    CHECK(memcmp(q, r, 34) == 0);
    memset(x, 0, sizeof x);
    gk_q8_quantize_block(x, q);
    CHECK(gk_q8_get(q, 5) == 0.0f);
}

/* gk_cpu_q8_quantize_act rounds each v * id as roundf: halves away from zero, and the floats next
 * to halves (scale 1: amax 127), then a block of other values at another scale */
static void test_q8_act_round(void)
{
    float x[64] = {127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f,
                   nextafterf(0.5f, 0.0f), -nextafterf(0.5f, 0.0f), nextafterf(0.5f, 1.0f),
                   nextafterf(1.5f, 0.0f), -nextafterf(2.5f, 0.0f), nextafterf(-2.5f, -3.0f),
                   0.0f, -0.0f, 3.0f, -7.25f, 99.75f};
    for (int i = 32; i < 64; i++) x[i] = (float)((i * 37) % 61 - 30) / 7.0f;
    gk_cpu_q8_act qa[2];
    gk_cpu_q8_quantize_act(qa, x, 64);
    CHECK(qa[0].d == 1.0f);
    int bad = 0;
    for (int b = 0; b < 2; b++) {
        float id = 1.0f / qa[b].d;
        for (int i = 0; i < 32; i++) bad += qa[b].q[i] != (int8_t)roundf(x[b * 32 + i] * id);
    }
    CHECKF(bad == 0, "%d activations rounded otherwise than roundf", bad);
    CHECK(qa[0].q[1] == 1 && qa[0].q[2] == -1 && qa[0].q[5] == 3 && qa[0].q[8] == -127);
    CHECK(qa[0].q[9] == 0 && qa[0].q[10] == 0 && qa[0].q[11] == 1 && qa[0].q[12] == 1);
}

/* C (M,N) = alpha * A @ B^T + beta C0 with A quantized as gk_cpu_q8_quantize_act does, in double */
static void ref_quantized(double *C, const float *A, const uint8_t *B, int M, int N, int K,
                          float alpha, float beta, const float *C0)
{
    int kb_n = K / 32;
    gk_cpu_q8_act *qa = malloc(sizeof *qa * kb_n);
    for (int r = 0; r < M; r++) {
        gk_cpu_q8_quantize_act(qa, A + (size_t)r * K, K);
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int b = 0; b < kb_n; b++) {
                const uint8_t *blk = B + ((size_t)j * kb_n + b) * GK_Q8_BLOCK_BYTES;
                long acc = 0;
                for (int i = 0; i < 32; i++) acc += (long)(int8_t)blk[2 + i] * qa[b].q[i];
                uint16_t d;
                memcpy(&d, blk, 2);
                s += (double)gk_f16f(d) * qa[b].d * (double)acc;
            }
            C[(size_t)r * N + j] = alpha * s + beta * C0[(size_t)r * N + j];
        }
    }
    free(qa);
}

static void test_q8_ops(void)
{
    gk_backend *be = NULL, *ref = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    CHECK_OK(gk_ref_create(&ref, &e), &e);
    if (!be || !ref) goto out;
    int K = 96, N = 302, Mmax = 20; /* N % 4 != 0: the last group of rows is short */
    CHECK_OK(be->ops->reserve(be, Mmax, N, 16, 16, &e), &e);
    float *A = malloc(sizeof(float) * Mmax * K), *W = malloc(sizeof(float) * K * N);
    uint8_t *Q = malloc((size_t)K * N / 32 * 34);
    float *c0 = malloc(sizeof(float) * Mmax * N), *c1 = malloc(sizeof(float) * Mmax * N);
    float *c2 = malloc(sizeof(float) * Mmax * N);
    double *cq = malloc(sizeof(double) * Mmax * N);
    fill(A, (size_t)Mmax * K, 1);
    fill(W, (size_t)K * N, 2);
    quantize(Q, W, (size_t)K * N); /* W as (N, K) rows */
    fill(c0, (size_t)Mmax * N, 5);
    int Ms[] = {1, 3, 8, 20};
    for (int isa = 0; isa <= ISA_MAX; isa++) {
        if (!use_isa(be, isa)) continue;
        for (int mi = 0; mi < 4; mi++)
            for (int beta = 0; beta < 2; beta++) {
                int M = Ms[mi];
                memcpy(c1, c0, sizeof(float) * Mmax * N);
                memcpy(c2, c0, sizeof(float) * Mmax * N);
                be->ops->gemm(be, 0, 1, M, N, K, 0.5f, A, GK_F32, K, Q, GK_Q8, K, (float)beta, c1,
                              GK_F32, N, NULL, NULL);
                ref->ops->gemm(ref, 0, 1, M, N, K, 0.5f, A, GK_F32, K, Q, GK_Q8, K, (float)beta,
                               c2, GK_F32, N, NULL, NULL);
                const char *p = gk_cpu_isa_name(isa);
                if (M > 8) { /* panels: exact activations, as the reference */
                    CHECKF(rel_err(c1, c2, (size_t)M * N) < 1e-6, "q8 %s M=%d beta=%d", p, M, beta);
                    continue;
                }
                ref_quantized(cq, A, Q, M, N, K, 0.5f, (float)beta, c0);
                float *cqf = malloc(sizeof(float) * M * N);
                for (int i = 0; i < M * N; i++) cqf[i] = (float)cq[i];
                double d = rel_err(c1, cqf, (size_t)M * N);
                CHECKF(d < 1e-6, "q8 %s M=%d beta=%d vs quantized products: %.3e", p, M, beta, d);
                free(cqf);
                int bad = 0; /* against exact activations: the worst case of their rounding */
                for (int r = 0; r < M; r++) {
                    gk_cpu_q8_act qa[3];
                    gk_cpu_q8_quantize_act(qa, A + (size_t)r * K, K);
                    for (int j = 0; j < N; j++) {
                        double bound = 0;
                        for (int b = 0; b < 3; b++)
                            for (int i = 0; i < 32; i++)
                                bound +=
                                    qa[b].d / 2 * fabs(gk_q8_get(Q, (size_t)j * K + b * 32 + i));
                        double diff = fabs((double)c1[r * N + j] - c2[r * N + j]);
                        bad += diff > 0.5 * bound + 1e-5;
                    }
                }
                CHECKF(bad == 0, "q8 %s M=%d: %d outputs past the rounding bound", p, M, bad);
            }
        int tokens[6] = {0, 9, 3, 3, 7, 1};
        float wpe[3 * 32];
        fill(wpe, 96, 8);
        be->ops->encoder_fwd(be, c1, tokens, Q, GK_Q8, wpe, NULL, 2, 3, 32, 0.0f, 0);
        ref->ops->encoder_fwd(ref, c2, tokens, Q, GK_Q8, wpe, NULL, 2, 3, 32, 0.0f, 0);
        CHECKF(rel_err(c1, c2, 192) < 1e-7, "encoder_q8 %s", gk_cpu_isa_name(isa));
        fprintf(stderr, "q8 ops: path %s checked\n", gk_cpu_isa_name(isa));
    }
    CHECK_OK(gk_backend_status(be, &e), &e);
    /* B not transposed is not a Q8 layout */
    be->ops->gemm(be, 0, 0, 1, N, K, 1.0f, A, GK_F32, K, Q, GK_Q8, N, 0.0f, c1, GK_F32, N, NULL,
                  NULL);
    CHECK(gk_backend_status(be, &e) == GK_EUSAGE);
    free(A);
    free(W);
    free(Q);
    free(c0);
    free(c1);
    free(c2);
    free(cq);
out:
    gk_backend_free(be);
    gk_backend_free(ref);
}

/* An int8 model's parameters read back as the quantized values in the table's layout; a prompt
 * long enough for the panel path gives the reference backend's logits (the same weights,
 * activations exact on both). */
static void test_q8_model_params(void)
{
    gk_backend *be = NULL, *ref = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    CHECK_OK(gk_ref_create(&ref, &e), &e);
    gk_gpt2_config cfg = {2, 2, 32, 16, 50, 1, 0.0f};
    gk_gpt2 *m = NULL, *r = NULL;
    CHECK_OK(gk_gpt2_create_ex(&m, &cfg, be, 1, 16, GK_GPT2_Q8, &e), &e);
    CHECK_OK(gk_gpt2_create_ex(&r, &cfg, ref, 1, 16, GK_GPT2_Q8, &e), &e);
    if (!m || !r) goto out;
    CHECK_OK(gk_gpt2_init(m, 5, &e), &e);
    CHECK_OK(gk_gpt2_init(r, 5, &e), &e);
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        if (!p->copy) continue;
        /* the Conv1D matrix [in, out] is kept [out, in]: set a known one, read it back */
        size_t n = p->numel, in = (size_t)p->shape[0], out = (size_t)p->shape[1];
        int tr = strcmp(p->name, "transformer.wte.weight") != 0;
        float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n),
              *t = malloc(sizeof(float) * n);
        uint8_t *q = malloc(n / 32 * 34);
        fill(x, n, 40 + (uint64_t)i);
        for (size_t a = 0; a < in; a++)
            for (size_t b = 0; b < out; b++) t[tr ? b * in + a : a * out + b] = x[a * out + b];
        quantize(q, t, n);
        CHECK_OK(gk_gpt2_tensor_set(m, i, GK_TENSOR_PARAM, x, &e), &e);
        CHECK_OK(gk_gpt2_tensor_set(r, i, GK_TENSOR_PARAM, x, &e), &e);
        CHECK_OK(gk_gpt2_tensor_get(m, i, GK_TENSOR_PARAM, y, &e), &e);
        int bad = 0;
        for (size_t a = 0; a < in; a++)
            for (size_t b = 0; b < out; b++)
                bad += y[a * out + b] != gk_q8_get(q, tr ? b * in + a : a * out + b);
        CHECKF(bad == 0, "%s: %d values", p->name, bad);
        CHECK(memcmp(p->copy, q, n / 32 * 34) == 0);
        free(x);
        free(y);
        free(t);
        free(q);
    }
    int tok[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Vp = gk_gpt2_padded_vocab(m);
    float *a = malloc(sizeof(float) * 12 * Vp), *b = malloc(sizeof(float) * 12 * Vp);
    CHECK_OK(gk_gpt2_forward_at(m, tok, 1, 0, 12, &e), &e);
    CHECK_OK(gk_gpt2_forward_at(r, tok, 1, 0, 12, &e), &e);
    gk_gpt2_logits_host(m, 0, 12, Vp, a, NULL);
    gk_gpt2_logits_host(r, 0, 12, Vp, b, NULL);
    CHECKF(rel_err(a, b, (size_t)12 * Vp) < 1e-5, "cpu vs ref: %.3e",
           rel_err(a, b, (size_t)12 * Vp));
    free(a);
    free(b);
out:
    gk_gpt2_free(m);
    gk_gpt2_free(r);
    gk_backend_free(be);
    gk_backend_free(ref);
}

/* int8 weights vs fp32 weights, same init: a prompt (panels: weights rounded, activations exact)
 * and single steps (both rounded). Bound: a block's rounding error is at most d/2 = max|x|/254
 * per element, uniform, so its rms is max|x| / (254 sqrt 3); GPT-2's init is Gaussian, whose
 * maximum over a block of 32 is within 3.5 sigma (p > 0.999 per block), so the relative rms
 * error of each quantized operand is below 3.5 / (254 sqrt 3) = 0.8%. A decoding matmul has two
 * (weights, activations): 1.1%; a logit passes through 13 such matmuls (4 per layer and the
 * lm_head, 3 layers), whose independent errors add in quadrature: sqrt(13) 1.1% = 4.1%; with
 * margin, 2^-4 (6.25%). */
static void test_q8_logits(void) { check_narrow_logits(GK_GPT2_Q8, 12, 0x1p-4, ISA_MAX, "int8"); }

static void test_q8_refused(void)
{
    gk_err e = {0};
    gk_gpt2_config cfg = {1, 2, 48, 8, 40, 1, 0.0f};
    gk_gpt2_mem mem;
    CHECK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_Q8, &mem, &e) == GK_EUSAGE);
    CHECK(strstr(e.msg, "n_embd 48") != NULL);
    cfg.n_embd = 64;
    CHECK(gk_gpt2_mem_estimate(&cfg, GK_BF16, 1, 8, GK_GPT2_Q8, &mem, &e) == GK_EUSAGE);
    CHECK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_Q8 | GK_GPT2_F16, &mem, &e) ==
          GK_EUSAGE);
    gk_gpt2_mem m32, m8;
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_INFERENCE, &m32, &e), &e);
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 8, GK_GPT2_Q8, &m8, &e), &e);
    CHECK(m8.params < m32.params && m8.params > m32.params / 4);
}

int main(void)
{
    RUN(test_q8_block);
    RUN(test_q8_act_round);
    RUN(test_q8_ops);
    RUN(test_q8_model_params);
    RUN(test_q8_logits);
    RUN(test_q8_refused);
    return TEST_END();
}
