/* gpt2_fixture.h: the PyTorch fixtures of the GPT-2 graph (tests/fixtures/gpt2_tiny*.bin, written
 * by tests/ref/gpt2_tiny_ref.py, whose docstring gives the byte layout): fix_load reads one
 * section by section and checks every count against the file size; model_from makes a model of
 * its weights. Shared by test_gpt2.c and test_zero.c (static functions: one copy a binary). */
#ifndef GK_TEST_GPT2_FIXTURE_H
#define GK_TEST_GPT2_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/model/gpt2.h"
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

#endif
