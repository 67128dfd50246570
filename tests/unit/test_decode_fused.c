/* test_decode_fused.c: the one-row decode step on gk_ops.matvec (cuda-emu's fused few-row
 * products: each layernorm inside the product after it, each residual add inside the one before
 * it; kernels/model/gpt2_infer.c) gives the logits of the same steps on the separate ops bit for
 * bit: bf16, batch 1 and 3, with and without biases, a cache of 128 (the split attention), the
 * steps recorded and replayed as sampling runs them, and unrecorded; matvec runs 4 times a layer
 * and once for the classifier. With gk_ops.mlp (the MLP's two products in one launch) matvec runs
 * twice a layer and mlp once, and the logits are the separate ops' within the rounding of the
 * second product's sum in another order; the op alone (GPT-2's 768 x 3072, 1 to 4 rows) gives
 * the two matvecs' outputs but for that rounding. ($GPT_TEST_CUDA, default cuda-emu.) */
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "infer_harness.h"

enum { STEPS = 5, P = 4 };

static const gk_ops *own;
static int matvecs, mlps;
static void counted_matvec(gk_backend *be, void *out, const void *x, const float *ln_w,
                           const float *ln_b, const void *W, int transW, const float *bias,
                           int gelu, const void *res, int M, int N, int K)
{
    matvecs++;
    own->matvec(be, out, x, ln_w, ln_b, W, transW, bias, gelu, res, M, N, K);
}

static void counted_mlp(gk_backend *be, void *out, const void *x, const float *ln_w,
                        const float *ln_b, const void *W1, const float *b1, const void *W2,
                        const float *b2, int M, int C, int Cm)
{
    mlps++;
    own->mlp(be, out, x, ln_w, ln_b, W1, b1, W2, b2, M, C, Cm);
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

static gk_backend *open_cuda(int graphs)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    const char *name = getenv("GPT_TEST_CUDA");
    gk_backend_opts o = {.device = name && *name ? name : "cuda-emu", .bf16 = 1,
                         .attention = GK_ATTN_AUTO, .cuda_no_graphs = !graphs};
    return gk_backend_open(&be, &o, &e) == 0 ? be : NULL;
}

/* with_mlp 0: the step on matvec alone, the same bits as the separate ops; 1: with mlp, within
 * the rounding its second sum's order brings (a bf16 rounding of an MLP's outputs, 2^-8 of them,
 * where the sums fall near a rounding boundary: the logits' normalized error below 2^-8). */
static void check(int graphs, int bias, int B, int with_mlp)
{
    gk_backend *be = open_cuda(graphs);
    if (!be) SKIP("no cuda backend (GPT_TEST_CUDA)");
    own = be->ops;
    CHECK(own->matvec != NULL && own->mlp != NULL);
    static gk_ops counted, plain;
    counted = *own, plain = *own;
    counted.matvec = counted_matvec;
    counted.mlp = with_mlp ? counted_mlp : NULL;
    plain.matvec = NULL;
    gk_gpt2_config cfg = {2, 4, 64, 128, 100, bias, 0.0f};
    matvecs = mlps = 0;
    float *fused = run(be, &counted, &cfg, B), *apart = run(be, &plain, &cfg, B);
    size_t n = (size_t)STEPS * B * 128; /* Vp: 100 padded to 128 */
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(fused + i, apart + i, sizeof *fused) != 0;
    double err = rel_err(fused, apart, n);
    if (with_mlp)
        CHECKF(err < 1.0 / 256, "graphs %d, bias %d, B %d: logits %g apart", graphs, bias, B, err);
    else
        CHECKF(differ == 0, "graphs %d, bias %d, B %d: %zu of %zu logits differ", graphs, bias, B,
               differ, n);
    int times = graphs ? 1 : STEPS; /* (recorded once) */
    int want = times * ((with_mlp ? 2 : 4) * cfg.n_layer + 1);
    CHECKF(matvecs == want, "graphs %d: %d matvecs, want %d", graphs, matvecs, want);
    CHECKF(mlps == (with_mlp ? times * cfg.n_layer : 0), "graphs %d: %d mlps", graphs, mlps);
    CHECK(gk_backend_status(be, NULL) == 0);
    free(fused), free(apart);
    gk_backend_free(be);
}

static void test_fused_step(void)
{
    for (int graphs = 1; graphs >= 0; graphs--)
        for (int bias = 1; bias >= 0; bias--) check(graphs, bias, bias ? 1 : 3, 0);
}

static void test_fused_mlp(void)
{
    check(1, 1, 1, 1);
    check(0, 0, 3, 1);
}

/* n bf16 in [-a, a) on the device (the host floats to *f, rounded). */
static void *dev_bf16(gk_backend *be, size_t n, float a, uint64_t seed, float **f)
{
    uint16_t *h = malloc(2 * n);
    *f = malloc(sizeof(float) * n);
    uint64_t key = gk_rng_key(seed, 0, 0, 5);
    for (size_t i = 0; i < n; i++) {
        h[i] = gk_f2bf16(a * (2.0f * gk_rng_uniform(key, i) - 1.0f));
        (*f)[i] = gk_bf16f(h[i]);
    }
    void *d = be->ops->alloc(be, 2 * n);
    be->ops->to_device(be, d, h, 2 * n);
    free(h);
    return d;
}

static float *dev_f32(gk_backend *be, size_t n, float a, float c, uint64_t seed)
{
    float *h = malloc(sizeof(float) * n);
    uint64_t key = gk_rng_key(seed, 0, 0, 6);
    for (size_t i = 0; i < n; i++) h[i] = c + a * (2.0f * gk_rng_uniform(key, i) - 1.0f);
    float *d = be->ops->alloc(be, sizeof(float) * n);
    be->ops->to_device(be, d, h, sizeof(float) * n);
    free(h);
    return d;
}

/* mlp against matvec, then matvec with the residual: each output within a rounding of the
 * hidden product's sum (one bf16 ulp of the product, 2^-8 relative) and of the add after it (one
 * of the output), most of them equal. */
static void test_mlp_op(void)
{
    gk_backend *be = open_cuda(0);
    if (!be) SKIP("no cuda backend (GPT_TEST_CUDA)");
    const gk_ops *op = be->ops;
    int C = 768, Cm = 3072;
    gk_err e = {0};
    CHECK_OK(op->reserve(be, 4, (size_t)Cm, 64, 4, &e), &e); /* the one launch's scratch */
    float *x, *w1, *w2;
    void *dx = dev_bf16(be, 4 * (size_t)C, 2.0f, 1, &x), *dw1 = dev_bf16(be, (size_t)C * Cm,
                                                                           0.05f, 2, &w1);
    void *dw2 = dev_bf16(be, (size_t)Cm * C, 0.03f, 3, &w2);
    float *lw = dev_f32(be, C, 0.2f, 1.0f, 4), *lb = dev_f32(be, C, 0.1f, 0, 5);
    float *b1 = dev_f32(be, Cm, 0.1f, 0, 6), *b2 = dev_f32(be, C, 0.1f, 0, 7);
    void *h = op->alloc(be, 2 * 4 * (size_t)Cm), *o1 = op->alloc(be, 2 * 4 * (size_t)C),
         *o2 = op->alloc(be, 2 * 4 * (size_t)C);
    uint16_t a[4 * 768], b[4 * 768];
    for (int M = 1; M <= 4; M++) {
        op->mlp(be, o1, dx, lw, lb, dw1, b1, dw2, b2, M, C, Cm);
        op->matvec(be, h, dx, lw, lb, dw1, 0, b1, 1, NULL, M, Cm, C);
        op->matvec(be, o2, h, NULL, NULL, dw2, 0, b2, 0, dx, M, C, Cm);
        op->to_host(be, a, o1, 2 * (size_t)M * C);
        op->to_host(be, b, o2, 2 * (size_t)M * C);
        int equal = 0, far = 0;
        for (int i = 0; i < M * C; i++) {
            float u = gk_bf16f(a[i]), v = gk_bf16f(b[i]), r = v - x[i];
            equal += a[i] == b[i];
            far += fabsf(u - v) > (fabsf(r) + fabsf(v)) / 256;
        }
        CHECKF(far == 0 && equal > M * C * 9 / 10, "M %d: %d equal, %d apart past a rounding", M,
               equal, far);
    }
    CHECK(gk_backend_status(be, NULL) == 0);
    void *ps[] = {dx, dw1, dw2, lw, lb, b1, b2, h, o1, o2};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) op->free(be, ps[i]);
    free(x), free(w1), free(w2);
    gk_backend_free(be);
}

int main(void)
{
    RUN(test_fused_step);
    RUN(test_fused_mlp);
    RUN(test_mlp_op);
    return TEST_END();
}
