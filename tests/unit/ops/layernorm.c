/* ops/layernorm.c: the op tests of layernorm_fwd and layernorm_bwd.
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

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

/* layernorm_fwd (mean and rstd compared too), and layernorm_bwd after this backend's forward;
 * det: the backward det more times, the same bits each time */
static void layernorm_cases(int N, int C, int with_bias, int off, int det)
{
    size_t n = (size_t)N * C;
    int b16 = bf16_run();
    const char *o = off ? " off 1" : "";
    tcase *c = new_case(run_ln_fwd, C + 8, "layernorm_fwd N%d C%d bias %d%s", N, C, with_bias, o);
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16;
    add(c, B_F32, R_OUT, (size_t)N, 1, 0);
    add(c, B_F32, R_OUT, (size_t)N, 1, 0);
    add(c, B_ACT, R_IN, n, 1, 0.5f);
    add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
    add(c, B_F32, with_bias ? R_IN : R_NONE, (size_t)C, 1, 0);
    c->ip[0] = N, c->ip[1] = C, c->off = off;
    check(c);

    c = new_case(run_ln_bwd, N + 2 * C + 8, "layernorm_bwd N%d C%d dbias %d%s", N, C, with_bias, o);
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16; /* dinp += rounds once */
    add(c, B_F32, R_OUT, (size_t)C, 1, 0);
    add(c, B_F32, with_bias ? R_OUT : R_NONE, (size_t)C, 1, 0);
    add(c, B_ACT, R_IN, n, 1, 0);
    add(c, B_ACT, R_IN, n, 1, 0.5f);
    add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
    add(c, B_F32, R_TMP, (size_t)N, 0, 0);
    add(c, B_F32, R_TMP, (size_t)N, 0, 0);
    add(c, B_ACT, R_TMP, n, 0, 0);
    c->ip[0] = N, c->ip[1] = C, c->off = off, c->det = det;
    check(c);
}

static void test_layernorm(void)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int with_bias = 0; with_bias < 2; with_bias++)
                layernorm_cases(NS[i], CS[j], with_bias, 0, 0);
    /* N, C, bias, off: packs and the scalar path, rows past what the CUDA kernel keeps in
     * registers, many rows */
    static const int ls[][4] = {{1, 24, 1, 0}, {7, 100, 0, 0}, {65, 7, 1, 0}, {5, 768, 1, 0},
                                {33, 64, 1, 1}, {2100, 16, 1, 0}, {3, 6200, 1, 0}};
    for (size_t k = 0; k < sizeof ls / sizeof *ls; k++)
        layernorm_cases(ls[k][0], ls[k][1], ls[k][2], ls[k][3], 1);
    /* The CUDA backward's one launch (once test_cuda_ln's): each block's dweight and dbias sums
     * added by the last block of each group of 16, the group sums by the block that completes
     * the last group, an arrival count per group that must be back at zero after every call.
     * Three runs of each shape, the same bits each time, each shape's first after another shape's
     * calls. Blocks (8 warps a block up to C = 768): 38 (groups of 16, 16, 6), 256 (16 groups,
     * the pack path; 7 warps a block, the first 8 of 1792 taking a second row), 250 (the scalar
     * path, one element off), 9 (2 warps a block: one group), 40 of 1 warp (C = 7000: the shared
     * memory's opt-in). */
    static const int gs[][3] = {{300, 100, 0},
                                {1800, 776, 0},
                                {2000, 777, 1},
                                {17, 3000, 0},
                                {40, 7000, 0}};
    for (size_t k = 0; k < sizeof gs / sizeof *gs; k++)
        layernorm_cases(gs[k][0], gs[k][1], 1, gs[k][2], 2);
}
