/* ops/optimizer.c: the op tests of scale, add, adamw and sumsq, and of the multi-tensor ops
 * (adamw_multi, zero_multi: the same bits as the one-tensor ops).
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

static void run_scale(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->scale(be, p[0], 0.37f, (size_t)c->ip[0]);
}
static void run_add(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->add(be, p[0], p[1], (size_t)c->ip[0]);
}
static void run_adamw(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    be->ops->adamw(be, p[0], p[1], p[2], p[3], (size_t)c->ip[0], 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3,
                   c->fp[0], p[4], t[4]);
}
/* every seventh element where eps matters: tiny gradient and moments */
static void eps_prep(const tcase *c, float *h[])
{
    for (int i = 0; i < c->ip[0]; i += 7) h[1][i] *= 1e-8f, h[2][i] *= 1e-8f, h[3][i] *= 1e-14f;
}

/* three steps (t = 1, 2, 3) with a bf16 copy */
static void run_adamw3(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    for (int s = 1; s <= 3; s++)
        be->ops->adamw(be, p[0], p[1], p[2], p[3], (size_t)c->ip[0], 1e-3f, 0.9f, 0.95f, 1e-8f,
                       0.1f, s, 0.5f, p[4], t[4]);
}

/* The CPU backend does the reference's IEEE operations in its order: the same bits after three
 * steps (elsewhere the model's bound) */
static void adamw3_case(int n)
{
    int same = strcmp(dev_name, "cpu") == 0;
    tcase *c =
        new_case(run_adamw3, 24, "adamw n%d 3 steps%s", n, same ? " (the reference's bits)" : "");
    for (int k = 0; k < 4; k++) {
        int i = add(c, B_F32, k == 1 ? R_IN : R_OUT, (size_t)n,
                    k == 2   ? 0.1f
                    : k == 3 ? 0.05f
                             : 1,
                    k == 3 ? 0.05f : 0);
        c->b[i].exact = same && k != 1;
    }
    c->b[add(c, B_BF16, R_OUT, (size_t)n, 1, 0)].copy_of = 1;
    c->ip[0] = n;
    check(c);
}

/* scale: one product, exact */
static void scale_case(int n, int off)
{
    tcase *c = new_case(run_scale, 0, "scale n%d%s", n, off ? " off 1" : "");
    c->b[add(c, B_F32, R_OUT, (size_t)n, 1, 0)].exact = 1;
    c->ip[0] = n, c->off = off;
    check(c);
}

/* add: one sum an element, exact; off: both one element off (the unaligned path) */
static void add_case(int n, int off)
{
    tcase *c = new_case(run_add, 0, "add n%d%s", n, off ? " off 1" : "");
    c->b[add(c, B_F32, R_OUT, (size_t)n, 1, 0)].exact = 1;
    add(c, B_F32, R_IN, (size_t)n, 1, 0);
    c->ip[0] = n, c->off = off;
    check(c);
}

/* copy: none, bf16, fp32 (the updated parameter exactly, rounded where bf16); eps: eps_prep */
static void adamw_case(int n, int off, int copy, int eps, float gs, float gamp)
{
    static const char *copies[] = {"none", "bf16", "f32"};
    tcase *c = new_case(run_adamw, 8, "adamw n%d copy %s%s%s", n, copies[copy], off ? " off 1" : "",
                        eps ? " eps" : "");
    add(c, B_F32, R_OUT, (size_t)n, 1, 0);         /* param */
    add(c, B_F32, R_IN, (size_t)n, gamp, 0);       /* grad */
    add(c, B_F32, R_OUT, (size_t)n, 0.1f, 0);      /* m */
    add(c, B_F32, R_OUT, (size_t)n, 0.01f, 0.01f); /* v >= 0 */
    c->b[add(c, copy == 2 ? B_F32 : B_BF16, copy ? R_OUT : R_NONE, (size_t)n, 1, 0)].copy_of = 1;
    c->ip[0] = n, c->fp[0] = gs, c->off = off, c->prep = eps ? eps_prep : NULL;
    check(c);
}

/* sumsq: a double on the host; fp32 squares summed in double; the same bits one element off */
static void sumsq_case(int n)
{
    float *x = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) x[i] = gk_rng_uniform(seed, (uint64_t)i) * 2.0f - 1.0f;
    seed++;
    double r = 0, d = -1, d1 = -2;
    float *px = ref->ops->alloc(ref, sizeof(float) * n),
          *dx = dev->ops->alloc(dev, sizeof(float) * (n + 1));
    CHECK(px && dx);
    if (px && dx) {
        ref->ops->to_device(ref, px, x, sizeof(float) * n);
        ref->ops->sumsq(ref, &r, px, (size_t)n);
        dev->ops->to_device(dev, dx, x, sizeof(float) * n);
        dev->ops->sumsq(dev, &d, dx, (size_t)n);
        dev->ops->to_device(dev, dx + 1, x, sizeof(float) * n);
        dev->ops->sumsq(dev, &d1, dx + 1, (size_t)n);
    }
    gk_err e = {0};
    CHECKF(gk_backend_sync(dev, &e) == 0, "sumsq: %s", e.msg);
    /* the sum of n positive terms in double; each square may be rounded to fp32 (u32), and
     * the CPU backend adds runs of 1024 squares in fp32 first (positive terms rounded to
     * nearest: a few u32 in practice, 1024 u32 at worst): 4 u32 */
    CHECKF(fabs(d - r) <= (4 * U32 + 2.0 * (n + 2) * 0x1p-53) * r, "sumsq n%d: %.17g, ref %.17g", n,
           d, r);
    CHECKF(d == d1, "sumsq n%d: %.17g one element off, %.17g aligned", n, d1, d);
    ref->ops->free(ref, px), dev->ops->free(dev, dx), free(x);
}

static void test_optimizer(void)
{
    static const int ns[] = {1, 7, 1000, 100003};
    for (int k = 0; k < 4; k++) {
        scale_case(ns[k], 0);
        add_case(ns[k], 0);
        for (int copy = 0; copy < 2; copy++) adamw_case(ns[k], 0, copy, 0, 0.7f, 1);
        sumsq_case(ns[k]);
    }
    /* sizes around packs and chunks, one element off, a bf16 copy and an
     * fp32 one or none, eps where it matters */
    adamw3_case(100003);
    static const int ms[] = {1, 7, 1001, 4099, 100003};
    for (int k = 0; k < 5; k++)
        for (int off = 0; off < 2; off++) {
            adamw_case(ms[k], off, 1, 1, 0.5f, 2);
            adamw_case(ms[k], off, k % 2 ? 2 : 0, 1, 0.5f, 2);
            scale_case(ms[k], off);
            add_case(ms[k], off);
            sumsq_case(ms[k]);
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
        ts[i] =
            (gk_adamw_tensor){d[0] + o, d[1] + o, d[2] + o, d[3] + o, copy, mt_n[i], i % 3 != 1};
    }
    for (int t = 1; t <= 2; t++) {
        float lr = 1e-3f * (float)t, gs = t == 1 ? 0.7f : 1.0f;
        if (multi) be->ops->adamw_multi(be, ts, MT_N, lr, 0.9f, 0.95f, 1e-8f, 0.1f, t, gs, tcopy);
        else
            for (int i = 0; i < MT_N; i++)
                be->ops->adamw(be, ts[i].param, ts[i].grad, ts[i].m, ts[i].v, ts[i].n, lr, 0.9f,
                               0.95f, 1e-8f, ts[i].decay ? 0.1f : 0.0f, t, gs, ts[i].copy, tcopy);
    }
    for (int k = 0; k < 4; k++) be->ops->to_host(be, h[k], d[k], bytes);
    be->ops->to_host(be, copy_out, dc, cb + 4);
    gk_err e = {0};
    CHECKF(gk_backend_sync(be, &e) == 0, "%s adamw%s: %s", be->ops->name, multi ? "_multi" : "",
           e.msg);
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
            CHECKF(memcmp(h[0][k], h[1][k], MT_TOTAL * sizeof(float)) == 0,
                   "%s adamw_multi (copy %s): %s differs from one adamw per tensor",
                   be->ops->name, tc ? "bf16" : "fp32", what[k]);
        CHECKF(memcmp(c[0], c[1], cb) == 0,
               "%s adamw_multi: the %s copy differs from one adamw per tensor", be->ops->name,
               tc ? "bf16" : "fp32");
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
