/* test_draw.c: drawing tokens on the device (backend.h's sample, cuda's sample.cu; the model's
 * gk_gpt2_draw and gk_gpt2_step_draw) against the host's sampler (kernels/infer/sampler.c):
 * - the op: rows of logits (fp32 and bf16 activations, ties, a NaN, -inf, 3 and 5003 and GPT-2's
 *   50257 logits) under greedy, temperature alone (the pick in id order), top-k (ties at the
 *   k-th), top-p, both, top-k 1; every step's tokens equal gk_sample's on the same logits, the
 *   step and position advance by one a call, and bad parameters are refused;
 * - gk_generate on a model: the tokens drawn on the device (the step and its draw recorded and
 *   replayed, and unrecorded) equal those drawn by the host's sampler from the same model's
 *   logits, batch 1 and 3, fp32 and bf16, through the window past block_size.
 * ($GPT_TEST_CUDA, default cuda-emu.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "kernels/infer/generate.h"
#include "kernels/infer/sampler.h"
#include "kernels/rng.h"
#include "test.h"

static gk_backend *open_cuda(int bf16, int graphs)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    const char *name = getenv("GPT_TEST_CUDA");
    gk_backend_opts o = {.device = name && *name ? name : "cuda-emu", .bf16 = bf16,
                         .attention = GK_ATTN_AUTO, .cuda_no_graphs = !graphs};
    if (gk_backend_open(&be, &o, &e) != 0) return NULL;
    return be;
}

/* B rows of n logits: multiples of 1/16 (bf16 holds them exactly; many ties), row 1 with a NaN
 * and a -inf; row 2 (when n > 1000) a sharp one, most of its weight on a few. */
static void make_logits(float *x, int B, int n, uint64_t seed)
{
    uint64_t key = gk_rng_key(seed, 0, 0, 11);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) {
            float u = gk_rng_uniform(key, (uint64_t)b * n + i);
            float v = roundf((u - 0.5f) * 96.0f) / 16.0f; /* -3 .. 3 */
            if (b == 2 && n > 1000) v = i % 97 == 5 ? 12.0f + v : v;
            x[(size_t)b * n + i] = v;
        }
    if (B > 1 && n > 2) x[(size_t)n + 1] = NAN, x[(size_t)n + 2] = -INFINITY;
}

/* The op on B rows of n for params p at steps 0..S-1 against gk_sample; returns mismatches. */
static int draws(gk_backend *be, const float *x, int B, int n, gk_params p, int S)
{
    const gk_ops *op = be->ops;
    size_t esz = be->act == GK_BF16 ? 2 : 4;
    void *host = malloc(esz * (size_t)B * n), *d = op->alloc(be, esz * (size_t)B * n);
    int *ids = op->alloc(be, sizeof(int) * B), *st = op->alloc(be, 2 * sizeof(int)), bad = 0;
    for (size_t i = 0; i < (size_t)B * n; i++)
        if (esz == 2) ((uint16_t *)host)[i] = gk_f2bf16(x[i]);
        else ((float *)host)[i] = x[i];
    op->to_device(be, d, host, esz * (size_t)B * n);
    int st0[2] = {40, 0}, got[8], st1[2];
    op->to_device(be, st, st0, sizeof st0);
    gk_sampler *s = NULL;
    gk_err e = {0};
    CHECK_OK(gk_sampler_create(&s, &p, n, &e), &e);
    for (int step = 0; s && step < S; step++) {
        op->sample(be, ids, d, (size_t)n, B, n, &p, st);
        op->to_host(be, got, ids, sizeof(int) * B);
        for (int b = 0; b < B; b++) {
            int want = gk_sample(s, x + (size_t)b * n, (uint32_t)b, (uint64_t)step);
            if (got[b] != want && bad++ < 3)
                fprintf(stderr, "n %d t %g k %d p %g row %d step %d: %d, host %d\n", n,
                        (double)p.temperature, p.top_k, (double)p.top_p, b, step, got[b], want);
        }
    }
    op->to_host(be, st1, st, sizeof st1);
    CHECKF(st1[0] == 40 + S && st1[1] == S, "st %d %d after %d draws", st1[0], st1[1], S);
    CHECK(gk_backend_status(be, NULL) == 0);
    gk_sampler_free(s);
    op->free(be, d), op->free(be, ids), op->free(be, st);
    free(host);
    return bad;
}

static void test_op(void)
{
    static const gk_params ps[] = {
        {0, 0, 1, 1},        {1.0f, 0, 1, 2},      {0.8f, 10, 1, 3},  {1.0f, 0, 0.9f, 4},
        {0.7f, 40, 0.95f, 5}, {1.5f, 1, 1, 6},      {2.0f, 0, 0.5f, 7}, {1.0f, 3000, 0.99f, 8},
    };
    static const int ns[] = {3, 5003};
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        gk_backend *be = open_cuda(bf16, 1);
        if (!be) SKIP("no cuda backend (GPT_TEST_CUDA)");
        CHECK(be->ops->sample != NULL);
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            float *x = malloc(sizeof(float) * 3 * ns[k]);
            make_logits(x, 3, ns[k], 10 + k);
            for (size_t j = 0; j < sizeof ps / sizeof *ps; j++)
                CHECKF(draws(be, x, 3, ns[k], ps[j], 6) == 0, "bf16 %d, n %d, params %zu", bf16,
                       ns[k], j);
            free(x);
        }
        int V = 50257; /* GPT-2's, one row, the chain the samples take */
        float *x = malloc(sizeof(float) * V);
        make_logits(x, 1, V, 30);
        CHECK(draws(be, x, 1, V, (gk_params){0.9f, 50, 0.95f, 9}, 3) == 0);
        CHECK(draws(be, x, 1, V, (gk_params){1.0f, 0, 1, 9}, 3) == 0);
        free(x);
        gk_params bad = {1.0f, 0, 1.5f, 1};
        be->ops->sample(be, NULL, NULL, 4, 1, 4, &bad, NULL);
        gk_err e = {0};
        CHECK(gk_backend_status(be, &e) == GK_EUSAGE && strstr(e.msg, "top-p 1.5"));
        gk_backend_free(be);
    }
}

/* gk_gen_hooks' token: appends to the ints *ctx points at. */
static int keep(void *ctx, int sample, int token, gk_err *err)
{
    (void)sample, (void)err;
    int **at = ctx;
    *(*at)++ = token;
    return 0;
}

/* gk_generate's tokens for prompt (P) on be, drawn by the device's op or (host) the host's. */
static int *generate(gk_backend *be, int host, int K, const gk_params *p, int n_new)
{
    gk_gpt2_config cfg = {2, 4, 64, 16, 100, 1, 0.0f};
    gk_err e = {0};
    gk_gpt2 *m = NULL;
    static gk_ops no_draw;
    const gk_ops *own = be->ops;
    no_draw = *own;
    no_draw.sample = NULL;
    if (host) be->ops = &no_draw;
    int prompt[] = {5, 17, 3, 99}, *out = calloc((size_t)K * n_new, sizeof(int)), *at = out;
    CHECK_OK(gk_gpt2_create_ex(&m, &cfg, be, K, cfg.block_size, GK_GPT2_INFERENCE, &e), &e);
    if (m) CHECK_OK(gk_gpt2_init(m, 5, &e), &e);
    if (m) CHECK(gk_gpt2_can_draw(m) == !host);
    gk_gen_opts o = {.n_new = n_new, .num_samples = K, .eot = -1, .n_vocab = 90, .sampling = *p};
    gk_gen_hooks h = {&at, NULL, keep};
    if (m) CHECK_OK(gk_generate(m, prompt, 4, &o, &h, NULL, &e), &e);
    gk_gpt2_free(m);
    be->ops = own;
    return out;
}

static void test_generate(void)
{
    static const gk_params ps[] = {{0, 0, 1, 1}, {1.0f, 0, 1, 2}, {0.8f, 20, 0.9f, 3}};
    /* bf16 with graphs: every chain; unrecorded, and fp32: one each */
    static const int runs[][3] = {{1, 1, 0}, {1, 1, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 2}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        int bf16 = runs[r][0], graphs = runs[r][1], j = runs[r][2];
        gk_backend *be = open_cuda(bf16, graphs);
        if (!be) SKIP("no cuda backend (GPT_TEST_CUDA)");
        int K = j == 1 ? 3 : 1, n_new = 14; /* 4 + 14 > block_size 16: the window */
        int *dev = generate(be, 0, K, &ps[j], n_new), *hst = generate(be, 1, K, &ps[j], n_new);
        CHECKF(!memcmp(dev, hst, sizeof(int) * K * n_new),
               "bf16 %d graphs %d params %d: the device's tokens differ", bf16, graphs, j);
        free(dev), free(hst);
        gk_backend_free(be);
    }
}

int main(void)
{
    RUN(test_op);
    RUN(test_generate);
    return TEST_END();
}
