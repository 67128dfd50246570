/* test_cuda_ln.c: the CUDA backend's layernorm backward (kernels/cuda/layernorm.cu: one
 * launch, the blocks' dweight, dbias sums added by the last block of each group of blocks, the
 * group sums by the block that completes the last group) on $GK_TEST_CUDA (default cuda-emu;
 * "cuda" on a GPU), fp32 and bf16 activations, against the ref backend (double accumulators).
 * Shapes: one group and several (a partial last one, all 16 of 256 blocks), the 16-byte pack
 * path and the scalar one (C not a multiple of 8, pointers one element off), a C whose shared
 * memory needs the opt-in. Each shape's backward runs three times from the same state, with the
 * other shapes' calls between (the arrival counts must be back to zero after each call), and
 * must give the same bits every time, dinp, dweight and dbias.
 * Tolerances (u32 = 2^-24, u16 = 2^-8, the unit roundoffs of ops_harness.h's model; these
 * shapes' reference bounds per element, as the op tests' layernorm_bwd has them norm-wise): a sum
 * of n terms in any order is within (n-1) u32 sum|terms| of the exact one, per column; dinp within
 * 16 (C+4) u32 of the row's largest, plus one bf16 rounding (u16 relative). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "kernels/rng.h"
#include "test.h"

#define U32 5.9604644775390625e-8 /* 2^-24 */
#define U16 3.90625e-3            /* 2^-8 */
#define RUNS 3

static gk_backend *dev[2], *ref; /* dev[1]: bf16 activations */
static uint64_t seed = 11;

/* n values uniform in [-amp, amp), rounded to bf16 when rb. */
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

/* Device buffer of n elements of type t holding x, `off` elements into the allocation. */
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

/* |got - want| <= bound[i] (or 0) + atol * max|want| + rtol * |want|. */
static void expect(const char *what, const char *name, const float *got, const float *want, const double *bound, size_t n,
                   double atol, double rtol)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double lim = (bound ? bound[i] : 0) + atol * mx + rtol * fabs(want[i]);
        if (!(fabs((double)got[i] - want[i]) <= lim)) {
            CHECKF(0, "%s: %s element %zu of %zu is %.8g, want %.8g (limit %.3g)", what, name, i, n, got[i], want[i], lim);
            return;
        }
    }
}

typedef struct {
    int N, C, off;
    float *x, *dy, *di0, *dw0, *db0, *w;   /* host inputs */
    float *wdi, *wdw, *wdb, *wm, *ws;      /* reference results */
    void *dx, *ddy;                        /* device inputs */
    float *dwt, *dm, *ds;
    float *got[RUNS][3];                   /* dinp, dweight, dbias of each run */
} ln_case;

/* The case's inputs on both backends, the reference backward, the device's forward statistics. */
static void setup(gk_backend *be, ln_case *k)
{
    int rb = be->act == GK_BF16, N = k->N, C = k->C;
    size_t n = (size_t)N * C;
    k->x = rnd(n, 2, rb), k->w = rnd((size_t)C, 1, 0), k->dy = rnd(n, 1, rb);
    k->di0 = rnd(n, 1, rb), k->dw0 = rnd((size_t)C, 1, 0), k->db0 = rnd((size_t)C, 1, 0);
    float *rx = put(ref, k->x, n, GK_F32, 0), *rw = put(ref, k->w, C, GK_F32, 0), *ro = ref->ops->alloc(ref, 4 * n);
    float *rm = ref->ops->alloc(ref, 4 * (size_t)N), *rs = ref->ops->alloc(ref, 4 * (size_t)N);
    float *rdy = put(ref, k->dy, n, GK_F32, 0), *rdi = put(ref, k->di0, n, GK_F32, 0);
    float *rdw = put(ref, k->dw0, C, GK_F32, 0), *rdb = put(ref, k->db0, C, GK_F32, 0);
    ref->ops->layernorm_fwd(ref, ro, rm, rs, rx, rw, NULL, N, C);
    ref->ops->layernorm_bwd(ref, rdi, rdw, rdb, rdy, rx, rw, rm, rs, N, C);
    k->wdi = get(ref, rdi, n, GK_F32), k->wdw = get(ref, rdw, C, GK_F32), k->wdb = get(ref, rdb, C, GK_F32);
    k->wm = get(ref, rm, N, GK_F32), k->ws = get(ref, rs, N, GK_F32);
    ref->ops->free(ref, rx), ref->ops->free(ref, rw), ref->ops->free(ref, ro), ref->ops->free(ref, rm), ref->ops->free(ref, rs);
    ref->ops->free(ref, rdy), ref->ops->free(ref, rdi), ref->ops->free(ref, rdw), ref->ops->free(ref, rdb);
    gk_elt t = be->act;
    k->dx = put(be, k->x, n, t, k->off), k->ddy = put(be, k->dy, n, t, k->off), k->dwt = put(be, k->w, C, GK_F32, 0);
    k->dm = be->ops->alloc(be, 4 * (size_t)N), k->ds = be->ops->alloc(be, 4 * (size_t)N);
    void *dout = put(be, k->x, n, t, k->off);
    be->ops->layernorm_fwd(be, dout, k->dm, k->ds, k->dx, k->dwt, NULL, N, C);
    unput(be, dout, t, k->off);
}

/* Run r of the device backward from the initial dinp, dweight, dbias. */
static void run(gk_backend *be, ln_case *k, int r)
{
    gk_elt t = be->act;
    size_t n = (size_t)k->N * k->C;
    void *ddi = put(be, k->di0, n, t, k->off);
    float *ddw = put(be, k->dw0, k->C, GK_F32, 0), *ddb = put(be, k->db0, k->C, GK_F32, 0);
    be->ops->layernorm_bwd(be, ddi, ddw, ddb, k->ddy, k->dx, k->dwt, k->dm, k->ds, k->N, k->C);
    k->got[r][0] = get(be, ddi, n, t), k->got[r][1] = get(be, ddw, k->C, GK_F32), k->got[r][2] = get(be, ddb, k->C, GK_F32);
    unput(be, ddi, t, k->off), be->ops->free(be, ddw), be->ops->free(be, ddb);
}

static void check(gk_backend *be, ln_case *k)
{
    int rb = be->act == GK_BF16, N = k->N, C = k->C;
    size_t n = (size_t)N * C;
    double g = (C + 4) * U32, *bw = calloc((size_t)C, sizeof(double)), *bb = calloc((size_t)C, sizeof(double));
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            double d = fabs(k->dy[(size_t)i * C + c]), xn = fabs((k->x[(size_t)i * C + c] - k->wm[i]) * k->ws[i]);
            bw[c] += d * xn, bb[c] += d;
        }
    for (int c = 0; c < C; c++)
        bw[c] = (N + 8) * U32 * (bw[c] + fabs(k->dw0[c])) + g * bw[c], bb[c] = (N + 2) * U32 * (bb[c] + fabs(k->db0[c]));
    char what[96];
    snprintf(what, sizeof what, "layernorm_bwd act=%d N=%d C=%d off=%d", be->act, N, C, k->off);
    expect(what, "dinp", k->got[0][0], k->wdi, NULL, n, 16 * g, rb ? U16 : 0);
    expect(what, "dweight", k->got[0][1], k->wdw, bw, C, 0, 0);
    expect(what, "dbias", k->got[0][2], k->wdb, bb, C, 0, 0);
    for (int r = 1; r < RUNS; r++)
        CHECKF(memcmp(k->got[0][0], k->got[r][0], sizeof(float) * n) == 0 && memcmp(k->got[0][1], k->got[r][1], sizeof(float) * C) == 0 &&
                   memcmp(k->got[0][2], k->got[r][2], sizeof(float) * C) == 0,
               "%s: run %d differs from run 0", what, r);
    free(bw), free(bb);
}

static void release(gk_backend *be, ln_case *k)
{
    unput(be, k->dx, be->act, k->off), unput(be, k->ddy, be->act, k->off);
    be->ops->free(be, k->dwt), be->ops->free(be, k->dm), be->ops->free(be, k->ds);
    float *h[] = {k->x, k->dy, k->di0, k->dw0, k->db0, k->w, k->wdi, k->wdw, k->wdb, k->wm, k->ws};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) free(h[i]);
    for (int r = 0; r < RUNS; r++)
        for (int j = 0; j < 3; j++) free(k->got[r][j]);
}

static void test_layernorm_bwd(void)
{
    if (!dev[0] || !dev[1]) SKIP("no CUDA device library");
    /* blocks (8 warps a block up to C = 768): 38 (groups 16, 16, 6); 256 (16 groups, pack path);
     * 250 (scalar path, off by one); 9 (2 warps: one group); 40 of 1 warp (C = 7000: opt-in) */
    static const int shapes[][3] = {{300, 100, 0}, {4100, 776, 0}, {2000, 777, 1}, {17, 3000, 0}, {40, 7000, 0}};
    enum { NC = sizeof shapes / sizeof shapes[0] };
    for (int a = 0; a < 2; a++) {
        ln_case k[NC] = {{0}};
        for (int s = 0; s < NC; s++) {
            k[s].N = shapes[s][0], k[s].C = shapes[s][1], k[s].off = shapes[s][2];
            setup(dev[a], &k[s]);
        }
        for (int r = 0; r < RUNS; r++) /* the shapes interleaved: each call finds the counts at zero */
            for (int s = 0; s < NC; s++) run(dev[a], &k[s], r);
        CHECK(gk_backend_sync(dev[a], NULL) == 0);
        for (int s = 0; s < NC; s++) check(dev[a], &k[s]), release(dev[a], &k[s]);
    }
}

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
    RUN(test_layernorm_bwd);
    gk_backend_free(dev[0]), gk_backend_free(dev[1]), gk_backend_free(ref);
    return TEST_END();
}
