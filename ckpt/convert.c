/* convert.c: gpt-ckpt convert: a checkpoint with its parameters stored as float32, bfloat16 or
 * float16 (nanoGPT's names; fp32, bf16, fp16 accepted).
 * Parameters are the floating-point tensors outside "optimizer." and "tokenizer."; AdamW moments
 * stay fp32 (or go, with --strip-optimizer); everything else, metadata included, is copied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/io/safetensors.h"

typedef struct conv {
    const gk_st_tensor *src;
    enum gk_dtype to;
} conv;

/* Fills bytes [off, off+n) of the converted tensor. */
static int fill(void *ctx, uint64_t off, void *buf, size_t n, gk_err *e)
{
    (void)e;
    const conv *c = ctx;
    size_t size = gk_dtype_size(c->to), first = (size_t)off / size, count = n / size;
    for (size_t i = 0; i < count; i++) {
        float x = (float)ck_value_at(c->src, first + i);
        if (c->to == GK_DT_F32)
            ((float *)buf)[i] = x;
        else
            ((uint16_t *)buf)[i] = c->to == GK_DT_BF16 ? gk_f32_to_bf16(x) : gk_f32_to_f16(x);
    }
    return 0;
}

static int convert(const char *in, const char *out, enum gk_dtype to, int strip, gk_err *e)
{
    gk_st_file *f = NULL;
    gk_st_writer *w = NULL;
    conv *cv = NULL;
    long long bytes;
    int rc = ck_st_open(in, &f, &bytes, e);
    if (!rc)
        rc = gk_ckpt_check_version(f, e);
    if (!rc)
        rc = gk_ckpt_verify(f, e);
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
        if (ck_is_param(t) && t->dtype != to) {
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
    char dst[4400];
    if (!rc && !(rc = ck_out_begin(out, dst, sizeof dst, e)))
        rc = ck_out_finish(out, dst, gk_st_writer_write(w, dst, e), e);
    if (!rc)
        gk_info("%s -> %s: parameters as %s, %zu tensors%s", in, out, gk_dtype_user_name(to), kept,
                stripped ? ", optimizer state dropped" : "");
    gk_st_writer_free(w);
    free(cv);
    gk_st_close(f);
    return rc;
}

static const char usage[] =
    "gpt-ckpt convert [options] FILE -o OUT --dtype TYPE\n"
    "Writes a copy of a checkpoint with its parameters in another floating-point type:\n"
    "TYPE is " GK_DTYPE_USER_CHOICES ";\n"
    "bfloat16 or float16 copies for inference, float32 back for training.";

int ck_convert_main(int argc, char **argv, gk_err *e)
{
    ck_args a = {0};
    const char *output = NULL, *dtype = NULL;
    int strip = 0;
    const gk_opt tab[] = {
        {'o', "output", GK_OPT_STR, &output, "OUT", "the checkpoint to write", 0, 0},
        {0, "dtype", GK_OPT_STR, &dtype, "TYPE", "float32, bfloat16 or float16", 0, 0},
        {0, "strip-optimizer", GK_OPT_FLAG, &strip, NULL, "leave out the AdamW moments", 0, 0},
        CK_OPT_QUIET(a),
        CK_OPT_END,
    };
    int rc = ck_args_parse(&a, tab, "convert", "checkpoint", usage, NULL, argc, argv, e);
    if (rc)
        return rc;
    if (!output)
        return gk_errf(e, GK_EUSAGE, "convert needs -o OUT");
    if ((rc = ck_out_check(output, e)))
        return rc;
    if (!dtype)
        return gk_errf(e, GK_EUSAGE, "convert needs --dtype: " GK_DTYPE_USER_CHOICES);
    enum gk_dtype to;
    if (gk_dtype_from_user(dtype, &to) != 0)
        return gk_errf(e, GK_EUSAGE, "--dtype %s: expected " GK_DTYPE_USER_CHOICES, dtype);
    return convert(a.operand, output, to, strip, e);
}
