/* ops/elementwise.c: the op tests of bias_bwd, gelu_bwd and dropout_bwd.
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

static void run_bias_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->bias_bwd(be, p[1], p[0], c->ip[0], c->ip[1]);
}
/* ip[2]: dinp aliases dout (buffer 0 holds dout) */
static void run_gelu_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->gelu_bwd(be, p[0], p[1], c->ip[2] ? p[0] : p[2], c->ip[0], c->ip[1]);
}
static void run_dropout_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->dropout_bwd(be, p[0], c->ip[2] ? p[0] : p[1], (size_t)c->ip[0] * c->ip[1], c->fp[0],
                         NKEY);
}

static void bias_bwd_case(int N, int C, int off, int det)
{
    tcase *c = new_case(run_bias_bwd, N, "bias_bwd N%d C%d%s", N, C, off ? " off 1" : "");
    add(c, B_ACT, R_IN, (size_t)N * C, 1, 0);
    add(c, B_F32, R_OUT, (size_t)C, 1, 0);
    c->ip[0] = N, c->ip[1] = C, c->off = off, c->det = det;
    check(c);
}

/* gelu_bwd and dropout_bwd (exact: one product); alias: the output is dout's buffer */
static void gelu_dropout_cases(int N, int C, float p, int off, int alias)
{
    size_t n = (size_t)N * C;
    tcase *c = new_case(run_gelu_bwd, 8, "gelu_bwd N%d C%d%s%s", N, C, off ? " off 1" : "",
                        alias ? " alias" : "");
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = bf16_run();
    add(c, B_ACT, R_IN, n, 3, 0);
    add(c, B_ACT, alias ? R_NONE : R_IN, n, 1, 0);
    c->ip[0] = N, c->ip[1] = C, c->ip[2] = alias, c->off = off;
    check(c);

    c = new_case(run_dropout_bwd, 2, "dropout_bwd N%d C%d p %g%s%s", N, C, p, off ? " off 1" : "",
                 alias ? " alias" : "");
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].exact = 1;
    add(c, B_ACT, alias ? R_NONE : R_IN, n, 1, 0);
    c->ip[0] = N, c->ip[1] = C, c->ip[2] = alias, c->off = off, c->fp[0] = p;
    check(c);
}

/* dropout keeps about 1 - p: 4800 draws of p = 0.3 within 4 standard deviations (the masks are
 * the reference's, compared above: this checks the reference too) */
static void dropout_rate(void)
{
    const size_t n = 4800;
    void *d = dev->ops->alloc(dev, 4 * n), *tmp = malloc(4 * n);
    CHECK(d != NULL);
    if (!d) return free(tmp);
    for (size_t i = 0; i < n; i++) gk_elt_put(tmp, dev->act, i, 1.0f);
    dev->ops->to_device(dev, d, tmp, n * gk_elt_size(dev->act));
    dev->ops->dropout_bwd(dev, d, d, n, 0.3f, NKEY);
    dev->ops->to_host(dev, tmp, d, n * gk_elt_size(dev->act));
    gk_err e = {0};
    CHECKF(gk_backend_sync(dev, &e) == 0, "dropout_bwd: %s", e.msg);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) kept += gk_elt_get(tmp, dev->act, i) != 0.0f;
    CHECKF(fabs(kept / (double)n - 0.7) < 4 * sqrt(0.21 / n), "dropout p 0.3 kept %.3f",
           kept / (double)n);
    dev->ops->free(dev, d), free(tmp);
}

static void test_elementwise(void)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            bias_bwd_case(NS[i], CS[j], 0, 0);
            gelu_dropout_cases(NS[i], CS[j], 0.3f, 0, 0);
        }
    /* bias_bwd on the same bits twice: long columns, many rows (the reduction's passes), off
     * alignment; gelu_bwd and dropout_bwd off alignment and in place */
    static const int bs[][3] = {{1, 1, 0},     {7, 24, 0},     {65, 100, 0},
                                {300, 8, 0},   {1000, 7, 0},   {513, 64, 1},
                                {9000, 16, 0}, {2000, 600, 0}, {4100, 776, 1}};
    for (size_t k = 0; k < sizeof bs / sizeof *bs; k++)
        bias_bwd_case(bs[k][0], bs[k][1], bs[k][2], 1);
    static const struct { int N, C; float p; int off, alias;
    } es[] = {{1, 1, 0, 0, 0},       {7, 24, 0, 0, 0},      {7, 24, 0, 0, 1},
              {65, 100, 0.2f, 0, 0}, {65, 100, 0.2f, 0, 1}, {3, 7, 0.5f, 1, 0},
              {129, 64, 0.1f, 1, 1}};
    for (size_t k = 0; k < sizeof es / sizeof *es; k++)
        gelu_dropout_cases(es[k].N, es[k].C, es[k].p, es[k].off, es[k].alias);
    dropout_rate();
}
