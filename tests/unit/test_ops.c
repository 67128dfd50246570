/* test_ops.c: the same op tests on every backend, against the reference backend (kernels/cpu/ref.c),
 * moving data only through the ops interface (alloc, to_device, op, to_host), as ggml's
 * test-backend-ops does. Devices: argv, else $GK_TEST_DEVICES, else "cpu cuda-emu"; a device whose
 * library is missing (or, for cuda, without a GPU) is skipped with a note. Each device runs with
 * fp32 activations, and with bf16 ones where it has them (cuda, cuda-emu).
 *
 * Every case is a list of buffers (activation-typed, fp32, weight-typed, int) and a function that
 * runs the op on one backend. The reference runs in fp32 (double inside) on the same values: in
 * bf16 runs the activation inputs (and bf16 weights) are rounded to bf16 first on both sides, so
 * only the device's own roundings and its summation order differ. Tolerances, norm-wise relative:
 *   tol = 2 (n + 2) max(d32, u32) + 2 s max(d16, u16)
 * u32 = 2^-24 and u16 = 2^-8 are the unit roundoffs of fp32 and bf16; n is the longest fp32
 * reduction in the op (a float sum of n terms errs by at most n u32 relative to the sum of the
 * terms' magnitudes, Higham's gamma_n; transcendental functions count 8); s is the number of bf16
 * roundings on the path to that output (0 in fp32 runs). d32 and d16 measure the problem's own
 * conditioning: the reference's relative change when every input is perturbed by one fp32 or
 * bf16 rounding (random signs), i.e. how much one rounding of that size can move this output.
 * Dropout outputs are also compared mask-wise, exactly (the same elements are zero). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "kernels/cpu/ref.h"
#include "kernels/rng.h"
#include "test.h"

#define U32 5.9604644775390625e-8 /* 2^-24 */
#define U16 3.90625e-3            /* 2^-8 */

static gk_backend *dev, *ref;
static const char *dev_name;
static uint64_t seed = 1;

/* Opens dev_name with bf16 activations or not; 0, or the error in e. */
static int open_dev(int bf16, gk_err *e)
{
    gk_backend_opts o = {dev_name, 0, bf16};
    int rc = gk_backend_open(&dev, &o, e);
    if (rc == 0 && (rc = dev->ops->reserve(dev, 4096, 1024, 64, 128, e))) { /* above every case */
        gk_backend_free(dev);
        dev = NULL;
    }
    return rc;
}
/* After a failed case: a fresh device, so that its sticky error does not fail every later one. */
static void reopen_dev(void)
{
    if (!dev->err.code) return;
    int bf16 = dev->act == GK_BF16;
    gk_err e = {0};
    gk_backend_free(dev);
    if (open_dev(bf16, &e)) {
        fprintf(stderr, "test_ops: reopening %s: %s\n", dev_name, e.msg);
        exit(1);
    }
}

/* ---- cases ---- */

typedef enum { B_ACT, B_F32, B_WT, B_INT, B_BF16 } bclass; /* element type: be->act, fp32, c->wt, int32, bf16 */
typedef enum { R_NONE, R_IN, R_OUT, R_TMP } brole;         /* R_OUT: compared (starts random); R_TMP: not */
typedef struct tbuf {
    bclass cls;
    brole role;
    size_t n;
    float scale, offset; /* random start values: offset + scale * U(-1, 1) */
    int stages;          /* bf16 roundings on the path to this output */
    int mask;            /* dropout output: zeros compared exactly */
    int copy_of;         /* > 0: exactly the bf16 rounding of the device's buffer copy_of - 1 */
} tbuf;

#define MAXB 9
typedef struct tcase tcase;
typedef void (*run_fn)(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c);
struct tcase {
    char what[128];
    int nb;
    tbuf b[MAXB];
    int *ints[MAXB]; /* values of B_INT buffers */
    int n_red;       /* longest fp32 reduction */
    gk_elt wt;       /* the weight type of B_WT buffers */
    run_fn run;
    int ip[12];
    float fp[4];
};

static int add(tcase *c, bclass cls, brole role, size_t n, float scale, float offset)
{
    tbuf *b = &c->b[c->nb];
    memset(b, 0, sizeof *b);
    b->cls = cls, b->role = role, b->n = n ? n : 1, b->scale = scale, b->offset = offset;
    return c->nb++;
}
static int bf16_run(void) { return dev->act == GK_BF16; }
static int *rand_ints(size_t n, int lo, int hi)
{
    int *x = malloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) x[i] = lo + (int)(gk_rng_uniform(seed, i) * (float)(hi - lo));
    seed++;
    return x;
}

/* ---- the driver ---- */

static gk_elt type_of(const tcase *c, int i, int is_ref)
{
    switch (c->b[i].cls) {
    case B_ACT: return is_ref ? GK_F32 : dev->act;
    case B_WT: return is_ref ? GK_F32 : c->wt;
    case B_BF16: return is_ref ? GK_F32 : GK_BF16;
    default: return GK_F32;
    }
}

/* Runs c on be with host start values h (floats; ints from c->ints), results into out[i] for
 * R_OUT buffers. 0, or the backend's error. */
static int run_on(gk_backend *be, int is_ref, const tcase *c, float *const h[], float *out[], gk_err *e)
{
    void *p[MAXB] = {0};
    gk_elt t[MAXB];
    int rc = 0;
    for (int i = 0; i < c->nb && !rc; i++) {
        const tbuf *b = &c->b[i];
        t[i] = type_of(c, i, is_ref);
        size_t es = b->cls == B_INT ? sizeof(int) : gk_elt_size(t[i]);
        if (b->role == R_NONE) continue;
        if (!(p[i] = be->ops->alloc(be, b->n * es))) return gk_errf(e, GK_ENOMEM, "alloc");
        if (b->cls == B_INT) {
            be->ops->to_device(be, p[i], c->ints[i], b->n * es);
            continue;
        }
        void *tmp = malloc(b->n * es);
        for (size_t k = 0; k < b->n; k++) gk_elt_put(tmp, t[i], k, h[i][k]);
        be->ops->to_device(be, p[i], tmp, b->n * es);
        free(tmp);
    }
    c->run(be, p, t, c);
    for (int i = 0; i < c->nb; i++) {
        if (c->b[i].role == R_OUT) {
            void *tmp = malloc(c->b[i].n * gk_elt_size(t[i]));
            be->ops->to_host(be, tmp, p[i], c->b[i].n * gk_elt_size(t[i]));
            for (size_t k = 0; k < c->b[i].n; k++) out[i][k] = gk_elt_get(tmp, t[i], k);
            free(tmp);
        }
        be->ops->free(be, p[i]);
    }
    rc = gk_backend_sync(be, e);
    return rc;
}

static double relerr(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* Host buffers for c: start values (bf16-rounded where the device holds bf16), or perturbed
 * copies of base by relative size u with random signs (u 0: plain copies). */
static float **host_bufs(const tcase *c, float *const base[], double u)
{
    float **h = calloc(MAXB, sizeof *h);
    for (int i = 0; i < c->nb; i++) {
        const tbuf *b = &c->b[i];
        if (b->cls == B_INT || b->role == R_NONE) continue;
        h[i] = malloc(sizeof(float) * b->n);
        for (size_t k = 0; k < b->n; k++) {
            if (base) {
                float r = gk_rng_uniform(seed, k) < 0.5f ? -1.0f : 1.0f;
                h[i][k] = (float)(base[i][k] * (1.0 + u * r));
                continue;
            }
            float x = b->offset + b->scale * (gk_rng_uniform(seed, k) * 2.0f - 1.0f);
            if (type_of(c, i, 0) == GK_BF16) x = gk_bf16f(gk_f2bf16(x));
            h[i][k] = x;
        }
        seed++;
    }
    return h;
}
static void free_bufs(float **h)
{
    for (int i = 0; i < MAXB; i++) free(h[i]);
    free(h);
}

/* One case: the reference on the start values and on two perturbations, the device once. */
static void check(tcase *c)
{
    float **h = host_bufs(c, NULL, 0), **R = host_bufs(c, NULL, 0), **D = host_bufs(c, NULL, 0);
    float **h32 = host_bufs(c, h, U32), **h16 = host_bufs(c, h, U16);
    float **R32 = host_bufs(c, NULL, 0), **R16 = host_bufs(c, NULL, 0);
    gk_err e = {0};
    int ok = run_on(ref, 1, c, h, R, &e) == 0 && run_on(ref, 1, c, h32, R32, &e) == 0 &&
             run_on(ref, 1, c, h16, R16, &e) == 0;
    CHECKF(ok, "%s: ref: %s", c->what, e.msg);
    int dok = ok && run_on(dev, 0, c, h, D, &e) == 0;
    CHECKF(!ok || dok, "%s: %s: %s", c->what, dev_name, e.msg);
    for (int i = 0; dok && i < c->nb; i++) {
        const tbuf *b = &c->b[i];
        if (b->role != R_OUT) continue;
        if (b->copy_of) { /* exact: the bf16 rounding of the device's own buffer */
            size_t bad = 0;
            for (size_t k = 0; k < b->n; k++) bad += D[i][k] != gk_bf16f(gk_f2bf16(D[b->copy_of - 1][k]));
            CHECKF(bad == 0, "%s: buffer %d: %zu of %zu elements not the bf16 copy", c->what, i, bad, b->n);
            continue;
        }
        double d32 = fmax(relerr(R32[i], R[i], b->n), U32), d16 = fmax(relerr(R16[i], R[i], b->n), U16);
        double tol = 2.0 * (c->n_red + 2) * d32 + 2.0 * b->stages * d16, err = relerr(D[i], R[i], b->n);
        size_t w = 0; /* the worst element, for the message */
        for (size_t k = 1; k < b->n; k++)
            if (fabsf(D[i][k] - R[i][k]) > fabsf(D[i][w] - R[i][w])) w = k;
        CHECKF(err <= tol, "%s: buffer %d: relerr %.3g > tol %.3g (worst [%zu]: %.9g, ref %.9g)", c->what,
               i, err, tol, w, D[i][w], R[i][w]);
        if (b->mask) {
            size_t bad = 0;
            for (size_t k = 0; k < b->n; k++) bad += (D[i][k] == 0.0f) != (R[i][k] == 0.0f);
            CHECKF(bad == 0, "%s: buffer %d: dropout mask differs in %zu of %zu", c->what, i, bad, b->n);
        }
    }
    free_bufs(h), free_bufs(R), free_bufs(D), free_bufs(h32), free_bufs(h16), free_bufs(R32), free_bufs(R16);
    for (int i = 0; i < c->nb; i++) free(c->ints[i]);
    memset(c->ints, 0, sizeof c->ints);
    reopen_dev();
}

static tcase *new_case(run_fn run, int n_red, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tcase *new_case(run_fn run, int n_red, const char *fmt, ...)
{
    static tcase c;
    memset(&c, 0, sizeof c);
    c.run = run, c.n_red = n_red, c.wt = GK_F32;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c.what, sizeof c.what, fmt, ap);
    va_end(ap);
    return &c;
}

static const int NS[] = {1, 7, 65}, CS[] = {1, 24, 100}; /* rows, columns: not multiples of tiles */
#define NKEY 0x5eed0fd20b0u                              /* a dropout key */

/* ---- gemm ---- */

static void run_gemm(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    const int *i = c->ip;
    be->ops->gemm(be, i[0], i[1], i[2], i[3], i[4], c->fp[0], p[0], t[0], i[5], p[1], t[1], i[6],
                  c->fp[1], p[2], t[2], i[7], p[3], p[4]);
}

/* combo: 0 all fp32; 1 (act, fp32 weights, act); 2 (act, bf16 weights, act); 3 (act, act, fp32)
 * accumulating (alpha 1, beta 1: the weight gradients). epi: 0 none, 1 bias, 2 bias + GELU, 3 GELU. */
static void gemm_case(int ta, int tb, int M, int N, int K, int pad, int combo, int epi)
{
    static const char *names[] = {"f32,f32,f32", "act,f32,act", "act,bf16,act", "act,act,f32"};
    static const char *epis[] = {"", " bias", " bias+gelu", " gelu"};
    int bias = epi == 1 || epi == 2, gelu = epi >= 2;
    tcase *c = new_case(run_gemm, K + 4 + 8 * gelu, "gemm %c%c M%d N%d K%d pad%d %s%s", ta ? 'T' : 'N',
                        tb ? 'T' : 'N', M, N, K, pad, names[combo], epis[epi]);
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

static void test_gemm(void)
{
    static const int shapes[][4] = {{7, 24, 65, 0}, {65, 7, 64, 0}, {1, 100, 24, 3}, {24, 1, 7, 1}};
    for (int s = 0; s < 4; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int combo = 0; combo < 4; combo++)
                    /* bf16 weights are only ever B (the CPU backend refuses them with A transposed) */
                    for (int epi = 0; epi < (combo == 3 ? 1 : 4) && !(combo == 2 && ta); epi++)
                        gemm_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], combo, epi);
}

/* ---- row-wise and element-wise ops ---- */

static void run_bias_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->bias_bwd(be, p[1], p[0], c->ip[0], c->ip[1]);
}
static void run_gelu_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->gelu_bwd(be, p[0], p[1], p[2], c->ip[0], c->ip[1]);
}
static void run_residual(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->residual_fwd(be, p[0], p[1], p[2], p[3], c->ip[0], c->ip[1], c->fp[0], NKEY);
}
static void run_dropout_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->dropout_bwd(be, p[0], p[1], (size_t)c->ip[0] * c->ip[1], c->fp[0], NKEY);
}
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

static void rowwise_cases(int N, int C)
{
    size_t n = (size_t)N * C;
    int b16 = bf16_run();
    tcase *c = new_case(run_bias_bwd, N, "bias_bwd N%d C%d", N, C);
    add(c, B_ACT, R_IN, n, 1, 0);
    add(c, B_F32, R_OUT, (size_t)C, 1, 0);
    c->ip[0] = N, c->ip[1] = C;
    check(c);

    c = new_case(run_gelu_bwd, 8, "gelu_bwd N%d C%d", N, C);
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16;
    add(c, B_ACT, R_IN, n, 3, 0);
    add(c, B_ACT, R_IN, n, 1, 0);
    c->ip[0] = N, c->ip[1] = C;
    check(c);

    for (int v = 0; v < 3; v++) { /* no bias; bias; bias and dropout (res 0: out is the mask) */
        float p = v == 2 ? 0.25f : 0.0f;
        c = new_case(run_residual, 4, "residual_fwd N%d C%d bias %d p %g", N, C, v > 0, p);
        int o = add(c, B_ACT, R_OUT, n, 1, 0);
        c->b[o].stages = b16, c->b[o].mask = p > 0;
        add(c, B_ACT, R_IN, n, p > 0 ? 0.0f : 1.0f, 0);
        add(c, B_ACT, R_IN, n, 1, 0);
        add(c, B_F32, v > 0 ? R_IN : R_NONE, (size_t)C, 1, 0);
        c->ip[0] = N, c->ip[1] = C, c->fp[0] = p;
        check(c);
    }

    c = new_case(run_dropout_bwd, 2, "dropout_bwd N%d C%d p 0.3", N, C);
    int o = add(c, B_ACT, R_OUT, n, 1, 0);
    c->b[o].stages = b16, c->b[o].mask = 1;
    add(c, B_ACT, R_IN, n, 1, 0);
    c->ip[0] = N, c->ip[1] = C, c->fp[0] = 0.3f;
    check(c);

    for (int with_bias = 0; with_bias < 2; with_bias++) {
        c = new_case(run_ln_fwd, C + 8, "layernorm_fwd N%d C%d bias %d", N, C, with_bias);
        c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16;
        add(c, B_F32, R_OUT, (size_t)N, 1, 0);
        add(c, B_F32, R_OUT, (size_t)N, 1, 0);
        add(c, B_ACT, R_IN, n, 1, 0.5f);
        add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
        add(c, B_F32, with_bias ? R_IN : R_NONE, (size_t)C, 1, 0);
        c->ip[0] = N, c->ip[1] = C;
        check(c);

        c = new_case(run_ln_bwd, N + 2 * C + 8, "layernorm_bwd N%d C%d dbias %d", N, C, with_bias);
        c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = b16; /* dinp += rounds once */
        add(c, B_F32, R_OUT, (size_t)C, 1, 0);
        add(c, B_F32, with_bias ? R_OUT : R_NONE, (size_t)C, 1, 0);
        add(c, B_ACT, R_IN, n, 1, 0);
        add(c, B_ACT, R_IN, n, 1, 0.5f);
        add(c, B_F32, R_IN, (size_t)C, 0.5f, 1);
        add(c, B_F32, R_TMP, (size_t)N, 0, 0);
        add(c, B_F32, R_TMP, (size_t)N, 0, 0);
        add(c, B_ACT, R_TMP, n, 0, 0);
        c->ip[0] = N, c->ip[1] = C;
        check(c);
    }
}

static void test_rowwise(void)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) rowwise_cases(NS[i], CS[j]);
}

/* ---- embedding ---- */

static void run_enc_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    be->ops->encoder_fwd(be, p[0], p[1], p[2], t[2], p[3], c->ip[0], c->ip[1], c->ip[2], c->fp[0], NKEY);
}
static void run_enc_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->encoder_bwd(be, p[0], p[1], p[2], p[3], c->ip[0], c->ip[1], c->ip[2], c->fp[0], NKEY);
}

static void test_encoder(void)
{
    static const int bt[][2] = {{1, 1}, {1, 7}, {5, 13}}; /* B*T = 1, 7, 65 rows */
    const int V = 11;                                    /* few tokens: many repeats in dwte */
    for (int s = 0; s < 3; s++)
        for (int j = 0; j < 3; j++)
            for (int v = 0; v < 3; v++) { /* fp32 wte; bf16 wte; dropout */
                int B = bt[s][0], T = bt[s][1], C = CS[j];
                float p = v == 2 ? 0.2f : 0.0f;
                size_t n = (size_t)B * T * C;
                tcase *c = new_case(run_enc_fwd, 2, "encoder_fwd B%d T%d C%d wte %s p %g", B, T, C,
                                    v == 1 ? "bf16" : "f32", p);
                c->wt = v == 1 ? GK_BF16 : GK_F32;
                int o = add(c, B_ACT, R_OUT, n, 1, 0);
                c->b[o].stages = bf16_run(), c->b[o].mask = p > 0;
                c->ints[add(c, B_INT, R_IN, (size_t)B * T, 0, 0)] = rand_ints((size_t)B * T, 0, V);
                add(c, B_WT, R_IN, (size_t)V * C, 1, 0);
                add(c, B_F32, R_IN, (size_t)T * C, 1, 0);
                c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->fp[0] = p;
                check(c);
                if (v == 1) continue;
                c = new_case(run_enc_bwd, B * T, "encoder_bwd B%d T%d C%d p %g", B, T, C, p);
                add(c, B_F32, R_OUT, (size_t)V * C, 1, 0);
                add(c, B_F32, R_OUT, (size_t)T * C, 1, 0);
                add(c, B_ACT, R_IN, n, 1, 0);
                c->ints[add(c, B_INT, R_IN, (size_t)B * T, 0, 0)] = rand_ints((size_t)B * T, 0, V);
                c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->fp[0] = p;
                check(c);
            }
}

/* ---- softmax cross-entropy ---- */

static void run_xent_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->xent_fwd(be, p[0], p[1], p[2], p[3], c->ip[0], c->ip[1], c->ip[2]);
}
/* the forward first (lse); ip[3]: dlogits aliases logits (a copy of them first) */
static void run_xent_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    int N = c->ip[0], V = c->ip[1], Vp = c->ip[2];
    be->ops->xent_fwd(be, p[3], p[4], p[1], p[2], N, V, Vp);
    const void *logits = p[1];
    if (c->ip[3]) {
        be->ops->copy(be, p[0], p[1], (size_t)N * Vp * gk_elt_size(t[1]));
        logits = p[0];
    }
    be->ops->xent_bwd(be, p[0], logits, p[4], p[2], c->fp[0], N, V, Vp);
}

static void test_xent(void)
{
    static const int vs[][2] = {{1, 1}, {24, 32}, {100, 100}, {37, 40}}; /* V, Vp */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            int N = NS[i], V = vs[j][0], Vp = vs[j][1];
            tcase *c = new_case(run_xent_fwd, V + 8, "xent_fwd N%d V%d Vp%d", N, V, Vp);
            add(c, B_F32, R_OUT, (size_t)N, 1, 0);
            add(c, B_F32, R_OUT, (size_t)N, 1, 0);
            add(c, B_ACT, R_IN, (size_t)N * Vp, 4, 0);
            c->ints[add(c, B_INT, R_IN, (size_t)N, 0, 0)] = rand_ints((size_t)N, -1, V);
            c->ip[0] = N, c->ip[1] = V, c->ip[2] = Vp;
            check(c);
            for (int alias = 0; alias < 2; alias++) {
                c = new_case(run_xent_bwd, V + 8, "xent_bwd N%d V%d Vp%d alias %d", N, V, Vp, alias);
                c->b[add(c, B_ACT, R_OUT, (size_t)N * Vp, 1, 0)].stages = bf16_run();
                add(c, B_ACT, R_IN, (size_t)N * Vp, 4, 0);
                c->ints[add(c, B_INT, R_IN, (size_t)N, 0, 0)] = rand_ints((size_t)N, -1, V);
                add(c, B_F32, R_TMP, (size_t)N, 0, 0);
                add(c, B_F32, R_TMP, (size_t)N, 0, 0);
                c->ip[0] = N, c->ip[1] = V, c->ip[2] = Vp, c->ip[3] = alias, c->fp[0] = 1.0f / 16;
                check(c);
            }
        }
}

/* ---- attention ---- */

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
    be->ops->attention_fwd_at(be, p[0], p[1], i[0], i[1], i[4], i[5], i[2], i[3]);
}

static void test_attention(void)
{
    /* B, T, NH, head size, dropout */
    static const int cs[][5] = {{1, 1, 1, 16, 0}, {2, 7, 3, 24, 0}, {1, 64, 4, 16, 0},
                                {1, 65, 3, 64, 0}, {2, 65, 1, 16, 1}, {1, 7, 4, 64, 1}};
    int b16 = bf16_run();
    for (int k = 0; k < 6; k++) {
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
    /* KV cache: B, Tc, NH, hs, t0, n */
    static const int at[][6] = {{2, 9, 3, 16, 0, 9}, {1, 65, 4, 64, 64, 1}, {2, 20, 1, 24, 7, 5}};
    for (int k = 0; k < 3; k++) {
        const int *a = at[k];
        int C = a[2] * a[3];
        tcase *c = new_case(run_attn_at, a[3] + a[1] + 8, "attention_fwd_at B%d Tc%d NH%d hs%d t0 %d n %d",
                            a[0], a[1], a[2], a[3], a[4], a[5]);
        c->b[add(c, B_ACT, R_OUT, (size_t)a[0] * a[5] * C, 1, 0)].stages = 2 * b16;
        add(c, B_ACT, R_IN, (size_t)a[0] * a[1] * 3 * C, 2, 0);
        c->ip[0] = a[0], c->ip[1] = a[1], c->ip[2] = C, c->ip[3] = a[2], c->ip[4] = a[4], c->ip[5] = a[5];
        check(c);
    }
}

/* ---- optimizer ---- */

static void run_scale(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->scale(be, p[0], 0.37f, (size_t)c->ip[0]);
}
static void run_adamw(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    be->ops->adamw(be, p[0], p[1], p[2], p[3], (size_t)c->ip[0], 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3,
                   0.7f, p[4], t[4]);
}

static void test_optimizer(void)
{
    static const int ns[] = {1, 7, 1000, 100003};
    for (int k = 0; k < 4; k++) {
        int n = ns[k];
        tcase *c = new_case(run_scale, 0, "scale n%d", n);
        add(c, B_F32, R_OUT, (size_t)n, 1, 0);
        c->ip[0] = n;
        check(c);
        for (int copy = 0; copy < 2; copy++) {
            c = new_case(run_adamw, 8, "adamw n%d copy %d", n, copy);
            add(c, B_F32, R_OUT, (size_t)n, 1, 0);      /* param */
            add(c, B_F32, R_IN, (size_t)n, 1, 0);       /* grad */
            add(c, B_F32, R_OUT, (size_t)n, 0.1f, 0);   /* m */
            add(c, B_F32, R_OUT, (size_t)n, 0.01f, 0.01f); /* v >= 0 */
            c->b[add(c, B_BF16, copy ? R_OUT : R_NONE, (size_t)n, 1, 0)].copy_of = 1;
            c->ip[0] = n;
            check(c);
        }
        /* sumsq: a double on the host; fp32 squares summed in double */
        float *x = malloc(sizeof(float) * n);
        for (int i = 0; i < n; i++) x[i] = gk_rng_uniform(seed, (uint64_t)i) * 2.0f - 1.0f;
        seed++;
        double r = 0, d = -1;
        float *px = ref->ops->alloc(ref, sizeof(float) * n), *dx = dev->ops->alloc(dev, sizeof(float) * n);
        CHECK(px && dx);
        if (px && dx) {
            ref->ops->to_device(ref, px, x, sizeof(float) * n);
            ref->ops->sumsq(ref, &r, px, (size_t)n);
            dev->ops->to_device(dev, dx, x, sizeof(float) * n);
            dev->ops->sumsq(dev, &d, dx, (size_t)n);
        }
        gk_err e = {0};
        CHECKF(gk_backend_sync(dev, &e) == 0, "sumsq: %s", e.msg);
        /* the sum of n positive terms in double; each square may be rounded to fp32 (u32), and
         * the CPU backend adds runs of 1024 squares in fp32 first (positive terms rounded to
         * nearest: a few u32 in practice, 1024 u32 at worst): 4 u32 */
        CHECKF(fabs(d - r) <= (4 * U32 + 2.0 * (n + 2) * 0x1p-53) * r, "sumsq n%d: %.17g, ref %.17g", n, d, r);
        ref->ops->free(ref, px), dev->ops->free(dev, dx), free(x);
    }
}

/* ---- cast: exact, round to nearest even ---- */

static void test_cast(void)
{
    /* ties (even below, even above), just above a tie, signs, a subnormal, the largest float
     * (rounds to inf), inf, NaN, then random values */
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0xbf808000u, 0x00000001u,
                                0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000000u};
    const size_t ns = sizeof special / sizeof *special, n = 1000 + ns;
    float *x = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    uint16_t *h = malloc(2 * n);
    memcpy(x, special, sizeof special);
    for (size_t i = ns; i < n; i++) x[i] = (gk_rng_uniform(seed, i) * 2.0f - 1.0f) * 1e3f;
    seed++;
    float *f = dev->ops->alloc(dev, 4 * n), *g = dev->ops->alloc(dev, 4 * n);
    uint16_t *b = dev->ops->alloc(dev, 2 * n);
    CHECK(f && g && b);
    if (f && g && b) {
        dev->ops->to_device(dev, f, x, 4 * n);
        dev->ops->cast(dev, b, GK_BF16, f, GK_F32, n);
        dev->ops->cast(dev, g, GK_F32, b, GK_BF16, n);
        dev->ops->to_host(dev, h, b, 2 * n);
        dev->ops->to_host(dev, back, g, 4 * n);
    }
    gk_err e = {0};
    CHECKF(gk_backend_sync(dev, &e) == 0, "cast: %s", e.msg);
    size_t bad = 0, bad_back = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = gk_f2bf16(x[i]);
        int nan = isnan(x[i]) && (h[i] & 0x7fffu) > 0x7f80u; /* any NaN stays a NaN */
        bad += h[i] != want && !nan;
        float w = gk_bf16f(h[i]);
        bad_back += memcmp(&w, &back[i], 4) != 0;
        if (i < ns && h[i] != want && !nan) fprintf(stderr, "cast %08x -> %04x, want %04x\n", special[i], h[i], want);
    }
    CHECKF(bad == 0, "cast f32 -> bf16: %zu of %zu differ", bad, n);
    CHECKF(bad_back == 0, "cast bf16 -> f32: %zu of %zu not exact", bad_back, n);
    dev->ops->free(dev, f), dev->ops->free(dev, g), dev->ops->free(dev, b);
    free(x), free(back), free(h);
}

/* ---- devices ---- */

/* RUN with the device and activation type in the test's name. */
#define RUN_ON(fn)                                                                          \
    do {                                                                                    \
        static char name_[96];                                                              \
        snprintf(name_, sizeof name_, "%s[%s %s]", #fn, dev_name, bf16_run() ? "bf16" : "fp32"); \
        t_cur_name = name_;                                                                 \
        t_cur_failed = t_cur_skipped = 0;                                                   \
        fn();                                                                               \
        if (t_cur_failed) t_failed++;                                                       \
        else t_passed++;                                                                    \
    } while (0)

/* Every test on device name with activations in bf16 or not. */
static void run_device(const char *name, int bf16)
{
    gk_err e = {0};
    dev_name = name;
    int rc = open_dev(bf16, &e);
    if (bf16 && (rc == GK_EUSAGE || (rc == 0 && dev->act != GK_BF16))) { /* no bf16 activations */
        gk_backend_free(dev);
        dev = NULL;
        return;
    }
    if (rc == GK_ENOTFOUND) {
        fprintf(stderr, "SKIP test_ops on %s: %s\n", name, e.msg);
        t_skipped++;
        return;
    }
    if (rc) {
        fprintf(stderr, "FAIL test_ops: opening %s: %s\n", name, e.msg);
        t_failed++;
        return;
    }
    RUN_ON(test_cast);
    RUN_ON(test_gemm);
    RUN_ON(test_rowwise);
    RUN_ON(test_encoder);
    RUN_ON(test_xent);
    RUN_ON(test_attention);
    RUN_ON(test_optimizer);
    gk_backend_free(dev);
    dev = NULL;
}

int main(int argc, char **argv)
{
    gk_err e = {0};
    if (gk_ref_create(&ref, &e) || ref->ops->reserve(ref, 4096, 1024, 64, 128, &e)) {
        fprintf(stderr, "test_ops: reference backend: %s\n", e.msg);
        return 1;
    }
    const char *env = getenv("GK_TEST_DEVICES");
    char list[512];
    snprintf(list, sizeof list, "%s", env && *env ? env : "cpu cuda-emu");
    char *names[16];
    int n = 0;
    if (argc > 1)
        for (int i = 1; i < argc && n < 16; i++) names[n++] = argv[i];
    else
        for (char *s = strtok(list, " ,"); s && n < 16; s = strtok(NULL, " ,")) names[n++] = s;
    for (int i = 0; i < n; i++) {
        run_device(names[i], 0);
        run_device(names[i], 1);
    }
    gk_backend_free(ref);
    return TEST_END();
}
