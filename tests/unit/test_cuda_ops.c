/* test_cuda_ops.c: the CUDA backend's element-wise and row-wise ops (kernels/cuda/cuda_ops*.cu)
 * on $GK_TEST_CUDA (default cuda-emu; "cuda" on a GPU), with fp32 and bf16 activations, against
 * the ref backend (double accumulators) on the same inputs (bf16: inputs rounded to bf16 first, so
 * only the device's fp32 arithmetic and its output rounding differ). Data moves only through the
 * ops interface. Shapes are chosen to hit both the 16-byte pack path and the scalar fallback (row
 * lengths that 4 or 8 do not divide, pointers one element off alignment) and the multi-pass paths
 * (row chunks, sort merges).
 * Tolerances: u32 = 2^-24, u16 = 2^-8 (unit roundoffs, as in ops_harness.h's model). A sum of n
 * terms in any order is within (n-1) u32 sum|terms| of the exact one (Higham), so fp32 reductions
 * are checked against that bound computed from the inputs, per element; a value stored as bf16 may differ by one rounding more
 * (u16 relative: the device rounds its fp32 value, the reference is rounded by the check). Plain
 * products (encoder, dropout, scale) are exact in fp32 and equal the reference rounded to bf16.
 * Transcendentals (expf, tanhf) add a few u32 of the result's scale. Determinism: reductions are
 * run twice and must agree bit for bit. The device is skipped when its library is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "kernels/comm/comm.h"
#include "kernels/comm/store.h"
#include "kernels/rng.h"
#include "test.h"

#define U32 5.9604644775390625e-8 /* 2^-24 */
#define U16 3.90625e-3            /* 2^-8, as ops_harness.h */

static gk_backend *dev[2], *ref; /* dev[1]: bf16 activations */

static gk_backend *open_backend(const char *name, int bf16)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    gk_backend_opts o = {.device = name, .threads = 1, .bf16 = bf16, .attention = GK_ATTN_AUTO};
    if (gk_backend_open(&be, &o, &e)) {
        fprintf(stderr, "note: %s\n", e.msg);
        return NULL;
    }
    return be;
}

static uint64_t seed = 7;
/* n values uniform in [-amp, amp), rounded to bf16 when rb (exact in both types then). */
static float *rnd(size_t n, float amp, int rb)
{
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        x[i] = (gk_rng_uniform(seed, i) * 2.0f - 1.0f) * amp;
        if (rb) x[i] = gk_bf16f(gk_f2bf16(x[i]));
    }
    seed++;
    return x;
}
static float rnd_act(const gk_backend *be, float x) { return be->act == GK_BF16 ? gk_bf16f(gk_f2bf16(x)) : x; }

/* Device buffer of n elements of type t holding x, starting `off` elements into the allocation
 * (off = 1 breaks 16-byte alignment); free it with unput. */
static void *put(gk_backend *be, const float *x, size_t n, gk_elt t, int off)
{
    size_t es = gk_elt_size(t);
    char *d = be->ops->alloc(be, (n + (size_t)off) * es + 64), *h = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++) gk_elt_put(h, t, i, x[i]);
    be->ops->to_device(be, d + (size_t)off * es, h, n * es);
    free(h);
    return d + (size_t)off * es;
}
static void unput(gk_backend *be, void *d, gk_elt t, int off) { be->ops->free(be, (char *)d - (size_t)off * gk_elt_size(t)); }
static float *get(gk_backend *be, const void *d, size_t n, gk_elt t)
{
    void *h = malloc(n * gk_elt_size(t) + 1);
    float *x = malloc(sizeof(float) * (n ? n : 1));
    be->ops->to_host(be, h, d, n * gk_elt_size(t));
    for (size_t i = 0; i < n; i++) x[i] = gk_elt_get(h, t, i);
    free(h);
    return x;
}

/* |got - want| <= bound[i] (a per-element bound, or NULL) + atol * max|want| + rtol * |want|. */
static void expect(const char *what, const float *got, const float *want, const double *bound, size_t n, double atol,
                   double rtol)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double lim = (bound ? bound[i] : 0) + atol * mx + rtol * fabs(want[i]);
        if (!(fabs((double)got[i] - want[i]) <= lim)) {
            CHECKF(0, "%s: element %zu of %zu is %.8g, want %.8g (limit %.3g)", what, i, n, got[i], want[i], lim);
            return;
        }
    }
}
/* The reference value as the device stores it (rounded to bf16 on a bf16 backend). */
static void round_to(const gk_backend *be, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = rnd_act(be, x[i]);
}

/* ---- bias backward ---- */

static void check_bias_bwd(gk_backend *be, int N, int C, int off)
{
    int rb = be->act == GK_BF16;
    float *dout = rnd((size_t)N * C, 1, rb), *db = rnd((size_t)C, 1, 0);
    double *bound = calloc((size_t)C, sizeof(double));
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) bound[c] += fabs(dout[(size_t)i * C + c]);
    for (int c = 0; c < C; c++) bound[c] = (N + 1) * U32 * (bound[c] + fabs(db[c]));
    float *rd = put(ref, dout, (size_t)N * C, GK_F32, 0), *rb_ = put(ref, db, (size_t)C, GK_F32, 0);
    void *dd = put(be, dout, (size_t)N * C, be->act, off);
    float *db1 = put(be, db, (size_t)C, GK_F32, 0), *db2 = put(be, db, (size_t)C, GK_F32, 0);
    ref->ops->bias_bwd(ref, rb_, rd, N, C);
    be->ops->bias_bwd(be, db1, dd, N, C);
    be->ops->bias_bwd(be, db2, dd, N, C); /* the same call again: the same bits */
    float *want = get(ref, rb_, (size_t)C, GK_F32), *got = get(be, db1, (size_t)C, GK_F32), *again = get(be, db2, (size_t)C, GK_F32);
    CHECK(gk_backend_sync(be, NULL) == 0);
    char what[96];
    snprintf(what, sizeof what, "bias_bwd %s N=%d C=%d off=%d", rb ? "bf16" : "fp32", N, C, off);
    expect(what, got, want, bound, (size_t)C, 0, 0);
    CHECKF(memcmp(got, again, sizeof(float) * (size_t)C) == 0, "%s: not deterministic", what);
    ref->ops->free(ref, rd), ref->ops->free(ref, rb_), unput(be, dd, be->act, off), be->ops->free(be, db1), be->ops->free(be, db2);
    free(dout), free(db), free(bound), free(want), free(got), free(again);
}

static void test_bias_bwd(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    static const int shapes[][3] = {{1, 1, 0}, {7, 24, 0}, {65, 100, 0}, {300, 8, 0}, {1000, 7, 0}, {513, 64, 1}, {9000, 16, 0}, {2000, 600, 0}, {4100, 776, 1}};
    for (int a = 0; a < 2; a++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) check_bias_bwd(dev[a], shapes[s][0], shapes[s][1], shapes[s][2]);
}

/* ---- embedding ---- */

static int *rnd_tokens(int n, int V)
{
    int *t = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) t[i] = (int)(gk_rng_uniform(seed, (uint64_t)i) * (float)V) % V;
    seed++;
    return t;
}
static int *put_tokens(gk_backend *be, const int *t, int n)
{
    int *d = be->ops->alloc(be, sizeof(int) * (size_t)n);
    be->ops->to_device(be, d, t, sizeof(int) * (size_t)n);
    return d;
}

static void check_encoder_fwd(gk_backend *be, int B, int T, int C, int V, gk_elt tw, float p)
{
    int N = B * T;
    float *wte = rnd((size_t)V * C, 1, tw == GK_BF16), *wpe = rnd((size_t)T * C, 1, 0);
    int *tok = rnd_tokens(N, V), *rt = put_tokens(ref, tok, N), *dt = put_tokens(be, tok, N);
    void *rw = put(ref, wte, (size_t)V * C, tw, 0), *dw = put(be, wte, (size_t)V * C, tw, 0);
    float *rp = put(ref, wpe, (size_t)T * C, GK_F32, 0), *dp = put(be, wpe, (size_t)T * C, GK_F32, 0);
    float *ro = ref->ops->alloc(ref, sizeof(float) * (size_t)N * C);
    void *dout = be->ops->alloc(be, gk_elt_size(be->act) * (size_t)N * C);
    uint64_t key = gk_rng_key(3, 1, 0, 0);
    ref->ops->encoder_fwd(ref, ro, rt, rw, tw, rp, NULL, B, T, C, p, key);
    be->ops->encoder_fwd(be, dout, dt, dw, tw, dp, NULL, B, T, C, p, key);
    float *want = get(ref, ro, (size_t)N * C, GK_F32), *got = get(be, dout, (size_t)N * C, be->act);
    CHECK(gk_backend_sync(be, NULL) == 0);
    round_to(be, want, (size_t)N * C);
    char what[96];
    snprintf(what, sizeof what, "encoder_fwd act=%d wte=%d B=%d T=%d C=%d p=%g", be->act, tw, B, T, C, p);
    expect(what, got, want, NULL, (size_t)N * C, 0, 0); /* one add and one product: exact */
    ref->ops->free(ref, rt), ref->ops->free(ref, rw), ref->ops->free(ref, rp), ref->ops->free(ref, ro);
    be->ops->free(be, dt), be->ops->free(be, dw), be->ops->free(be, dp), be->ops->free(be, dout);
    free(wte), free(wpe), free(tok), free(want), free(got);
}

static void check_encoder_bwd(gk_backend *be, int B, int T, int C, int V, float p)
{
    int N = B * T, rb = be->act == GK_BF16;
    float *dout = rnd((size_t)N * C, 1, rb), *gte = rnd((size_t)V * C, 1, 0), *gpe = rnd((size_t)T * C, 1, 0);
    int *tok = rnd_tokens(N, V), *rt = put_tokens(ref, tok, N), *dt = put_tokens(be, tok, N);
    uint64_t key = gk_rng_key(5, 2, 0, 0);
    /* bounds: (terms + 1) u32 (sum |terms| + |initial|) for each gradient element */
    double *bte = calloc((size_t)V * C, sizeof(double)), *bpe = calloc((size_t)T * C, sizeof(double));
    int *cnt = calloc((size_t)V, sizeof(int));
    for (int i = 0; i < N; i++) {
        cnt[tok[i]]++;
        for (int c = 0; c < C; c++) {
            double d = fabs(dout[(size_t)i * C + c]) * (p > 0 ? 1.0 / (1.0 - p) : 1.0);
            bte[(size_t)tok[i] * C + c] += d, bpe[(size_t)(i % T) * C + c] += d;
        }
    }
    for (size_t i = 0; i < (size_t)V * C; i++) bte[i] = (cnt[i / C] + 2) * U32 * (bte[i] + fabs(gte[i]));
    for (size_t i = 0; i < (size_t)T * C; i++) bpe[i] = (B + 2) * U32 * (bpe[i] + fabs(gpe[i]));
    float *rd = put(ref, dout, (size_t)N * C, GK_F32, 0), *rte = put(ref, gte, (size_t)V * C, GK_F32, 0);
    float *rpe = put(ref, gpe, (size_t)T * C, GK_F32, 0);
    void *dd = put(be, dout, (size_t)N * C, be->act, 0);
    float *dte[2], *dpe[2], *got[4];
    ref->ops->encoder_bwd(ref, rte, rpe, rd, rt, B, T, C, p, key);
    for (int r = 0; r < 2; r++) {
        dte[r] = put(be, gte, (size_t)V * C, GK_F32, 0), dpe[r] = put(be, gpe, (size_t)T * C, GK_F32, 0);
        be->ops->encoder_bwd(be, dte[r], dpe[r], dd, dt, B, T, C, p, key);
        got[2 * r] = get(be, dte[r], (size_t)V * C, GK_F32), got[2 * r + 1] = get(be, dpe[r], (size_t)T * C, GK_F32);
    }
    CHECK(gk_backend_sync(be, NULL) == 0);
    float *wte = get(ref, rte, (size_t)V * C, GK_F32), *wpe = get(ref, rpe, (size_t)T * C, GK_F32);
    char what[96];
    snprintf(what, sizeof what, "encoder_bwd dwte act=%d B=%d T=%d C=%d V=%d p=%g", be->act, B, T, C, V, p);
    expect(what, got[0], wte, bte, (size_t)V * C, 0, 0);
    CHECKF(memcmp(got[0], got[2], sizeof(float) * (size_t)V * C) == 0, "%s: not deterministic", what);
    snprintf(what, sizeof what, "encoder_bwd dwpe act=%d B=%d T=%d C=%d p=%g", be->act, B, T, C, p);
    expect(what, got[1], wpe, bpe, (size_t)T * C, 0, 0);
    CHECKF(memcmp(got[1], got[3], sizeof(float) * (size_t)T * C) == 0, "%s: not deterministic", what);
    ref->ops->free(ref, rt), ref->ops->free(ref, rd), ref->ops->free(ref, rte), ref->ops->free(ref, rpe);
    be->ops->free(be, dt), be->ops->free(be, dd);
    for (int r = 0; r < 2; r++) be->ops->free(be, dte[r]), be->ops->free(be, dpe[r]), free(got[2 * r]), free(got[2 * r + 1]);
    free(dout), free(gte), free(gpe), free(tok), free(bte), free(bpe), free(cnt), free(wte), free(wpe);
}

static void test_encoder(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    for (int a = 0; a < 2; a++)
        for (int tw = 0; tw < 2; tw++) {
            check_encoder_fwd(dev[a], 2, 7, 24, 11, (gk_elt)tw, 0);
            check_encoder_fwd(dev[a], 1, 1, 7, 3, (gk_elt)tw, 0);
            check_encoder_fwd(dev[a], 3, 65, 100, 50, (gk_elt)tw, 0.25f);
        }
    for (int a = 0; a < 2; a++) {
        check_encoder_bwd(dev[a], 1, 1, 7, 3, 0);
        check_encoder_bwd(dev[a], 2, 7, 24, 5, 0);
        check_encoder_bwd(dev[a], 2, 65, 100, 40, 0.25f);
        check_encoder_bwd(dev[a], 3, 700, 8, 40, 0);  /* 2100 keys: tiles and two merge passes */
        check_encoder_bwd(dev[a], 1, 1500, 16, 1, 0); /* one token everywhere: one long run */
    }
}

/* ---- layernorm ---- */

static void check_layernorm(gk_backend *be, int N, int C, int with_bias, int off)
{
    int rb = be->act == GK_BF16;
    size_t n = (size_t)N * C;
    float *x = rnd(n, 2, rb), *w = rnd((size_t)C, 1, 0), *b = rnd((size_t)C, 1, 0), *dy = rnd(n, 1, rb);
    float *di0 = rnd(n, 1, rb), *dw0 = rnd((size_t)C, 1, 0), *db0 = rnd((size_t)C, 1, 0);
    for (int i = 0; i < N; i++) /* rows with a mean */
        x[(size_t)i * C] = rb ? gk_bf16f(gk_f2bf16(x[(size_t)i * C] + 3.0f)) : x[(size_t)i * C] + 3.0f;
    /* reference forward and backward */
    float *rx = put(ref, x, n, GK_F32, 0), *rw = put(ref, w, C, GK_F32, 0), *rbb = with_bias ? put(ref, b, C, GK_F32, 0) : NULL;
    float *ro = ref->ops->alloc(ref, 4 * n), *rm = ref->ops->alloc(ref, 4 * (size_t)N), *rs = ref->ops->alloc(ref, 4 * (size_t)N);
    float *rdy = put(ref, dy, n, GK_F32, 0), *rdi = put(ref, di0, n, GK_F32, 0), *rdw = put(ref, dw0, C, GK_F32, 0);
    float *rdb = put(ref, db0, C, GK_F32, 0);
    ref->ops->layernorm_fwd(ref, ro, rm, rs, rx, rw, rbb, N, C);
    ref->ops->layernorm_bwd(ref, rdi, rdw, with_bias ? rdb : NULL, rdy, rx, rw, rm, rs, N, C);
    /* device: forward, then the backward twice from the same state (determinism) */
    gk_elt t = be->act;
    void *dx = put(be, x, n, t, off), *dyd = put(be, dy, n, t, off), *dout = put(be, x, n, t, off);
    float *dwt = put(be, w, C, GK_F32, 0), *dbb = with_bias ? put(be, b, C, GK_F32, 0) : NULL;
    float *dm = be->ops->alloc(be, 4 * (size_t)N), *ds = be->ops->alloc(be, 4 * (size_t)N), *got[8];
    be->ops->layernorm_fwd(be, dout, dm, ds, dx, dwt, dbb, N, C);
    got[0] = get(be, dout, n, t), got[1] = get(be, dm, N, GK_F32), got[2] = get(be, ds, N, GK_F32);
    for (int r = 0; r < 2; r++) {
        void *ddi = put(be, di0, n, t, off);
        float *ddw = put(be, dw0, C, GK_F32, 0), *ddb = put(be, db0, C, GK_F32, 0);
        be->ops->layernorm_bwd(be, ddi, ddw, with_bias ? ddb : NULL, dyd, dx, dwt, dm, ds, N, C);
        got[3 + 3 * r] = get(be, ddi, n, t), got[4 + 3 * r] = get(be, ddw, C, GK_F32);
        if (r == 0) got[5] = get(be, ddb, C, GK_F32);
        unput(be, ddi, t, off), be->ops->free(be, ddw), be->ops->free(be, ddb);
    }
    CHECK(gk_backend_sync(be, NULL) == 0);
    float *wo = get(ref, ro, n, GK_F32), *wm = get(ref, rm, N, GK_F32), *ws = get(ref, rs, N, GK_F32);
    float *wdi = get(ref, rdi, n, GK_F32), *wdw = get(ref, rdw, C, GK_F32), *wdb = get(ref, rdb, C, GK_F32);
    /* row statistics: sums of C terms (relative (C+4) u32); the outputs add one bf16 rounding.
     * dweight, dbias: sums over N rows, bounded per column as in bias_bwd. */
    double g = (C + 4) * U32, *bw = calloc((size_t)C, sizeof(double)), *bb = calloc((size_t)C, sizeof(double));
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            double d = fabs(dy[(size_t)i * C + c]), xn = fabs((x[(size_t)i * C + c] - wm[i]) * ws[i]);
            bw[c] += d * xn, bb[c] += d;
        }
    for (int c = 0; c < C; c++) bw[c] = (N + 8) * U32 * (bw[c] + fabs(dw0[c])) + g * bw[c], bb[c] = (N + 2) * U32 * (bb[c] + fabs(db0[c]));
    char what[112];
    snprintf(what, sizeof what, "layernorm act=%d N=%d C=%d bias=%d off=%d", t, N, C, with_bias, off);
    expect(what, got[1], wm, NULL, N, g, g);
    expect(what, got[2], ws, NULL, N, 0, 4 * g);
    expect(what, got[0], wo, NULL, n, 8 * g, rb ? U16 : 0);
    expect(what, got[3], wdi, NULL, n, 16 * g, rb ? U16 : 0);
    expect(what, got[4], wdw, bw, C, 0, 0);
    if (with_bias) expect(what, got[5], wdb, bb, C, 0, 0);
    CHECKF(memcmp(got[3], got[6], sizeof(float) * n) == 0 && memcmp(got[4], got[7], sizeof(float) * C) == 0,
           "%s: backward not deterministic", what);
    ref->ops->free(ref, rx), ref->ops->free(ref, rw), ref->ops->free(ref, rbb), ref->ops->free(ref, ro), ref->ops->free(ref, rm);
    ref->ops->free(ref, rs), ref->ops->free(ref, rdy), ref->ops->free(ref, rdi), ref->ops->free(ref, rdw), ref->ops->free(ref, rdb);
    unput(be, dx, t, off), unput(be, dyd, t, off), unput(be, dout, t, off);
    be->ops->free(be, dwt), be->ops->free(be, dbb), be->ops->free(be, dm), be->ops->free(be, ds);
    for (int k = 0; k < 8; k++) free(got[k]);
    free(x), free(w), free(b), free(dy), free(di0), free(dw0), free(db0), free(bw), free(bb);
    free(wo), free(wm), free(ws), free(wdi), free(wdw), free(wdb);
}

static void test_layernorm(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    static const int shapes[][4] = {{1, 24, 1, 0}, {7, 100, 0, 0}, {65, 7, 1, 0}, {5, 768, 1, 0}, {33, 64, 1, 1}, {2100, 16, 1, 0}, {3, 6200, 1, 0}};
    for (int a = 0; a < 2; a++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            check_layernorm(dev[a], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
}

/* ---- softmax cross-entropy ---- */

static void check_xent(gk_backend *be, int N, int V, int Vp, int alias)
{
    int rb = be->act == GK_BF16;
    size_t n = (size_t)N * Vp;
    float *lg = rnd(n, 4, rb), dloss = 1.0f / 3;
    int *tg = malloc(sizeof(int) * (size_t)N);
    for (int i = 0; i < N; i++) tg[i] = i % 5 == 3 ? -1 : (i * 7919) % V;
    int *rt = put_tokens(ref, tg, N), *dt = put_tokens(be, tg, N);
    float *rl = put(ref, lg, n, GK_F32, 0), *rloss = ref->ops->alloc(ref, 4 * (size_t)N), *rlse = ref->ops->alloc(ref, 4 * (size_t)N);
    float *rd = ref->ops->alloc(ref, 4 * n);
    ref->ops->xent_fwd(ref, rloss, rlse, rl, rt, N, V, Vp);
    ref->ops->xent_bwd(ref, rd, rl, rlse, rt, dloss, N, V, Vp);
    gk_elt t = be->act;
    void *dl = put(be, lg, n, t, 0), *dd = alias ? dl : be->ops->alloc(be, gk_elt_size(t) * n);
    float *dloss_ = be->ops->alloc(be, 4 * (size_t)N), *dlse = be->ops->alloc(be, 4 * (size_t)N);
    be->ops->xent_fwd(be, dloss_, dlse, dl, dt, N, V, Vp);
    be->ops->xent_bwd(be, dd, dl, dlse, dt, dloss, N, V, Vp);
    float *gl = get(be, dloss_, N, GK_F32), *gz = get(be, dlse, N, GK_F32), *gd = get(be, dd, n, t);
    CHECK(gk_backend_sync(be, NULL) == 0);
    float *wl = get(ref, rloss, N, GK_F32), *wz = get(ref, rlse, N, GK_F32), *wd = get(ref, rd, n, GK_F32);
    /* lse: a sum of V exponentials (each a few u32) and a log: (V + 8) u32 of its scale; the
     * gradient: exp of (x - lse), whose argument carries lse's error: relative (V + 16) u32 */
    double g = (V + 16) * U32 * 8;
    char what[96];
    snprintf(what, sizeof what, "xent act=%d N=%d V=%d Vp=%d alias=%d", t, N, V, Vp, alias);
    expect(what, gz, wz, NULL, N, g, g);
    expect(what, gl, wl, NULL, N, g, g);
    expect(what, gd, wd, NULL, n, g * dloss, g + (rb ? U16 : 0));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < Vp; j++)
            if ((tg[i] < 0 || j >= V) && gd[(size_t)i * Vp + j] != 0.0f) {
                CHECKF(0, "%s: dlogits[%d][%d] = %g, want exactly 0", what, i, j, gd[(size_t)i * Vp + j]);
                i = N;
                break;
            }
    ref->ops->free(ref, rt), ref->ops->free(ref, rl), ref->ops->free(ref, rloss), ref->ops->free(ref, rlse), ref->ops->free(ref, rd);
    be->ops->free(be, dt), be->ops->free(be, dl), be->ops->free(be, dloss_), be->ops->free(be, dlse);
    if (!alias) be->ops->free(be, dd);
    free(lg), free(tg), free(gl), free(gz), free(gd), free(wl), free(wz), free(wd);
}

static void test_xent(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    for (int a = 0; a < 2; a++) {
        check_xent(dev[a], 1, 1, 1, 0);
        check_xent(dev[a], 7, 100, 104, 0);
        check_xent(dev[a], 7, 100, 104, 1);
        check_xent(dev[a], 5, 37, 37, 1);
        check_xent(dev[a], 9, 3000, 3008, 0);
    }
}

/* ---- the residual add fused with layernorm ---- */

/* res_out = res + dropout(x + bias) against the reference's (two roundings, and bf16's), dropped
 * elements exactly res; ln_out, mean, rstd against the reference's layernorm of the device's
 * res_out as stored (so bf16 runs add only the output's rounding), as in check_layernorm.
 * alias: 0 none, 1 res_out is res, 2 res_out is x. */
static void check_res_ln(gk_backend *be, int N, int C, int with_bias, float p, int off, int alias)
{
    int rb = be->act == GK_BF16;
    size_t n = (size_t)N * C;
    gk_elt t = be->act;
    float *x = rnd(n, 3, rb), *y = rnd(n, 1, rb), *b = rnd((size_t)C, 1, 0), *w = rnd((size_t)C, 1, 0), *lb = rnd((size_t)C, 1, 0);
    for (int i = 0; i < N; i++) y[(size_t)i * C] = rnd_act(be, y[(size_t)i * C] + 3.0f); /* rows with a mean */
    uint64_t key = gk_rng_key(13, (uint64_t)N, (uint32_t)C, 2);
    float *rx = put(ref, x, n, GK_F32, 0), *ry = put(ref, y, n, GK_F32, 0), *rbias = put(ref, b, C, GK_F32, 0);
    float *rw = put(ref, w, C, GK_F32, 0), *rlb = put(ref, lb, C, GK_F32, 0), *rr = ref->ops->alloc(ref, 4 * n);
    float *ro = ref->ops->alloc(ref, 4 * n), *rst = ref->ops->alloc(ref, 8 * (size_t)N);
    ref->ops->residual_layernorm_fwd(ref, rr, ro, rst, rst + N, ry, rx, with_bias ? rbias : NULL, p, key, rw, rlb, N, C);
    void *dx = put(be, x, n, t, off), *dy = put(be, y, n, t, off), *dout = alias ? NULL : put(be, y, n, t, off);
    void *res_out = alias == 1 ? dy : alias == 2 ? dx : dout, *dln = put(be, x, n, t, off);
    float *dbias = put(be, b, C, GK_F32, 0), *dw = put(be, w, C, GK_F32, 0), *dlb = put(be, lb, C, GK_F32, 0);
    float *dst = be->ops->alloc(be, 8 * (size_t)N);
    be->ops->residual_layernorm_fwd(be, res_out, dln, dst, dst + N, dy, dx, with_bias ? dbias : NULL, p, key, dw,
                                    with_bias ? dlb : NULL, N, C);
    float *got = get(be, res_out, n, t), *gln = get(be, dln, n, t), *gst = get(be, dst, 2 * (size_t)N, GK_F32);
    CHECK(gk_backend_sync(be, NULL) == 0);
    float *wr = get(ref, rr, n, GK_F32), *dres = put(ref, got, n, GK_F32, 0); /* the layernorm of got */
    ref->ops->layernorm_fwd(ref, ro, rst, rst + N, dres, rw, with_bias ? rlb : NULL, N, C);
    float *wo = get(ref, ro, n, GK_F32), *wst = get(ref, rst, 2 * (size_t)N, GK_F32);
    char what[128];
    snprintf(what, sizeof what, "residual_layernorm_fwd act=%d N=%d C=%d bias=%d p=%g off=%d alias=%d", t, N, C, with_bias, p,
             off, alias);
    expect(what, got, wr, NULL, n, 2 * U32, 2 * U32 + (rb ? U16 : 0)); /* res + (x + b) m: two roundings */
    for (size_t i = 0; p > 0 && i < n; i++) /* dropped elements (ref's mask) are res exactly */
        if (gk_rng_dropout(key, i, p) == 0.0f && got[i] != y[i]) {
            CHECKF(0, "%s: element %zu is %.8g, want res %.8g (dropped)", what, i, got[i], y[i]);
            break;
        }
    double g = (C + 4) * U32;
    expect(what, gst, wst, NULL, N, g, g);
    expect(what, gst + N, wst + N, NULL, N, 0, 4 * g);
    expect(what, gln, wo, NULL, n, 8 * g, rb ? U16 : 0);
    ref->ops->free(ref, rx), ref->ops->free(ref, ry), ref->ops->free(ref, rbias), ref->ops->free(ref, rw), ref->ops->free(ref, rlb);
    ref->ops->free(ref, rr), ref->ops->free(ref, ro), ref->ops->free(ref, rst), ref->ops->free(ref, dres);
    unput(be, dx, t, off), unput(be, dy, t, off), unput(be, dln, t, off);
    if (!alias) unput(be, dout, t, off);
    be->ops->free(be, dbias), be->ops->free(be, dw), be->ops->free(be, dlb), be->ops->free(be, dst);
    free(x), free(y), free(b), free(w), free(lb), free(got), free(gln), free(gst), free(wr), free(wo), free(wst);
}

static void test_residual_layernorm(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    /* packs and the scalar fallback (C % 8, C % 4, off 1); rows longer than the registers keep
     * (bf16 past 1024 or 256, fp32 past 1024) */
    static const struct { int N, C, bias; float p; int off, alias; } cs[] = {
        {1, 1, 1, 0, 0, 0},      {7, 24, 1, 0, 0, 0},     {7, 24, 0, 0, 0, 1},      {65, 100, 0, 0.2f, 0, 0},
        {65, 100, 1, 0.2f, 0, 1}, {3, 7, 1, 0.5f, 1, 0},  {129, 64, 1, 0.1f, 1, 2}, {5, 768, 1, 0.1f, 0, 1},
        {4, 300, 1, 0, 0, 2},    {3, 1040, 1, 0.1f, 0, 0}, {2, 6200, 0, 0.1f, 0, 1},
    };
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
            check_res_ln(dev[a], cs[i].N, cs[i].C, cs[i].bias, cs[i].p, cs[i].off, cs[i].alias);
}

/* ---- element-wise: GELU forward and backward, dropout backward ---- */

static void check_elementwise(gk_backend *be, int N, int C, float p, int off, int alias)
{
    int rb = be->act == GK_BF16;
    size_t n = (size_t)N * C;
    gk_elt t = be->act;
    float *x = rnd(n, 3, rb), *y = rnd(n, 1, rb);
    uint64_t key = gk_rng_key(11, (uint64_t)N, (uint32_t)C, 1);
    float *rx = put(ref, x, n, GK_F32, 0), *ry = put(ref, y, n, GK_F32, 0);
    float *rg = ref->ops->alloc(ref, 4 * n), *rd = ref->ops->alloc(ref, 4 * n), *rf = ref->ops->alloc(ref, 4 * n);
    ref->ops->gelu_fwd(ref, rf, rx, N, C);
    ref->ops->gelu_bwd(ref, rg, rx, ry, N, C);
    ref->ops->dropout_bwd(ref, rd, ry, n, p, key);
    void *dx = put(be, x, n, t, off), *df = put(be, y, n, t, off), *dy[2], *out[2];
    be->ops->gelu_fwd(be, df, dx, N, C);
    for (int k = 0; k < 2; k++) dy[k] = put(be, y, n, t, off), out[k] = alias ? dy[k] : put(be, y, n, t, off);
    be->ops->gelu_bwd(be, out[0], dx, dy[0], N, C);
    be->ops->dropout_bwd(be, out[1], dy[1], n, p, key);
    float *got[2], *gf = get(be, df, n, t);
    for (int k = 0; k < 2; k++) got[k] = get(be, out[k], n, t);
    CHECK(gk_backend_sync(be, NULL) == 0);
    float *wg = get(ref, rg, n, GK_F32), *wd = get(ref, rd, n, GK_F32), *wf = get(ref, rf, n, GK_F32);
    char what[112];
    snprintf(what, sizeof what, "act=%d N=%d C=%d p=%g off=%d alias=%d", t, N, C, p, off, alias);
    char name[160];
    snprintf(name, sizeof name, "gelu_fwd %s", what); /* tanhf and a few products, then rounded */
    expect(name, gf, wf, NULL, n, 8 * U32, 8 * U32 + (rb ? U16 : 0));
    /* gelu': tanhf and a few products, 16 u32 of the tensor's scale (it crosses zero near x = -0.75) */
    snprintf(name, sizeof name, "gelu_bwd %s", what);
    expect(name, got[0], wg, NULL, n, 16 * U32, 16 * U32 + (rb ? U16 : 0));
    snprintf(name, sizeof name, "dropout_bwd %s", what); /* one product: exact, then rounded */
    round_to(be, wd, n);
    expect(name, got[1], wd, NULL, n, 0, 0);
    ref->ops->free(ref, rx), ref->ops->free(ref, ry), ref->ops->free(ref, rg), ref->ops->free(ref, rd), ref->ops->free(ref, rf);
    unput(be, dx, t, off), unput(be, df, t, off);
    for (int k = 0; k < 2; k++) {
        unput(be, dy[k], t, off);
        if (!alias) unput(be, out[k], t, off);
        free(got[k]);
    }
    free(x), free(y), free(wg), free(wd), free(gf), free(wf);
}

static void test_elementwise(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    for (int a = 0; a < 2; a++) {
        check_elementwise(dev[a], 1, 1, 0, 0, 0);
        check_elementwise(dev[a], 7, 24, 0, 0, 0);
        check_elementwise(dev[a], 7, 24, 0, 0, 1);
        check_elementwise(dev[a], 65, 100, 0.2f, 0, 0);
        check_elementwise(dev[a], 65, 100, 0.2f, 0, 1);
        check_elementwise(dev[a], 3, 7, 0.5f, 1, 0);
        check_elementwise(dev[a], 129, 64, 0.1f, 1, 1);
    }
}

/* ---- optimizer: sumsq, scale, AdamW (fp32 buffers on both activation types) ---- */

static void check_optim(gk_backend *be, size_t n, int off, gk_elt tcopy, int with_copy)
{
    float *w = rnd(n, 1, 0), *g = rnd(n, 2, 0), *m = rnd(n, 0.1f, 0), *v = rnd(n, 0.01f, 0);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    for (size_t i = 0; i < n; i += 7) g[i] *= 1e-8f, m[i] *= 1e-8f, v[i] *= 1e-14f; /* where eps matters */
    float *rw = put(ref, w, n, GK_F32, 0), *rg = put(ref, g, n, GK_F32, 0), *rm = put(ref, m, n, GK_F32, 0), *rv = put(ref, v, n, GK_F32, 0);
    float *dw = put(be, w, n, GK_F32, off), *dg = put(be, g, n, GK_F32, off), *dm = put(be, m, n, GK_F32, off);
    float *dv = put(be, v, n, GK_F32, off), *dg0 = put(be, g, n, GK_F32, 0);
    void *dc = with_copy ? put(be, w, n, tcopy, off) : NULL;
    double want_ss = 0, got_ss = -1, got_ss0 = -2;
    ref->ops->sumsq(ref, &want_ss, rg, n);
    be->ops->sumsq(be, &got_ss, dg, n);
    be->ops->sumsq(be, &got_ss0, dg0, n); /* the other alignment: the same bits */
    ref->ops->adamw(ref, rw, rg, rm, rv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.5f, NULL, GK_F32);
    be->ops->adamw(be, dw, dg, dm, dv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.5f, dc, tcopy);
    ref->ops->scale(ref, rg, 0.37f, n);
    be->ops->scale(be, dg, 0.37f, n);
    float *gw = get(be, dw, n, GK_F32), *gm = get(be, dm, n, GK_F32), *gv = get(be, dv, n, GK_F32), *gg = get(be, dg, n, GK_F32);
    float *gc = with_copy ? get(be, dc, n, tcopy) : NULL;
    CHECK(gk_backend_sync(be, NULL) == 0);
    float *ww = get(ref, rw, n, GK_F32), *wm = get(ref, rm, n, GK_F32), *wv = get(ref, rv, n, GK_F32), *wg = get(ref, rg, n, GK_F32);
    char what[96];
    snprintf(what, sizeof what, "optim act=%d n=%zu off=%d copy=%d/%d", be->act, n, off, with_copy, tcopy);
    /* sums of n positive doubles: (n + 4) 2^-53 relative */
    CHECKF(fabs(got_ss - want_ss) <= (n + 4) * 0x1p-53 * want_ss, "%s: sumsq %.17g, want %.17g", what, got_ss, want_ss);
    CHECKF(got_ss == got_ss0, "%s: sumsq %.17g at offset %d, %.17g aligned", what, got_ss, off, got_ss0);
    /* the same float operations as ref, but the device may fuse a multiply-add: a few u32 of the
     * terms (m's two terms can cancel: a real GPU's contraction showed that, 2026-11-27) */
    double *bm = calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++) bm[i] = 4 * U32 * (fabs(0.9 * m[i]) + fabs(0.1 * 0.5 * g[i]));
    expect(what, gm, wm, bm, n, 0, 4 * U32);
    free(bm);
    expect(what, gv, wv, NULL, n, 0, 4 * U32);
    expect(what, gw, ww, NULL, n, 4 * U32, 4 * U32);
    expect(what, gg, wg, NULL, n, 0, 0); /* scale: one product, exact */
    for (size_t i = 0; gc && i < n; i++)
        if (gc[i] != (tcopy == GK_BF16 ? gk_bf16f(gk_f2bf16(gw[i])) : gw[i])) {
            CHECKF(0, "%s: copy[%zu] = %.8g, param %.8g", what, i, gc[i], gw[i]);
            break;
        }
    ref->ops->free(ref, rw), ref->ops->free(ref, rg), ref->ops->free(ref, rm), ref->ops->free(ref, rv);
    unput(be, dw, GK_F32, off), unput(be, dg, GK_F32, off), unput(be, dm, GK_F32, off), unput(be, dv, GK_F32, off);
    be->ops->free(be, dg0);
    if (dc) unput(be, dc, tcopy, off);
    free(w), free(g), free(m), free(v), free(gw), free(gm), free(gv), free(gg), free(gc), free(ww), free(wm), free(wv), free(wg);
}

static void test_optim(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    static const size_t sizes[] = {1, 7, 1001, 4099, 100003};
    for (int a = 0; a < 2; a++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int off = 0; off < 2; off++) {
                check_optim(dev[a], sizes[s], off, GK_BF16, 1);
                check_optim(dev[a], sizes[s], off, GK_F32, s % 2);
            }
}

/* One rank through the device's NCCL (on a GPU the real library; test_nccl_emu has the ranks):
 * gk_comm_open (the comm_open slot) of a world of 1 through a store of its own, an allreduce between two ops on the device's stream (it must
 * see the first and the second must see it: x * 2, sum of one rank, * 0.5 is x again), allreduce_host
 * and barrier, close. */
static void test_comm_one_rank(void)
{
    gk_backend *be = dev[0];
    if (!be) SKIP("no CUDA device library");
    size_t len = 1001;
    gk_err e = {0};
    gk_comm *c = NULL;
    gk_store *s = NULL;
    CHECK_OK(gk_store_open(&s, "127.0.0.1", 0, 1, 0, 60, &e), &e);
    if (s) CHECK_OK(gk_comm_open(be, s, 0, 1, 60, NULL, &c, &e), &e);
    if (!c) {
        if (s) gk_store_close(s);
        return;
    }
    float *x = rnd(len, 1, 0), *d = put(be, x, len, GK_F32, 0);
    be->ops->scale(be, d, 2.0f, len);
    CHECK_OK(c->ops->allreduce(c, d, len, &e), &e);
    be->ops->scale(be, d, 0.5f, len);
    float *y = get(be, d, len, GK_F32);
    CHECK(memcmp(x, y, len * sizeof(float)) == 0);
    double v[2] = {1.5, -2};
    CHECK_OK(c->ops->allreduce_host(c, v, 2, &e), &e);
    CHECK(v[0] == 1.5 && v[1] == -2);
    CHECK_OK(c->ops->barrier(c, &e), &e);
    gk_comm_close(c);
    gk_store_close(s);
    CHECK_OK(gk_backend_status(be, &e), &e);
    unput(be, d, GK_F32, 0);
    free(x), free(y);
}

/* Opens the device with both activation types and the reference; reserves scratch for the
 * largest shapes below. */
static void test_open(void)
{
    const char *name = getenv("GK_TEST_CUDA");
    name = name && *name ? name : "cuda-emu";
    dev[0] = open_backend(name, 0), dev[1] = open_backend(name, 1), ref = open_backend("ref", 0);
    CHECK(ref != NULL);
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    gk_err e = {0};
    for (int a = 0; a < 2; a++) CHECK_OK(dev[a]->ops->reserve(dev[a], 10000, 2048, 0, 0, &e), &e);
}

int main(void)
{
    RUN(test_open);
    RUN(test_bias_bwd);
    RUN(test_encoder);
    RUN(test_layernorm);
    RUN(test_residual_layernorm);
    RUN(test_xent);
    RUN(test_elementwise);
    RUN(test_optim);
    RUN(test_comm_one_rank);
    gk_backend_free(dev[0]), gk_backend_free(dev[1]), gk_backend_free(ref);
    return TEST_END();
}
