/* test_gpt2.c: the GPT-2 graph (kernels/model/gpt2.h) against PyTorch fixtures, on the CPU and the
 * reference backends; thread-count independence; dropout determinism; gradient accumulation.
 *
 * Fixtures: tests/fixtures/gpt2_tiny.bin (2 layers, 4 heads, 64 wide, vocab 100 (padded to 128),
 * block 16, B=2, T=16, bias on) and gpt2_tiny_nobias.bin (1 layer, bias off), written by
 * tests/ref/gpt2_tiny_ref.py, whose docstring gives the byte layout; gpt2_fixture.h's fix_load
 * reads it section by section and checks every count against the file size. They are committed:
 * a missing fixture is a failure, not a skip. Also the parser of gptkit.config. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/ref/ref.h"
#include "kernels/model/gpt2.h"
#include "kernels/model/gpt2_load.h"
#include "gpt2_fixture.h"
#include "test.h"

/* ||a - b|| / ||b|| in double */
static double relerr(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++)
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
    return r > 0 ? sqrt(d / r) : sqrt(d);
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
    return TEST_END();
}
