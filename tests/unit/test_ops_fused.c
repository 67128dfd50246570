/* test_ops_fused.c: the op tests (ops_harness.h: its driver and tolerance model) of the ops
 * that fuse or recompute: gelu_fwd, which recomputes gemm's GELU epilogue (GK_GPT2_RECOMPUTE),
 * and residual_layernorm_fwd, the residual add fused with the layernorm after it. Devices as
 * ops_harness.h says. */
#include "ops_harness.h"

/* n random values offset + scale U(-1,1) of type t on be: the device buffer, and in h the values
 * as stored. */
static void *put_rand(gk_backend *be, float *h, size_t n, gk_elt t, float scale, float offset)
{
    void *tmp = malloc(n * 4), *d = be->ops->alloc(be, n * 4);
    for (size_t i = 0; i < n; i++) {
        gk_elt_put(tmp, t, i, offset + scale * (gk_rng_uniform(seed, i) * 2.0f - 1.0f));
        h[i] = gk_elt_get(tmp, t, i);
    }
    seed++;
    if (d) be->ops->to_device(be, d, tmp, n * gk_elt_size(t));
    free(tmp);
    return d;
}
static void get_vals(gk_backend *be, float *h, const void *d, size_t n, gk_elt t)
{
    void *tmp = malloc(n * 4);
    be->ops->to_host(be, tmp, d, n * gk_elt_size(t));
    for (size_t i = 0; i < n; i++) h[i] = gk_elt_get(tmp, t, i);
    free(tmp);
}

/* ---- GELU forward: the recompute of gemm's GELU epilogue ---- */

static void run_gelu_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->gelu_fwd(be, p[0], p[1], c->ip[0], c->ip[1]);
}

static void gelu_fwd_case(int N, int C, float amp, int off)
{
    tcase *c =
        new_case(run_gelu_fwd, 8, "gelu_fwd N%d C%d amp %g%s", N, C, amp, off ? " off 1" : "");
    c->b[add(c, B_ACT, R_OUT, (size_t)N * C, 1, 0)].stages = bf16_run();
    add(c, B_ACT, R_IN, (size_t)N * C, amp, 0);
    c->ip[0] = N, c->ip[1] = C, c->off = off;
    check(c);
}

/* gemm (M,K) x (K,N) + bias with the GELU epilogue on be, then gelu_fwd of its pre_gelu: C again.
 * cpu and ref: bit for bit (one GELU function each). cuda: the epilogue is cuBLASLt's, which (the
 * emulator as the library) takes GELU of the fp32 sum and rounds pre and C each to be->act, while
 * gelu_fwd starts from the rounded pre; so per element |gelu_fwd - C| <= one rounding of pre (u
 * |pre|) times max |gelu'| (1.13), plus one rounding of each output (u |C| twice), plus what two
 * evaluations of 0.5 x (1 + tanh) may differ by (each rounds tanh's t to about 2u of 1, and 1 + t
 * cancels: u |pre|), u = 2^-24 in fp32, 2^-8 in bf16 (under the emulator too, whose kernels
 * contract multiply-adds as nvcc does).
 * On a GPU cuBLASLt's GELU is not our tanhf (an H100 differed by up to 1e-5 relative, 2026-11-27):
 * plus 2^-11 |pre|, half of 2^-10 relative error in tanh (a hardware tanh's error is 2^-11). */
static void check_recompute(gk_backend *be, int M, int N, int K, gk_elt wt)
{
    size_t n = (size_t)M * N, es = gk_elt_size(be->act);
    float *h = malloc(sizeof(float) * (3 * n + (size_t)(M + N) * K + N)), *a = h + 3 * n,
          *w = a + (size_t)M * K;
    float *pre = h, *out = pre + n, *re = out + n, *hb = w + (size_t)K * N;
    void *da = put_rand(be, a, (size_t)M * K, be->act, 1, 0),
         *dw = put_rand(be, w, (size_t)K * N, wt, 0.5f, 0);
    float *db = put_rand(be, hb, (size_t)N, GK_F32, 1, 0);
    void *dpre = be->ops->alloc(be, n * es), *dout = be->ops->alloc(be, n * es),
         *dre = be->ops->alloc(be, n * es);
    be->ops->gemm(be, 0, 0, M, N, K, 1.0f, da, be->act, K, dw, wt, N, 0.0f, dout, be->act, N, db,
                  dpre);
    be->ops->gelu_fwd(be, dre, dpre, M, N);
    get_vals(be, pre, dpre, n, be->act), get_vals(be, out, dout, n, be->act),
        get_vals(be, re, dre, n, be->act);
    gk_err e = {0};
    CHECKF(gk_backend_sync(be, &e) == 0, "%s gelu_fwd recompute: %s", be->ops->name, e.msg);
    /* cuBLASLt took the bias + GELU epilogue (an H100's refusal once left every such gemm of a
     * training step to the slow fallback kernel: correct, and 100 times slower) */
    CHECKF(!be->note[0], "%s: %s", be->ops->name, be->note);
    int exact = strncmp(be->ops->name, "cuda", 4) != 0;
    double u = be->act == GK_BF16 ? U16 : U32, epi = be->props.host_memory ? 0 : 0x1p-11;
    size_t bad = 0, w0 = 0;
    for (size_t i = 0; i < n; i++) {
        double lim =
            exact ? 0 : 2.13 * u * fabs(pre[i]) + 2 * u * fabs(out[i]) + epi * fabs(pre[i]);
        if (!(fabs((double)re[i] - out[i]) <= lim) && !bad++) w0 = i;
    }
    CHECKF(bad == 0,
           "%s %s M%d N%d K%d wt %d: gelu_fwd(pre_gelu) is not gemm's GELU output in %zu of %zu "
           "(%s; first [%zu]: %.9g, C %.9g, pre %.9g)",
           be->ops->name, be->act == GK_BF16 ? "bf16" : "fp32", M, N, K, wt, bad, n,
           exact ? "bit for bit" : "within a rounding", w0, re[w0], out[w0], pre[w0]);
    be->ops->free(be, da), be->ops->free(be, dw), be->ops->free(be, db);
    be->ops->free(be, dpre), be->ops->free(be, dout), be->ops->free(be, dre);
    free(h);
}

/* gelu_fwd of one buffer as (N, C), one row and one column: the same bits (an element's GELU does
 * not depend on how the rows are cut) */
static void check_cuts(int N, int C)
{
    size_t n = (size_t)N * C;
    float *h = malloc(sizeof(float) * 4 * n), *got[3] = {h + n, h + 2 * n, h + 3 * n};
    void *x = put_rand(dev, h, n, dev->act, 4, 0), *y = dev->ops->alloc(dev, n * 4);
    for (int k = 0; k < 3 && x && y; k++) {
        dev->ops->gelu_fwd(dev, y, x,
                           k == 0   ? N
                           : k == 1 ? 1
                                    : (int)n,
                           k == 0   ? C
                           : k == 1 ? (int)n
                                    : 1);
        get_vals(dev, got[k], y, n, dev->act);
    }
    gk_err e = {0};
    CHECKF(x && y && gk_backend_sync(dev, &e) == 0, "gelu_fwd cuts: %s", e.msg);
    CHECKF(memcmp(got[0], got[1], 4 * n) == 0 && memcmp(got[0], got[2], 4 * n) == 0,
           "gelu_fwd N%d C%d: one row or one column gives other bits", N, C);
    dev->ops->free(dev, x), dev->ops->free(dev, y), free(h);
}

/* On seeds of its own, so that the cases after it keep their data. */
static void test_gelu_fwd(void)
{
    static const int CW[] = {1, 7, 64, 65, 3072}; /* odd and unaligned widths, and the MLP's */
    uint64_t saved = seed;
    seed = (uint64_t)0x6e1u << 32;
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < sizeof CW / sizeof *CW; j++) {
            int N = NS[i], C = CW[j];
            gelu_fwd_case(N, C, 4, 0);
        }
    /* N, C, off */
    static const int moved[][3] = {{1, 1, 0}, {7, 24, 0}, {65, 100, 0}, {3, 7, 1}, {129, 64, 1}};
    for (int k = 0; k < 5; k++) gelu_fwd_case(moved[k][0], moved[k][1], 3, moved[k][2]);
    static const int mnk[][3] = {{1, 1, 7}, {7, 65, 64}, {65, 3072, 24}};
    for (int k = 0; k < 3; k++) { /* weights of the activations' type (cuBLASLt), and fp32 */
        check_recompute(ref, mnk[k][0], mnk[k][1], mnk[k][2], GK_F32);
        check_recompute(dev, mnk[k][0], mnk[k][1], mnk[k][2], dev->act);
        if (dev->act != GK_F32) check_recompute(dev, mnk[k][0], mnk[k][1], mnk[k][2], GK_F32);
    }
    check_cuts(50, 96);
    reopen_dev();
    seed = saved;
}

/* ---- the residual add fused with the layernorm after it ---- */

/* ip[2] = alias: 0 none, 1 res_out is res (buffer 0 holds res), 2 res_out is x (buffer 0 holds
 * x) */
static void run_res_ln(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    int alias = c->ip[2];
    const void *res = alias == 1 ? p[0] : p[4], *x = alias == 2 ? p[0] : p[5];
    be->ops->residual_layernorm_fwd(be, p[0], p[1], p[2], p[3], res, x, p[6], c->fp[0], NKEY, p[7],
                                    p[8], c->ip[0], c->ip[1]);
}

/* One case against the reference; zero_res: res is 0, so res_out is the dropout mask (compared
 * as one); off: device buffers one element off alignment. */
static void res_ln_case(int N, int C, int bias, float p, int alias, int zero_res, int off)
{
    size_t n = (size_t)N * C;
    int b16 = bf16_run();
    {
        tcase *c =
            new_case(run_res_ln, C + 12, "residual_layernorm_fwd N%d C%d bias %d p %g alias %s%s%s",
                     N, C, bias, p,
                     alias == 1   ? "res"
                     : alias == 2 ? "x"
                                  : "none",
                     zero_res ? " res 0" : "", off ? " off 1" : "");
        /* res or x */
        int zr = zero_res && alias == 1,
            o = add(c, B_ACT, R_OUT, n, !zr, 0.5f * (alias == 1 && !zr));
        c->b[o].stages = b16, c->b[o].mask = zero_res;
        for (int k = 0; k < 3; k++) /* ln_out, mean, rstd: of the rounded residual */
            c->b[add(c, k ? B_F32 : B_ACT, R_OUT, k ? (size_t)N : n, 1, 0)].stages = 2 * b16;
        add(c, B_ACT, alias == 1 ? R_NONE : R_IN, n, zero_res ? 0.0f : 1.0f,
            zero_res ? 0.0f : 0.5f);
        add(c, B_ACT, alias == 2 ? R_NONE : R_IN, n, 1, 0);
        add(c, B_F32, bias ? R_IN : R_NONE, (size_t)C, 1, 0);
        add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
        add(c, B_F32, bias ? R_IN : R_NONE, (size_t)C, 1, 0);
        c->ip[0] = N, c->ip[1] = C, c->ip[2] = alias, c->fp[0] = p, c->off = off;
        check(c);
    }
}

/* no bias; bias, res_out = res; bias and dropout with res 0 (res_out is the mask); bias and
 * dropout, res_out = res; dropout without biases, res_out = x */
static void res_ln_cases(int N, int C)
{
    static const int bias_of[] = {0, 1, 1, 1, 0}, alias_of[] = {0, 1, 0, 1, 2};
    for (int v = 0; v < 5; v++)
        res_ln_case(N, C, bias_of[v], v >= 2 ? 0.25f : 0.0f, alias_of[v], v == 2, 0);
}

/* The fused op is the residual add and then be's own layernorm_fwd: res_out = res + dropout(x +
 * bias) computed here in fp32 and rounded to be->act (within one unit of its last place and half
 * a unit of the dropped-out term: a device may contract to a fused multiply-add), and ln_out,
 * mean, rstd are those of layernorm_fwd on that res_out as stored, bit for bit. */
static void check_two_steps(gk_backend *be, int N, int C, int bias, float p, int alias)
{
    size_t n = (size_t)N * C;
    gk_elt t = be->act;
    float *h = malloc(sizeof(float) * (5 * n + 3 * (size_t)C + 4 * (size_t)N));
    float *res = h, *x = res + n, *got = x + n, *ln = got + n, *ln2 = ln + n, *hb = ln2 + n;
    /* st: the fused op's mean, rstd, then layernorm_fwd's */
    float *hw = hb + C, *hl = hw + C, *st = hl + C;
    void *dres = put_rand(be, res, n, t, 1, 0.5f), *dx = put_rand(be, x, n, t, 1, 0);
    float *db = put_rand(be, hb, (size_t)C, GK_F32, 1, 0),
          *dw = put_rand(be, hw, (size_t)C, GK_F32, 0.5f, 1);
    float *dl = put_rand(be, hl, (size_t)C, GK_F32, 1, 0),
          *dst = be->ops->alloc(be, 16 * (size_t)N);
    void *out = alias == 1 ? dres : alias == 2 ? dx : be->ops->alloc(be, n * 4);
    void *dln = be->ops->alloc(be, n * 4), *dln2 = be->ops->alloc(be, n * 4),
         *dres2 = be->ops->alloc(be, n * 4);
    be->ops->residual_layernorm_fwd(be, out, dln, dst, dst + N, dres, dx, bias ? db : NULL, p, NKEY,
                                    dw, bias ? dl : NULL, N, C);
    be->ops->copy(be, dres2, out, n * gk_elt_size(t));
    be->ops->layernorm_fwd(be, dln2, dst + 2 * (size_t)N, dst + 3 * (size_t)N, dres2, dw,
                           bias ? dl : NULL, N, C);
    get_vals(be, got, out, n, t), get_vals(be, ln, dln, n, t), get_vals(be, ln2, dln2, n, t);
    get_vals(be, st, dst, 4 * (size_t)N, GK_F32);
    gk_err e = {0};
    char what[128];
    snprintf(what, sizeof what, "%s residual_layernorm_fwd N%d C%d bias %d p %g alias %d",
             be->ops->name, N, C, bias, p, alias);
    CHECKF(gk_backend_sync(be, &e) == 0, "%s: %s", what, e.msg);
    size_t bad = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        float y = x[i] + (bias ? hb[i % C] : 0.0f);
        if (p > 0) y *= gk_rng_dropout(NKEY, i, p);
        float r = res[i] + y;
        if (t == GK_BF16) r = gk_bf16f(gk_f2bf16(r));
        /* a contracted res + y rounds once where this rounds y first: half a unit of y more */
        if (fabsf(got[i] - r) >
                fabsf(r) * (t == GK_BF16 ? 0x1p-7f : 0x1p-23f) + fabsf(y) * 0x1p-24f &&
            !bad++)
            w = i;
    }
    CHECKF(bad == 0, "%s: res_out is not res + dropout(x + bias) in %zu of %zu (first [%zu]: %.9g)",
           what, bad, n, w, got[w]);
    CHECKF(memcmp(ln, ln2, sizeof(float) * n) == 0, "%s: ln_out is not layernorm_fwd of res_out",
           what);
    CHECKF(memcmp(st, st + 2 * N, sizeof(float) * 2 * N) == 0,
           "%s: mean, rstd are not layernorm_fwd's", what);
    be->ops->free(be, dres), be->ops->free(be, dx), be->ops->free(be, db), be->ops->free(be, dw),
        be->ops->free(be, dl);
    if (!alias) be->ops->free(be, out);
    be->ops->free(be, dln), be->ops->free(be, dln2), be->ops->free(be, dres2),
        be->ops->free(be, dst);
    free(h);
}

static void test_residual_layernorm(void)
{
    /* N, C, bias, p, off, alias; packs and the scalar path, rows past the
     * registers (bf16 past 1024 or 256, fp32 past 1024); with dropout once more with res 0, so
     * that the dropped elements are exactly res (zeros compared as a mask) */
    static const struct { int N, C, bias; float p; int off, alias; } cs[] = {
        {1, 1, 1, 0, 0, 0},       {7, 24, 1, 0, 0, 0},      {7, 24, 0, 0, 0, 1},
        {65, 100, 0, 0.2f, 0, 0}, {65, 100, 1, 0.2f, 0, 1}, {3, 7, 1, 0.5f, 1, 0},
        {129, 64, 1, 0.1f, 1, 2}, {5, 768, 1, 0.1f, 0, 1},  {4, 300, 1, 0, 0, 2},
        {3, 1040, 1, 0.1f, 0, 0}, {2, 6200, 0, 0.1f, 0, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        for (int z = 0; z < 1 + (cs[i].p > 0); z++)
            res_ln_case(cs[i].N, cs[i].C, cs[i].bias, cs[i].p, cs[i].alias, z, cs[i].off);
    /* widths: packs of 4 and 8 or not, rows longer than the CUDA kernel keeps in registers */
    static const int CW[] = {1, 7, 24, 64, 65, 100, 300, 768, 1040};
    for (size_t j = 0; j < sizeof CW / sizeof *CW; j++) {
        for (int i = 0; i < 3; i++) res_ln_cases(NS[i], CW[j]);
        /* no bias; bias, res_out = res; dropout; dropout, res_out = x */
        for (int v = 0; v < 4; v++) {
            gk_backend *bes[2] = {ref, dev};
            for (int k = 0; k < 2; k++)
                check_two_steps(bes[k], 7, CW[j], v > 0, v >= 2 ? 0.25f : 0.0f,
                                v == 1   ? 1
                                : v == 3 ? 2
                                         : 0);
        }
    }
    reopen_dev();
}

int main(int argc, char **argv)
{
    static const ops_test tests[] = {OPS_TEST(test_gelu_fwd), OPS_TEST(test_residual_layernorm)};
    return ops_main(argc, argv, tests, (int)(sizeof tests / sizeof *tests));
}
