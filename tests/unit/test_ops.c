/* test_ops.c: the op tests on every backend (and on each CUDA attention path: cuda-emu:fa2 and the
 * like) against the reference backend (kernels/ref/ref.c), on the driver and the one tolerance
 * model of ops_harness.h (its header comment states both). One file per op family in
 * tests/unit/ops/, included here to make one binary (each binary adds link time): matmul,
 * elementwise, layernorm, encoder, classifier, attention, optimizer, cast. The fused and
 * recompute ops are in test_ops_fused.c (the same driver, a binary of its own); the attention
 * paths and the fused gradients in test_ops_paths (this file with OPS_PATHS). */
#include "ops_harness.h"

static const int CS[] = {1, 24, 100}; /* columns: not multiples of tiles */

/* n random ints in [lo, hi) (token ids, targets). */
static int *rand_ints(size_t n, int lo, int hi)
{
    int *x = malloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) x[i] = lo + (int)(gk_rng_uniform(seed, i) * (float)(hi - lo));
    seed++;
    return x;
}

#include "ops/attention.c"
#include "ops/cast.c"
#include "ops/classifier.c"
#include "ops/elementwise.c"
#include "ops/encoder.c"
#include "ops/layernorm.c"
#include "ops/matmul.c"
#include "ops/optimizer.c"

/* ---- a caller that reserved nothing ---- */

/* c on the device and on a fresh backend of its kind whose scratch nobody reserved: the same bits
 * (the CPU grows its scratch and runs its own code; it once ran the reference's, whose bits
 * differ, a speed cliff nothing said). */
static void unreserved(tcase *c)
{
    gk_backend_opts o = {.device = dev_base};
    gk_backend *u = NULL;
    gk_err e = {0};
    float **h = host_bufs(c, NULL, 0), **D = out_bufs(c), **U = out_bufs(c);
    int ok = gk_backend_open(&u, &o, &e) == 0 && run_on(dev, 0, c, h, D, &e) == 0 &&
             run_on(u, 0, c, h, U, &e) == 0;
    CHECKF(ok, "%s unreserved: %s", c->what, e.msg);
    for (int i = 0; ok && i < c->nb; i++)
        if (c->b[i].role == R_OUT)
            CHECKF(memcmp(D[i], U[i], sizeof(float) * c->b[i].n) == 0,
                   "%s: buffer %d: not the same bits without a reserve", c->what, i);
    gk_backend_free(u);
    free_bufs(h), free_bufs(D), free_bufs(U);
    for (int i = 0; i < c->nb; i++) free(c->ints[i]), c->ints[i] = NULL;
}

/* gemm, B (N,K) of 32-element Q8_0 blocks in ints (buffer 1): C (M,N) = A (M,K) @ B^T */
static void run_gemm_q8(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    int M = c->ip[0], N = c->ip[1], K = c->ip[2];
    be->ops->gemm(be, 0, 1, M, N, K, 1.0f, p[0], GK_F32, K, p[1], GK_Q8, K, 0.0f, p[2], GK_F32, N,
                  NULL, NULL);
}

/* The ops with scratch (bias_bwd, layernorm_bwd, attention_fwd, _bwd and _fwd_at, gemm with
 * 16-bit and Q8_0 weights past the few-row paths), each once beside the reserved device: the CPU
 * backends' (the others reserve device memory that their ops cannot grow). */
static void test_unreserved(void)
{
    if (dev->props.kind != GK_KIND_CPU) return;
    int N = 65, C = 100;
    tcase *c = new_case(run_bias_bwd, N, "bias_bwd N%d C%d", N, C);
    add(c, B_ACT, R_IN, (size_t)N * C, 0.37f, 0.1f); /* full mantissas: sums that round */
    add(c, B_F32, R_OUT, (size_t)C, 1, 0);
    c->ip[0] = N, c->ip[1] = C;
    unreserved(c);

    c = new_case(run_ln_bwd, 0, "layernorm_bwd N%d C%d", N, C);
    add(c, B_ACT, R_OUT, (size_t)N * C, 1, 0);
    add(c, B_F32, R_OUT, (size_t)C, 1, 0);
    add(c, B_F32, R_OUT, (size_t)C, 1, 0);
    add(c, B_ACT, R_IN, (size_t)N * C, 1, 0);
    add(c, B_ACT, R_IN, (size_t)N * C, 1, 0.5f);
    add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
    add(c, B_F32, R_TMP, (size_t)N, 0, 0);
    add(c, B_F32, R_TMP, (size_t)N, 0, 0);
    add(c, B_ACT, R_TMP, (size_t)N * C, 0, 0);
    c->ip[0] = N, c->ip[1] = C;
    unreserved(c);

    int B = 2, T = 65, NH = 2, hs = 32;
    size_t n = (size_t)B * T * NH * hs;
    c = new_case(run_attn_bwd, 0, "attention_fwd, attention_bwd B%d T%d NH%d hs%d", B, T, NH, hs);
    add(c, B_ACT, R_OUT, 3 * n, 1, 0);
    add(c, B_ACT, R_IN, n, 1, 0);
    add(c, B_ACT, R_IN, 3 * n, 2, 0);
    add(c, B_ACT, R_OUT, n, 0, 0);
    add(c, B_F32, R_OUT, (size_t)B * NH * T, 0, 0);
    c->ip[0] = B, c->ip[1] = T, c->ip[2] = NH * hs, c->ip[3] = NH, c->fp[0] = 0.1f;
    unreserved(c);

    c = new_case(run_attn_at, 0, "attention_fwd_at B%d Tc%d NH%d hs%d t0 33 n 5", B, 70, 3, 16);
    add(c, B_ACT, R_OUT, (size_t)B * 5 * 48, 1, 0);
    add(c, B_ACT, R_OUT, (size_t)B * 70 * 3 * 48, 2, 0);
    c->ints[add(c, B_INT, R_IN, 1, 0, 0)] = rand_ints(1, 33, 34);
    c->ip[0] = B, c->ip[1] = 70, c->ip[2] = 48, c->ip[3] = 3, c->ip[5] = 5;
    unreserved(c);

    static const struct { gk_elt wt; int tb; } w16[] = {{GK_BF16, 0}, {GK_BF16, 1}, {GK_F16, 1}};
    int M = 20, Nn = 300, K = 72;
    for (int k = 0; k < 3; k++) {
        c = new_case(run_gemm, 0, "gemm N%c M%d N%d K%d %s weights", w16[k].tb ? 'T' : 'N', M, Nn,
                     K, w16[k].wt == GK_BF16 ? "bf16" : "f16");
        c->wt = w16[k].wt;
        add(c, B_ACT, R_IN, (size_t)M * K, 1, 0);
        add(c, B_WT, R_IN, (size_t)Nn * K, 1, 0);
        add(c, B_ACT, R_OUT, (size_t)M * Nn, 1, 0);
        add(c, B_F32, R_NONE, 0, 0, 0);
        add(c, B_F32, R_NONE, 0, 0, 0);
        int v[] = {0, w16[k].tb, M, Nn, K, K, w16[k].tb ? K : Nn, Nn};
        memcpy(c->ip, v, sizeof v);
        c->fp[0] = 1.0f;
        unreserved(c);
    }

    K = 64;
    size_t qbytes = (size_t)Nn * K / GK_Q8_BLOCK * GK_Q8_BLOCK_BYTES;
    c = new_case(run_gemm_q8, 0, "gemm NT M%d N%d K%d q8 weights", M, Nn, K);
    add(c, B_ACT, R_IN, (size_t)M * K, 1, 0);
    int iq = add(c, B_INT, R_IN, qbytes / sizeof(int), 0, 0);
    add(c, B_ACT, R_OUT, (size_t)M * Nn, 1, 0);
    int *q = rand_ints(qbytes / sizeof(int), 0, 1); /* zeros, then the blocks */
    for (size_t b = 0; b < qbytes / GK_Q8_BLOCK_BYTES; b++) {
        uint8_t *blk = (uint8_t *)q + b * GK_Q8_BLOCK_BYTES;
        blk[0] = 0x00, blk[1] = 0x24; /* the scale: fp16 2^-6, little-endian */
        for (int i = 0; i < GK_Q8_BLOCK; i++)
            blk[2 + i] = (uint8_t)(int8_t)((int)(b * 37 + i * 11) % 255 - 127);
    }
    c->ints[iq] = q;
    c->ip[0] = M, c->ip[1] = Nn, c->ip[2] = K;
    unreserved(c);
}

int main(int argc, char **argv)
{
    static const ops_test tests[] = {
        OPS_TEST(test_cast),           OPS_TEST(test_gemm),           OPS_TEST(test_elementwise),
        OPS_TEST(test_layernorm),      OPS_TEST(test_encoder),        OPS_TEST(test_xent),
        OPS_TEST_ATTN(test_attention), OPS_TEST(test_attention_at),   OPS_TEST(test_optimizer),
        OPS_TEST(test_multi),          OPS_TEST_FUSED(test_gemm_bwd), OPS_TEST(test_unreserved),
    };
    return ops_main(argc, argv, tests, (int)(sizeof tests / sizeof *tests));
}
