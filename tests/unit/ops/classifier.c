/* ops/classifier.c: the op tests of xent_fwd and xent_bwd (softmax cross-entropy).
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

static void run_xent_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->xent_fwd(be, p[0], p[1], p[2], p[3], c->ip[0], c->ip[1], c->ip[2]);
}
/* the forward first (lse; its targets p[5]: those >= V ignored); ip[3]: dlogits aliases logits
 * (a copy of them first) */
static void run_xent_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    int N = c->ip[0], V = c->ip[1], Vp = c->ip[2];
    be->ops->xent_fwd(be, p[3], p[4], p[1], p[5], N, V, Vp);
    const void *logits = p[1];
    if (c->ip[3]) {
        be->ops->copy(be, p[0], p[1], (size_t)N * Vp * gk_elt_size(t[1]));
        logits = p[0];
    }
    be->ops->xent_bwd(be, p[0], logits, p[4], p[2], c->fp[0], N, V, Vp);
}

/* n targets: every fifth from the fourth ignored (-1), the others spread over [0, V) */
static int *spread_targets(int n, int V)
{
    int *t = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) t[i] = i % 5 == 3 ? -1 : (int)((i * 7919L) % V);
    return t;
}

/* The backward's n targets: those of spread_targets (spread) or random over [-1, V], every
 * target V (spread: every seventh from the sixth) one no column holds: the softmax alone. */
static int *bwd_targets(int n, int V, int spread)
{
    int *t = spread ? spread_targets(n, V) : rand_ints((size_t)n, -1, V + 1);
    for (int i = 5; spread && i < n; i += 7) t[i] = V;
    return t;
}

/* the forward (loss, lse; not again for alias) and the backward; dlogits are zero exactly in
 * ignored rows and padding (compared as a mask where V > 1: elsewhere every probability is
 * positive). spread: targets of spread_targets, else random. */
static void xent_cases(int N, int V, int Vp, int alias, float dloss, int spread)
{
    tcase *c;
    if (!alias || spread) { /* the forward once per shape */
        c = new_case(run_xent_fwd, V + 8, "xent_fwd N%d V%d Vp%d", N, V, Vp);
        /* loss: 0 exactly where ignored */
        c->b[add(c, B_F32, R_OUT, (size_t)N, 1, 0)].mask = V > 1;
        add(c, B_F32, R_OUT, (size_t)N, 1, 0);
        add(c, B_ACT, R_IN, (size_t)N * Vp, 4, 0);
        c->ints[add(c, B_INT, R_IN, (size_t)N, 0, 0)] =
            spread ? spread_targets(N, V) : rand_ints((size_t)N, -1, V);
        c->ip[0] = N, c->ip[1] = V, c->ip[2] = Vp;
        check(c);
    }
    c = new_case(run_xent_bwd, V + 8, "xent_bwd N%d V%d Vp%d alias %d", N, V, Vp, alias);
    int o = add(c, B_ACT, R_OUT, (size_t)N * Vp, 1, 0);
    c->b[o].stages = bf16_run(), c->b[o].mask = V > 1;
    add(c, B_ACT, R_IN, (size_t)N * Vp, 4, 0);
    int *tb = bwd_targets(N, V, spread), *tf = malloc(sizeof(int) * (size_t)N);
    for (int i = 0; i < N; i++) tf[i] = tb[i] < V ? tb[i] : -1;
    c->ints[add(c, B_INT, R_IN, (size_t)N, 0, 0)] = tb;
    add(c, B_F32, R_TMP, (size_t)N, 0, 0);
    add(c, B_F32, R_TMP, (size_t)N, 0, 0);
    c->ints[add(c, B_INT, R_IN, (size_t)N, 0, 0)] = tf;
    c->ip[0] = N, c->ip[1] = V, c->ip[2] = Vp, c->ip[3] = alias, c->fp[0] = dloss;
    check(c);
}

static void test_xent(void)
{
    static const int vs[][2] = {{1, 1}, {24, 32}, {100, 100}, {37, 40}}; /* V, Vp */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int alias = 0; alias < 2; alias++)
                xent_cases(NS[i], vs[j][0], vs[j][1], alias, 1.0f / 16, 0);
    /* N, V, Vp, alias; a vocabulary of 3000 (the row's chunks) */
    static const int xs[][4] = {{1, 1, 1, 0},   {7, 100, 104, 0},   {7, 100, 104, 1},
                                {5, 37, 37, 1}, {9, 3000, 3008, 0}, {9, 70, 128, 0}};
    for (int k = 0; k < 6; k++) xent_cases(xs[k][0], xs[k][1], xs[k][2], xs[k][3], 1.0f / 3, 1);
}
