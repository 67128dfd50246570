/* test_decode_fused.c: the one-row decode step on gk_ops.matvec (cuda-emu's fused few-row
 * products: each layernorm inside the product after it, each residual add inside the one before
 * it; kernels/model/gpt2_infer.c) gives the logits of the same steps on the separate ops bit for
 * bit: bf16, batch 1 and 3, with and without biases, a cache of 128 (the split attention), the
 * steps recorded and replayed as sampling runs them, and unrecorded; matvec runs 4 times a layer
 * and once for the classifier. ($GPT_TEST_CUDA, default cuda-emu.) */
#include <stdlib.h>
#include <string.h>

#include "infer_harness.h"

enum { STEPS = 5, P = 4 };

static const gk_ops *own;
static int matvecs;
static void counted_matvec(gk_backend *be, void *out, const void *x, const float *ln_w,
                           const float *ln_b, const void *W, int transW, const float *bias,
                           int gelu, const void *res, int M, int N, int K)
{
    matvecs++;
    own->matvec(be, out, x, ln_w, ln_b, W, transW, bias, gelu, res, M, N, K);
}

/* The logits (STEPS, B, Vp) of a prompt of P tokens and STEPS one-row steps, on ops. */
static float *run(gk_backend *be, const gk_ops *ops, const gk_gpt2_config *cfg, int B)
{
    gk_err e = {0};
    gk_gpt2 *m = NULL;
    be->ops = ops;
    CHECK_OK(gk_gpt2_create(&m, cfg, be, B, cfg->block_size, &e), &e);
    if (m) CHECK_OK(gk_gpt2_init(m, 7, &e), &e);
    int Vp = m ? gk_gpt2_padded_vocab(m) : 0, in[4 * P];
    float *logits = calloc((size_t)STEPS * B * (Vp ? Vp : 1), sizeof(float));
    uint64_t key = gk_rng_key(3, 0, 0, 1);
    for (int i = 0; i < B * P; i++) in[i] = (int)(gk_rng_uniform(key, i) * cfg->vocab_size);
    if (m) CHECK_OK(gk_gpt2_forward_at(m, in, B, 0, P, &e), &e);
    for (int s = 0; m && s < STEPS; s++) {
        for (int b = 0; b < B; b++) in[b] = (int)(gk_rng_uniform(key, 100 + s * 4 + b) * 100);
        CHECK_OK(gk_gpt2_forward_at(m, in, B, P + s, 1, &e), &e);
        gk_gpt2_logits_host(m, 0, B, Vp, logits + (size_t)s * B * Vp, NULL);
    }
    gk_gpt2_free(m);
    be->ops = own;
    return logits;
}

static void check(int graphs, int bias, int B)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    const char *name = getenv("GPT_TEST_CUDA");
    gk_backend_opts o = {.device = name && *name ? name : "cuda-emu", .bf16 = 1,
                         .attention = GK_ATTN_AUTO, .cuda_no_graphs = !graphs};
    if (gk_backend_open(&be, &o, &e) != 0) SKIP(e.msg);
    own = be->ops;
    CHECK(own->matvec != NULL);
    static gk_ops counted, plain;
    counted = *own, plain = *own;
    counted.matvec = counted_matvec;
    plain.matvec = NULL;
    gk_gpt2_config cfg = {2, 4, 64, 128, 100, bias, 0.0f};
    matvecs = 0;
    float *fused = run(be, &counted, &cfg, B), *apart = run(be, &plain, &cfg, B);
    size_t n = (size_t)STEPS * B * 128; /* Vp: 100 padded to 128 */
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(fused + i, apart + i, sizeof *fused) != 0;
    CHECKF(differ == 0, "graphs %d, bias %d, B %d: %zu of %zu logits differ", graphs, bias, B,
           differ, n);
    int want = (graphs ? 1 : STEPS) * (4 * cfg.n_layer + 1); /* (recorded once) */
    CHECKF(matvecs == want, "graphs %d: %d matvecs, want %d", graphs, matvecs, want);
    CHECK(gk_backend_status(be, NULL) == 0);
    free(fused), free(apart);
    gk_backend_free(be);
}

static void test_fused_step(void)
{
    for (int graphs = 1; graphs >= 0; graphs--)
        for (int bias = 1; bias >= 0; bias--) check(graphs, bias, bias ? 1 : 3);
}

int main(void)
{
    RUN(test_fused_step);
    return TEST_END();
}
