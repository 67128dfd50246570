/* convert.c: gpt-ckpt convert: a checkpoint with its parameters stored as bf16, fp16 or fp32.
 * Parameters are the floating-point tensors outside "optimizer." and "tokenizer."; AdamW moments
 * stay fp32 (or go, with --strip-optimizer); everything else, metadata included, is copied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/io/safetensors.h"

typedef struct convert_opts {
    const char *output, *dtype;
    int strip, quiet;
} convert_opts;

typedef struct conv {
    const gk_st_tensor *src;
    enum gk_dtype to;
} conv;

static float elem(const gk_st_tensor *t, size_t i)
{
    switch (t->dtype) {
    case GK_DT_F32: return ((const float *)t->data)[i];
    case GK_DT_BF16: return gk_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: return gk_f16_to_f32(((const uint16_t *)t->data)[i]);
    }
}

/* Fills bytes [off, off+n) of the converted tensor. */
static int fill(void *ctx, uint64_t off, void *buf, size_t n, gk_err *e)
{
    (void)e;
    const conv *c = ctx;
    size_t size = gk_dtype_size(c->to), first = (size_t)off / size, count = n / size;
    for (size_t i = 0; i < count; i++) {
        float x = elem(c->src, first + i);
        if (c->to == GK_DT_F32)
            ((float *)buf)[i] = x;
        else
            ((uint16_t *)buf)[i] = c->to == GK_DT_BF16 ? gk_f32_to_bf16(x) : gk_f32_to_f16(x);
    }
    return 0;
}

static int is_param(const gk_st_tensor *t)
{
    return strncmp(t->name, "optimizer.", 10) != 0 && strncmp(t->name, "tokenizer.", 10) != 0 &&
           (t->dtype == GK_DT_F32 || t->dtype == GK_DT_BF16 || t->dtype == GK_DT_F16);
}

static int convert(const char *in, const char *out, enum gk_dtype to, int strip, gk_err *e)
{
    gk_st_file *f = NULL;
    gk_st_writer *w = NULL;
    conv *cv = NULL;
    int rc = gk_st_open(&f, in, e);
    if (!rc)
        rc = gk_st_writer_create(&w, e);
    size_t n = f ? gk_st_count(f) : 0, kept = 0, stripped = 0;
    if (!rc && !(cv = calloc(n ? n : 1, sizeof *cv)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        if (strip && strncmp(t->name, "optimizer.", 10) == 0) {
            stripped++;
            continue;
        }
        kept++;
        if (is_param(t) && t->dtype != to) {
            cv[i] = (conv){t, to};
            rc = gk_st_writer_add_fill(w, t->name, to, t->ndim, t->shape, fill, &cv[i], e);
        } else {
            rc = gk_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, e);
        }
    }
    for (size_t i = 0; rc == 0 && i < gk_st_meta_count(f); i++) {
        const char *k, *v;
        gk_st_meta_at(f, i, &k, &v);
        rc = gk_st_writer_meta(w, k, v, e);
    }
    if (!rc)
        rc = gk_st_writer_write(w, out, e);
    if (!rc)
        gk_info("%s -> %s: parameters as %s, %zu tensors%s", in, out, gk_dtype_name(to), kept,
                stripped ? ", optimizer state dropped" : "");
    gk_st_writer_free(w);
    free(cv);
    gk_st_close(f);
    return rc;
}

static const char usage[] =
    "gpt-ckpt convert [options] FILE -o OUT --dtype bf16|fp16|fp32\n"
    "Writes a copy of a checkpoint with its parameters in another floating-point type\n"
    "(bf16 or fp16 copies for inference; fp32 back for training).";

int ck_convert_main(int argc, char **argv, gk_err *e)
{
    convert_opts o = {0};
    const gk_opt tab[] = {
        {'o', "output", GK_OPT_STR, &o.output, "OUT", "the checkpoint to write", 0, 0},
        {0, "dtype", GK_OPT_STR, &o.dtype, "TYPE", "bf16, fp16 or fp32", 0, 0},
        {0, "strip-optimizer", GK_OPT_FLAG, &o.strip, NULL, "leave out the AdamW moments", 0, 0},
        {'q', "quiet", GK_OPT_FLAG, &o.quiet, NULL, "no messages but errors", 0, 0},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    int first, rc = gk_opt_parse_main(tab, "gpt-ckpt", usage, NULL, argc, argv, &first, e);
    if (rc)
        return rc;
    gk_log_setup("gpt-ckpt", o.quiet ? GK_LOG_QUIET : GK_LOG_NORMAL);
    if (argc - first != 1)
        return gk_errf(e, GK_EUSAGE, "convert takes one checkpoint; see --help");
    if (!o.output)
        return gk_errf(e, GK_EUSAGE, "convert needs -o OUT");
    static const struct { const char *name; enum gk_dtype dt; } types[] = {
        {"bf16", GK_DT_BF16}, {"fp16", GK_DT_F16}, {"fp32", GK_DT_F32},
        {"bfloat16", GK_DT_BF16}, {"float16", GK_DT_F16}, {"float32", GK_DT_F32},
    };
    if (!o.dtype)
        return gk_errf(e, GK_EUSAGE, "convert needs --dtype bf16|fp16|fp32");
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strcmp(o.dtype, types[i].name) == 0)
            return convert(argv[first], o.output, types[i].dt, o.strip, e);
    return gk_errf(e, GK_EUSAGE, "--dtype %s: expected bf16, fp16 or fp32", o.dtype);
}
