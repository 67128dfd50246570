/* cmd.c: what gpt-ckpt's subcommands share (see ck.h): the option prologue, opening a
 * checkpoint, which tensors are parameters, reading an element of any float tensor, and the
 * biased tensor table the exporters write. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ck.h"
#include "common/io/ckpt_src.h"
#include "common/log.h"

int ck_args_parse(ck_args *a, const gk_opt *tab, const char *cmd, const char *what,
                  const char *usage, const char *footer, int argc, char **argv, gk_err *e)
{
    int first, rc = gk_opt_parse_main(tab, "gpt-ckpt", usage, footer, argc, argv, &first, e);
    if (rc)
        return rc;
    gk_log_setup("gpt-ckpt", a->quiet ? GK_LOG_QUIET : GK_LOG_NORMAL + a->verbose);
    if (argc - first != 1)
        return gk_errf(e, GK_EUSAGE, "%s takes one %s; see --help", cmd, what);
    a->operand = argv[first];
    return 0;
}

/* What named stands for (an out_dir: its latest), downloaded when in a bucket (saying so when
 * requests were retried). */
static int src_open(gk_ckpt_src *src, const char *named, const gk_env *env, gk_err *e)
{
    int rc = gk_ckpt_src_open(src, named, env, e);
    if (src->retries)
        gk_warn("%s: %ld requests retried", src->where, src->retries);
    return rc;
}

int ck_open_sized(const char *named, const gk_env *env, gk_ckpt **c, gk_gpt2_config *cfg,
                  long long *bytes, gk_err *e)
{
    gk_ckpt_src src;
    long long size = -1;
    struct stat st;
    *c = NULL;
    int rc = src_open(&src, named, env, e);
    if (!rc && src.fd >= 0) {
        size = src.bytes;
        rc = gk_ckpt_open_fd(c, src.fd, src.where, e);
    } else if (!rc) {
        rc = gk_ckpt_open(c, src.where, e);
        if (rc == 0 && stat(src.where, &st) == 0)
            size = (long long)st.st_size;
    }
    gk_ckpt_src_close(&src);
    if (bytes)
        *bytes = size;
    if (rc == 0 && cfg && (rc = gk_gpt2_ckpt_config(*c, cfg, e)) != 0) {
        gk_ckpt_close(*c);
        *c = NULL;
    }
    return rc;
}

int ck_st_open(const char *named, const gk_env *env, gk_st_file **f, long long *bytes, gk_err *e)
{
    gk_ckpt_src src;
    int rc = src_open(&src, named, env, e);
    *bytes = src.bytes;
    if (!rc)
        rc = src.fd >= 0 ? gk_st_open_fd(f, src.fd, src.where, e) : gk_st_open(f, src.where, e);
    gk_ckpt_src_close(&src);
    return rc;
}

int ck_open(const char *path, const gk_env *env, gk_ckpt **c, gk_gpt2_config *cfg, gk_err *e)
{
    return ck_open_sized(path, env, c, cfg, NULL, e);
}

int ck_is_param(const gk_st_tensor *t)
{
    return strncmp(t->name, "optimizer.", 10) != 0 && strncmp(t->name, "tokenizer.", 10) != 0 &&
           strncmp(t->name, "q8_0.", 5) != 0 &&
           (t->dtype == GK_DT_F32 || t->dtype == GK_DT_BF16 || t->dtype == GK_DT_F16 ||
            t->dtype == GK_DT_I8);
}

double ck_value_at(const gk_st_tensor *t, size_t i)
{
    switch (t->dtype) {
    case GK_DT_F32: return ((const float *)t->data)[i];
    case GK_DT_F64: return ((const double *)t->data)[i];
    case GK_DT_BF16: return gk_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: return gk_f16_to_f32(((const uint16_t *)t->data)[i]);
    }
}

int ck_table_make_biased(ck_table *t, const gk_gpt2_config *cfg, gk_err *e)
{
    gk_gpt2_config with = *cfg;
    with.bias = 1;
    ck_table own = {0};
    int rc = ck_table_make(t, &with, e);
    if (rc == 0 && !cfg->bias)
        rc = ck_table_make(&own, cfg, e);
    for (int i = 0, k = 0; rc == 0 && !cfg->bias && i < t->n; i++) {
        /* both tables are in the model's order: the own one is the biased one minus biases */
        if (k < own.n && strcmp(own.e[k].name, t->e[i].name) == 0)
            k++;
        else
            t->e[i].zero = 1;
    }
    ck_table_free(&own);
    if (rc)
        ck_table_free(t);
    return rc;
}
