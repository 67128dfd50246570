/* test_cuda_attn.c: the CUDA backend's attention (kernels/cuda/attention*.cu) on $GK_TEST_CUDA
 * (default cuda-emu; "cuda" on a GPU), moving data only through the ops interface, against the
 * ref backend (double-precision loops) on the same inputs:
 * - fp32 activations (plain path) against ref: forward, lse, backward, decode;
 * Each path is a backend opened with its attention setting (gk_backend_opts.attention).
 * - bf16 activations, the plain path (attention = plain) and the flash kernels against ref run
 *   on the bf16-rounded inputs, and flash against plain; T = 1, 7, 64, 65, 130, odd head counts,
 *   head sizes 16, 24 (no flash kernel: plain), 32, 64; dropout p > 0 (masks keyed as ref's);
 * - the fa2 path (attention = fa2: attention_fa2.cu's forward, attention_fa2_bwd.cu's backward)
 *   likewise against ref, plain and flash: out, lse, dqkv, on those shapes and on several B and
 *   heads with T around its 64-row tiles (T = 1, 63, 65, 127, 129, 130, 200), head sizes 16, 32,
 *   64, 128, dropout on and off; its dqkv also against flash's within 2u (rtol and atol): both
 *   round P and dS to bf16 before the same products in the same order, and differ by about an
 *   ulp (1.3u at most under the emulator), so that a gradient off by 1% fails;
 * Tolerances (|got - want| <= atol + rtol |want|, atol scaled by the tensor's largest |want|):
 * fp32: the same sums in another order, rtol 1e-5, atol 1e-6 x max. bf16 has unit roundoff
 * u = 2^-9: the plain path rounds only its outputs (rtol 2u, atol 2u x max for the accumulated
 * gradients); flash also rounds the probabilities and dS to bf16 before its tensor-core products,
 * which adds a few u of the tensor's scale (rtol 4u, atol 4u x max). lse is fp32 on every path
 * (bf16 products are exact in fp32): rtol 1e-5, atol 2e-5 x max. The device is skipped when its
 * library is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "test.h"

static const char *device(void)
{
    const char *d = getenv("GK_TEST_CUDA");
    return d && *d ? d : "cuda-emu";
}

/* The device backend with bf16 (1) or fp32 (0) activations and attention path attn (a
 * gk_attention); NULL (and the test skipped by the caller) when its library does not load. */
static gk_backend *open_path(int bf16, int attn)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    gk_backend_opts o = {.device = device(), .bf16 = bf16, .attention = attn,
                         .cuda_lib = getenv("GPT_CUDA_LIB")}; /* gpu_session.sh: another build's */
    if (gk_backend_open(&be, &o, &e)) {
        fprintf(stderr, "note: %s\n", e.msg);
        return NULL;
    }
    return be;
}
static gk_backend *open_device(int bf16) { return open_path(bf16, GK_ATTN_AUTO); }

static gk_backend *open_ref(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    gk_backend_opts o = {.device = "ref", .threads = 1, .bf16 = 0, .attention = GK_ATTN_AUTO};
    CHECK_OK(gk_backend_open(&be, &o, &e), &e);
    return be;
}

static unsigned long long lcg = 88172645463325252ULL;
static float urand(void) /* uniform in [-1, 1) */
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(lcg >> 40) / 8388608.0f - 1.0f;
}
static float *rand_buf(size_t n, float amp, int round_bf16)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
        x[i] = amp * urand();
        if (round_bf16) x[i] = gk_bf16f(gk_f2bf16(x[i]));
    }
    return x;
}

/* Device copy of host fp32 x (n) in type t. */
static void *put(gk_backend *be, const float *x, size_t n, gk_elt t)
{
    void *d = be->ops->alloc(be, n * gk_elt_size(t)), *h = malloc(n * gk_elt_size(t));
    for (size_t i = 0; i < n; i++) gk_elt_put(h, t, i, x[i]);
    be->ops->to_device(be, d, h, n * gk_elt_size(t));
    free(h);
    return d;
}
/* Host fp32 copy (malloc'd) of device d (n of type t). */
static float *get(gk_backend *be, const void *d, size_t n, gk_elt t)
{
    void *h = malloc(n * gk_elt_size(t));
    float *x = malloc(sizeof(float) * n);
    be->ops->to_host(be, h, d, n * gk_elt_size(t));
    for (size_t i = 0; i < n; i++) x[i] = gk_elt_get(h, t, i);
    free(h);
    return x;
}

/* Checks got against want (n): |got - want| <= atol * max|want| + rtol * |want|. */
static void expect_close(const char *what, const float *got, const float *want, size_t n,
                         double atol, double rtol)
{
    double mx = 0, worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]), lim = atol * mx + rtol * fabs(want[i]);
        if (!(d <= lim) && (d - lim > worst || worst == 0)) worst = d - lim + 1e-300, wi = i;
    }
    CHECKF(worst == 0, "%s: element %zu is %.7g, want %.7g (max |want| %.3g)", what, wi,
           got[wi], want[wi], mx);
}

typedef struct attn_case {
    int B, T, C, NH;
    float p;
} attn_case;

/* One backend's forward and backward: host copies of out, lse, dqkv. */
typedef struct attn_result {
    float *out, *lse, *dqkv;
} attn_result;

static attn_result run_attention(gk_backend *be, const attn_case *c, const float *qkv,
                                 const float *dout, uint64_t key)
{
    size_t n3 = (size_t)c->B * c->T * 3 * c->C, n1 = n3 / 3, nl = (size_t)c->B * c->NH * c->T;
    gk_elt t = be->act;
    gk_err e = {0};
    CHECK_OK(be->ops->reserve(be, (size_t)c->B * c->T, 3 * (size_t)c->C, c->C / c->NH, c->T, &e), &e);
    void *dq = put(be, qkv, n3, t), *dd = put(be, dout, n1, t);
    void *dout_ = be->ops->alloc(be, n1 * gk_elt_size(t)), *dg = be->ops->alloc(be, n3 * gk_elt_size(t));
    float *dl = be->ops->alloc(be, nl * sizeof(float));
    be->ops->attention_fwd(be, dout_, dl, dq, c->B, c->T, c->C, c->NH, c->p, key);
    be->ops->attention_bwd(be, dg, dd, dq, dout_, dl, c->B, c->T, c->C, c->NH, c->p, key);
    CHECK_OK(gk_backend_sync(be, &e), &e);
    attn_result r = {get(be, dout_, n1, t), get(be, dl, nl, GK_F32), get(be, dg, n3, t)};
    be->ops->free(be, dq), be->ops->free(be, dd), be->ops->free(be, dout_);
    be->ops->free(be, dg), be->ops->free(be, dl);
    return r;
}

static void free_result(attn_result *r) { free(r->out), free(r->lse), free(r->dqkv); }

static void expect_same(const char *tag, const attn_case *c, const attn_result *got,
                        const attn_result *want, double atol, double rtol)
{
    char what[3][128];
    const char *names[3] = {"out", "lse", "dqkv"};
    size_t n3 = (size_t)c->B * c->T * 3 * c->C, nl = (size_t)c->B * c->NH * c->T;
    for (int i = 0; i < 3; i++)
        snprintf(what[i], sizeof what[i], "%s %s B=%d T=%d C=%d NH=%d p=%g", tag, names[i], c->B,
                 c->T, c->C, c->NH, c->p);
    expect_close(what[0], got->out, want->out, n3 / 3, atol, rtol);
    expect_close(what[1], got->lse, want->lse, nl, 2e-5, 1e-5);
    expect_close(what[2], got->dqkv, want->dqkv, n3, atol, rtol);
}

static const attn_case cases[] = {
    {1, 1, 16, 1, 0.0f},  {2, 7, 48, 3, 0.0f},  {1, 64, 32, 2, 0.0f}, {2, 65, 48, 3, 0.0f},
    {1, 130, 64, 2, 0.0f}, {1, 65, 72, 3, 0.0f}, {1, 66, 128, 2, 0.0f}, {2, 65, 48, 3, 0.25f},
    {1, 7, 16, 1, 0.5f},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* fp32: the plain path against ref. */
static void test_fp32_vs_ref(void)
{
    gk_backend *dev = open_device(0), *ref = open_ref();
    if (!dev) {
        gk_backend_free(ref);
        SKIP("no device library");
    }
    for (size_t k = 0; k < NCASES; k++) {
        const attn_case *c = &cases[k];
        size_t n1 = (size_t)c->B * c->T * c->C;
        float *qkv = rand_buf(3 * n1, 2.0f, 0), *dout = rand_buf(n1, 1.0f, 0);
        attn_result want = run_attention(ref, c, qkv, dout, 77 + k);
        attn_result got = run_attention(dev, c, qkv, dout, 77 + k);
        expect_same("fp32", c, &got, &want, 1e-6, 1e-5);
        free_result(&want), free_result(&got), free(qkv), free(dout);
    }
    gk_backend_free(dev);
    gk_backend_free(ref);
}

/* bf16: plain and flash against ref on the rounded inputs, and flash against plain. */
static void test_bf16_flash_and_plain(void)
{
    gk_backend *plain_be = open_path(1, GK_ATTN_PLAIN), *flash_be = open_path(1, GK_ATTN_FLASH);
    gk_backend *ref = open_ref();
    if (!plain_be || !flash_be) {
        gk_backend_free(plain_be), gk_backend_free(flash_be), gk_backend_free(ref);
        SKIP("no device library");
    }
    const double u = 1.0 / 512;
    for (size_t k = 0; k < NCASES; k++) {
        const attn_case *c = &cases[k];
        size_t n1 = (size_t)c->B * c->T * c->C;
        float *qkv = rand_buf(3 * n1, 2.0f, 1), *dout = rand_buf(n1, 1.0f, 1);
        attn_result want = run_attention(ref, c, qkv, dout, 5 + k);
        attn_result plain = run_attention(plain_be, c, qkv, dout, 5 + k);
        attn_result flash = run_attention(flash_be, c, qkv, dout, 5 + k);
        expect_same("bf16 plain", c, &plain, &want, 2 * u, 2 * u);
        expect_same("bf16 flash", c, &flash, &want, 4 * u, 4 * u);
        expect_same("bf16 flash vs plain", c, &flash, &plain, 4 * u, 4 * u);
        int hs = c->C / c->NH;
        if (c->T >= 7 && (hs == 16 || hs == 32 || hs == 64)) /* P in bf16 changes some bits */
            CHECKF(memcmp(flash.out, plain.out, sizeof(float) * n1) != 0,
                   "T=%d hs=%d: attention = flash gave the plain path's bits", c->T, hs);
        free_result(&want), free_result(&plain), free_result(&flash), free(qkv), free(dout);
    }
    gk_backend_free(plain_be), gk_backend_free(flash_be), gk_backend_free(ref);
}

static const attn_case fa2_cases[] = {
    {3, 127, 128, 2, 0.0f}, {2, 129, 192, 3, 0.0f}, {1, 200, 256, 4, 0.0f}, {2, 200, 64, 2, 0.0f},
    {2, 129, 128, 1, 0.1f}, {2, 1, 128, 2, 0.1f},   {2, 63, 128, 2, 0.0f},  {3, 65, 96, 3, 0.1f},
    {2, 130, 128, 2, 0.2f}, {1, 130, 256, 2, 0.0f}, {2, 65, 64, 4, 0.0f},   {1, 63, 256, 2, 0.3f},
};
#define NFA2 (sizeof fa2_cases / sizeof fa2_cases[0])

/* bf16: the fa2 forward and backward against ref, plain and flash, on cases and fa2_cases. */
static void test_bf16_fa2(void)
{
    gk_backend *plain_be = open_path(1, GK_ATTN_PLAIN), *fa2_be = open_path(1, GK_ATTN_FA2);
    gk_backend *flash_be = open_path(1, GK_ATTN_FLASH), *ref = open_ref();
    if (!plain_be || !fa2_be || !flash_be) {
        gk_backend_free(plain_be), gk_backend_free(fa2_be), gk_backend_free(flash_be);
        gk_backend_free(ref);
        SKIP("no device library");
    }
    const double u = 1.0 / 512;
    for (size_t k = 0; k < NCASES + NFA2; k++) {
        const attn_case *c = k < NCASES ? &cases[k] : &fa2_cases[k - NCASES];
        size_t n1 = (size_t)c->B * c->T * c->C;
        float *qkv = rand_buf(3 * n1, 2.0f, 1), *dout = rand_buf(n1, 1.0f, 1);
        attn_result want = run_attention(ref, c, qkv, dout, 31 + k);
        attn_result plain = run_attention(plain_be, c, qkv, dout, 31 + k);
        attn_result fa2 = run_attention(fa2_be, c, qkv, dout, 31 + k);
        attn_result flash = run_attention(flash_be, c, qkv, dout, 31 + k);
        expect_same("bf16 fa2", c, &fa2, &want, 4 * u, 4 * u);
        expect_same("bf16 fa2 vs plain", c, &fa2, &plain, 4 * u, 4 * u);
        expect_same("bf16 fa2 vs flash", c, &fa2, &flash, 4 * u, 4 * u);
        char what[128];
        snprintf(what, sizeof what, "bf16 fa2 vs flash dqkv (2u) B=%d T=%d C=%d NH=%d p=%g", c->B,
                 c->T, c->C, c->NH, c->p);
        expect_close(what, fa2.dqkv, flash.dqkv, 3 * n1, 2 * u, 2 * u);
        int hs = c->C / c->NH;
        if (c->T >= 7 && hs % 16 == 0) /* P in bf16 changes some bits: fa2 did run */
            CHECKF(memcmp(fa2.out, plain.out, sizeof(float) * n1) != 0,
                   "T=%d hs=%d: attention = fa2 gave the plain path's bits", c->T, hs);
        free_result(&want), free_result(&plain), free_result(&fa2), free_result(&flash);
        free(qkv), free(dout);
    }
    gk_backend_free(plain_be), gk_backend_free(fa2_be), gk_backend_free(flash_be);
    gk_backend_free(ref);
}

/* The KV-cache decode against ref's, for n = 1 (single-stream decode) and a few rows, and against
 * the forward (t0 = 0, n = Tc). */
static void test_decode(void)
{
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        gk_backend *dev = open_device(bf16), *ref = open_ref();
        if (!dev) {
            gk_backend_free(ref);
            SKIP("no device library");
        }
        const int B = 2, Tc = 70, C = 48, NH = 3;
        const int spans[][2] = {{0, 1}, {0, Tc}, {69, 1}, {33, 5}, {64, 6}};
        size_t n3 = (size_t)B * Tc * 3 * C;
        float *qkv = rand_buf(n3, 2.0f, bf16);
        void *dq = put(dev, qkv, n3, dev->act);
        for (size_t s = 0; s < sizeof spans / sizeof spans[0]; s++) {
            int t0 = spans[s][0], n = spans[s][1];
            size_t no = (size_t)B * n * C;
            float *want = malloc(sizeof(float) * no);
            void *dout = dev->ops->alloc(dev, no * gk_elt_size(dev->act));
            int *dt0 = dev->ops->alloc(dev, sizeof(int)); /* the position: a device int */
            dev->ops->to_device(dev, dt0, &t0, sizeof t0);
            ref->ops->attention_fwd_at(ref, want, qkv, NULL, B, Tc, &t0, n, C, NH);
            dev->ops->attention_fwd_at(dev, dout, dq, NULL, B, Tc, dt0, n, C, NH);
            dev->ops->free(dev, dt0);
            float *got = get(dev, dout, no, dev->act);
            char what[64];
            snprintf(what, sizeof what, "%s decode t0=%d n=%d", bf16 ? "bf16" : "fp32", t0, n);
            expect_close(what, got, want, no, bf16 ? 2.0 / 512 : 1e-6, bf16 ? 2.0 / 512 : 1e-5);
            free(want), free(got), dev->ops->free(dev, dout);
        }
        gk_err e = {0};
        CHECK_OK(gk_backend_sync(dev, &e), &e);
        dev->ops->free(dev, dq), free(qkv);
        gk_backend_free(dev);
        gk_backend_free(ref);
    }
}

/* The KV-cache step with new rows (decoding's qkv_new), with the scratch reserved so that the
 * cache of 200 rows takes the split kernels: the cache afterwards is exactly ref's (the new rows
 * stored, nothing else touched) and the outputs match ref's; one new row (attn_decode_part
 * stores it itself) and several (cache_store first). */
static void test_decode_store(void)
{
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        gk_backend *dev = open_device(bf16), *ref = open_ref();
        if (!dev) {
            gk_backend_free(ref);
            SKIP("no device library");
        }
        const int B = 2, Tc = 200, C = 48, NH = 3;
        const int spans[][2] = {{0, 1}, {70, 1}, {199, 1}, {130, 3}};
        size_t n3 = (size_t)B * Tc * 3 * C;
        gk_err e = {0};
        CHECK_OK(dev->ops->reserve(dev, (size_t)B * Tc, 3 * (size_t)C, C / NH, Tc, &e), &e);
        float *cache = rand_buf(n3, 2.0f, bf16);
        void *dq = put(dev, cache, n3, dev->act);
        for (size_t s = 0; s < sizeof spans / sizeof spans[0]; s++) {
            int t0 = spans[s][0], n = spans[s][1];
            size_t nn = (size_t)B * n * 3 * C, no = (size_t)B * n * C;
            float *fresh = rand_buf(nn, 2.0f, bf16), *want = malloc(sizeof(float) * no);
            void *dfresh = put(dev, fresh, nn, dev->act);
            void *dout = dev->ops->alloc(dev, no * gk_elt_size(dev->act));
            int *dt0 = dev->ops->alloc(dev, sizeof(int));
            dev->ops->to_device(dev, dt0, &t0, sizeof t0);
            ref->ops->attention_fwd_at(ref, want, cache, fresh, B, Tc, &t0, n, C, NH);
            dev->ops->attention_fwd_at(dev, dout, dq, dfresh, B, Tc, dt0, n, C, NH);
            float *got = get(dev, dout, no, dev->act), *gc = get(dev, dq, n3, dev->act);
            char what[64];
            snprintf(what, sizeof what, "%s decode+store t0=%d n=%d", bf16 ? "bf16" : "fp32", t0, n);
            expect_close(what, got, want, no, bf16 ? 2.0 / 512 : 1e-6, bf16 ? 2.0 / 512 : 1e-5);
            CHECKF(!memcmp(gc, cache, sizeof(float) * n3), "%s: the cache is not ref's", what);
            free(fresh), free(want), free(got), free(gc);
            dev->ops->free(dev, dfresh), dev->ops->free(dev, dout), dev->ops->free(dev, dt0);
        }
        CHECK_OK(gk_backend_sync(dev, &e), &e);
        dev->ops->free(dev, dq), free(cache);
        gk_backend_free(dev);
        gk_backend_free(ref);
    }
}

/* The same inputs twice give the same bits (no atomics, fixed sums), on each bf16 path. */
static void test_deterministic(void)
{
    const attn_case c = {2, 65, 64, 2, 0.1f};
    size_t n1 = (size_t)c.B * c.T * c.C;
    float *qkv = rand_buf(3 * n1, 2.0f, 1), *dout = rand_buf(n1, 1.0f, 1);
    const int paths[] = {GK_ATTN_PLAIN, GK_ATTN_FLASH, GK_ATTN_FA2};
    for (int i = 0; i < 3; i++) {
        gk_backend *dev = open_path(1, paths[i]);
        if (!dev) {
            free(qkv), free(dout);
            SKIP("no device library");
        }
        attn_result a = run_attention(dev, &c, qkv, dout, 9), b = run_attention(dev, &c, qkv, dout, 9);
        CHECKF(!memcmp(a.out, b.out, sizeof(float) * n1) &&
                   !memcmp(a.dqkv, b.dqkv, sizeof(float) * 3 * n1),
               "%s: two runs differ", gk_attention_name(paths[i]));
        free_result(&a), free_result(&b);
        gk_backend_free(dev);
    }
    free(qkv), free(dout);
}

/* The setting: names both ways, a bad value naming the setting; cuda-emu refuses cudnn with one
 * line at open; auto is fa2 (the same bits), neither flash's nor plain's; cpu ignores the
 * setting; a path number out of range is refused. */
static void test_attention_setting(void)
{
    gk_err e = {0};
    int a = -1;
    for (int i = GK_ATTN_AUTO; i <= GK_ATTN_PLAIN; i++) {
        CHECK_OK(gk_attention_parse(gk_attention_name(i), "attention", &a, &e), &e);
        CHECKF(a == i, "%s parsed as %d", gk_attention_name(i), a);
    }
    CHECKF(gk_attention_parse("cuDNN", "--attention", &a, &e) == GK_EUSAGE &&
               !strcmp(e.msg, "--attention: 'cuDNN' is not one of auto, cudnn, flash, fa2, plain"),
           "bad value: %s", e.msg);
    gk_backend *be = NULL;
    gk_backend_opts cpu = {.device = "cpu", .threads = 1, .bf16 = 0, .attention = GK_ATTN_CUDNN};
    CHECK_OK(gk_backend_open(&be, &cpu, &e), &e);
    gk_backend_free(be), be = NULL;
    if (strcmp(device(), "cuda-emu")) return; /* on a GPU: test_bf16_cudnn */
    gk_backend *dev = open_device(1);
    if (!dev) SKIP("no device library");
    gk_backend_free(dev);
    gk_backend_opts o = {.device = "cuda-emu", .bf16 = 1, .attention = GK_ATTN_CUDNN};
    e.code = 0;
    CHECKF(gk_backend_open(&be, &o, &e) == GK_EIO && !be &&
               strstr(e.msg, "cuda-emu backend: attention = cudnn: cuDNN does not run under the "
                             "CUDA emulator") && !strchr(e.msg, '\n'),
           "cudnn on the emulator: %d %s", e.code, e.msg);
    o.attention = GK_ATTN_PLAIN + 1;
    CHECKF(gk_backend_open(&be, &o, &e) == GK_EUSAGE && !be, "path %d: %s", o.attention, e.msg);
    const attn_case c = {2, 65, 64, 2, 0.0f};
    size_t n1 = (size_t)c.B * c.T * c.C;
    float *qkv = rand_buf(3 * n1, 2.0f, 1), *dout = rand_buf(n1, 1.0f, 1);
    gk_backend *auto_be = open_path(1, GK_ATTN_AUTO), *fa2_be = open_path(1, GK_ATTN_FA2);
    gk_backend *plain_be = open_path(1, GK_ATTN_PLAIN), *flash_be = open_path(1, GK_ATTN_FLASH);
    attn_result x = run_attention(auto_be, &c, qkv, dout, 3), y = run_attention(fa2_be, &c, qkv, dout, 3);
    attn_result z = run_attention(plain_be, &c, qkv, dout, 3);
    attn_result w = run_attention(flash_be, &c, qkv, dout, 3);
    CHECKF(!memcmp(x.out, y.out, sizeof(float) * n1) && !memcmp(x.dqkv, y.dqkv, sizeof(float) * 3 * n1),
           "cuda-emu: attention = auto is not fa2");
    CHECKF(memcmp(x.out, z.out, sizeof(float) * n1) != 0, "cuda-emu: attention = auto gave plain's bits");
    CHECKF(memcmp(x.dqkv, w.dqkv, sizeof(float) * 3 * n1) != 0,
           "cuda-emu: attention = auto gave flash's bits");
    free_result(&x), free_result(&y), free_result(&z), free_result(&w), free(qkv), free(dout);
    gk_backend_free(auto_be), gk_backend_free(fa2_be), gk_backend_free(plain_be);
    gk_backend_free(flash_be);
}

/* bf16: cuDNN's fused attention (attention = cudnn, attention_cudnn.cpp) against ref, plain and
 * flash (out, lse, dqkv; flash's tolerance: cuDNN too rounds P and dS to bf16 for its tensor-core
 * products) on the cases it takes (no dropout) and on GPT-2's shape, T = 1024, where cuDNN must
 * have run both (no note: a shape it has no plan for, T = 1, runs on the fa2 kernels with a
 * note, printed here); the same bits twice (its deterministic backward); dropout is refused with
 * one line naming it. cuda-emu (no
 * cuDNN): the open is refused (checked here and by test_attention_setting); on a GPU without
 * cuDNN (a library built without its headers, no libcudnn.so.9) the test skips, saying why. */
static void test_bf16_cudnn(void)
{
    gk_backend *dnn = NULL;
    gk_err e = {0};
    gk_backend_opts o = {.device = device(), .bf16 = 1, .attention = GK_ATTN_CUDNN,
                         .cuda_lib = getenv("GPT_CUDA_LIB")};
    int rc = gk_backend_open(&dnn, &o, &e);
    if (!strcmp(device(), "cuda-emu")) {
        gk_backend_free(dnn);
        if (rc == GK_ENOTFOUND) SKIP("no device library");
        CHECKF(rc == GK_EIO && strstr(e.msg, "cuDNN does not run under the CUDA emulator"),
               "cudnn on cuda-emu: %d %s", rc, e.msg);
        return;
    }
    if (rc) {
        fprintf(stderr, "note: %s\n", e.msg);
        SKIP("attention = cudnn does not open here (the note says why)");
    }
    gk_backend *plain_be = open_path(1, GK_ATTN_PLAIN), *flash_be = open_path(1, GK_ATTN_FLASH);
    gk_backend *ref = open_ref();
    const double u = 1.0 / 512;
    static const attn_case big = {2, 1024, 768, 12, 0.0f};
    for (size_t k = 0; k <= NCASES; k++) {
        const attn_case *c = k < NCASES ? &cases[k] : &big;
        if (c->p > 0) continue;
        size_t n1 = (size_t)c->B * c->T * c->C;
        float *qkv = rand_buf(3 * n1, 2.0f, 1), *dout = rand_buf(n1, 1.0f, 1);
        attn_result want = run_attention(ref, c, qkv, dout, 51 + k);
        attn_result plain = run_attention(plain_be, c, qkv, dout, 51 + k);
        attn_result flash = run_attention(flash_be, c, qkv, dout, 51 + k);
        dnn->note[0] = 0;
        attn_result got = run_attention(dnn, c, qkv, dout, 51 + k);
        if (dnn->note[0]) fprintf(stderr, "note: T=%d: %s\n", c->T, dnn->note);
        CHECKF(c != &big || !dnn->note[0], "cudnn did not run GPT-2's shape: %s", dnn->note);
        attn_result again = run_attention(dnn, c, qkv, dout, 51 + k);
        expect_same("bf16 cudnn", c, &got, &want, 4 * u, 4 * u);
        expect_same("bf16 cudnn vs plain", c, &got, &plain, 4 * u, 4 * u);
        expect_same("bf16 cudnn vs flash", c, &got, &flash, 4 * u, 4 * u);
        CHECKF(!memcmp(got.out, again.out, sizeof(float) * n1) &&
                   !memcmp(got.dqkv, again.dqkv, sizeof(float) * 3 * n1),
               "cudnn T=%d: two runs differ", c->T);
        free_result(&want), free_result(&plain), free_result(&flash), free_result(&got);
        free_result(&again), free(qkv), free(dout);
    }
    gk_backend_free(dnn), gk_backend_free(plain_be), gk_backend_free(flash_be), gk_backend_free(ref);
    /* dropout: one line naming it, a usage error, nothing run */
    CHECK_OK(gk_backend_open(&dnn, &o, &e), &e);
    attn_case c = {1, 8, 64, 1, 0.1f};
    void *buf = dnn->ops->alloc(dnn, 4 * sizeof(uint16_t) * c.T * c.C);
    float *lse = dnn->ops->alloc(dnn, sizeof(float) * c.T);
    dnn->ops->attention_fwd(dnn, (uint16_t *)buf + 3 * c.T * c.C, lse, buf, c.B, c.T, c.C, c.NH, c.p, 1);
    CHECKF(gk_backend_sync(dnn, &e) == GK_EUSAGE && strstr(e.msg, "attention = cudnn: dropout 0.1"),
           "cudnn with dropout: %s", e.msg);
    dnn->ops->free(dnn, buf), dnn->ops->free(dnn, lse);
    gk_backend_free(dnn);
}

int main(void)
{
    RUN(test_attention_setting);
    RUN(test_fp32_vs_ref);
    RUN(test_bf16_flash_and_plain);
    RUN(test_bf16_fa2);
    RUN(test_decode);
    RUN(test_decode_store);
    RUN(test_deterministic);
    RUN(test_bf16_cudnn);
    return TEST_END();
}
