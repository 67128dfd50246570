/* ops/matmul.c: the op tests of gemm (every transpose, type combination and epilogue) and of
 * gemm_bwd (its backward epilogues: the bias gradient, GELU's gradient).
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

static void run_gemm(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    const int *i = c->ip;
    be->ops->gemm(be, i[0], i[1], i[2], i[3], i[4], c->fp[0], p[0], t[0], i[5], p[1], t[1], i[6],
                  c->fp[1], p[2], t[2], i[7], p[3], p[4]);
}

/* combo: 0 all fp32; 1 (act, fp32 weights, act); 2 (act, bf16 weights, act); 3 (act, act, fp32)
 * accumulating (alpha 1, beta 1: the weight gradients). epi: 0 none, 1 bias, 2 bias + GELU, 3
 * GELU. */
static void gemm_case(int ta, int tb, int M, int N, int K, int pad, int combo, int epi)
{
    static const char *names[] = {"f32,f32,f32", "act,f32,act", "act,bf16,act", "act,act,f32"};
    static const char *epis[] = {"", " bias", " bias+gelu", " gelu"};
    int bias = epi == 1 || epi == 2, gelu = epi >= 2;
    tcase *c = new_case(run_gemm, K + 4 + 8 * gelu, "gemm %c%c M%d N%d K%d pad%d %s%s",
                        ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, pad, names[combo], epis[epi]);
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

static void identity_prep(const tcase *c, float *h[])
{
    int N = c->ip[3];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) h[1][(size_t)i * N + j] = i == j;
}

/* x (M, N) @ I + bias, fp32: exact on every backend (x + bias, rounded once) */
static void bias_identity_case(int M, int N)
{
    tcase *c = new_case(run_gemm, N + 2, "gemm M%d N%d K%d x @ I + bias", M, N, N);
    add(c, B_F32, R_IN, (size_t)M * N, 2, 0);
    add(c, B_F32, R_IN, (size_t)N * N, 0, 0);
    c->b[add(c, B_F32, R_OUT, (size_t)M * N, 1, 0)].exact = 1;
    add(c, B_F32, R_IN, (size_t)N, 1, 0);
    add(c, B_F32, R_NONE, 0, 0, 0);
    int v[] = {0, 0, M, N, N, N, N, N};
    memcpy(c->ip, v, sizeof v);
    c->fp[0] = 1.0f, c->fp[1] = 0.0f, c->prep = identity_prep;
    check(c);
}

static void test_gemm(void)
{
    /* M N K pad; the last three are the few-row products of decoding (cuda: matmul_rows.cu's
     * kernels, for bf16 A, B and C: N, K and the leading dimensions multiples of 8, a partial
     * column tile, K past several of a block's row steps) */
    static const int shapes[][4] = {{7, 24, 65, 0}, {65, 7, 64, 0}, {1, 100, 24, 3}, {24, 1, 7, 1},
                                    {1, 40, 136, 0}, {3, 96, 520, 8}, {4, 264, 64, 0}};
    for (int s = 0; s < (int)(sizeof shapes / sizeof *shapes); s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int combo = 0; combo < 4; combo++)
                    /* bf16 weights are only ever B (the CPU backend refuses them with A
                     * transposed) */
                    for (int epi = 0; epi < (combo == 3 ? 1 : 4) && !(combo == 2 && ta); epi++)
                        gemm_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                                  combo, epi);
    /* N wide enough for the CPU to cut into slabs, odd M and K, fp32 */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) gemm_case(ta, tb, 37, 300, 129, 0, 0, 0);
    bias_identity_case(50, 96);
}

static void run_gemm_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    const int *i = c->ip;
    be->ops->gemm_bwd(be, i[0], i[1], i[2], i[3], i[4], c->fp[0], p[0], t[0], i[5], p[1], t[1],
                      i[6], c->fp[1], p[2], t[2], i[7], p[3], p[4]);
}

/* The two gemm_bwd calls of a layer out (N,OC) = x (N,IC) @ w (IC,OC) + bias:
 * dgelu 0: dw (IC,OC) = beta dw + x^T dout with dbias (OC) += the column sums of dout;
 * dgelu 1: dx (N,IC) = gelu'(pre) * (dout w^T), w of type wt. f32: every buffer fp32. */
static void gemm_bwd_case(int dgelu, int N, int IC, int OC, int f32, gk_elt wt, float beta)
{
    tcase *c = new_case(run_gemm_bwd, (dgelu ? OC : N) + 4,
                        "gemm_bwd %s N%d IC%d OC%d %s%s beta %g", dgelu ? "dx gelu'" : "dw dbias",
                        N, IC, OC, f32 ? "f32" : "act", wt == GK_BF16 ? " bf16 weights" : "", beta);
    bclass act = f32 ? B_F32 : B_ACT;
    c->wt = wt;
    if (!dgelu) {
        add(c, act, R_IN, (size_t)N * IC, 1, 0);               /* x */
        add(c, act, R_IN, (size_t)N * OC, 1, 0);               /* dout */
        add(c, B_F32, R_OUT, (size_t)IC * OC, 1, 0);           /* dw */
        add(c, B_F32, R_NONE, 0, 0, 0);
        add(c, B_F32, R_OUT, (size_t)OC, 1, 0);                /* dbias */
        int v[] = {1, 0, IC, OC, N, IC, OC, OC};
        memcpy(c->ip, v, sizeof v);
    } else {
        add(c, act, R_IN, (size_t)N * OC, 1, 0);               /* dout */
        add(c, f32 ? B_F32 : B_WT, R_IN, (size_t)IC * OC, 1, 0); /* w */
        int ic = add(c, act, R_OUT, (size_t)N * IC, 1, 0);     /* dx */
        add(c, act, R_IN, (size_t)N * IC, 3, 0);               /* pre: GELU's input */
        add(c, B_F32, R_NONE, 0, 0, 0);
        c->b[ic].stages = !f32 && bf16_run() ? 2 : 0; /* the product, then times gelu' */
        int v[] = {0, 1, N, IC, OC, OC, OC, IC};
        memcpy(c->ip, v, sizeof v);
    }
    c->fp[0] = 1.0f, c->fp[1] = beta;
    check(c);
}

/* On cpu, ref and cuda, gemm, gelu_bwd and bias_bwd apart; on NAME:fused, cuBLASLt's DGELU and
 * BGRADA epilogues (the emulator's, on cuda-emu): model shapes (multiples of 8) and odd ones, the
 * weight gradient fresh (beta 0) and accumulated (beta 1), fp32 and bf16 weights, and a few rows
 * (the fused path leaves those to the ops apart). */
static void test_gemm_bwd(void)
{
    static const int shapes[][3] = {{64, 32, 96}, {65, 24, 40}, {33, 7, 13}, {3, 16, 24}};
    for (int s = 0; s < 4; s++) {
        int N = shapes[s][0], IC = shapes[s][1], OC = shapes[s][2];
        for (int f32 = 0; f32 < 2 - bf16_run(); f32++) { /* gelu' and the sums: in be->act */
            gemm_bwd_case(0, N, IC, OC, f32, GK_F32, 0.0f);
            gemm_bwd_case(0, N, IC, OC, f32, GK_F32, 1.0f);
            gemm_bwd_case(1, N, IC, OC, f32, GK_F32, 0.0f);
            if (!f32) gemm_bwd_case(1, N, IC, OC, 0, GK_BF16, 0.0f);
        }
    }
}
