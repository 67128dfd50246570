/* test_kernels.c: every op of the CPU backend against the reference backend on random inputs, and
 * every backward of the reference backend against central finite differences of its forward.
 *
 * Tolerances are derived, not picked: a float32 result of a length-n reduction has relative error
 * at most ~n*u (u = 2^-24, Higham's gamma_n), times the problem's conditioning where cancellation
 * occurs (computed for gemm as || |A||B| || / ||AB||); transcendental kernels add their own
 * few-ulp error. Finite differences: the truncation error of a step h is estimated from the
 * steps h and 2h (|fd(h) - fd(2h)| bounds it: the error is O(h^2)), and the rounding error is
 * u * sum|dout*out| / h (the forward's outputs are float); the check allows twice their sum. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/ref.h"
#include "kernels/rng.h"
#include "test.h"

#define U 5.9604645e-8 /* float32 unit roundoff */

static gk_backend *cpu, *ref;
static uint64_t seed = 1;

static float *rnd(size_t n, float scale)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = (gk_rng_uniform(seed, i) * 2.0f - 1.0f) * scale;
    seed++;
    return x;
}
static float *dup(const float *x, size_t n)
{
    float *y = malloc(sizeof(float) * n);
    memcpy(y, x, sizeof(float) * n);
    return y;
}
#define F32 GK_F32

static double relerr(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
    return r > 0 ? sqrt(d / r) : sqrt(d);
}
#define CMP(a, b, n, tol, what)                                                          \
    do {                                                                                 \
        double e_ = relerr(a, b, n);                                                     \
        CHECKF(e_ <= (tol), "%s: relerr %.3g > tol %.3g", what, e_, (double)(tol));      \
    } while (0)

/* ---- fast vs reference ---- */

static void test_gemm(void)
{
    int M = 37, N = 300, K = 129; /* odd sizes, and N large enough to be cut into slabs */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            float *A = rnd((size_t)M * K, 1), *B = rnd((size_t)K * N, 1), *C0 = rnd((size_t)M * N, 1);
            float *C1 = dup(C0, (size_t)M * N), *C2 = dup(C0, (size_t)M * N);
            int lda = ta ? M : K, ldb = tb ? K : N;
            cpu->ops->gemm(cpu, ta, tb, M, N, K, 0.5f, A, F32, lda, B, F32, ldb, 0.25f, C1, F32, N, NULL, NULL);
            ref->ops->gemm(ref, ta, tb, M, N, K, 0.5f, A, F32, lda, B, F32, ldb, 0.25f, C2, F32, N, NULL, NULL);
            /* conditioning: the same product on absolute values */
            float *Aa = dup(A, (size_t)M * K), *Ba = dup(B, (size_t)K * N), *Ca = dup(C0, (size_t)M * N);
            for (int i = 0; i < M * K; i++) Aa[i] = fabsf(Aa[i]);
            for (int i = 0; i < K * N; i++) Ba[i] = fabsf(Ba[i]);
            for (int i = 0; i < M * N; i++) Ca[i] = fabsf(Ca[i]);
            ref->ops->gemm(ref, ta, tb, M, N, K, 0.5f, Aa, F32, lda, Ba, F32, ldb, 0.25f, Ca, F32, N, NULL, NULL);
            double na = 0, nr = 0;
            for (int i = 0; i < M * N; i++) na += (double)Ca[i] * Ca[i], nr += (double)C2[i] * C2[i];
            CMP(C1, C2, (size_t)M * N, 2 * (K + 2) * U * sqrt(na / nr), ta ? (tb ? "gemm TT" : "gemm TN") : (tb ? "gemm NT" : "gemm NN"));
            free(A), free(B), free(C0), free(C1), free(C2), free(Aa), free(Ba), free(Ca);
        }
}

static void test_rowwise_ops(void)
{
    int N = 50, C = 96;
    size_t n = (size_t)N * C;
    float *x = rnd(n, 2), *bias = rnd(C, 1), *w = rnd(C, 1), *d = rnd(n, 1);
    float *o1 = calloc(n, 4), *o2 = calloc(n, 4);
    /* gemm's bias epilogue, against x @ I + bias: one rounding */
    float *x1 = dup(x, n), *x2 = dup(x, n), *eye = calloc((size_t)C * C, 4);
    for (int i = 0; i < C; i++) eye[(size_t)i * C + i] = 1.0f;
    cpu->ops->gemm(cpu, 0, 0, N, C, C, 1.0f, x, F32, C, eye, F32, C, 0.0f, x1, F32, C, bias, NULL);
    ref->ops->gemm(ref, 0, 0, N, C, C, 1.0f, x, F32, C, eye, F32, C, 0.0f, x2, F32, C, bias, NULL);
    CMP(x1, x2, n, U, "gemm bias epilogue");
    for (int i = 0; i < N; i++)
        CHECK(x2[(size_t)i * C + 5] == x[(size_t)i * C + 5] + bias[5]);
    /* bias_bwd: sums of N */
    float b1[96] = {0}, b2[96] = {0};
    cpu->ops->bias_bwd(cpu, b1, d, N, C);
    ref->ops->bias_bwd(ref, b2, d, N, C);
    CMP(b1, b2, C, 2 * N * U, "bias_bwd");
    /* layernorm fwd: sums of C, then a few ops per element */
    float m1[50], r1[50], m2[50], r2[50];
    cpu->ops->layernorm_fwd(cpu, o1, m1, r1, x, w, bias, N, C);
    ref->ops->layernorm_fwd(ref, o2, m2, r2, x, w, bias, N, C);
    CMP(o1, o2, n, 2 * (C + 8) * U, "layernorm_fwd");
    CMP(r1, r2, N, 2 * (C + 8) * U, "layernorm_fwd rstd");
    /* layernorm bwd: sums of C per row (dinp), of N per column (dweight, dbias) */
    float *di1 = dup(d, n), *di2 = dup(d, n), dw1[96] = {0}, dw2[96] = {0}, db1[96] = {0}, db2[96] = {0};
    cpu->ops->layernorm_bwd(cpu, di1, dw1, db1, d, x, w, m2, r2, N, C);
    ref->ops->layernorm_bwd(ref, di2, dw2, db2, d, x, w, m2, r2, N, C);
    CMP(di1, di2, n, 2 * (C + 8) * U, "layernorm_bwd dinp");
    CMP(dw1, dw2, C, 2 * (N + 8) * U, "layernorm_bwd dweight");
    CMP(db1, db2, C, 2 * N * U, "layernorm_bwd dbias");
    /* gelu: ~10 ops and a 2-ulp exp per element; x has |x| <= 3 so the derivative is tame */
    float *g1 = dup(x, n), *g2 = dup(x, n);
    cpu->ops->gemm(cpu, 0, 0, N, C, C, 1.0f, x, F32, C, eye, F32, C, 0.0f, o1, F32, C, bias, g1);
    ref->ops->gemm(ref, 0, 0, N, C, C, 1.0f, x, F32, C, eye, F32, C, 0.0f, o2, F32, C, bias, g2);
    CMP(g1, g2, n, U, "gemm gelu epilogue: pre-activation");
    CMP(o1, o2, n, 2 * 16 * U, "gemm gelu epilogue");
    cpu->ops->gelu_bwd(cpu, o1, g2, d, N, C);
    ref->ops->gelu_bwd(ref, o2, g2, d, N, C);
    CMP(o1, o2, n, 2 * 24 * U, "gelu_bwd");
    /* gelu_fwd: the epilogue's GELU, bit for bit on each backend (cpu: also when the rows are cut
     * otherwise, one long row or one column), and cpu against ref as the epilogue */
    float *e1 = calloc(n, 4), *e2 = calloc(n, 4);
    cpu->ops->gemm(cpu, 0, 0, N, C, C, 1.0f, x, F32, C, eye, F32, C, 0.0f, o1, F32, C, bias, g1);
    ref->ops->gemm(ref, 0, 0, N, C, C, 1.0f, x, F32, C, eye, F32, C, 0.0f, o2, F32, C, bias, g2);
    cpu->ops->gelu_fwd(cpu, e1, g1, N, C);
    ref->ops->gelu_fwd(ref, e2, g2, N, C);
    CHECKF(memcmp(e1, o1, 4 * n) == 0, "cpu gelu_fwd is not the gemm epilogue's GELU");
    CHECKF(memcmp(e2, o2, 4 * n) == 0, "ref gelu_fwd is not the gemm epilogue's GELU");
    CMP(e1, e2, n, 2 * 16 * U, "gelu_fwd");
    for (int k = 0; k < 2; k++) {
        memset(e1, 0, 4 * n);
        cpu->ops->gelu_fwd(cpu, e1, g1, k ? (int)n : 1, k ? 1 : (int)n);
        CHECKF(memcmp(e1, o1, 4 * n) == 0, "cpu gelu_fwd as %s differs", k ? "one column" : "one row");
    }
    free(e1), free(e2);
    /* residual + layernorm with and without dropout: same masks, two roundings for the residual,
     * then a layernorm of it; with res_out aliasing res too */
    for (int k = 0; k < 4; k++) {
        float p = k & 1 ? 0.3f : 0.0f, *l1 = dup(d, n), *l2 = dup(d, n);
        float *s1 = k & 2 ? dup(x, n) : o1, *s2 = k & 2 ? dup(x, n) : o2;
        cpu->ops->residual_layernorm_fwd(cpu, s1, l1, m1, r1, k & 2 ? s1 : x, d, bias, p, 77, w, bias, N, C);
        ref->ops->residual_layernorm_fwd(ref, s2, l2, m2, r2, k & 2 ? s2 : x, d, bias, p, 77, w, bias, N, C);
        CMP(s1, s2, n, 4 * U, "residual_layernorm_fwd res_out");
        CMP(l1, l2, n, 2 * (C + 12) * U, "residual_layernorm_fwd ln_out");
        CMP(r1, r2, N, 2 * (C + 12) * U, "residual_layernorm_fwd rstd");
        /* the layernorm is of res_out: the same as layernorm_fwd on it, bit for bit */
        float *l3 = dup(d, n), m3[50], r3[50];
        cpu->ops->layernorm_fwd(cpu, l3, m3, r3, s1, w, bias, N, C);
        CHECK(memcmp(l1, l3, 4 * n) == 0 && memcmp(m1, m3, sizeof m3) == 0 && memcmp(r1, r3, sizeof r3) == 0);
        if (k & 2) free(s1), free(s2);
        free(l1), free(l2), free(l3);
        cpu->ops->dropout_bwd(cpu, o1, d, n, p, 77);
        ref->ops->dropout_bwd(ref, o2, d, n, p, 77);
        CMP(o1, o2, n, 2 * U, "dropout_bwd");
    }
    /* dropout keeps about 1-p: 4800 draws, within 4 standard deviations */
    int kept = 0;
    for (size_t i = 0; i < n; i++) kept += o1[i] != 0.0f || d[i] == 0.0f;
    CHECKF(fabs(kept / (double)n - 0.7) < 4 * sqrt(0.21 / n), "kept fraction %.3f", kept / (double)n);
    free(x), free(bias), free(w), free(d), free(o1), free(o2), free(x1), free(x2), free(eye), free(di1), free(di2), free(g1), free(g2);
}

static void test_encoder(void)
{
    int B = 3, T = 7, C = 80, V = 11;
    int tok[21];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7) % V;
    float *wte = rnd((size_t)V * C, 1), *wpe = rnd((size_t)T * C, 1), *d = rnd((size_t)B * T * C, 1);
    float *o1 = calloc((size_t)B * T * C, 4), *o2 = calloc((size_t)B * T * C, 4);
    for (int k = 0; k < 2; k++) {
        float p = k ? 0.25f : 0.0f;
        cpu->ops->encoder_fwd(cpu, o1, tok, wte, F32, wpe, NULL, B, T, C, p, 5);
        ref->ops->encoder_fwd(ref, o2, tok, wte, F32, wpe, NULL, B, T, C, p, 5);
        CMP(o1, o2, (size_t)B * T * C, 2 * U, "encoder_fwd");
        float *a1 = calloc((size_t)V * C, 4), *a2 = calloc((size_t)V * C, 4);
        float *q1 = calloc((size_t)T * C, 4), *q2 = calloc((size_t)T * C, 4);
        cpu->ops->encoder_bwd(cpu, a1, q1, d, tok, B, T, C, p, 5);
        ref->ops->encoder_bwd(ref, a2, q2, d, tok, B, T, C, p, 5);
        CMP(a1, a2, (size_t)V * C, 2 * B * T * U, "encoder_bwd dwte");
        CMP(q1, q2, (size_t)T * C, 2 * B * U, "encoder_bwd dwpe");
        free(a1), free(a2), free(q1), free(q2);
    }
    free(wte), free(wpe), free(d), free(o1), free(o2);
}

static void test_attention(void)
{
    int B = 2, T = 13, NH = 3, C = 48, hs = C / NH;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    float *qkv = rnd(nq, 1.5f), *d = rnd(no, 1);
    float *o1 = calloc(no, 4), *o2 = calloc(no, 4), *l1 = calloc((size_t)B * NH * T, 4), *l2 = calloc((size_t)B * NH * T, 4);
    float *g1 = calloc(nq, 4), *g2 = calloc(nq, 4);
    for (int k = 0; k < 2; k++) {
        float p = k ? 0.2f : 0.0f;
        cpu->ops->attention_fwd(cpu, o1, l1, qkv, B, T, C, NH, p, 9);
        ref->ops->attention_fwd(ref, o2, l2, qkv, B, T, C, NH, p, 9);
        CMP(o1, o2, no, 2 * (T + hs + 8) * U, "attention_fwd out");
        CMP(l1, l2, (size_t)B * NH * T, 2 * (T + hs + 8) * U, "attention_fwd lse");
        cpu->ops->attention_bwd(cpu, g1, d, qkv, o2, l2, B, T, C, NH, p, 9);
        ref->ops->attention_bwd(ref, g2, d, qkv, o2, l2, B, T, C, NH, p, 9);
        CMP(g1, g2, nq, 4 * (T + hs + 8) * U, "attention_bwd");
    }
    free(qkv), free(d), free(o1), free(o2), free(l1), free(l2), free(g1), free(g2);
}

static void test_xent(void)
{
    int N = 9, V = 70, Vp = 128;
    float *lg = rnd((size_t)N * Vp, 4);
    int tg[9] = {0, 5, 69, -1, 3, 3, 60, 1, 2};
    float l1[9], l2[9], z1[9], z2[9];
    cpu->ops->xent_fwd(cpu, l1, z1, lg, tg, N, V, Vp);
    ref->ops->xent_fwd(ref, l2, z2, lg, tg, N, V, Vp);
    CMP(z1, z2, N, 2 * (V + 8) * U, "xent_fwd lse");
    CMP(l1, l2, N, 2 * (V + 8) * U * 4 /* |logit| <= 4: lse - logit cancels by <= 4 */, "xent_fwd loss");
    CHECK(l1[3] == 0.0f);
    float *d1 = calloc((size_t)N * Vp, 4), *d2 = calloc((size_t)N * Vp, 4);
    cpu->ops->xent_bwd(cpu, d1, lg, z2, tg, 0.125f, N, V, Vp);
    ref->ops->xent_bwd(ref, d2, lg, z2, tg, 0.125f, N, V, Vp);
    CMP(d1, d2, (size_t)N * Vp, 2 * 8 * U, "xent_bwd");
    for (int j = V; j < Vp; j++) CHECK(d1[j] == 0.0f);
    free(lg), free(d1), free(d2);
}

static void test_optim(void)
{
    size_t n = 100003;
    float *x = rnd(n, 1), *g = rnd(n, 1);
    double s1, s2;
    cpu->ops->sumsq(cpu, &s1, x, n);
    ref->ops->sumsq(ref, &s2, x, n);
    /* float partial sums of 1024 terms, added in double */
    CHECKF(fabs(s1 - s2) <= 2 * 1024 * U * s2, "sumsq %.10g vs %.10g", s1, s2);
    float *p1 = dup(x, n), *p2 = dup(x, n), *m1 = rnd(n, 0.1f), *v1 = rnd(n, 0.1f);
    for (size_t i = 0; i < n; i++) v1[i] = fabsf(v1[i]);
    float *m2 = dup(m1, n), *v2 = dup(v1, n);
    uint16_t *h1 = calloc(n, 2), *h2 = calloc(n, 2);
    for (int t = 1; t <= 3; t++) {
        cpu->ops->adamw(cpu, p1, g, m1, v1, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f, h1, GK_BF16);
        ref->ops->adamw(ref, p2, g, m2, v2, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f, h2, GK_BF16);
    }
    /* the same IEEE operations in the same order: identical */
    CHECK(memcmp(p1, p2, 4 * n) == 0 && memcmp(m1, m2, 4 * n) == 0 && memcmp(v1, v2, 4 * n) == 0);
    /* the bf16 copy is the updated parameter rounded to nearest even (a hand-checked pair too) */
    CHECK(memcmp(h1, h2, 2 * n) == 0);
    int copy_ok = 1;
    for (size_t i = 0; i < n; i++) {
        float back = gk_bf16f(h1[i]);
        copy_ok &= fabsf(back - p1[i]) <= fabsf(p1[i]) * 0x1p-8f;
    }
    CHECK(copy_ok);
    CHECK(gk_f2bf16(1.0f + 0x1p-8f) == 0x3f80 && gk_f2bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    cpu->ops->scale(cpu, p1, 0.5f, n);
    ref->ops->scale(ref, p2, 0.5f, n);
    CHECK(memcmp(p1, p2, 4 * n) == 0);
    free(x), free(g), free(p1), free(p2), free(m1), free(v1), free(m2), free(v2), free(h1), free(h2);
}

/* ---- finite differences on the reference ops ---- */

typedef struct fdctx {
    int op, N, C, B, T, NH, V;
    float p, *a, *b, *c; /* op inputs */
    float *lw, *lb;      /* the layernorm's weight and bias (FD_RESID, FD_RESLN) */
    int *tok;
} fdctx;

enum { FD_LN, FD_GELU, FD_ATTN, FD_XENT, FD_ENC, FD_GEMM, FD_RESID, FD_RESLN };

/* Runs the reference forward of op on ctx's inputs into out. */
static void fwd(fdctx *x, float *out)
{
    const gk_ops *o = ref->ops;
    float tmp[4096];
    switch (x->op) {
    case FD_LN: o->layernorm_fwd(ref, out, tmp, tmp + 2048, x->a, x->b, x->c, x->N, x->C); break;
    case FD_GELU: { /* gemm's GELU epilogue on a @ I */
        float *pre = calloc((size_t)x->N * x->C, 4), *eye = calloc((size_t)x->C * x->C, 4);
        for (int i = 0; i < x->C; i++) eye[(size_t)i * x->C + i] = 1.0f;
        o->gemm(ref, 0, 0, x->N, x->C, x->C, 1.0f, x->a, F32, x->C, eye, F32, x->C, 0.0f, out, F32,
                x->C, NULL, pre);
        free(pre), free(eye);
        break;
    }
    case FD_ATTN: o->attention_fwd(ref, out, tmp, x->a, x->B, x->T, x->C, x->NH, x->p, 3); break;
    case FD_XENT: o->xent_fwd(ref, out, tmp, x->a, x->tok, x->N, x->V, x->V); break;
    case FD_ENC: o->encoder_fwd(ref, out, x->tok, x->a, F32, x->b, NULL, x->B, x->T, x->C, x->p, 4); break;
    case FD_GEMM:
        o->gemm(ref, 0, 0, x->N, x->C, x->T, 1.0f, x->a, F32, x->T, x->b, F32, x->C, 0.0f, out, F32,
                x->C, NULL, NULL);
        break;
    case FD_RESID: /* the residual (out) of the fused op */
    case FD_RESLN: { /* its layernorm (out) */
        size_t n = (size_t)x->N * x->C;
        float *r = x->op == FD_RESID ? out : tmp, *l = x->op == FD_RESID ? tmp : out;
        o->residual_layernorm_fwd(ref, r, l, tmp + n, tmp + n + x->N, x->a, x->b, x->c, x->p, 6,
                                  x->lw, x->lb, x->N, x->C);
        break;
    }
    }
}

/* L = sum r*out in double; also sum |r*out| (for the rounding bound). */
static double lossf(fdctx *x, const float *r, float *out, size_t nout, double *abs_sum)
{
    fwd(x, out);
    double s = 0, a = 0;
    for (size_t i = 0; i < nout; i++) s += (double)r[i] * out[i], a += fabs((double)r[i] * out[i]);
    if (abs_sum) *abs_sum = a;
    return s;
}

/* Checks g (the analytic dL/dv) at 8 coordinates of v, an input of x, by central differences. */
static void fd_check(const char *what, fdctx *x, float *v, size_t nv, const float *g, const float *r,
                     size_t nout)
{
    float *out = malloc(sizeof(float) * nout);
    for (int k = 0; k < 8; k++) {
        size_t j = (size_t)(gk_rng_uniform(seed + 1000, k) * nv);
        float v0 = v[j];
        double fdh[2], A = 0;
        for (int s = 0; s < 2; s++) {
            double h = (s ? 2e-2 : 1e-2) * fmax(1.0, fabs(v0));
            float vp = (float)(v0 + h), vm = (float)(v0 - h);
            v[j] = vp;
            double lp = lossf(x, r, out, nout, &A);
            v[j] = vm;
            double lm = lossf(x, r, out, nout, NULL);
            fdh[s] = (lp - lm) / ((double)vp - vm);
        }
        v[j] = v0;
        double h = 1e-2 * fmax(1.0, fabs(v0));
        double tol = 2 * (fabs(fdh[0] - fdh[1]) + U * A / h);
        CHECKF(fabs(g[j] - fdh[0]) <= tol, "%s[%zu]: analytic %.7g, finite difference %.7g (tol %.2g)",
               what, j, g[j], fdh[0], tol);
    }
    free(out);
    seed++;
}

static void test_fd_layernorm(void)
{
    fdctx x = {.op = FD_LN, .N = 4, .C = 16};
    size_t n = 64;
    x.a = rnd(n, 2), x.b = rnd(16, 1), x.c = rnd(16, 1);
    float *r = rnd(n, 1), out[64], mean[4], rstd[4];
    ref->ops->layernorm_fwd(ref, out, mean, rstd, x.a, x.b, x.c, 4, 16);
    float *di = calloc(n, 4), dw[16] = {0}, db[16] = {0};
    ref->ops->layernorm_bwd(ref, di, dw, db, r, x.a, x.b, mean, rstd, 4, 16);
    fd_check("layernorm dinp", &x, x.a, n, di, r, n);
    fd_check("layernorm dweight", &x, x.b, 16, dw, r, n);
    fd_check("layernorm dbias", &x, x.c, 16, db, r, n);
    free(x.a), free(x.b), free(x.c), free(r), free(di);
}

static void test_fd_gelu_gemm_resid(void)
{
    fdctx x = {.op = FD_GELU, .N = 4, .C = 16};
    x.a = rnd(64, 3);
    float *r = rnd(64, 1), g[64];
    ref->ops->gelu_bwd(ref, g, x.a, r, 4, 16);
    fd_check("gelu", &x, x.a, 64, g, r, 64);
    free(x.a), free(r);
    /* gemm as a linear layer: out (N,OC) = inp (N,IC) @ w (IC,OC), the transposes of matmul_bwd */
    fdctx y = {.op = FD_GEMM, .N = 5, .T = 7, .C = 6};
    y.a = rnd(35, 1), y.b = rnd(42, 1);
    float *r2 = rnd(30, 1), da[35], dw[42];
    ref->ops->gemm(ref, 0, 1, 5, 7, 6, 1.0f, r2, F32, 6, y.b, F32, 6, 0.0f, da, F32, 7, NULL, NULL);
    ref->ops->gemm(ref, 1, 0, 7, 6, 5, 1.0f, y.a, F32, 7, r2, F32, 6, 0.0f, dw, F32, 6, NULL, NULL);
    fd_check("gemm dinp", &y, y.a, 35, da, r2, 30);
    fd_check("gemm dweight", &y, y.b, 42, dw, r2, 30);
    free(y.a), free(y.b), free(r2);
    /* residual + dropout: d res = r, d x = dropout_bwd(r), d bias = column sums of that */
    fdctx z = {.op = FD_RESID, .N = 4, .C = 8, .p = 0.3f};
    z.a = rnd(32, 1), z.b = rnd(32, 1), z.c = rnd(8, 1), z.lw = rnd(8, 1), z.lb = rnd(8, 1);
    float *r3 = rnd(32, 1), dx[32], dbias[8] = {0};
    ref->ops->dropout_bwd(ref, dx, r3, 32, 0.3f, 6);
    ref->ops->bias_bwd(ref, dbias, dx, 4, 8);
    fd_check("residual dres", &z, z.a, 32, r3, r3, 32);
    fd_check("residual dx", &z, z.b, 32, dx, r3, 32);
    fd_check("residual dbias", &z, z.c, 8, dbias, r3, 32);
    /* its layernorm: d res = layernorm_bwd(r) at the residual, d x = dropout_bwd of that */
    z.op = FD_RESLN;
    float res[32], ln[32], mean[4], rstd[4], dres[32] = {0}, dlw[8] = {0}, dlb[8] = {0};
    ref->ops->residual_layernorm_fwd(ref, res, ln, mean, rstd, z.a, z.b, z.c, 0.3f, 6, z.lw, z.lb, 4, 8);
    ref->ops->layernorm_bwd(ref, dres, dlw, dlb, r3, res, z.lw, mean, rstd, 4, 8);
    ref->ops->dropout_bwd(ref, dx, dres, 32, 0.3f, 6);
    fd_check("residual+layernorm dres", &z, z.a, 32, dres, r3, 32);
    fd_check("residual+layernorm dx", &z, z.b, 32, dx, r3, 32);
    fd_check("residual+layernorm dweight", &z, z.lw, 8, dlw, r3, 32);
    free(z.a), free(z.b), free(z.c), free(z.lw), free(z.lb), free(r3);
}

static void test_fd_attention(void)
{
    for (int k = 0; k < 2; k++) {
        fdctx x = {.op = FD_ATTN, .B = 2, .T = 5, .C = 12, .NH = 2, .p = k ? 0.3f : 0.0f};
        size_t nq = 2 * 5 * 36, no = 2 * 5 * 12;
        x.a = rnd(nq, 1);
        float *r = rnd(no, 1), out[120], lse[20], *g = calloc(nq, 4);
        ref->ops->attention_fwd(ref, out, lse, x.a, 2, 5, 12, 2, x.p, 3);
        ref->ops->attention_bwd(ref, g, r, x.a, out, lse, 2, 5, 12, 2, x.p, 3);
        fd_check(k ? "attention (dropout)" : "attention", &x, x.a, nq, g, r, no);
        free(x.a), free(r), free(g);
    }
}

static void test_fd_xent_encoder(void)
{
    int tg[6] = {1, 0, 9, -1, 4, 4};
    fdctx x = {.op = FD_XENT, .N = 6, .V = 10, .tok = tg};
    x.a = rnd(60, 3);
    float r[6], lse[6], g[60];
    for (int i = 0; i < 6; i++) r[i] = 1.0f / 5; /* mean over the 5 valid rows */
    ref->ops->xent_fwd(ref, g, lse, x.a, tg, 6, 10, 10);
    ref->ops->xent_bwd(ref, g, x.a, lse, tg, 1.0f / 5, 6, 10, 10);
    fd_check("xent", &x, x.a, 60, g, r, 6);
    free(x.a);
    int tok[6] = {2, 0, 2, 1, 2, 3};
    fdctx e = {.op = FD_ENC, .B = 2, .T = 3, .C = 4, .p = 0.25f, .tok = tok};
    e.a = rnd(16, 1), e.b = rnd(12, 1);
    float *r2 = rnd(24, 1), dwte[16] = {0}, dwpe[12] = {0};
    ref->ops->encoder_bwd(ref, dwte, dwpe, r2, tok, 2, 3, 4, 0.25f, 4);
    fd_check("encoder dwte", &e, e.a, 16, dwte, r2, 24);
    fd_check("encoder dwpe", &e, e.b, 12, dwpe, r2, 24);
    free(e.a), free(e.b), free(r2);
}

/* ---- idle threads ---- */

static double process_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A thread waiting for the next parallel region gives its core up after a short spin (cpu.c
 * bounds libgomp's, 8 ms by default, so that processes sharing cores do not spin against each
 * other): a 50 ms sleep of the main thread after a region costs the process almost no CPU. */
static void test_idle_threads_sleep(void)
{
    if (getenv("OMP_WAIT_POLICY")) SKIP("OMP_WAIT_POLICY is set");
    const char *spin = getenv("GOMP_SPINCOUNT");
    double least = 1e9;
    for (int r = 0; r < 3; r++) {
        int ran[2] = {0, 0};
#pragma omp parallel num_threads(2)
        ran[omp_get_thread_num() & 1] = 1;
        double c0 = process_cpu_ms();
        nanosleep(&(struct timespec){0, 50000000}, NULL);
        double used = process_cpu_ms() - c0;
        least = used < least ? used : least;
        CHECK(ran[0]);
    }
    CHECKF(least < 2.0, "idle threads used %.1f ms of CPU in a 50 ms sleep (GOMP_SPINCOUNT %s)",
           least, spin ? spin : "unset");
}

int main(void)
{
    gk_err err;
    if (gk_cpu_create(&cpu, 2, &err) || gk_ref_create(&ref, &err) ||
        cpu->ops->reserve(cpu, 1024, 4096, 64, 64, &err)) {
        fprintf(stderr, "backend: %s\n", err.msg);
        return 1;
    }
    RUN(test_gemm);
    RUN(test_rowwise_ops);
    RUN(test_encoder);
    RUN(test_attention);
    RUN(test_xent);
    RUN(test_optim);
    RUN(test_fd_layernorm);
    RUN(test_fd_gelu_gemm_resid);
    RUN(test_fd_attention);
    RUN(test_fd_xent_encoder);
    RUN(test_idle_threads_sleep);
    gk_backend_free(cpu);
    gk_backend_free(ref);
    return TEST_END();
}
