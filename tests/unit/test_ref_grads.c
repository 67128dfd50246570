/* test_ref_grads.c: every backward of the reference backend against central finite differences
 * of its forward (the one place of the gradient checks; the ops of the other backends are checked
 * against the reference by test_ops and test_ops_fused, on ops_harness.h).
 *
 * Finite differences: the truncation error of a step h is estimated from the steps h and 2h
 * (|fd(h) - fd(2h)| bounds it: the error is O(h^2)), and the rounding error is u * sum|dout*out| /
 * h (u = 2^-24, the forward's outputs are float); the check allows twice their sum. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ref.h"
#include "kernels/rng.h"
#include "test.h"

#define U 5.9604645e-8 /* float32 unit roundoff */

static gk_backend *ref;
static uint64_t seed = 1;

static float *rnd(size_t n, float scale)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = (gk_rng_uniform(seed, i) * 2.0f - 1.0f) * scale;
    seed++;
    return x;
}
#define F32 GK_F32

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
    case FD_ENC:
        o->encoder_fwd(ref, out, x->tok, x->a, F32, x->b, NULL, x->B, x->T, x->C, x->p, 4);
        break;
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
static void fd_check(const char *what, fdctx *x, float *v, size_t nv, const float *g,
                     const float *r, size_t nout)
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
        CHECKF(fabs(g[j] - fdh[0]) <= tol,
               "%s[%zu]: analytic %.7g, finite difference %.7g (tol %.2g)", what, j, g[j], fdh[0],
               tol);
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
    ref->ops->residual_layernorm_fwd(ref, res, ln, mean, rstd, z.a, z.b, z.c, 0.3f, 6, z.lw, z.lb,
                                     4, 8);
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

int main(void)
{
    gk_err err;
    if (gk_ref_create(&ref, &err)) {
        fprintf(stderr, "backend: %s\n", err.msg);
        return 1;
    }
    RUN(test_fd_layernorm);
    RUN(test_fd_gelu_gemm_resid);
    RUN(test_fd_attention);
    RUN(test_fd_xent_encoder);
    gk_backend_free(ref);
    return TEST_END();
}
