/* gpt2_load.c: checkpoint -> gk_gpt2 (see gpt2_load.h). */
#include "kernels/model/gpt2_load.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/safetensors.h"
#include "kernels/model/gpt2_internal.h"

int gk_gpt2_config_parse(const char *json, const char *origin, gk_gpt2_config *cfg, gk_err *e)
{
    json_error_t je;
    json_t *o = json_loads(json ? json : "", 0, &je);
    if (!o) return gk_errf(e, GK_EFORMAT, "%s: bad model config JSON: %s", origin, je.text);
    int bias = 1;
    double dropout = 0;
    json_int_t dims[5]; /* read as JSON's 64-bit integers: "i" would cast 2^32 + 2 to 2 */
    static const char *const names[5] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"};
    gk_gpt2_config c = {0};
    int rc = json_unpack_ex(o, &je, 0, "{s:I, s:I, s:I, s:I, s:I, s?b, s?F}", names[0], &dims[0],
                            names[1], &dims[1], names[2], &dims[2], names[3], &dims[3], names[4],
                            &dims[4], "bias", &bias, "dropout", &dropout);
    json_decref(o);
    if (rc != 0) return gk_errf(e, GK_EFORMAT, "%s: model config: %s", origin, je.text);
    int *fields[5] = {&c.n_layer, &c.n_head, &c.n_embd, &c.block_size, &c.vocab_size};
    for (int i = 0; i < 5; i++) {
        if (dims[i] < 1 || dims[i] > INT_MAX)
            return gk_errf(e, GK_EFORMAT, "%s: model config: %s = %lld is out of range", origin,
                           names[i], (long long)dims[i]);
        *fields[i] = (int)dims[i];
    }
    c.bias = bias;
    c.dropout = (float)dropout;
    gk_err sub;
    if (gk_gpt2_config_check(&c, &sub))
        return gk_errf(e, GK_EFORMAT, "%s: model config: %s", origin, sub.msg);
    *cfg = c;
    return 0;
}

int gk_gpt2_ckpt_config(const gk_ckpt *c, gk_gpt2_config *cfg, gk_err *e)
{
    const char *json = gk_ckpt_config_json(c);
    if (!json)
        return gk_errf(e, GK_EFORMAT, "%s: not a gptkit checkpoint (no gptkit.config metadata); "
                       "make one with gpt-ckpt import", gk_ckpt_path(c));
    return gk_gpt2_config_parse(json, gk_ckpt_path(c), cfg, e);
}

int gk_gpt2_load(gk_gpt2 *m, const gk_ckpt *c, gk_err *e)
{
    size_t max = 1;
    for (int i = 0; i < gk_gpt2_n_params(m); i++)
        if (gk_gpt2_param(m, i)->numel > max) max = gk_gpt2_param(m, i)->numel;
    float *host = malloc(max * sizeof *host);
    if (!host) return gk_errf(e, GK_ENOMEM, "out of memory loading %s", gk_ckpt_path(c));
    int rc = 0;
    for (int i = 0; rc == 0 && i < gk_gpt2_n_params(m); i++) {
        const gk_param *t = gk_gpt2_param(m, i);
        int64_t shape[2] = {t->shape[0], t->ndim > 1 ? t->shape[1] : 0};
        if ((rc = gk_ckpt_read(c, 0, t->name, t->ndim, shape, host, e)) == 0)
            gk_gpt2_param_set(m, i, host);
    }
    free(host);
    return rc;
}

int gk_gpt2_vocab(const gk_ckpt *c, const gk_gpt2_config *cfg, const char *path_or_dir,
                  int required, gk_vocab **v, gk_err *e)
{
    char path[4096] = "";
    gk_err quiet;
    *v = NULL;
    int rc = path_or_dir ? GK_ENOTFOUND : gk_ckpt_vocab(c, v, e);
    if (rc == GK_ENOTFOUND && !path_or_dir && cfg->vocab_size < GK_GPT2_VOCAB_SIZE) {
        /* no vocabulary inside, and GPT-2's would not fit: name -V rather than GPT-2's lookup */
        if (!required)
            return 0;
        return gk_errf(e, GK_ENOTFOUND,
                       "%s: the checkpoint carries no vocabulary, and its %d tokens are not "
                       "GPT-2's: give its vocabulary with -V (for a char-level model, the file "
                       "from gpt-tokenize --vocab-out, e.g. -V vocab.json)",
                       gk_ckpt_path(c), cfg->vocab_size);
    }
    if (rc == GK_ENOTFOUND) {
        rc = gk_vocab_find(path, sizeof path, path_or_dir, path_or_dir || required ? e : &quiet);
        if (rc)
            return path_or_dir || required ? rc : 0;
        rc = gk_vocab_load(v, path, e);
    }
    if (rc == 0 && gk_vocab_size(*v) > (uint32_t)cfg->vocab_size) {
        rc = gk_errf(e, GK_EFORMAT, "%s: the vocabulary%s%s has %u tokens, the model only %d",
                     gk_ckpt_path(c), *path ? " " : "", path, gk_vocab_size(*v), cfg->vocab_size);
        gk_vocab_free(*v);
        *v = NULL;
    }
    return rc;
}

char *gk_gpt2_config_json(const gk_gpt2_config *c)
{
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:b, s:f}", "n_layer", c->n_layer, "n_head",
                          c->n_head, "n_embd", c->n_embd, "block_size", c->block_size, "vocab_size",
                          c->vocab_size, "bias", c->bias, "dropout", (double)c->dropout);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}
