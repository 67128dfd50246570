/* test_ops.c: the op tests on every backend against the reference backend (kernels/cpu/ref.c), on
 * the driver and the one tolerance model of ops_harness.h (its header comment states both): gemm,
 * the row-wise and element-wise ops, the embedding, softmax cross-entropy, attention, the
 * optimizer, the multi-tensor ops and the cast. The fused and recompute ops are in
 * test_ops_fused.c (the same driver, a binary of its own). */
#include "ops_harness.h"

static const int CS[] = {1, 24, 100}; /* columns: not multiples of tiles */

/* ---- gemm ---- */

static void run_gemm(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    const int *i = c->ip;
    be->ops->gemm(be, i[0], i[1], i[2], i[3], i[4], c->fp[0], p[0], t[0], i[5], p[1], t[1], i[6],
                  c->fp[1], p[2], t[2], i[7], p[3], p[4]);
}

/* combo: 0 all fp32; 1 (act, fp32 weights, act); 2 (act, bf16 weights, act); 3 (act, act, fp32)
 * accumulating (alpha 1, beta 1: the weight gradients). epi: 0 none, 1 bias, 2 bias + GELU, 3 GELU. */
static void gemm_case(int ta, int tb, int M, int N, int K, int pad, int combo, int epi)
{
    static const char *names[] = {"f32,f32,f32", "act,f32,act", "act,bf16,act", "act,act,f32"};
    static const char *epis[] = {"", " bias", " bias+gelu", " gelu"};
    int bias = epi == 1 || epi == 2, gelu = epi >= 2;
    tcase *c = new_case(run_gemm, K + 4 + 8 * gelu, "gemm %c%c M%d N%d K%d pad%d %s%s", ta ? 'T' : 'N',
                        tb ? 'T' : 'N', M, N, K, pad, names[combo], epis[epi]);
    bclass ca = combo == 0 ? B_F32 : B_ACT, cb = combo == 0 ? B_F32 : combo == 3 ? B_ACT : B_WT;
    bclass cc = combo == 0 || combo == 3 ? B_F32 : B_ACT;
    c->wt = combo == 2 ? GK_BF16 : GK_F32;
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    add(c, ca, R_IN, (size_t)(ta ? K : M) * lda, 1, 0);
    add(c, cb, R_IN, (size_t)(tb ? N : K) * ldb, 1, 0);
    int ic = add(c, cc, R_OUT, (size_t)M * ldc, 1, 0);
    add(c, B_F32, bias ? R_IN : R_NONE, (size_t)N, 1, 0);
    int ip = add(c, cc, gelu ? R_OUT : R_NONE, (size_t)M * ldc, 1, 0);
    int out16 = cc == B_ACT && bf16_run();
    c->b[ic].stages = out16 * (1 + gelu); /* pre-activation and output */
    c->b[ip].stages = out16;
    int v[] = {ta, tb, M, N, K, lda, ldb, ldc};
    memcpy(c->ip, v, sizeof v);
    c->fp[0] = combo == 3 ? 1.0f : 0.5f;
    c->fp[1] = gelu ? 0.0f : combo == 3 ? 1.0f : 0.25f;
    check(c);
}

static void test_gemm(void)
{
    /* M N K pad; the last three are the few-row products of decoding (cuda: cuda_gemv.cu's
     * kernels, for bf16 A, B and C: N, K and the leading dimensions multiples of 8, a partial
     * column tile, K past several of a block's row steps) */
    static const int shapes[][4] = {{7, 24, 65, 0}, {65, 7, 64, 0}, {1, 100, 24, 3}, {24, 1, 7, 1},
                                    {1, 40, 136, 0}, {3, 96, 520, 8}, {4, 264, 64, 0}};
    for (int s = 0; s < (int)(sizeof shapes / sizeof *shapes); s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int combo = 0; combo < 4; combo++)
                    /* bf16 weights are only ever B (the CPU backend refuses them with A transposed) */
                    for (int epi = 0; epi < (combo == 3 ? 1 : 4) && !(combo == 2 && ta); epi++)
                        gemm_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], combo, epi);
}

/* ---- row-wise and element-wise ops ---- */

static void run_bias_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->bias_bwd(be, p[1], p[0], c->ip[0], c->ip[1]);
}
static void run_gelu_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->gelu_bwd(be, p[0], p[1], p[2], c->ip[0], c->ip[1]);
}
static void run_dropout_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->dropout_bwd(be, p[0], p[1], (size_t)c->ip[0] * c->ip[1], c->fp[0], NKEY);
}
static void run_ln_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->layernorm_fwd(be, p[0], p[1], p[2], p[3], p[4], p[5], c->ip[0], c->ip[1]);
}
/* the forward of this backend first: the backward's mean and rstd are its own */
static void run_ln_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    int N = c->ip[0], C = c->ip[1];
    be->ops->layernorm_fwd(be, p[8], p[6], p[7], p[4], p[5], NULL, N, C);
    be->ops->layernorm_bwd(be, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], N, C);
}

static void rowwise_cases(int N, int C)
{
    size_t n = (size_t)N * C;
    int b16 = bf16_run();
    tcase *c = new_case(run_bias_bwd, N, "bias_bwd N%d C%d", N, C);
    add(c, B_ACT, R_IN, n, 1, 0);
    add(c, B_F32, R_OUT, (size_t)C, 1, 0);
    c->ip[0] = N, c->ip[1] = C;
    check(c);

    c = new_case(run_gelu_bwd, 8, "gelu_bwd N%d C%d", N, C);
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16;
    add(c, B_ACT, R_IN, n, 3, 0);
    add(c, B_ACT, R_IN, n, 1, 0);
    c->ip[0] = N, c->ip[1] = C;
    check(c);

    c = new_case(run_dropout_bwd, 2, "dropout_bwd N%d C%d p 0.3", N, C);
    int o = add(c, B_ACT, R_OUT, n, 1, 0);
    c->b[o].stages = b16, c->b[o].mask = 1;
    add(c, B_ACT, R_IN, n, 1, 0);
    c->ip[0] = N, c->ip[1] = C, c->fp[0] = 0.3f;
    check(c);

    for (int with_bias = 0; with_bias < 2; with_bias++) {
        c = new_case(run_ln_fwd, C + 8, "layernorm_fwd N%d C%d bias %d", N, C, with_bias);
        c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16;
        add(c, B_F32, R_OUT, (size_t)N, 1, 0);
        add(c, B_F32, R_OUT, (size_t)N, 1, 0);
        add(c, B_ACT, R_IN, n, 1, 0.5f);
        add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
        add(c, B_F32, with_bias ? R_IN : R_NONE, (size_t)C, 1, 0);
        c->ip[0] = N, c->ip[1] = C;
        check(c);

        c = new_case(run_ln_bwd, N + 2 * C + 8, "layernorm_bwd N%d C%d dbias %d", N, C, with_bias);
        c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16; /* dinp += rounds once */
        add(c, B_F32, R_OUT, (size_t)C, 1, 0);
        add(c, B_F32, with_bias ? R_OUT : R_NONE, (size_t)C, 1, 0);
        add(c, B_ACT, R_IN, n, 1, 0);
        add(c, B_ACT, R_IN, n, 1, 0.5f);
        add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
        add(c, B_F32, R_TMP, (size_t)N, 0, 0);
        add(c, B_F32, R_TMP, (size_t)N, 0, 0);
        add(c, B_ACT, R_TMP, n, 0, 0);
        c->ip[0] = N, c->ip[1] = C;
        check(c);
    }
}

static void test_rowwise(void)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) rowwise_cases(NS[i], CS[j]);
}

/* n random ints in [lo, hi) (token ids, targets). */
static int *rand_ints(size_t n, int lo, int hi)
{
    int *x = malloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) x[i] = lo + (int)(gk_rng_uniform(seed, i) * (float)(hi - lo));
    seed++;
    return x;
}

/* ---- embedding ---- */

static void run_enc_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    const int *t0 = c->ip[3] ? p[4] : NULL; /* a device int: the first position */
    be->ops->encoder_fwd(be, p[0], p[1], p[2], t[2], p[3], t0, c->ip[0], c->ip[1], c->ip[2], c->fp[0], NKEY);
}
static void run_enc_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->encoder_bwd(be, p[0], p[1], p[2], p[3], c->ip[0], c->ip[1], c->ip[2], c->fp[0], NKEY);
}

static void test_encoder(void)
{
    static const int bt[][2] = {{1, 1}, {1, 7}, {5, 13}}; /* B*T = 1, 7, 65 rows */
    const int V = 11;                                    /* few tokens: many repeats in dwte */
    for (int s = 0; s < 3; s++)
        for (int j = 0; j < 3; j++)
            for (int v = 0; v < 4; v++) { /* fp32 wte; bf16 wte; dropout; from position 3 */
                int B = bt[s][0], T = bt[s][1], C = CS[j], t0 = v == 3 ? 3 : 0;
                float p = v == 2 ? 0.2f : 0.0f;
                size_t n = (size_t)B * T * C;
                tcase *c = new_case(run_enc_fwd, 2, "encoder_fwd B%d T%d C%d wte %s p %g t0 %d", B, T,
                                    C, v == 1 ? "bf16" : "f32", p, t0);
                c->wt = v == 1 ? GK_BF16 : GK_F32;
                int o = add(c, B_ACT, R_OUT, n, 1, 0);
                c->b[o].stages = bf16_run(), c->b[o].mask = p > 0;
                c->ints[add(c, B_INT, R_IN, (size_t)B * T, 0, 0)] = rand_ints((size_t)B * T, 0, V);
                add(c, B_WT, R_IN, (size_t)V * C, 1, 0);
                add(c, B_F32, R_IN, (size_t)(t0 + T) * C, 1, 0);
                if (t0) c->ints[add(c, B_INT, R_IN, 1, 0, 0)] = rand_ints(1, t0, t0 + 1);
                c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->ip[3] = t0, c->fp[0] = p;
                check(c);
                if (v == 1 || v == 3) continue;
                c = new_case(run_enc_bwd, B * T, "encoder_bwd B%d T%d C%d p %g", B, T, C, p);
                add(c, B_F32, R_OUT, (size_t)V * C, 1, 0);
                add(c, B_F32, R_OUT, (size_t)T * C, 1, 0);
                add(c, B_ACT, R_IN, n, 1, 0);
                c->ints[add(c, B_INT, R_IN, (size_t)B * T, 0, 0)] = rand_ints((size_t)B * T, 0, V);
                c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->fp[0] = p;
                check(c);
            }
}

/* ---- softmax cross-entropy ---- */

static void run_xent_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->xent_fwd(be, p[0], p[1], p[2], p[3], c->ip[0], c->ip[1], c->ip[2]);
}
/* the forward first (lse); ip[3]: dlogits aliases logits (a copy of them first) */
static void run_xent_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    int N = c->ip[0], V = c->ip[1], Vp = c->ip[2];
    be->ops->xent_fwd(be, p[3], p[4], p[1], p[2], N, V, Vp);
    const void *logits = p[1];
    if (c->ip[3]) {
        be->ops->copy(be, p[0], p[1], (size_t)N * Vp * gk_elt_size(t[1]));
        logits = p[0];
    }
    be->ops->xent_bwd(be, p[0], logits, p[4], p[2], c->fp[0], N, V, Vp);
}

static void test_xent(void)
{
    static const int vs[][2] = {{1, 1}, {24, 32}, {100, 100}, {37, 40}}; /* V, Vp */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            int N = NS[i], V = vs[j][0], Vp = vs[j][1];
            tcase *c = new_case(run_xent_fwd, V + 8, "xent_fwd N%d V%d Vp%d", N, V, Vp);
            add(c, B_F32, R_OUT, (size_t)N, 1, 0);
            add(c, B_F32, R_OUT, (size_t)N, 1, 0);
            add(c, B_ACT, R_IN, (size_t)N * Vp, 4, 0);
            c->ints[add(c, B_INT, R_IN, (size_t)N, 0, 0)] = rand_ints((size_t)N, -1, V);
            c->ip[0] = N, c->ip[1] = V, c->ip[2] = Vp;
            check(c);
            for (int alias = 0; alias < 2; alias++) {
                c = new_case(run_xent_bwd, V + 8, "xent_bwd N%d V%d Vp%d alias %d", N, V, Vp, alias);
                c->b[add(c, B_ACT, R_OUT, (size_t)N * Vp, 1, 0)].stages = bf16_run();
                add(c, B_ACT, R_IN, (size_t)N * Vp, 4, 0);
                c->ints[add(c, B_INT, R_IN, (size_t)N, 0, 0)] = rand_ints((size_t)N, -1, V);
                add(c, B_F32, R_TMP, (size_t)N, 0, 0);
                add(c, B_F32, R_TMP, (size_t)N, 0, 0);
                c->ip[0] = N, c->ip[1] = V, c->ip[2] = Vp, c->ip[3] = alias, c->fp[0] = 1.0f / 16;
                check(c);
            }
        }
}

/* ---- attention ---- */

static void run_attn_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->attention_fwd(be, p[0], p[1], p[2], c->ip[0], c->ip[1], c->ip[2], c->ip[3], c->fp[0], NKEY);
}
/* the forward first: out and lse are this backend's */
static void run_attn_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    int B = c->ip[0], T = c->ip[1], C = c->ip[2], NH = c->ip[3];
    be->ops->attention_fwd(be, p[3], p[4], p[2], B, T, C, NH, c->fp[0], NKEY);
    be->ops->attention_bwd(be, p[0], p[1], p[2], p[3], p[4], B, T, C, NH, c->fp[0], NKEY);
}
static void run_attn_at(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    const int *i = c->ip;
    const void *fresh = i[6] ? p[3] : NULL; /* the new rows, or none: in the cache already */
    be->ops->attention_fwd_at(be, p[0], p[1], fresh, i[0], i[1], p[2], i[5], i[2], i[3]);
}

static void test_attention(void)
{
    /* B, T, NH, head size, dropout */
    static const int cs[][5] = {{1, 1, 1, 16, 0}, {2, 7, 3, 24, 0}, {1, 64, 4, 16, 0},
                                {1, 65, 3, 64, 0}, {2, 65, 1, 16, 1}, {1, 7, 4, 64, 1}};
    int b16 = bf16_run();
    for (int k = 0; k < 6; k++) {
        int B = cs[k][0], T = cs[k][1], NH = cs[k][2], hs = cs[k][3], C = NH * hs;
        float p = cs[k][4] ? 0.1f : 0.0f;
        size_t n = (size_t)B * T * C;
        /* bf16: scores from bf16 q, k; probabilities rounded for the second product; output */
        tcase *c = new_case(run_attn_fwd, hs + T + 8, "attention_fwd B%d T%d NH%d hs%d p %g", B, T, NH, hs, p);
        c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = 2 * b16;
        c->b[add(c, B_F32, R_OUT, (size_t)B * NH * T, 1, 0)].stages = b16;
        add(c, B_ACT, R_IN, 3 * n, 2, 0);
        c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->ip[3] = NH, c->fp[0] = p;
        check(c);
        /* bf16: the forward's output (in D = rowsum(dO O)), P, dS and dqkv rounded */
        c = new_case(run_attn_bwd, hs + 2 * T + 8, "attention_bwd B%d T%d NH%d hs%d p %g", B, T, NH, hs, p);
        c->b[add(c, B_ACT, R_OUT, 3 * n, 1, 0)].stages = 4 * b16;
        add(c, B_ACT, R_IN, n, 1, 0);
        add(c, B_ACT, R_IN, 3 * n, 2, 0);
        add(c, B_ACT, R_TMP, n, 0, 0);
        add(c, B_F32, R_TMP, (size_t)B * NH * T, 0, 0);
        c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->ip[3] = NH, c->fp[0] = p;
        check(c);
    }
    /* KV cache: B, Tc, NH, hs, t0, n, new rows passed apart (stored into the cache by the op,
     * which is then compared too: exact copies) */
    static const int at[][7] = {{2, 9, 3, 16, 0, 9, 0}, {1, 65, 4, 64, 64, 1, 0}, {2, 20, 1, 24, 7, 5, 0},
                                {2, 20, 1, 24, 7, 5, 1}, {1, 65, 4, 64, 64, 1, 1}, {3, 130, 2, 32, 100, 1, 1}};
    for (int k = 0; k < 6; k++) {
        const int *a = at[k];
        int C = a[2] * a[3];
        tcase *c = new_case(run_attn_at, a[3] + a[1] + 8, "attention_fwd_at B%d Tc%d NH%d hs%d t0 %d n %d%s",
                            a[0], a[1], a[2], a[3], a[4], a[5], a[6] ? " new rows apart" : "");
        c->b[add(c, B_ACT, R_OUT, (size_t)a[0] * a[5] * C, 1, 0)].stages = 2 * b16;
        add(c, B_ACT, a[6] ? R_OUT : R_IN, (size_t)a[0] * a[1] * 3 * C, 2, 0);
        c->ints[add(c, B_INT, R_IN, 1, 0, 0)] = rand_ints(1, a[4], a[4] + 1);
        if (a[6]) add(c, B_ACT, R_IN, (size_t)a[0] * a[5] * 3 * C, 2, 0);
        c->ip[0] = a[0], c->ip[1] = a[1], c->ip[2] = C, c->ip[3] = a[2], c->ip[4] = a[4], c->ip[5] = a[5];
        c->ip[6] = a[6];
        check(c);
    }
}

/* ---- optimizer ---- */

static void run_scale(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->scale(be, p[0], 0.37f, (size_t)c->ip[0]);
}
static void run_adamw(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    be->ops->adamw(be, p[0], p[1], p[2], p[3], (size_t)c->ip[0], 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3,
                   0.7f, p[4], t[4]);
}

static void test_optimizer(void)
{
    static const int ns[] = {1, 7, 1000, 100003};
    for (int k = 0; k < 4; k++) {
        int n = ns[k];
        tcase *c = new_case(run_scale, 0, "scale n%d", n);
        add(c, B_F32, R_OUT, (size_t)n, 1, 0);
        c->ip[0] = n;
        check(c);
        for (int copy = 0; copy < 2; copy++) {
            c = new_case(run_adamw, 8, "adamw n%d copy %d", n, copy);
            add(c, B_F32, R_OUT, (size_t)n, 1, 0);      /* param */
            add(c, B_F32, R_IN, (size_t)n, 1, 0);       /* grad */
            add(c, B_F32, R_OUT, (size_t)n, 0.1f, 0);   /* m */
            add(c, B_F32, R_OUT, (size_t)n, 0.01f, 0.01f); /* v >= 0 */
            c->b[add(c, B_BF16, copy ? R_OUT : R_NONE, (size_t)n, 1, 0)].copy_of = 1;
            c->ip[0] = n;
            check(c);
        }
        /* sumsq: a double on the host; fp32 squares summed in double */
        float *x = malloc(sizeof(float) * n);
        for (int i = 0; i < n; i++) x[i] = gk_rng_uniform(seed, (uint64_t)i) * 2.0f - 1.0f;
        seed++;
        double r = 0, d = -1;
        float *px = ref->ops->alloc(ref, sizeof(float) * n), *dx = dev->ops->alloc(dev, sizeof(float) * n);
        CHECK(px && dx);
        if (px && dx) {
            ref->ops->to_device(ref, px, x, sizeof(float) * n);
            ref->ops->sumsq(ref, &r, px, (size_t)n);
            dev->ops->to_device(dev, dx, x, sizeof(float) * n);
            dev->ops->sumsq(dev, &d, dx, (size_t)n);
        }
        gk_err e = {0};
        CHECKF(gk_backend_sync(dev, &e) == 0, "sumsq: %s", e.msg);
        /* the sum of n positive terms in double; each square may be rounded to fp32 (u32), and
         * the CPU backend adds runs of 1024 squares in fp32 first (positive terms rounded to
         * nearest: a few u32 in practice, 1024 u32 at worst): 4 u32 */
        CHECKF(fabs(d - r) <= (4 * U32 + 2.0 * (n + 2) * 0x1p-53) * r, "sumsq n%d: %.17g, ref %.17g", n, d, r);
        ref->ops->free(ref, px), dev->ops->free(dev, dx), free(x);
    }
}

/* ---- the multi-tensor ops: the same bits as the one-tensor ops, on ref and the device ---- */

/* Tensors of a table: sizes around the CUDA kernel's chunks (4096) and packs (4), empty ones, and
 * starts off a 16-byte boundary (the element offsets into one buffer per array), so that one
 * launch mixes packed and single-element entries. */
#define MT_N 8
static const size_t mt_n[MT_N] = {7, 4097, 0, 1, 10000, 8195, 3, 4096};
static const size_t mt_off[MT_N] = {0, 8, 4108, 4109, 4112, 14113, 22308, 22312};
#define MT_TOTAL 26408

/* AdamW twice (t = 1 and 2) on be: by adamw_multi when multi, else one adamw per tensor.
 * h: param, grad, m, v (MT_TOTAL floats each) in, then param, m, v and the copy (MT_TOTAL
 * elements of tcopy, and one more) out. */
static void mt_adamw(gk_backend *be, int multi, gk_elt tcopy, float *h[4], void *copy_out)
{
    size_t bytes = MT_TOTAL * sizeof(float), cb = MT_TOTAL * gk_elt_size(tcopy);
    float *d[4];
    char *dc = be->ops->alloc(be, cb + 4);
    for (int k = 0; k < 4; k++) {
        d[k] = be->ops->alloc(be, bytes);
        if (d[k]) be->ops->to_device(be, d[k], h[k], bytes);
    }
    if (!d[0] || !d[1] || !d[2] || !d[3] || !dc) {
        CHECKF(0, "%s: alloc", be->ops->name);
        return;
    }
    gk_adamw_tensor ts[MT_N];
    for (int i = 0; i < MT_N; i++) {
        size_t o = mt_off[i];
        /* copies: every other tensor, one of them an element off (not a pack's alignment) */
        void *copy = i % 2 ? NULL : dc + (o + (i == 4)) * gk_elt_size(tcopy);
        ts[i] = (gk_adamw_tensor){d[0] + o, d[1] + o, d[2] + o, d[3] + o, copy, mt_n[i], i % 3 != 1};
    }
    for (int t = 1; t <= 2; t++) {
        float lr = 1e-3f * (float)t, gs = t == 1 ? 0.7f : 1.0f;
        if (multi) be->ops->adamw_multi(be, ts, MT_N, lr, 0.9f, 0.95f, 1e-8f, 0.1f, t, gs, tcopy);
        else
            for (int i = 0; i < MT_N; i++)
                be->ops->adamw(be, ts[i].param, ts[i].grad, ts[i].m, ts[i].v, ts[i].n, lr, 0.9f, 0.95f,
                               1e-8f, ts[i].decay ? 0.1f : 0.0f, t, gs, ts[i].copy, tcopy);
    }
    for (int k = 0; k < 4; k++) be->ops->to_host(be, h[k], d[k], bytes);
    be->ops->to_host(be, copy_out, dc, cb + 4);
    gk_err e = {0};
    CHECKF(gk_backend_sync(be, &e) == 0, "%s adamw%s: %s", be->ops->name, multi ? "_multi" : "", e.msg);
    for (int k = 0; k < 4; k++) be->ops->free(be, d[k]);
    be->ops->free(be, dc);
}

static void mt_adamw_on(gk_backend *be)
{
    for (int tc = 0; tc < 2; tc++) {
        gk_elt tcopy = tc ? GK_BF16 : GK_F32;
        float *h[2][4];
        unsigned char *c[2];
        size_t cb = MT_TOTAL * gk_elt_size(tcopy) + 4;
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < 4; k++) {
                h[r][k] = malloc(MT_TOTAL * sizeof(float));
                for (size_t i = 0; i < MT_TOTAL; i++) {
                    float u = gk_rng_uniform(seed + (uint64_t)k, i);
                    h[r][k][i] = k == 3 ? u * 0.01f : (u * 2.0f - 1.0f) * (k == 2 ? 0.1f : 1.0f);
                }
            }
            c[r] = calloc(1, cb);
            mt_adamw(be, r, tcopy, h[r], c[r]);
        }
        seed += 4;
        static const char *what[4] = {"param", "grad", "m", "v"};
        for (int k = 0; k < 4; k++)
            CHECKF(memcmp(h[0][k], h[1][k], MT_TOTAL * sizeof(float)) == 0, "%s adamw_multi (copy %s): %s differs "
                   "from one adamw per tensor", be->ops->name, tc ? "bf16" : "fp32", what[k]);
        CHECKF(memcmp(c[0], c[1], cb) == 0, "%s adamw_multi: the %s copy differs from one adamw per tensor",
               be->ops->name, tc ? "bf16" : "fp32");
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < 4; k++) free(h[r][k]);
            free(c[r]);
        }
    }
}

/* zero_multi on ranges of odd starts and lengths, one past a CUDA chunk (16384 bytes), and an
 * empty one: those bytes zero, every other byte as it was. */
static void mt_zero_on(gk_backend *be)
{
    static const size_t off[] = {0, 16, 35, 100, 4000, 4000, 20000};
    static const size_t len[] = {16, 19, 1, 3000, 0, 17, 16400};
    const size_t n = 40000, ns = sizeof off / sizeof *off;
    unsigned char *h = malloc(n), *got = malloc(n), *d = be->ops->alloc(be, n);
    CHECK(d != NULL);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(1 + gk_rng_uniform(seed, i) * 254);
    seed++;
    gk_span sp[sizeof off / sizeof *off];
    if (d) {
        be->ops->to_device(be, d, h, n);
        for (size_t k = 0; k < ns; k++) sp[k] = (gk_span){d + off[k], len[k]};
        be->ops->zero_multi(be, sp, (int)ns);
        be->ops->to_host(be, got, d, n);
    }
    gk_err e = {0};
    CHECKF(gk_backend_sync(be, &e) == 0, "%s zero_multi: %s", be->ops->name, e.msg);
    for (size_t k = 0; k < ns; k++) memset(h + off[k], 0, len[k]);
    size_t bad = 0;
    for (size_t i = 0; i < n && d; i++) bad += got[i] != h[i];
    CHECKF(bad == 0, "%s zero_multi: %zu of %zu bytes wrong", be->ops->name, bad, n);
    be->ops->free(be, d);
    free(h), free(got);
}

static void test_multi(void)
{
    if (dev->act == GK_F32) { /* the reference once per device */
        mt_adamw_on(ref);
        mt_zero_on(ref);
    }
    mt_adamw_on(dev);
    mt_zero_on(dev);
}

/* ---- cast: exact, round to nearest even ---- */

static void test_cast(void)
{
    /* ties (even below, even above), just above a tie, signs, a subnormal, the largest float
     * (rounds to inf), inf, NaN, then random values */
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0xbf808000u, 0x00000001u,
                                0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000000u};
    const size_t ns = sizeof special / sizeof *special, n = 1000 + ns;
    float *x = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    uint16_t *h = malloc(2 * n);
    memcpy(x, special, sizeof special);
    for (size_t i = ns; i < n; i++) x[i] = (gk_rng_uniform(seed, i) * 2.0f - 1.0f) * 1e3f;
    seed++;
    float *f = dev->ops->alloc(dev, 4 * n), *g = dev->ops->alloc(dev, 4 * n);
    uint16_t *b = dev->ops->alloc(dev, 2 * n);
    CHECK(f && g && b);
    if (f && g && b) {
        dev->ops->to_device(dev, f, x, 4 * n);
        dev->ops->cast(dev, b, GK_BF16, f, GK_F32, n);
        dev->ops->cast(dev, g, GK_F32, b, GK_BF16, n);
        dev->ops->to_host(dev, h, b, 2 * n);
        dev->ops->to_host(dev, back, g, 4 * n);
    }
    gk_err e = {0};
    CHECKF(gk_backend_sync(dev, &e) == 0, "cast: %s", e.msg);
    size_t bad = 0, bad_back = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = gk_f2bf16(x[i]);
        int nan = isnan(x[i]) && (h[i] & 0x7fffu) > 0x7f80u; /* any NaN stays a NaN */
        bad += h[i] != want && !nan;
        float w = gk_bf16f(h[i]);
        bad_back += memcmp(&w, &back[i], 4) != 0;
        if (i < ns && h[i] != want && !nan) fprintf(stderr, "cast %08x -> %04x, want %04x\n", special[i], h[i], want);
    }
    CHECKF(bad == 0, "cast f32 -> bf16: %zu of %zu differ", bad, n);
    CHECKF(bad_back == 0, "cast bf16 -> f32: %zu of %zu not exact", bad_back, n);
    dev->ops->free(dev, f), dev->ops->free(dev, g), dev->ops->free(dev, b);
    free(x), free(back), free(h);
}
int main(int argc, char **argv)
{
    static const ops_test tests[] = {
        OPS_TEST(test_cast),    OPS_TEST(test_gemm),      OPS_TEST(test_rowwise),
        OPS_TEST(test_encoder), OPS_TEST(test_xent),      OPS_TEST(test_attention),
        OPS_TEST(test_optimizer), OPS_TEST(test_multi),
    };
    return ops_main(argc, argv, tests, (int)(sizeof tests / sizeof *tests));
}
