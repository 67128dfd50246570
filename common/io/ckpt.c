/* ckpt.c: gptkit checkpoints over safetensors (see ckpt.h). */
#include "common/io/ckpt.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/q8.h"
#include "common/io/safetensors.h"
#include "common/log.h"

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

/* One tensor of a save whose floats come from the caller's fill (gk_ckpt_info.fill). */
typedef struct fill_ctx {
    const gk_ckpt_info *info;
    size_t entry;
    int kind;
} fill_ctx;

static int fill_tensor(void *ctx, uint64_t off, void *buf, size_t n, gk_err *e)
{
    const fill_ctx *c = ctx;
    return c->info->fill(c->info->fill_ctx, c->entry, c->kind, off, buf, n, e);
}

/* Adds an fp32 tensor: its floats at data, or from fill (f not NULL). */
static int add_f32(gk_st_writer *w, const char *name, const gk_ckpt_param *p, const float *data,
                   fill_ctx *f, gk_err *e)
{
    return f ? gk_st_writer_add_fill(w, name, GK_DT_F32, p->ndim, p->shape, fill_tensor, f, e)
             : gk_st_writer_add(w, name, GK_DT_F32, p->ndim, p->shape, data, e);
}

/* f: the moments' fill contexts (2), or NULL. */
static int add_moments(gk_st_writer *w, const gk_ckpt_param *p, fill_ctx *f, gk_err *e)
{
    char name[300];
    int rc = 0;
    if (p->m) {
        snprintf(name, sizeof name, "optimizer.m.%s", p->name);
        rc = add_f32(w, name, p, p->m, f, e);
    }
    if (!rc && p->v) {
        snprintf(name, sizeof name, "optimizer.v.%s", p->name);
        rc = add_f32(w, name, p, p->v, f ? f + 1 : NULL, e);
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
    fill_ctx *fills = info->fill ? calloc(3 * (n ? n : 1), sizeof *fills) : NULL;
    char *json = NULL, *merges = NULL;
    if (!conv || (info->fill && !fills))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    if (!rc && info->fill && dtype != GK_DT_F32)
        rc = gk_errf(e, GK_EUSAGE, "%s: a save from fill is float32", path);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const gk_ckpt_param *p = &params[i];
        fill_ctx *f = fills ? fills + 3 * i : NULL;
        for (int k = 0; f && k < 3; k++) f[k] = (fill_ctx){info, i, "\0mv"[k]};
        conv[i] = (convert_ctx){p->data, dtype};
        rc = dtype == GK_DT_F32
                 ? add_f32(w, p->name, p, p->data, f, e)
                 : gk_st_writer_add_fill(w, p->name, (enum gk_dtype)dtype, p->ndim, p->shape,
                                         fill_converted, &conv[i], e);
        if (!rc)
            rc = add_moments(w, p, f ? f + 1 : NULL, e);
    }
    char version[16];
    snprintf(version, sizeof version, "%d", GK_CKPT_FORMAT_VERSION);
    if (!rc)
        rc = gk_st_writer_meta(w, "format", "pt", e);
    if (!rc)
        rc = gk_st_writer_meta(w, "gptkit.format_version", version, e);
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
    free(fills);
    free(json);
    free(merges);
    return rc;
}

/* ---------------------------------------------------------------- loading */

int gk_ckpt_verify(const gk_st_file *f, gk_err *e)
{
    int verified = 0;
    int rc = gk_st_verify(f, &verified, e);
    if (rc == 0 && !verified)
        gk_verbose("%s has no checksums (written before gptkit 0.1.0): not verified",
                   gk_st_path(f));
    return rc;
}

int gk_ckpt_check_version(const gk_st_file *f, gk_err *e)
{
    const char *v = gk_st_meta(f, "gptkit.format_version");
    if (!v)
        return 0; /* version 1 */
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < 1)
        return gk_errf(e, GK_EFORMAT, "%s: format version '%.40s' is not a number", gk_st_path(f),
                       v);
    if (n > GK_CKPT_FORMAT_VERSION)
        return gk_errf(e, GK_EFORMAT,
                       "%s: format version %ld is newer than "
                       "this gptkit reads (%d): upgrade gptkit",
                       gk_st_path(f), n, GK_CKPT_FORMAT_VERSION);
    return 0;
}

/* path's file, or when fd >= 0 the file open on it named path. */
static int ckpt_open(gk_ckpt **out, int fd, const char *path, gk_err *e)
{
    gk_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int rc = fd >= 0 ? gk_st_open_fd(&c->f, fd, path, e) : gk_st_open(&c->f, path, e);
    if (rc == 0 && (rc = gk_ckpt_check_version(c->f, e)) != 0)
        gk_st_close(c->f);
    else if (rc == 0 && (rc = gk_ckpt_verify(c->f, e)) != 0)
        gk_st_close(c->f);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int gk_ckpt_open(gk_ckpt **out, const char *path, gk_err *e) { return ckpt_open(out, -1, path, e); }
int gk_ckpt_open_fd(gk_ckpt **out, int fd, const char *name, gk_err *e)
{
    return ckpt_open(out, fd, name, e);
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

/* The finiteness check reads the bits: an exponent of all ones (NaN, infinity) sets bit 31 of
 * exponent + 1. Blocks of 16 with 16 accumulators let the compiler vectorize it at -O2. */
#define NONFINITE_BIT(u) ((((u) & 0x7f800000u) + 0x00800000u) & 0x80000000u)

/* Copies n floats from src into dst (src == NULL: only checks dst); returns nonzero when one
 * is not finite. One pass over memory: the check rides on the copy. */
static uint32_t copy_f32_checked(float *dst, const float *src, size_t n)
{
    uint32_t acc[16] = {0}, u[16];
    const float *from = src ? src : dst;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        memcpy(u, from + i, sizeof u);
        for (int j = 0; j < 16; j++)
            acc[j] |= NONFINITE_BIT(u[j]);
        if (src)
            memcpy(dst + i, u, sizeof u);
    }
    for (; i < n; i++) {
        memcpy(u, from + i, sizeof u[0]);
        acc[0] |= NONFINITE_BIT(u[0]);
        if (src)
            dst[i] = from[i];
    }
    for (int j = 1; j < 16; j++)
        acc[0] |= acc[j];
    return acc[0];
}

/* Copies t's values into dst as fp32 (BF16 and F16 converted in cache-sized chunks, checked
 * while still in cache); returns the index of the first NaN or infinity, or numel if none. */
static size_t copy_checked(float *dst, const gk_st_tensor *t)
{
    enum { CHUNK = 1 << 14 }; /* 64 KB of fp32 */
    size_t n = (size_t)t->numel;
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        uint32_t bad;
        if (t->dtype == GK_DT_F32) {
            bad = copy_f32_checked(dst + at, (const float *)t->data + at, k);
        } else {
            if (t->dtype == GK_DT_BF16)
                gk_bf16_to_f32_n(dst + at, (const uint16_t *)t->data + at, k);
            else
                gk_f16_to_f32_n(dst + at, (const uint16_t *)t->data + at, k);
            bad = copy_f32_checked(dst + at, NULL, k); /* still in cache */
        }
        if (!bad)
            continue;
        for (size_t i = at; i < at + k; i++)
            if (!isfinite(dst[i]))
                return i;
    }
    return n;
}

/* An int8 tensor t (gpt-formats(5): Q8_0 with its scales in "q8_0.NAME") widened into dst:
 * 0, or GK_EFORMAT for missing or misshapen scales, or non-finite ones (named as copy_checked's
 * caller names a bad value). */
static int read_q8(const gk_ckpt *c, const gk_st_tensor *t, float *dst, gk_err *e)
{
    char sname[320];
    snprintf(sname, sizeof sname, "q8_0.%s", t->name);
    const gk_st_tensor *s = gk_st_find(c->f, sname);
    int axis = t->ndim == 2 && s && s->ndim == 2 && s->dtype == GK_DT_F16
                   ? gk_q8_axis(t->shape, s->shape)
                   : -1;
    if (axis < 0)
        return gk_errf(e, GK_EFORMAT,
                       "%s: int8 tensor '%s' needs F16 scales '%s' of "
                       "shape [%lld/32, %lld] or [%lld, %lld/32]%s",
                       gk_st_path(c->f), t->name, sname, (long long)t->shape[0],
                       (long long)(t->ndim > 1 ? t->shape[1] : 0), (long long)t->shape[0],
                       (long long)(t->ndim > 1 ? t->shape[1] : 0), s ? "" : " (absent)");
    for (int64_t i = 0; i < s->numel; i++)
        if (!isfinite(gk_f16_to_f32(((const uint16_t *)s->data)[i])))
            return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' holds a non-finite scale at element "
                           "%lld of %lld: the checkpoint is damaged", gk_st_path(c->f), sname,
                           (long long)i, (long long)s->numel);
    int64_t d0 = t->shape[0], d1 = t->shape[1];
    for (int64_t i = 0; i < d0; i++)
        for (int64_t j = 0; j < d1; j++)
            dst[i * d1 + j] = gk_q8_value(t->data, s->data, axis, d1, i, j);
    return 0;
}

int gk_ckpt_read(const gk_ckpt *c, int kind, const char *name, int ndim, const int64_t *shape,
                 float *dst, gk_err *e)
{
    char full[300];
    snprintf(full, sizeof full, "%s%s",
             kind == 'm'   ? "optimizer.m."
             : kind == 'v' ? "optimizer.v."
                           : "",
             name);
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
    if (t->dtype == GK_DT_I8 && !kind)
        return read_q8(c, t, dst, e);
    if (t->dtype != GK_DT_F32 && t->dtype != GK_DT_BF16 && t->dtype != GK_DT_F16)
        return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' has dtype %s, expected F32, BF16 or F16%s",
                       gk_st_path(c->f), full, gk_dtype_name(t->dtype), kind ? "" : " (or I8)");
    size_t bad = copy_checked(dst, t);
    if (bad < (size_t)t->numel)
        return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' holds %s at element %zu of %lld: the "
                       "checkpoint is damaged or its training diverged", gk_st_path(c->f), full,
                       isnan(dst[bad]) ? "NaN" : dst[bad] > 0 ? "+Inf" : "-Inf", bad,
                       (long long)t->numel);
    return 0;
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
    return gk_vocab_load_mem(out, v->data, v->nbytes, m ? m->data : NULL, m ? m->nbytes : 0, origin,
                             e);
}
