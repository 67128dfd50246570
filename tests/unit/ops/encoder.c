/* ops/encoder.c: the op tests of encoder_fwd and encoder_bwd (token and position embedding).
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

static void run_enc_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    const int *t0 = c->ip[3] ? p[4] : NULL; /* a device int: the first position */
    be->ops->encoder_fwd(be, p[0], p[1], p[2], t[2], p[3], t0, c->ip[0], c->ip[1], c->ip[2],
                         c->fp[0], NKEY);
}
static void run_enc_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->encoder_bwd(be, p[0], p[1], p[2], p[3], c->ip[0], c->ip[1], c->ip[2], c->fp[0], NKEY);
}

/* exact: an add and one product, rounded once (the reference as the device stores it) */
static void enc_fwd_case(int B, int T, int C, int V, gk_elt wt, float p, int t0)
{
    size_t n = (size_t)B * T * C;
    tcase *c = new_case(run_enc_fwd, 2, "encoder_fwd B%d T%d C%d V%d wte %s p %g t0 %d", B, T, C, V,
                        wt == GK_BF16 ? "bf16" : "f32", p, t0);
    c->wt = wt;
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].exact = 1;
    c->ints[add(c, B_INT, R_IN, (size_t)B * T, 0, 0)] = rand_ints((size_t)B * T, 0, V);
    add(c, B_WT, R_IN, (size_t)V * C, 1, 0);
    add(c, B_F32, R_IN, (size_t)(t0 + T) * C, 1, 0);
    if (t0) c->ints[add(c, B_INT, R_IN, 1, 0, 0)] = rand_ints(1, t0, t0 + 1);
    c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->ip[3] = t0, c->fp[0] = p;
    check(c);
}

/* dwte (V, C) and dwpe (T, C) accumulate: sums of up to B T rows; det: the same bits twice */
static void enc_bwd_case(int B, int T, int C, int V, float p, int det)
{
    tcase *c = new_case(run_enc_bwd, B * T, "encoder_bwd B%d T%d C%d V%d p %g", B, T, C, V, p);
    add(c, B_F32, R_OUT, (size_t)V * C, 1, 0);
    add(c, B_F32, R_OUT, (size_t)T * C, 1, 0);
    add(c, B_ACT, R_IN, (size_t)B * T * C, 1, 0);
    c->ints[add(c, B_INT, R_IN, (size_t)B * T, 0, 0)] = rand_ints((size_t)B * T, 0, V);
    c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->fp[0] = p, c->det = det;
    check(c);
}

static void test_encoder(void)
{
    static const int bt[][2] = {{1, 1}, {1, 7}, {5, 13}}; /* B*T = 1, 7, 65 rows */
    const int V = 11;                                    /* few tokens: many repeats in dwte */
    for (int s = 0; s < 3; s++)
        for (int j = 0; j < 3; j++)
            for (int v = 0; v < 4; v++) { /* fp32 wte; bf16 wte; dropout; from position 3 */
                int B = bt[s][0], T = bt[s][1], C = CS[j];
                float p = v == 2 ? 0.2f : 0.0f;
                enc_fwd_case(B, T, C, V, v == 1 ? GK_BF16 : GK_F32, p, v == 3 ? 3 : 0);
                if (v != 1 && v != 3) enc_bwd_case(B, T, C, V, p, 0);
            }
    /* B, T, C, V, dropout; the backward's tiles and sort merges (2100 keys: two merge passes),
     * one token everywhere (one long run), twice for the same bits */
    static const int fs[][5] = {{2, 7, 24, 11, 0},
                                {1, 1, 7, 3, 0},
                                {3, 65, 100, 50, 1},
                                {3, 7, 80, 11, 1}};
    for (int k = 0; k < 4; k++)
        for (int tw = 0; tw < 2; tw++) /* the CPU refuses dropout with 16-bit weights */
            if (!(tw && fs[k][4] && strncmp(dev_name, "cuda", 4)))
                enc_fwd_case(fs[k][0], fs[k][1], fs[k][2], fs[k][3], tw ? GK_BF16 : GK_F32,
                             fs[k][4] ? 0.25f : 0.0f, 0);
    static const int bs[][5] = {{1, 1, 7, 3, 0},    {2, 7, 24, 5, 0},    {2, 65, 100, 40, 1},
                                {3, 700, 8, 40, 0}, {1, 1500, 16, 1, 0}, {3, 7, 80, 11, 1}};
    for (int k = 0; k < 6; k++)
        enc_bwd_case(bs[k][0], bs[k][1], bs[k][2], bs[k][3], bs[k][4] ? 0.25f : 0.0f, 1);
}
