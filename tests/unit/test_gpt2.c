/* test_gpt2.c: the GPT-2 graph (kernels/model/gpt2.h) against PyTorch fixtures, on the CPU and the
 * reference backends; thread-count independence; dropout determinism; gradient accumulation.
 *
 * Fixtures: tests/fixtures/gpt2_tiny.bin (2 layers, 4 heads, 64 wide, vocab 100 (padded to 128),
 * block 16, B=2, T=16, bias on) and gpt2_tiny_nobias.bin (1 layer, bias off), written by
 * tests/ref/gpt2_tiny_ref.py, whose docstring gives the byte layout; fix_load below reads it
 * section by section and checks every count against the file size. They are committed: a missing
 * fixture is a failure, not a skip. Also the parser of gptkit.config. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/comm/comm.h"
#include "kernels/cpu/cpu.h"
#include "kernels/ref/ref.h"
#include "kernels/model/gpt2.h"
#include "kernels/model/gpt2_load.h"
#include "test.h"

typedef struct fixture {
    gk_gpt2_config cfg;
    int B, T, steps, n_final;
    float lr, wd, clip, b1, b2, eps;
    float *params, *logits, *grads, *losses, *norms, *final;
    int *inputs, *targets;
    float loss;
    size_t n_params; /* floats in the params section */
    char *buf;
} fixture;

static size_t table_floats(const gk_gpt2_config *c)
{
    size_t C = c->n_embd, per = 2 * C + 12 * C * C;
    if (c->bias) per += 11 * C;
    return (size_t)c->vocab_size * C + (size_t)c->block_size * C + c->n_layer * per + C +
           (c->bias ? C : 0);
}

static int fix_load(fixture *f, const char *path)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    rewind(fp);
    f->buf = malloc(size);
    if (!f->buf || fread(f->buf, 1, size, fp) != (size_t)size) {
        fclose(fp);
        return -1;
    }
    fclose(fp);
    int32_t h[16];
    float hy[8];
    if (size < 96) return -1;
    memcpy(h, f->buf, 64);
    memcpy(hy, f->buf + 64, 32);
    if (h[0] != 0x46324B47 || h[1] != 1) return -1;
    f->cfg = (gk_gpt2_config){h[2], h[3], h[4], h[5], h[6], h[7], 0.0f};
    f->B = h[8], f->T = h[9], f->steps = h[10], f->n_final = h[11];
    f->lr = hy[0], f->wd = hy[1], f->clip = hy[2], f->b1 = hy[3], f->b2 = hy[4], f->eps = hy[5];
    size_t np = table_floats(&f->cfg), N = (size_t)f->B * f->T, V = f->cfg.vocab_size;
    int ntens = 2 + f->cfg.n_layer * (f->cfg.bias ? 12 : 6) + (f->cfg.bias ? 2 : 1);
    size_t want = 96 + 4 * (np + 2 * N + N * V + 1 + np + 2 * (size_t)f->steps +
                            (size_t)ntens * (f->n_final + 1));
    if ((size_t)size != want) {
        fprintf(stderr, "%s: %ld bytes, expected %zu\n", path, size, want);
        return -1;
    }
    char *p = f->buf + 96;
    f->n_params = np;
    f->params = (float *)p, p += 4 * np;
    f->inputs = (int *)p, p += 4 * N;
    f->targets = (int *)p, p += 4 * N;
    f->logits = (float *)p, p += 4 * N * V;
    memcpy(&f->loss, p, 4), p += 4;
    f->grads = (float *)p, p += 4 * np;
    f->losses = (float *)p, p += 4 * f->steps;
    f->norms = (float *)p, p += 4 * f->steps;
    f->final = (float *)p;
    return 0;
}

/* ||a - b|| / ||b|| in double */
static double relerr(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++)
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* The tiny fixture into f; nonzero (a failed check, f freed) when it cannot be read. */
static int load_tiny(fixture *f)
{
    if (!fix_load(f, "tests/fixtures/gpt2_tiny.bin")) return 0;
    CHECKF(0, "cannot load tests/fixtures/gpt2_tiny.bin");
    free(f->buf);
    return -1;
}

static gk_gpt2 *model_from(const fixture *f, gk_backend *be, float dropout)
{
    gk_err err;
    gk_gpt2 *m = NULL;
    gk_gpt2_config c = f->cfg;
    c.dropout = dropout;
    if (gk_gpt2_create(&m, &c, be, f->B, f->T, &err)) {
        fprintf(stderr, "create: %s\n", err.msg);
        return NULL;
    }
    size_t off = 0;
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        be->ops->to_device(be, p->data, f->params + off, p->numel * sizeof(float));
        off += p->numel;
    }
    return off == f->n_params ? m : NULL;
}

/* The fixture comparison on backend be: logits, loss, every gradient, 10 AdamW steps. */
static void check_fixture(const char *path, gk_backend *be, int max_steps)
{
    fixture f;
    CHECKF(fix_load(&f, path) == 0, "cannot load fixture %s", path);
    if (!f.buf) return;
    gk_err err;
    gk_gpt2 *m = model_from(&f, be, 0.0f);
    CHECK(m != NULL);
    if (!m) goto out;
    int N = f.B * f.T, V = f.cfg.vocab_size, Vp = gk_gpt2_padded_vocab(m);
    CHECK(Vp % 64 == 0 && Vp >= V);
    float loss = 0;
    CHECK_OK(gk_gpt2_forward(m, f.inputs, f.targets, f.B, f.T, &loss, &err), &err);
    float *lg = malloc(sizeof(float) * N * Vp), *lgu = malloc(sizeof(float) * N * V);
    gk_gpt2_logits_host(m, 0, N, Vp, lg, NULL);
    for (int i = 0; i < N; i++) memcpy(lgu + (size_t)i * V, lg + (size_t)i * Vp, sizeof(float) * V);
    double e = relerr(lgu, f.logits, (size_t)N * V);
    CHECKF(e < 1e-5, "%s logits relerr %.3g", be->ops->name, e);
    CHECKF(fabsf(loss - f.loss) < 1e-4, "%s loss %.7f vs %.7f", be->ops->name, loss, f.loss);
    gk_gpt2_zero_grad(m);
    CHECK_OK(gk_gpt2_backward(m, 1.0f, &err), &err);
    size_t off = 0, nmax = 0;
    double worst = 0;
    for (int i = 0; i < gk_gpt2_n_params(m); i++)
        if (gk_gpt2_param(m, i)->numel > nmax) nmax = gk_gpt2_param(m, i)->numel;
    float *h = malloc(sizeof(float) * nmax);
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        be->ops->to_host(be, h, p->grad, p->numel * sizeof(float));
        e = relerr(h, f.grads + off, p->numel);
        worst = e > worst ? e : worst;
        CHECKF(e < 1e-5, "%s grad %s relerr %.3g", be->ops->name, p->name, e);
        off += p->numel;
    }
    fprintf(stderr, "  %s %s: logits/loss/grads ok (worst grad relerr %.2g)\n", be->ops->name,
            path, worst);
    gk_adamw hy = {f.b1, f.b2, f.eps, f.wd, f.clip, 0};
    int steps = f.steps < max_steps ? f.steps : max_steps;
    for (int s = 0; s < steps; s++) {
        double norm = 0;
        gk_gpt2_zero_grad(m);
        CHECK_OK(gk_gpt2_forward(m, f.inputs, f.targets, f.B, f.T, &loss, &err), &err);
        CHECK_OK(gk_gpt2_backward(m, 1.0f, &err), &err);
        CHECK_OK(gk_gpt2_update(m, &hy, f.lr, &norm, &err), &err);
        CHECKF(fabsf(loss - f.losses[s]) < 1e-4, "%s step %d loss %.6f vs %.6f", be->ops->name, s,
               loss, f.losses[s]);
        CHECKF(fabs(norm - f.norms[s]) < 1e-5 * f.norms[s], "%s step %d grad norm %.7f vs %.7f",
               be->ops->name, s, norm, f.norms[s]);
    }
    /* Final parameters: the first n_final values of each tensor and its norm. AdamW's step is
     * invariant to the gradient's scale, so an element's relative gradient error becomes the
     * same relative error of its update, and for elements with near-zero gradients that is far
     * above the tensor-wide 1e-5 (biases start at 0, so their values are their updates). Hence
     * the elementwise check is relative to the update (final - initial), under 1e-4 (10x the
     * gradient bound, for 10 steps), and the tensor norm relative to itself, under 1e-5. */
    const float *fin = f.final, *init = f.params;
    worst = 0;
    for (int i = 0; steps == f.steps && i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        be->ops->to_host(be, h, p->data, p->numel * sizeof(float));
        size_t k = p->numel < (size_t)f.n_final ? p->numel : (size_t)f.n_final;
        double nrm = 0, d = 0, u = 0;
        for (size_t j = 0; j < p->numel; j++) nrm += (double)h[j] * h[j];
        for (size_t j = 0; j < k; j++) {
            d += ((double)h[j] - fin[j]) * ((double)h[j] - fin[j]);
            u += ((double)fin[j] - init[j]) * ((double)fin[j] - init[j]);
        }
        e = sqrt(d / u);
        double en = fabs(sqrt(nrm) - fin[f.n_final]) / fin[f.n_final];
        worst = e > worst ? e : worst;
        CHECKF(e < 1e-4 && en < 1e-5, "%s final %s update relerr %.3g, norm relerr %.3g",
               be->ops->name, p->name, e, en);
        fin += f.n_final + 1;
        init += p->numel;
    }
    if (steps == f.steps)
        fprintf(stderr, "  %s %s: %d AdamW steps ok (worst final update relerr %.2g)\n",
                be->ops->name, path, steps, worst);
    else
        fprintf(stderr, "  %s %s: first %d AdamW steps ok\n", be->ops->name, path, steps);
    free(h);
    free(lg);
    free(lgu);
    gk_gpt2_free(m);
out:
    free(f.buf);
}

static void test_fixture_cpu(void)
{
    gk_err err;
    gk_backend *be = NULL;
    CHECK_OK(gk_cpu_create(&be, 2, &err), &err);
    check_fixture("tests/fixtures/gpt2_tiny.bin", be, 1000);
    check_fixture("tests/fixtures/gpt2_tiny_nobias.bin", be, 1000);
    gk_backend_free(be);
}

/* The reference backend runs the same graph (slowly: 2 of the 10 steps). */
static void test_fixture_ref(void)
{
    gk_err err;
    gk_backend *be = NULL;
    CHECK_OK(gk_ref_create(&be, &err), &err);
    check_fixture("tests/fixtures/gpt2_tiny.bin", be, 2);
    check_fixture("tests/fixtures/gpt2_tiny_nobias.bin", be, 2);
    gk_backend_free(be);
}

static void test_param_table(void)
{
    gk_err err;
    gk_backend *be = NULL;
    CHECK_OK(gk_ref_create(&be, &err), &err);
    gk_gpt2_config c = {3, 2, 8, 16, 65, 1, 0.0f};
    gk_gpt2 *m = NULL;
    CHECK_OK(gk_gpt2_create(&m, &c, be, 1, 4, &err), &err);
    if (!m) return;
    CHECK(gk_gpt2_n_params(m) == 2 + 3 * 12 + 2);
    CHECK(strcmp(gk_gpt2_param(m, 0)->name, "transformer.wte.weight") == 0);
    CHECK(gk_gpt2_param(m, 0)->shape[0] == 65 && gk_gpt2_param(m, 0)->shape[1] == 8);
    const gk_param *qkv = gk_gpt2_param(m, 2 + 12 + 2);
    CHECK(strcmp(qkv->name, "transformer.h.1.attn.c_attn.weight") == 0);
    CHECK(qkv->ndim == 2 && qkv->shape[0] == 8 && qkv->shape[1] == 24 && qkv->decay);
    CHECK(!gk_gpt2_param(m, 3)->decay); /* h.0.ln_1.weight */
    CHECK(strcmp(gk_gpt2_param(m, 39)->name, "transformer.ln_f.bias") == 0);
    CHECK(gk_gpt2_padded_vocab(m) == 128);
    CHECK(gk_gpt2_num_scalars(m) == table_floats(&c));
    /* init: LN weights 1, biases 0, weights of std ~0.02 (c_proj ~0.02/sqrt(6)) */
    CHECK_OK(gk_gpt2_init(m, 7, &err), &err);
    CHECK(gk_gpt2_param(m, 2)->data[0] == 1.0f && gk_gpt2_param(m, 3)->data[5] == 0.0f);
    const gk_param *w = gk_gpt2_param(m, 0);
    double s = 0;
    for (size_t i = 0; i < w->numel; i++) s += (double)w->data[i] * w->data[i];
    double sd = sqrt(s / w->numel);
    /* 520 normal samples: the sample std is within 4 standard errors (0.02/sqrt(2*520)) of 0.02 */
    CHECKF(fabs(sd - 0.02) < 4 * 0.02 / sqrt(2.0 * w->numel), "wte std %.5f", sd);
    CHECK(w->data[65 * 8] == 0.0f); /* padded row stays zero */
    gk_gpt2_free(m);
    c.bias = 0;
    CHECK_OK(gk_gpt2_create(&m, &c, be, 1, 4, &err), &err);
    CHECK(gk_gpt2_n_params(m) == 2 + 3 * 6 + 1);
    for (int i = 0; m && i < gk_gpt2_n_params(m); i++)
        CHECK(strstr(gk_gpt2_param(m, i)->name, "bias") == NULL);
    gk_gpt2_free(m);
    c.n_embd = 9;
    CHECK(gk_gpt2_create(&m, &c, be, 1, 4, &err) == GK_EUSAGE);
    gk_gpt2_free(NULL);
    gk_backend_free(be);
}

/* forward + backward on a fresh model from the fixture; returns loss, grads and logits. */
typedef struct run {
    float loss;
    float *grads, *logits; /* whole grad block order of the table; logits (N,Vp) */
    size_t ng, nl;
} run;

static run run_once(const fixture *f, gk_backend *be, float dropout, uint64_t counter, int steps)
{
    run r = {0};
    gk_err err;
    gk_gpt2 *m = model_from(f, be, dropout);
    if (!m) return r;
    gk_gpt2_set_training(m, 1);
    gk_gpt2_set_rng(m, 42, counter);
    gk_adamw hy = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0};
    for (int s = 0; s < steps; s++) {
        gk_gpt2_zero_grad(m);
        if (gk_gpt2_forward(m, f->inputs, f->targets, f->B, f->T, &r.loss, &err) ||
            gk_gpt2_backward(m, 1.0f, &err))
            fprintf(stderr, "run: %s\n", err.msg);
        if (s + 1 < steps) gk_gpt2_update(m, &hy, 1e-3f, NULL, &err);
    }
    r.ng = f->n_params;
    r.grads = malloc(sizeof(float) * r.ng);
    size_t off = 0;
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        be->ops->to_host(be, r.grads + off, p->grad, p->numel * sizeof(float));
        off += p->numel;
    }
    r.nl = (size_t)f->B * f->T * gk_gpt2_padded_vocab(m);
    r.logits = malloc(sizeof(float) * r.nl);
    /* after backward the logits buffer holds dlogits: compare those */
    gk_gpt2_logits_host(m, 0, f->B * f->T, gk_gpt2_padded_vocab(m), r.logits, NULL);
    gk_gpt2_free(m);
    return r;
}

static void run_free(run *r) { free(r->grads), free(r->logits); }

/* 1 and 2 threads: bit-identical. Every op splits its work by the data (fixed chunks, one
 * (b,h) or one row per task), never by thread count; gemm cuts M or N, never K, so each element
 * is the same dot product. Checked with and without dropout, over 3 steps (AdamW included). */
static void test_threads_bitexact(void)
{
    fixture f;
    if (load_tiny(&f)) return;
    gk_err err;
    gk_backend *b1 = NULL, *b2 = NULL;
    CHECK_OK(gk_cpu_create(&b1, 1, &err), &err);
    CHECK_OK(gk_cpu_create(&b2, 2, &err), &err);
    for (int d = 0; d < 2; d++) {
        run r1 = run_once(&f, b1, d ? 0.1f : 0.0f, 5, 3),
            r2 = run_once(&f, b2, d ? 0.1f : 0.0f, 5, 3);
        CHECK(r1.grads && r2.grads);
        if (r1.grads && r2.grads) {
            CHECKF(memcmp(&r1.loss, &r2.loss, 4) == 0, "dropout %d: loss %.9g vs %.9g", d, r1.loss,
                   r2.loss);
            CHECKF(memcmp(r1.grads, r2.grads, 4 * r1.ng) == 0, "dropout %d: grads differ", d);
            CHECKF(memcmp(r1.logits, r2.logits, 4 * r1.nl) == 0, "dropout %d: dlogits differ", d);
        }
        run_free(&r1), run_free(&r2);
    }
    gk_backend_free(b1);
    gk_backend_free(b2);
    free(f.buf);
}

/* Dropout: same (seed, counter) -> same result; another counter -> another mask; eval mode
 * (training off) -> none; the CPU graph with dropout agrees with the reference backend's. */
static void test_dropout(void)
{
    fixture f;
    if (load_tiny(&f)) return;
    gk_err err;
    gk_backend *cpu = NULL, *ref = NULL;
    CHECK_OK(gk_cpu_create(&cpu, 2, &err), &err);
    CHECK_OK(gk_ref_create(&ref, &err), &err);
    run a = run_once(&f, cpu, 0.2f, 9, 1), b = run_once(&f, cpu, 0.2f, 9, 1);
    run c = run_once(&f, cpu, 0.2f, 10, 1), z = run_once(&f, cpu, 0.0f, 9, 1);
    run r = run_once(&f, ref, 0.2f, 9, 1);
    if (a.grads && b.grads && c.grads && z.grads && r.grads) {
        CHECK(a.loss == b.loss && memcmp(a.grads, b.grads, 4 * a.ng) == 0);
        CHECK(a.loss != c.loss);
        CHECK(a.loss != z.loss);
        CHECKF(fabsf(z.loss - f.loss) < 1e-4, "no-dropout loss %.6f vs %.6f", z.loss, f.loss);
        double e = relerr(a.grads, r.grads, a.ng);
        CHECKF(fabsf(a.loss - r.loss) < 1e-4 && e < 1e-5,
               "cpu vs ref with dropout: loss %.6f vs %.6f, grads relerr %.3g", a.loss, r.loss, e);
    } else {
        CHECK(0);
    }
    run_free(&a), run_free(&b), run_free(&c), run_free(&z), run_free(&r);
    /* eval mode: no dropout even with cfg.dropout > 0 */
    gk_gpt2 *m = model_from(&f, cpu, 0.5f);
    float loss = 0;
    CHECK_OK(gk_gpt2_forward(m, f.inputs, f.targets, f.B, f.T, &loss, &err), &err);
    CHECKF(fabsf(loss - f.loss) < 1e-4, "eval loss %.6f vs %.6f", loss, f.loss);
    gk_gpt2_free(m);
    gk_backend_free(cpu);
    gk_backend_free(ref);
    free(f.buf);
}

/* Two micro-steps with loss_scale 1/2 accumulate the same gradients as one with scale 1. */
static void test_grad_accumulation(void)
{
    fixture f;
    if (load_tiny(&f)) return;
    gk_err err;
    gk_backend *be = NULL;
    CHECK_OK(gk_cpu_create(&be, 2, &err), &err);
    gk_gpt2 *m = model_from(&f, be, 0.0f);
    float loss;
    gk_gpt2_zero_grad(m);
    for (int k = 0; k < 2; k++) {
        CHECK_OK(gk_gpt2_forward(m, f.inputs, f.targets, f.B, f.T, &loss, &err), &err);
        CHECK_OK(gk_gpt2_backward(m, 0.5f, &err), &err);
    }
    size_t off = 0;
    double worst = 0;
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        double e = relerr(p->grad, f.grads + off, p->numel);
        worst = e > worst ? e : worst;
        off += p->numel;
    }
    CHECKF(worst < 1e-5, "accumulated grads relerr %.3g", worst);
    /* a second backward without a forward is refused */
    CHECK(gk_gpt2_backward(m, 1.0f, &err) == GK_EUSAGE);
    int bad[32];
    memcpy(bad, f.inputs, sizeof bad);
    bad[3] = 100;
    CHECK(gk_gpt2_forward(m, bad, NULL, f.B, f.T, NULL, &err) == GK_EUSAGE);
    gk_gpt2_free(m);
    gk_backend_free(be);
    free(f.buf);
}

/* ZeRO-1 with the gradients summed during the backward (gk_gpt2_reduce_in_next_backward): each
 * layer's sum is started as it is written and update reduce-scatters nothing more; without the
 * call update reduce-scatters them. Rank 0 of 2 here, the other rank played by a comm that adds
 * zeros (and leaves the other shard's weights as they were), so both ways give the same bits. */
static int zc_starts, zc_scatters;
static int zc_sum(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    (void)c, (void)buf, (void)n, (void)e;
    return 0;
}
static int zc_start(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    zc_starts++;
    return zc_sum(c, buf, n, e);
}
static int zc_wait(gk_comm *c, gk_err *e) { (void)c, (void)e; return 0; }
static int zc_wait_some(gk_comm *c, int keep, gk_err *e) { (void)keep; return zc_wait(c, e); }
static int zc_host(gk_comm *c, double *v, int n, gk_err *e)
{
    (void)c, (void)v, (void)n, (void)e;
    return 0;
}
static int zc_scatter(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    (void)e;
    zc_scatters++;
    if (out != in + (size_t)c->rank * count)
        memmove(out, in + (size_t)c->rank * count, count * sizeof *out);
    return 0;
}
static int zc_gather(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    (void)e;
    if (in != out + (size_t)c->rank * count)
        memmove(out + (size_t)c->rank * count, in, count * sizeof *out);
    return 0;
}

static const gk_comm_ops zeros_ops = {
    .name = "zeros", .allreduce = zc_sum, .allreduce_host = zc_host, .reduce_scatter = zc_scatter,
    .all_gather = zc_gather, .allreduce_start = zc_start, .allreduce_wait = zc_wait,
    .reduce_scatter_start = zc_scatter, .started_wait = zc_wait_some};

/* The ZeRO tests' start: the tiny fixture, a CPU backend and two models of it (0: no fixture). */
static gk_backend *zero_setup(fixture *f, gk_gpt2 *m[2])
{
    gk_err err;
    gk_backend *be = NULL;
    if (load_tiny(f)) return NULL;
    CHECK_OK(gk_cpu_create(&be, 2, &err), &err);
    m[0] = model_from(f, be, 0.0f), m[1] = model_from(f, be, 0.0f);
    return be;
}

static void test_zero1_sums_in_backward(void)
{
    fixture f;
    gk_gpt2 *m[2];
    gk_backend *be = zero_setup(&f, m);
    if (!be) return;
    gk_comm comm = {&zeros_ops, 0, 2, NULL, GK_F32};
    gk_err err;
    gk_adamw h = {f.b1, f.b2, f.eps, f.wd, f.clip, 0};
    int starts[2], scatters[2];
    for (int k = 0; k < 2 && m[0] && m[1]; k++) { /* k = 0: sums in the backward */
        float loss;
        CHECK_OK(gk_gpt2_set_comm(m[k], &comm, 1, &err), &err);
        zc_starts = zc_scatters = 0;
        gk_gpt2_zero_grad(m[k]);
        CHECK_OK(gk_gpt2_forward(m[k], f.inputs, f.targets, f.B, f.T, &loss, &err), &err);
        if (k == 0) gk_gpt2_reduce_in_next_backward(m[k]);
        CHECK_OK(gk_gpt2_backward(m[k], 1.0f, &err), &err);
        CHECK_OK(gk_gpt2_update(m[k], &h, f.lr, NULL, &err), &err);
        starts[k] = zc_starts, scatters[k] = zc_scatters;
    }
    CHECKF(starts[0] == f.cfg.n_layer + 1 && scatters[0] == 0,
           "in the backward: %d sums started, %d reduce-scatters",
           starts[0], scatters[0]);
    CHECKF(starts[1] == 0 && scatters[1] == 1, "after it: %d sums started, %d reduce-scatters",
           starts[1], scatters[1]);
    size_t differ = 0;
    for (int i = 0; m[0] && m[1] && i < gk_gpt2_n_params(m[0]); i++) {
        const gk_param *a = gk_gpt2_param(m[0], i), *b = gk_gpt2_param(m[1], i);
        differ += memcmp(a->data, b->data, a->numel * sizeof(float)) != 0;
    }
    CHECKF(differ == 0, "%zu tensors differ", differ);
    gk_gpt2_free(m[0]);
    gk_gpt2_free(m[1]);
    gk_backend_free(be);
    free(f.buf);
}

/* Whether float o of the parameter block is rank 0's of 2 under ZeRO-2: in the first piece of its
 * bucket (wte and wpe; each layer, the last with ln_f) or the bucket's tail (gpt2_shard.c). */
static int zero2_rank0(const gk_gpt2 *m, size_t o)
{
    int L = gk_gpt2_cfg(m)->n_layer, n = gk_gpt2_n_params(m);
    const gk_param *last = gk_gpt2_param(m, n - 1);
    size_t lo = 0, hi = (last->offset + last->numel + 15) / 16 * 16;
    for (int l = 0; l <= L; l++) { /* bucket l ends where layer l starts */
        char name[64];
        snprintf(name, sizeof name, "transformer.h.%d.ln_1.weight", l);
        for (int i = 0; i < n && l < L; i++)
            if (strcmp(gk_gpt2_param(m, i)->name, name) == 0 && gk_gpt2_param(m, i)->offset <= o)
                lo = gk_gpt2_param(m, i)->offset;
    }
    for (int l = 0; l < L; l++) /* the next bucket's start, if any */
        for (int i = 0; i < n; i++) {
            const gk_param *p = gk_gpt2_param(m, i);
            if (strstr(p->name, "ln_1.weight") && p->offset > o && p->offset < hi) hi = p->offset;
        }
    size_t piece = (hi - lo) / 2 / 16 * 16;
    return o < lo + piece || o >= lo + 2 * piece;
}

/* ZeRO-2 as rank 0 of 2 beside a rank that adds zeros (the comm above), two micro-steps of other
 * targets: the backward reduce-scatters each layer's bucket into the shard and adds the second
 * micro-step's there, so the update moves exactly rank 0's pieces (and the tails) as the
 * one-process run does (within the order of a gemm's accumulation and the shard's add; no
 * clipping, so each float's step is its own) and leaves the rest; gradients are not readable. */
static void test_zero2_shards(void)
{
    fixture f;
    gk_gpt2 *m[2];
    gk_backend *be = zero_setup(&f, m);
    if (!be) return;
    gk_comm comm = {&zeros_ops, 0, 2, NULL, GK_F32};
    gk_err err;
    gk_adamw h = {f.b1, f.b2, f.eps, f.wd, 0, 0};
    int N = f.B * f.T, *other = malloc(sizeof *other * (size_t)N);
    for (int i = 0; i < N; i++) other[i] = f.targets[(i + 1) % N];
    for (int k = 0; k < 2 && m[0] && m[1]; k++) { /* k = 1: ZeRO-2 */
        float loss;
        if (k) CHECK_OK(gk_gpt2_set_comm(m[k], &comm, 2, &err), &err);
        gk_gpt2_zero_grad(m[k]);
        for (int s = 0; s < 2; s++) {
            CHECK_OK(gk_gpt2_forward(m[k], f.inputs, s ? other : f.targets, f.B, f.T, &loss, &err),
                     &err);
            CHECK_OK(gk_gpt2_backward(m[k], 0.5f, &err), &err);
        }
        CHECK_OK(gk_gpt2_update(m[k], &h, f.lr, NULL, &err), &err);
    }
    size_t mine = 0, theirs = 0, wrong = 0, off = 0, max = 0;
    for (int i = 0; m[0] && m[1] && i < gk_gpt2_n_params(m[0]); i++) {
        const gk_param *a = gk_gpt2_param(m[0], i), *b = gk_gpt2_param(m[1], i);
        max = a->numel > max ? a->numel : max;
        for (size_t j = 0; j < a->numel; j++) {
            int own = zero2_rank0(m[1], b->offset + j);
            mine += own, theirs += !own;
            wrong += own ? fabsf(b->data[j] - a->data[j]) > 1e-6f
                         : memcmp(&b->data[j], &f.params[off + j], 4) != 0;
        }
        off += a->numel;
    }
    CHECKF(wrong == 0 && mine > theirs / 2 && theirs > mine / 2,
           "%zu of %zu floats wrong (%zu rank 0's)", wrong, mine + theirs, mine);
    float *g = malloc(sizeof *g * (max ? max : 1));
    CHECK(m[1] && gk_gpt2_tensor_get(m[1], 0, GK_TENSOR_GRAD, g, &err) == GK_EUSAGE &&
          strstr(err.msg, "sharded across ranks (zero_stage 2)"));
    free(g), free(other);
    gk_gpt2_free(m[0]);
    gk_gpt2_free(m[1]);
    gk_backend_free(be);
    free(f.buf);
}

/* gptkit.config: the one parser of a checkpoint's model config takes JSON's 64-bit integers
 * and refuses what does not fit an int (it once read 2^32 + 2 layers as 2). */
static void test_config_parse(void)
{
    gk_gpt2_config c;
    gk_err e = {0};
    CHECK(gk_gpt2_config_parse("{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"block_size\": 16, "
                               "\"vocab_size\": 50, \"bias\": false}", "x", &c, &e) == 0);
    CHECK(c.n_layer == 2 && c.n_head == 2 && c.n_embd == 8 && c.block_size == 16 &&
          c.vocab_size == 50);
    CHECK(c.bias == 0);
    CHECK(gk_gpt2_config_parse("{\"n_layer\": 4294967298, \"n_head\": 2, \"n_embd\": 8, "
                               "\"block_size\": 16, \"vocab_size\": 50}", "x", &c, &e) != 0);
    CHECKF(strstr(e.msg, "x: model config: n_layer = 4294967298 is out of range") != NULL, "%s",
           e.msg);
    CHECK(gk_gpt2_config_parse("{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"block_size\": 0, "
                               "\"vocab_size\": 50}", "x", &c, &e) != 0);
    CHECKF(strstr(e.msg, "block_size = 0 is out of range") != NULL, "%s", e.msg);
}

int main(void)
{
    RUN(test_config_parse);
    RUN(test_param_table);
    RUN(test_fixture_cpu);
    RUN(test_fixture_ref);
    RUN(test_threads_bitexact);
    RUN(test_dropout);
    RUN(test_grad_accumulation);
    RUN(test_zero1_sums_in_backward);
    RUN(test_zero2_shards);
    return TEST_END();
}
