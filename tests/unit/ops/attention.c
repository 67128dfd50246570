/* ops/attention.c: the op tests of attention_fwd, attention_bwd and attention_fwd_at (KV cache).
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

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
                                {1, 65, 3, 64, 0}, {2, 65, 1, 16, 1}, {1, 7, 4, 64, 1},
                                {2, 13, 3, 16, 0}, {2, 13, 3, 16, 1}}; /* the last two once test_kernels's */
    int b16 = bf16_run();
    for (int k = 0; k < (int)(sizeof cs / sizeof *cs); k++) {
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
