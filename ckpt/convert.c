/* convert.c: gpt-ckpt convert: a checkpoint with its parameters stored as float32, bfloat16,
 * float16 (nanoGPT's names; fp32, bf16, fp16 accepted) or int8.
 * Parameters are the floating-point (or int8) tensors outside "optimizer.", "tokenizer." and
 * "q8_0."; AdamW moments stay fp32 (or go, with --strip-optimizer); everything else, metadata
 * included, is copied. int8 (gpt-formats(5)) is llama.cpp's Q8_0 for the weight matrices the
 * int8 model keeps so (wte and the four of each layer: I8 values in the tensor's own shape, F16
 * scales per 32 along the input dimension in "q8_0.NAME"); the other parameters keep their type.
 * Converting an int8 checkpoint to a floating-point type widens those and drops the scales. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck.h"
#include "common/io/q8.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/io/safetensors.h"

typedef struct conv {
    const gk_st_tensor *src;
    const gk_st_tensor *scales; /* src is int8: its q8_0 scales, else NULL */
    enum gk_dtype to;
    int axis;                   /* of the scales */
    int8_t *q;                  /* to int8: the values and scales written */
    uint16_t *d;
} conv;

/* Element i of c->src, widened */
static float value_of(const conv *c, size_t i)
{
    if (!c->scales)
        return (float)ck_value_at(c->src, i);
    int64_t d1 = c->src->shape[1];
    return gk_q8_value(c->src->data, c->scales->data, c->axis, d1, (int64_t)i / d1,
                       (int64_t)i % d1);
}

/* Fills bytes [off, off+n) of the converted tensor. */
static int fill(void *ctx, uint64_t off, void *buf, size_t n, gk_err *e)
{
    (void)e;
    const conv *c = ctx;
    size_t size = gk_dtype_size(c->to), first = (size_t)off / size, count = n / size;
    for (size_t i = 0; i < count; i++) {
        float x = value_of(c, first + i);
        if (c->to == GK_DT_F32)
            ((float *)buf)[i] = x;
        else
            ((uint16_t *)buf)[i] = c->to == GK_DT_BF16 ? gk_f32_to_bf16(x) : gk_f32_to_f16(x);
    }
    return 0;
}

/* The weight matrices an int8 model keeps in int8 (gpt2.h GK_GPT2_Q8): wte, and the 2-D
 * parameters of the blocks; their blocks run along axis 1 for wte ([vocab, n_embd]), else along
 * axis 0 (Conv1D: [in, out]). -1 for the others. */
static int q8_axis_of(const gk_st_tensor *t)
{
    if (t->ndim != 2) return -1;
    if (!strcmp(t->name, "transformer.wte.weight")) return 1;
    return strncmp(t->name, "transformer.h.", 14) == 0 ? 0 : -1;
}

/* c->q, c->d = the int8 values and scales of c->src along axis (its length a multiple of 32) */
static int quantize(conv *c, int axis, const char *in, gk_err *e)
{
    const gk_st_tensor *t = c->src;
    int64_t d0 = t->shape[0], d1 = t->shape[1];
    if ((axis ? d1 : d0) % GK_Q8_N)
        return gk_errf(e, GK_EUSAGE, "%s: tensor '%s' [%lld, %lld]: int8 needs its input "
                       "dimension (%lld) to be a multiple of %d", in, t->name, (long long)d0,
                       (long long)d1, (long long)(axis ? d1 : d0), GK_Q8_N);
    c->q = malloc((size_t)t->numel);
    c->d = malloc((size_t)t->numel / GK_Q8_N * sizeof *c->d);
    if (!c->q || !c->d)
        return gk_errf(e, GK_ENOMEM, "out of memory quantizing '%s'", t->name);
    float x[GK_Q8_N];
    int8_t q[GK_Q8_N];
    int64_t nb0 = axis ? d0 : d0 / GK_Q8_N, nb1 = axis ? d1 / GK_Q8_N : d1; /* scales' shape */
    for (int64_t a = 0; a < nb0; a++)
        for (int64_t b = 0; b < nb1; b++) {
            int64_t i0 = axis ? a : a * GK_Q8_N, j0 = axis ? b * GK_Q8_N : b;
            for (int k = 0; k < GK_Q8_N; k++)
                x[k] = value_of(c, (size_t)((i0 + (axis ? 0 : k)) * d1 + j0 + (axis ? k : 0)));
            gk_q8_quantize32(x, 1, &c->d[a * nb1 + b], q);
            for (int k = 0; k < GK_Q8_N; k++)
                c->q[(i0 + (axis ? 0 : k)) * d1 + j0 + (axis ? k : 0)] = q[k];
        }
    return 0;
}

/* One parameter to int8 (quantized) or, when it is not one the int8 model keeps so, as it is */
static int add_int8(gk_st_writer *w, conv *c, const char *in, gk_err *e)
{
    const gk_st_tensor *t = c->src;
    int axis = q8_axis_of(t);
    if (axis < 0 || t->dtype == GK_DT_I8)
        return gk_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, e);
    int rc = quantize(c, axis, in, e);
    int64_t sshape[2] = {axis ? t->shape[0] : t->shape[0] / GK_Q8_N,
                         axis ? t->shape[1] / GK_Q8_N : t->shape[1]};
    char sname[320];
    snprintf(sname, sizeof sname, "q8_0.%s", t->name);
    if (!rc) rc = gk_st_writer_add(w, t->name, GK_DT_I8, 2, t->shape, c->q, e);
    if (!rc) rc = gk_st_writer_add(w, sname, GK_DT_F16, 2, sshape, c->d, e);
    return rc;
}

/* c->scales and c->axis of the int8 parameter c->src, or GK_EFORMAT as gk_ckpt_read says it */
static int q8_scales(const gk_st_file *f, conv *c, gk_err *e)
{
    char sname[320];
    snprintf(sname, sizeof sname, "q8_0.%s", c->src->name);
    c->scales = gk_st_find(f, sname);
    c->axis =
        c->src->ndim == 2 && c->scales && c->scales->ndim == 2 && c->scales->dtype == GK_DT_F16
            ? gk_q8_axis(c->src->shape, c->scales->shape)
            : -1;
    if (c->axis < 0)
        return gk_errf(e, GK_EFORMAT, "%s: int8 tensor '%s' has no F16 scales '%s' of a matching "
                       "shape", gk_st_path(f), c->src->name, sname);
    return 0;
}

static int convert(const char *in, const char *out, enum gk_dtype to, int strip, const gk_env *env,
                   gk_err *e)
{
    gk_st_file *f = NULL;
    gk_st_writer *w = NULL;
    conv *cv = NULL;
    long long bytes;
    int rc = ck_st_open(in, env, &f, &bytes, e);
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
        if (to != GK_DT_I8 && strncmp(t->name, "q8_0.", 5) == 0)
            continue; /* the scales of int8 parameters, widened below */
        kept++;
        cv[i] = (conv){.src = t, .to = to};
        if (ck_is_param(t) && t->dtype == GK_DT_I8 && (rc = q8_scales(f, &cv[i], e)))
            break;
        if (ck_is_param(t) && to == GK_DT_I8) {
            rc = add_int8(w, &cv[i], in, e);
        } else if (ck_is_param(t) && t->dtype != to) {
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
    if (!rc && !(rc = ck_out_begin(out, env, dst, sizeof dst, e)))
        rc = ck_out_finish(out, dst, gk_st_writer_write(w, dst, e), e);
    if (!rc)
        gk_info("%s -> %s: parameters as %s, %zu tensors%s", in, out,
                to == GK_DT_I8 ? "int8 (Q8_0)" : gk_dtype_user_name(to), kept,
                stripped ? ", optimizer state dropped" : "");
    gk_st_writer_free(w);
    for (size_t i = 0; cv && i < n; i++) {
        free(cv[i].q);
        free(cv[i].d);
    }
    free(cv);
    gk_st_close(f);
    return rc;
}

static const char usage[] =
    "gpt-ckpt convert [options] FILE -o OUT --dtype TYPE\n"
    "Writes a copy of a checkpoint with its parameters in another type:\n"
    "TYPE is " GK_DTYPE_USER_CHOICES ", or int8;\n"
    "bfloat16, float16 or int8 (llama.cpp's Q8_0 weight matrices) copies for inference,\n"
    "float32 back for training.";

int ck_convert_main(int argc, char **argv, const gk_env *env, gk_err *e)
{
    ck_args a = {0};
    const char *output = NULL, *dtype = NULL;
    int strip = 0;
    const gk_opt tab[] = {
        {'o', "output", GK_OPT_STR, &output, "OUT", "the checkpoint to write", 0, 0},
        {0, "dtype", GK_OPT_STR, &dtype, "TYPE", "float32, bfloat16, float16 or int8", 0, 0},
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
        return gk_errf(e, GK_EUSAGE, "convert needs --dtype: " GK_DTYPE_USER_CHOICES ", or int8");
    enum gk_dtype to = GK_DT_I8;
    if (strcmp(dtype, "int8") && gk_dtype_from_user(dtype, &to) != 0)
        return gk_errf(e, GK_EUSAGE, "--dtype %s: expected " GK_DTYPE_USER_CHOICES ", or int8",
                       dtype);
    return convert(a.operand, output, to, strip, env, e);
}
