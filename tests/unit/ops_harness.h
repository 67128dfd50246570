/* ops_harness.h: the op tests' one driver and one tolerance model (header-only, like test.h: it
 * is the main of test_ops.c and test_ops_fused.c).
 * Owns: the devices under test and the reference backend (kernels/ref/ref.c, the oracle), the case
 * description (buffers by element class and role, the function that runs the op on one backend),
 * running a case on the reference and on each device through the ops interface only (alloc,
 * to_device, op, to_host, as ggml's test-backend-ops), the tolerance check, and the loop over
 * devices and activation types. Not thread-safe: one test binary, one thread.
 *
 * Devices: argv, else $GPT_TEST_DEVICES, else "cpu" and $GPT_TEST_CUDA (default cuda-emu; "cuda"
 * on a GPU), and in test_ops_paths (test_ops.c built with OPS_PATHS, a binary of its own that
 * runs beside it) that device on the attention paths plain, flash and (on a GPU) cudnn (below;
 * fa2 is auto's) and with its fused gradient epilogues (NAME:fused); a device whose library is
 * missing (or, for cuda, without a GPU) is skipped with a note. Each runs with fp32 activations,
 * and with bf16 ones where it has them (cuda, cuda-emu).
 * The backend library is $GPT_CUDA_LIB's where set (a variant build), else the binary's ../lib.
 * The CUDA emulator runs each block's threads and the blocks in shuffled order here (another
 * permutation each launch and block; GPT_EMU_ORDER=shuffle unless the environment says another),
 * with its race checker on: a missing barrier changes a result or the bits of a second run
 * (tests/unit/emu/test_emu_order.cu checks that shuffling exposes one), and the checker sees
 * every shared-memory access whatever the order.
 * Attention paths: a device named NAME:PATH (cuda-emu:fa2, cuda:cudnn; PATH one of
 * gk_attention_parse's) is NAME opened with that attention setting; it runs only the tests marked
 * attn (OPS_TEST_ATTN), and in bf16 only (in fp32 every path takes the plain kernels). A case may
 * also compare an output with the same device opened on another path (a sibling, opened once per
 * device and path): the same bits (auto is fa2), not the same bits (the path did run: rounding P
 * to bf16 changes some), or near: elementwise within one bf16 unit roundoff of the sibling's
 * largest element plus one of its own, |D - S| <= u16 (max|S| + |S|) (fa2's and flash's
 * gradients: the same roundings before the same products in the same order; an error of 1%
 * fails). A cudnn device that does not open (no cuDNN: a build without its headers, the
 * emulator) is skipped with the reason. NAME:fused (cuda-emu:fused, cuda:fused) is NAME opened
 * with cuda_fused_grads (gemm_bwd through cuBLASLt's backward epilogues); it runs only the tests
 * marked OPS_TEST_FUSED, with fp32 and bf16 activations.
 *
 * The tolerance model, the only one of the op tests. The reference runs in fp32 (double inside)
 * on the same values: in bf16 runs the activation inputs (and bf16 weights) are rounded to bf16
 * first on both sides, so only the device's own roundings and its summation order differ. Each
 * compared output buffer is checked norm-wise, relative:
 *   |D - R|_2 / |R|_2 <= tol = 2 (n + 2) max(d32, u32) + 2 s max(d16, u16)
 * u32 = 2^-24 and u16 = 2^-8 are the unit roundoffs of fp32 and bf16 (one rounding to nearest
 * errs by at most u relative); n is the longest fp32 reduction in the op (a float sum of n terms
 * errs by at most n u32 relative to the sum of the terms' magnitudes, Higham's gamma_n;
 * transcendental functions count 8); s is the number of bf16 roundings on the path to that output
 * (0 in fp32 runs). d32 and d16 measure the problem's own conditioning: the reference's relative
 * change when every input is perturbed by one fp32 or bf16 rounding (random signs), i.e. how much
 * one rounding of that size can move this output. Where no rounding happens the check is exact
 * instead: an output marked exact must equal the reference rounded to the device's type, bit for
 * bit (copies, one product, an add); a copy_of output the bf16 rounding of the device's own fp32
 * output; a mask output has its zeros where the reference has them (dropout, ignored targets,
 * padding). A case marked det (a count) runs det more times on the device and must give the same
 * bits each time (reductions whose order is fixed; cross-block reductions whose arrival counts
 * must be back at zero after each call); one marked off places every device buffer one element
 * past its allocation (16-byte packs refused: the scalar paths).
 *
 * A device that serves a slot with the reference backend's code (its props.ref_ops) would be
 * compared with the oracle itself there: each device run says which slots do (none on any backend
 * now), and a case of such a slot carries "[reference code]" in its name. */
#ifndef GK_OPS_HARNESS_H
#define GK_OPS_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "kernels/ref/ref.h"
#include "kernels/rng.h"
#include "test.h"

#define U32 5.9604644775390625e-8 /* 2^-24 */
#define U16 3.90625e-3            /* 2^-8 */

static gk_backend *dev, *ref;
static const char *dev_name;     /* as listed: NAME or NAME:PATH */
static char dev_base[64];        /* NAME */
static int dev_path, dev_pathed; /* the attention path (a gk_attention),
                                  * and whether one was named */
static int dev_fused;            /* NAME:fused: opened with cuda_fused_grads
                                  * (gemm_bwd's epilogues) */
static gk_backend *sib[GK_ATTN_PLAIN + 1]; /* dev's base opened on another path, or NULL */
static const int NS[] = {1, 7, 65}; /* rows of the cases: not multiples of tiles */
#define NKEY 0x5eed0fd20b0u        /* the cases' dropout key */
static uint64_t seed = 1;

/* *be = dev_base on attention path `path` with bf16 activations or not; 0, or the error in e. */
static int open_path(gk_backend **be, int path, int bf16, gk_err *e)
{
    gk_backend_opts o = {.device = dev_base,
                         .bf16 = bf16,
                         .attention = path,
                         .cuda_fused_grads = dev_fused,
                         .cuda_lib = getenv("GPT_CUDA_LIB")};
    int rc = gk_backend_open(be, &o, e);
    /* above every case */
    if (rc == 0 && (rc = (*be)->ops->reserve(*be, 10000, 2048, 64, 128, e))) {
        gk_backend_free(*be);
        *be = NULL;
    }
    return rc;
}
/* Opens dev_name with bf16 activations or not; 0, or the error in e. */
static int open_dev(int bf16, gk_err *e) { return open_path(&dev, dev_path, bf16, e); }

/* The device's base on path (a sibling, opened the first time and kept while the device is), or
 * NULL with a failed check. */
static gk_backend *sibling(int path)
{
    gk_err e = {0};
    if (!sib[path] && open_path(&sib[path], path, dev->act == GK_BF16, &e))
        CHECKF(0, "%s on attention path %s: %s", dev_base, gk_attention_name(path), e.msg);
    return sib[path];
}
static void free_siblings(void)
{
    for (int i = 0; i <= GK_ATTN_PLAIN; i++) gk_backend_free(sib[i]), sib[i] = NULL;
}
/* After a failed case: a fresh device, so that its sticky error does not fail every later one. */
static void reopen_dev(void)
{
    for (int i = 0; i <= GK_ATTN_PLAIN; i++)
        /* reopened when next asked */
        if (sib[i] && sib[i]->err.code) gk_backend_free(sib[i]), sib[i] = NULL;
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

typedef enum { B_ACT, B_F32, B_WT, B_INT, B_BF16 } bclass; /* element type: be->act,
                                                            * fp32, c->wt, int32, bf16 */
typedef enum { R_NONE, R_IN, R_OUT, R_TMP } brole;         /* R_OUT: compared (starts
                                                            * random); R_TMP: not */
typedef struct tbuf {
    bclass cls;
    brole role;
    size_t n;
    float scale, offset; /* random start values: offset + scale * U(-1, 1) */
    int stages;          /* bf16 roundings on the path to this output */
    int mask;            /* zeros where the reference has them
                          * (dropout, ignored targets, padding) */
    int copy_of;         /* > 0: exactly the device's buffer copy_of
                          * - 1 as this one's type holds it */
    int exact;           /* the reference rounded to the device's type, bit for bit */
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
    int off, det;                             /* device buffers one element off; det more runs */
    void (*prep)(const tcase *c, float *h[]); /* start values changed on the host, or NULL */
    int nvs;
    struct { int path, buf, rel; } vs[4];     /* output buf against the sibling on path (vs()) */
};
enum { VS_SAME = 1, VS_DIFF, VS_NEAR }; /* the same bits, not the same bits, within u16 (atop) */

static int add(tcase *c, bclass cls, brole role, size_t n, float scale, float offset)
{
    tbuf *b = &c->b[c->nb];
    memset(b, 0, sizeof *b);
    b->cls = cls, b->role = role, b->n = n ? n : 1, b->scale = scale, b->offset = offset;
    return c->nb++;
}
static int bf16_run(void) { return dev->act == GK_BF16; }
/* Compares output buf of c with the same on the sibling on attention path (rel: VS_*). */
static inline void vs(tcase *c, int path, int buf, int rel)
{
    c->vs[c->nvs].path = path, c->vs[c->nvs].buf = buf, c->vs[c->nvs].rel = rel, c->nvs++;
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
static int run_on(gk_backend *be, int is_ref, const tcase *c, float *const h[], float *out[],
                  gk_err *e)
{
    void *p[MAXB] = {0};
    gk_elt t[MAXB];
    int rc = 0;
    for (int i = 0; i < c->nb && !rc; i++) {
        const tbuf *b = &c->b[i];
        t[i] = type_of(c, i, is_ref);
        size_t es = b->cls == B_INT ? sizeof(int) : gk_elt_size(t[i]);
        size_t o = c->off && !is_ref && b->cls != B_INT ? es : 0; /* bytes past the allocation */
        if (b->role == R_NONE) continue;
        if (!(p[i] = be->ops->alloc(be, b->n * es + o))) return gk_errf(e, GK_ENOMEM, "alloc");
        p[i] = (char *)p[i] + o;
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
        size_t o = c->off && !is_ref && c->b[i].cls != B_INT ? gk_elt_size(t[i]) : 0;
        if (c->b[i].role == R_OUT) {
            void *tmp = malloc(c->b[i].n * gk_elt_size(t[i]));
            be->ops->to_host(be, tmp, p[i], c->b[i].n * gk_elt_size(t[i]));
            for (size_t k = 0; k < c->b[i].n; k++) out[i][k] = gk_elt_get(tmp, t[i], k);
            free(tmp);
        }
        if (p[i]) be->ops->free(be, (char *)p[i] - o);
    }
    rc = gk_backend_sync(be, e);
    return rc;
}

static double relerr(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++)
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
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
/* Host buffers for c's outputs (run_on writes them, never reads them): not filled, but seed
 * moves on as host_bufs moves it, so that the cases after draw the same start values. */
static float **out_bufs(const tcase *c)
{
    float **h = calloc(MAXB, sizeof *h);
    for (int i = 0; i < c->nb; i++) {
        const tbuf *b = &c->b[i];
        if (b->cls == B_INT || b->role == R_NONE) continue;
        h[i] = calloc(b->n, sizeof(float));
        seed++;
    }
    return h;
}
static void free_bufs(float **h)
{
    for (int i = 0; i < MAXB; i++) free(h[i]);
    free(h);
}

/* Bit-for-bit checks of output i: exact (the reference as the device stores it), copy_of. */
static void check_bits(const tcase *c, int i, float *const R[], float *const D[])
{
    const tbuf *b = &c->b[i];
    size_t bad = 0;
    if (b->exact) {
        gk_elt t = type_of(c, i, 0);
        for (size_t k = 0; k < b->n; k++) {
            float want = t == GK_BF16 ? gk_bf16f(gk_f2bf16(R[i][k])) : R[i][k];
            bad += memcmp(&want, &D[i][k], 4) != 0 && !(isnan(want) && isnan(D[i][k]));
        }
        CHECKF(bad == 0, "%s: buffer %d: %zu of %zu elements not the reference exactly", c->what, i,
               bad, b->n);
    }
    if (b->copy_of) { /* exact: the device's own buffer as this one's type holds it */
        int b16 = type_of(c, i, 0) == GK_BF16;
        bad = 0;
        for (size_t k = 0; k < b->n; k++) {
            float s = D[b->copy_of - 1][k];
            bad += D[i][k] != (b16 ? gk_bf16f(gk_f2bf16(s)) : s);
        }
        CHECKF(bad == 0, "%s: buffer %d: %zu of %zu elements not the %s copy", c->what, i, bad,
               b->n, b16 ? "bf16" : "fp32");
    }
}

/* The norm-wise check of output i (the model atop this file), and its zeros where it is a mask. */
static void check_norm(const tcase *c, int i, float *const R[], float *const D[],
                       float *const R32[], float *const R16[])
{
    const tbuf *b = &c->b[i];
    double d32 = fmax(relerr(R32[i], R[i], b->n), U32), d16 = fmax(relerr(R16[i], R[i], b->n), U16);
    double tol = 2.0 * (c->n_red + 2) * d32 + 2.0 * b->stages * d16, err = relerr(D[i], R[i], b->n);
    size_t w = 0; /* the worst element, for the message */
    for (size_t k = 1; k < b->n; k++)
        if (fabsf(D[i][k] - R[i][k]) > fabsf(D[i][w] - R[i][w])) w = k;
    CHECKF(err <= tol, "%s: buffer %d: relerr %.3g > tol %.3g (worst [%zu]: %.9g, ref %.9g)",
           c->what, i, err, tol, w, D[i][w], R[i][w]);
    if (b->mask) {
        size_t bad = 0;
        for (size_t k = 0; k < b->n; k++) bad += (D[i][k] == 0.0f) != (R[i][k] == 0.0f);
        CHECKF(bad == 0, "%s: buffer %d: zeros (mask) differ in %zu of %zu", c->what, i, bad, b->n);
    }
}

/* Output v->buf of the device (D) against the sibling's (S), as v->rel asks. */
static void check_vs(const tcase *c, int v, float *const D[], float *const S[])
{
    int i = c->vs[v].buf, rel = c->vs[v].rel;
    size_t n = c->b[i].n, bad = 0, k;
    const char *p = gk_attention_name(c->vs[v].path);
    int same = memcmp(D[i], S[i], sizeof(float) * n) == 0;
    if (rel != VS_NEAR) {
        CHECKF(same == (rel == VS_SAME), "%s: buffer %d: %s the bits of attention = %s", c->what, i,
               same ? "has" : "has not", p);
        return;
    }
    double mx = 0;
    for (k = 0; k < n; k++) mx = fmax(mx, fabs(S[i][k]));
    for (k = 0; k < n; k++) bad += !(fabs((double)D[i][k] - S[i][k]) <= U16 * (mx + fabs(S[i][k])));
    CHECKF(bad == 0, "%s: buffer %d: %zu of %zu elements beyond u16 of attention = %s's", c->what,
           i, bad, n, p);
}

/* The sibling comparisons of c, on the device's start values h and its outputs D: each sibling
 * runs once. */
static void check_siblings(const tcase *c, float *const h[], float *const D[])
{
    for (int v = 0; v < c->nvs; v++) {
        int path = c->vs[v].path, done = 0;
        for (int w = 0; w < v; w++) done |= c->vs[w].path == path;
        if (done) continue;
        gk_backend *s = sibling(path);
        float **S = out_bufs(c);
        gk_err e = {0};
        if (s && run_on(s, 0, c, h, S, &e) == 0) {
            for (int w = v; w < c->nvs; w++)
                if (c->vs[w].path == path) check_vs(c, w, D, S);
        } else if (s)
            CHECKF(0, "%s: attention = %s: %s", c->what, gk_attention_name(path), e.msg);
        free_bufs(S);
    }
}

/* Whether the op of case c (the first word of its name) is one the device serves with the
 * reference code: listed in props.ref_ops, alone or followed by its cases in parentheses. */
static int ref_served(const tcase *c)
{
    const char *list = dev->props.ref_ops;
    char op[64];
    size_t n = strcspn(c->what, " ");
    snprintf(op, sizeof op, "%.*s", (int)n, c->what);
    for (const char *r = list; n && n < sizeof op && (r = strstr(r, op)); r += n)
        if ((r == list || r[-1] == ' ') && (r[n] == 0 || r[n] == ' ' || r[n] == '(')) return 1;
    return 0;
}

/* One case: the reference on the start values and on two perturbations, the device once (and det
 * more times), the siblings it names once each. */
static void check(tcase *c)
{
    if (ref_served(c)) /* the reference against itself: said in the name */
        snprintf(c->what + strlen(c->what), sizeof c->what - strlen(c->what), " [reference code]");
    float **h = host_bufs(c, NULL, 0), **R = out_bufs(c), **D = out_bufs(c);
    if (c->prep) c->prep(c, h);
    float **h32 = host_bufs(c, h, U32), **h16 = host_bufs(c, h, U16);
    float **R32 = out_bufs(c), **R16 = out_bufs(c), **A = c->det ? out_bufs(c) : NULL;
    gk_err e = {0};
    int ok = run_on(ref, 1, c, h, R, &e) == 0 && run_on(ref, 1, c, h32, R32, &e) == 0 &&
             run_on(ref, 1, c, h16, R16, &e) == 0;
    CHECKF(ok, "%s: ref: %s", c->what, e.msg);
    int dok = ok && run_on(dev, 0, c, h, D, &e) == 0;
    for (int r = 0; dok && r < c->det; r++) { /* each run against the first */
        dok = run_on(dev, 0, c, h, A, &e) == 0;
        for (int i = 0; dok && i < c->nb; i++)
            if (c->b[i].role == R_OUT)
                CHECKF(memcmp(A[i], D[i], sizeof(float) * c->b[i].n) == 0,
                       "%s: buffer %d: not the same bits on run %d", c->what, i, r + 2);
    }
    CHECKF(!ok || dok, "%s: %s: %s", c->what, dev_name, e.msg);
    for (int i = 0; dok && i < c->nb; i++) {
        if (c->b[i].role != R_OUT) continue;
        check_bits(c, i, R, D);
        if (!c->b[i].copy_of && !c->b[i].exact) check_norm(c, i, R, D, R32, R16);
    }
    if (dok) check_siblings(c, h, D);
    free_bufs(h), free_bufs(R), free_bufs(D), free_bufs(h32), free_bufs(h16), free_bufs(R32),
        free_bufs(R16);
    if (A) free_bufs(A);
    for (int i = 0; i < c->nb; i++) free(c->ints[i]);
    memset(c->ints, 0, sizeof c->ints);
    reopen_dev();
}

static tcase *new_case(run_fn run, int n_red, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
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

/* ---- devices ---- */

/* RUN with the device and activation type in the test's name. */
#define RUN_ON(t)                                                      \
    do {                                                               \
        static char name_[96];                                         \
        snprintf(name_, sizeof name_, "%s[%s %s]", (t).name, dev_name, \
                 bf16_run() ? "bf16" : "fp32");                        \
        if (!t_selected(name_)) break;                                 \
        t_cur_name = name_;                                            \
        t_cur_failed = t_cur_skipped = 0;                              \
        (t).fn();                                                      \
        if (t_cur_failed)                                              \
            t_failed++;                                                \
        else if (t_cur_skipped)                                        \
            t_skipped++;                                               \
        else                                                           \
            t_passed++;                                                \
    } while (0)

/* One test of the table: a function, its name, and which named devices it also runs on: the
 * attention paths (NAME:PATH) or the fused gradient epilogues (NAME:fused). */
typedef struct ops_test {
    void (*fn)(void);
    const char *name;
    int attn; /* 1 the attention paths, 2 NAME:fused */
} ops_test;
#define OPS_TEST(fn) {fn, #fn, 0}
#define OPS_TEST_ATTN(fn) {fn, #fn, 1}
#define OPS_TEST_FUSED(fn) {fn, #fn, 2}

/* dev_base, dev_path, dev_pathed and dev_fused from name (NAME, NAME:PATH or NAME:fused); 0, or a
 * failed check. */
static int parse_device(const char *name)
{
    const char *colon = strchr(name, ':');
    size_t n = colon ? (size_t)(colon - name) : strlen(name);
    gk_err e = {0};
    snprintf(dev_base, sizeof dev_base, "%.*s", (int)n, name);
    dev_path = GK_ATTN_AUTO, dev_pathed = colon != NULL;
    dev_fused = colon && strcmp(colon + 1, "fused") == 0;
    if (colon && !dev_fused && gk_attention_parse(colon + 1, name, &dev_path, &e)) {
        fprintf(stderr, "FAIL test_ops: device %s\n", e.msg);
        t_failed++;
        return -1;
    }
    return 0;
}

/* Every test of tests[0..n) on device name with activations in bf16 or not (on an attention path:
 * the attn tests, in bf16). */
static void run_device(const char *name, int bf16, const ops_test *tests, int n)
{
    gk_err e = {0};
    dev_name = name;
    if (parse_device(name) || (dev_pathed && !dev_fused && !bf16)) return;
    int rc = open_dev(bf16, &e);
    if (bf16 && (rc == GK_EUSAGE || (rc == 0 && dev->act != GK_BF16))) { /* no bf16 activations */
        gk_backend_free(dev);
        dev = NULL;
        return;
    }
    if (rc == GK_ENOTFOUND || (rc && dev_path == GK_ATTN_CUDNN)) {
        fprintf(stderr, "SKIP test_ops on %s: %s\n", name, e.msg);
        t_skipped++;
        return;
    }
    if (rc) {
        fprintf(stderr, "FAIL test_ops: opening %s: %s\n", name, e.msg);
        t_failed++;
        return;
    }
    if (dev->props.ref_ops[0])
        fprintf(stderr,
                "test_ops: %s %s: the reference code serves "
                "%s (those cases compare it with itself)\n",
                name, bf16 ? "bf16" : "fp32", dev->props.ref_ops);
    else if (!dev_pathed)
        fprintf(stderr, "test_ops: %s %s: every op runs the device's own code\n", name,
                bf16 ? "bf16" : "fp32");
    for (int i = 0; i < n; i++)
        if (!dev_pathed || tests[i].attn == (dev_fused ? 2 : 1)) RUN_ON(tests[i]);
    free_siblings();
    gk_backend_free(dev);
    dev = NULL;
}

#ifdef OPS_ISA
/* Whether this CPU runs the path OPS_ISA ("v3": x86-64-v3, AVX2 + FMA + F16C; "v1": baseline). */
static int ops_isa_runs(void)
{
    if (strcmp(OPS_ISA, "v3")) return 1;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
}
#endif

/* The whole run: the reference backend, then tests[0..n) on each device of argv, else
 * $GPT_TEST_DEVICES, else "cpu" and $GPT_TEST_CUDA (default cuda-emu), or with OPS_PATHS that on
 * the paths plain and flash (and cudnn on a GPU; fa2 is auto's, checked bit for bit by
 * test_attention) and fused, with fp32 and then bf16 activations. */
static int ops_main(int argc, char **argv, const ops_test *tests, int n_tests)
{
    gk_err e = {0};
    if (gk_ref_create(&ref, &e) || ref->ops->reserve(ref, 10000, 2048, 64, 128, &e)) {
        fprintf(stderr, "test_ops: reference backend: %s\n", e.msg);
        return 1;
    }
    const char *env = getenv("GPT_TEST_DEVICES"), *cuda = getenv("GPT_TEST_CUDA");
    char list[512];
    setenv("GPT_EMU_ORDER", "shuffle", 0); /* the header's thread order (the environment's wins) */
    cuda = cuda && *cuda ? cuda : "cuda-emu";
#ifdef OPS_ISA /* test_ops_isa_*: the CPU backend's loops built for one instruction-set path */
    if (!ops_isa_runs()) {
        fprintf(stderr, "SKIP test_ops on cpu (%s): this CPU cannot run that path\n", OPS_ISA);
        t_skipped++;
        gk_backend_free(ref);
        return TEST_END();
    }
    env = "cpu";
#endif
    if (env && *env) snprintf(list, sizeof list, "%s", env);
    else {
#ifdef OPS_PATHS /* test_ops_paths: the attention paths and the fused gradients (auto: fa2) */
        snprintf(list, sizeof list, "%s:plain %s:flash %s:fused", cuda, cuda, cuda);
        if (strcmp(cuda, "cuda-emu")) /* cuDNN: not under the emulator */
            snprintf(list + strlen(list), sizeof list - strlen(list), " %s:cudnn", cuda);
#else
        snprintf(list, sizeof list, "cpu %s", cuda);
#endif
    }
    char *names[16];
    int n = 0;
    if (argc > 1)
        for (int i = 1; i < argc && n < 16; i++) names[n++] = argv[i];
    else
        for (char *s = strtok(list, " ,"); s && n < 16; s = strtok(NULL, " ,")) names[n++] = s;
    for (int i = 0; i < n; i++) {
        run_device(names[i], 0, tests, n_tests);
        run_device(names[i], 1, tests, n_tests);
    }
    gk_backend_free(ref);
    return TEST_END();
}

#endif
