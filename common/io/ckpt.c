/* ckpt.c: gptkit checkpoints over safetensors (see ckpt.h). */
#include "common/io/ckpt.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/safetensors.h"

struct gk_ckpt {
    gk_st_file *f;
};

/* ---------------------------------------------------------------- saving */

typedef struct convert_ctx {
    const float *src;
    int dtype;
} convert_ctx;

static int fill_converted(void *ctx, uint64_t off, void *buf, size_t n, gk_err *e)
{
    (void)e;
    const convert_ctx *c = ctx;
    size_t first = (size_t)off / 2, count = n / 2;
    if (c->dtype == GK_DT_BF16)
        gk_f32_to_bf16_n(buf, c->src + first, count);
    else
        gk_f32_to_f16_n(buf, c->src + first, count);
    return 0;
}

static int add_moments(gk_st_writer *w, const gk_ckpt_param *p, gk_err *e)
{
    char name[300];
    int rc = 0;
    if (p->m) {
        snprintf(name, sizeof name, "optimizer.m.%s", p->name);
        rc = gk_st_writer_add(w, name, GK_DT_F32, p->ndim, p->shape, p->m, e);
    }
    if (!rc && p->v) {
        snprintf(name, sizeof name, "optimizer.v.%s", p->name);
        rc = gk_st_writer_add(w, name, GK_DT_F32, p->ndim, p->shape, p->v, e);
    }
    return rc;
}

static int add_vocab(gk_st_writer *w, const gk_vocab *v, char **json, char **merges, gk_err *e)
{
    size_t jl = 0, ml = 0;
    int rc = gk_vocab_to_json(v, json, &jl, e);
    if (!rc)
        rc = gk_vocab_merges(v, merges, &ml, e);
    int64_t shape[1] = {(int64_t)jl};
    if (!rc)
        rc = gk_st_writer_add(w, "tokenizer.vocab", GK_DT_U8, 1, shape, *json, e);
    shape[0] = (int64_t)ml;
    if (!rc && *merges)
        rc = gk_st_writer_add(w, "tokenizer.merges", GK_DT_U8, 1, shape, *merges, e);
    char tok[128];
    snprintf(tok, sizeof tok, "{\"type\":\"%s\",\"fingerprint\":%u}",
             gk_vocab_type(v) == GK_VOCAB_CHAR ? "char" : "gpt2-bpe", gk_vocab_fingerprint(v));
    if (!rc)
        rc = gk_st_writer_meta(w, "gptkit.tokenizer", tok, e);
    return rc;
}

int gk_ckpt_save(const char *path, const gk_ckpt_param *params, size_t n, const gk_ckpt_info *info,
                 gk_err *e)
{
    gk_st_writer *w;
    int rc = gk_st_writer_create(&w, e);
    if (rc)
        return rc;
    int dtype = info->dtype ? info->dtype : GK_DT_F32;
    convert_ctx *conv = calloc(n ? n : 1, sizeof *conv);
    char *json = NULL, *merges = NULL;
    if (!conv)
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const gk_ckpt_param *p = &params[i];
        conv[i] = (convert_ctx){p->data, dtype};
        rc = dtype == GK_DT_F32
                 ? gk_st_writer_add(w, p->name, GK_DT_F32, p->ndim, p->shape, p->data, e)
                 : gk_st_writer_add_fill(w, p->name, (enum gk_dtype)dtype, p->ndim, p->shape,
                                         fill_converted, &conv[i], e);
        if (!rc)
            rc = add_moments(w, p, e);
    }
    if (!rc)
        rc = gk_st_writer_meta(w, "format", "pt", e);
    if (!rc)
        rc = gk_st_writer_meta(w, "gptkit.config", info->config_json, e);
    if (!rc && info->train_json)
        rc = gk_st_writer_meta(w, "gptkit.train", info->train_json, e);
    if (!rc && info->vocab)
        rc = add_vocab(w, info->vocab, &json, &merges, e);
    if (!rc)
        rc = gk_st_writer_write(w, path, e);
    gk_st_writer_free(w);
    free(conv);
    free(json);
    free(merges);
    return rc;
}

/* ---------------------------------------------------------------- loading */

int gk_ckpt_open(gk_ckpt **out, const char *path, gk_err *e)
{
    gk_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int rc = gk_st_open(&c->f, path, e);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void gk_ckpt_close(gk_ckpt *c)
{
    if (!c)
        return;
    gk_st_close(c->f);
    free(c);
}

const char *gk_ckpt_path(const gk_ckpt *c) { return gk_st_path(c->f); }
const char *gk_ckpt_config_json(const gk_ckpt *c) { return gk_st_meta(c->f, "gptkit.config"); }
const char *gk_ckpt_train_json(const gk_ckpt *c) { return gk_st_meta(c->f, "gptkit.train"); }
const struct gk_st_file *gk_ckpt_file(const gk_ckpt *c) { return c->f; }

int gk_ckpt_has_optimizer(const gk_ckpt *c)
{
    for (size_t i = 0; i < gk_st_count(c->f); i++)
        if (strncmp(gk_st_at(c->f, i)->name, "optimizer.", 10) == 0)
            return 1;
    return 0;
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    int k = snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k > 0 && (size_t)k < cap; i++)
        k += snprintf(buf + k, cap - (size_t)k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k > 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, "]");
}

int gk_ckpt_read(const gk_ckpt *c, int kind, const char *name, int ndim, const int64_t *shape,
                 float *dst, gk_err *e)
{
    char full[300];
    snprintf(full, sizeof full, "%s%s", kind == 'm' ? "optimizer.m." : kind == 'v' ? "optimizer.v." : "", name);
    const gk_st_tensor *t = gk_st_find(c->f, full);
    if (!t)
        return gk_errf(e, GK_ENOTFOUND, "%s: no tensor '%s'", gk_st_path(c->f), full);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char want[64], got[64];
        shape_text(want, sizeof want, ndim, shape);
        shape_text(got, sizeof got, t->ndim, t->shape);
        return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' has shape %s, expected %s", gk_st_path(c->f),
                       full, got, want);
    }
    switch (t->dtype) {
    case GK_DT_F32: memcpy(dst, t->data, t->nbytes); return 0;
    case GK_DT_BF16: gk_bf16_to_f32_n(dst, t->data, (size_t)t->numel); return 0;
    case GK_DT_F16: gk_f16_to_f32_n(dst, t->data, (size_t)t->numel); return 0;
    default:
        return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' has dtype %s, expected F32, BF16 or F16",
                       gk_st_path(c->f), full, gk_dtype_name(t->dtype));
    }
}

int gk_ckpt_vocab(const gk_ckpt *c, gk_vocab **out, gk_err *e)
{
    const gk_st_tensor *v = gk_st_find(c->f, "tokenizer.vocab");
    const gk_st_tensor *m = gk_st_find(c->f, "tokenizer.merges");
    if (!v)
        return gk_errf(e, GK_ENOTFOUND, "%s: no embedded vocabulary", gk_st_path(c->f));
    if (v->dtype != GK_DT_U8 || (m && m->dtype != GK_DT_U8))
        return gk_errf(e, GK_EFORMAT, "%s: tokenizer tensors must be U8", gk_st_path(c->f));
    char origin[512];
    snprintf(origin, sizeof origin, "%s:tokenizer.vocab", gk_st_path(c->f));
    return gk_vocab_load_mem(out, v->data, v->nbytes, m ? m->data : NULL, m ? m->nbytes : 0, origin, e);
}
