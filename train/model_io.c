/* model_io.c: gk_gpt2 <-> checkpoint (see model_io.h). */
#include "model_io.h"

#include "kernels/gpt2_load.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

char *tr_state_json(const tr_state *s, const char *settings_json)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:i}", "step", (json_int_t)s->step, "tokens",
                          (json_int_t)s->tokens, "seed", (json_int_t)s->seed, "rng_counter",
                          (json_int_t)s->rng_counter, "world_size", s->world_size);
    if (!o)
        return NULL;
    if (isfinite(s->best_val_loss))
        json_object_set_new(o, "best_val_loss", json_real(s->best_val_loss));
    if (s->skipped)
        json_object_set_new(o, "skipped", json_integer((json_int_t)s->skipped));
    json_t *cfg = settings_json ? json_loads(settings_json, 0, NULL) : NULL;
    if (cfg)
        json_object_set_new(o, "config", cfg);
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    return text;
}

int tr_state_parse(const char *json, const char *origin, tr_state *s, gk_err *e)
{
    json_error_t je;
    json_t *o = json_loads(json ? json : "", 0, &je);
    if (!o)
        return gk_errf(e, GK_EFORMAT, "%s: bad trainer state JSON: %s", origin, je.text);
    json_int_t step = 0, tokens = 0, seed = 0, counter = 0, skipped = 0;
    int world = 1;
    double best = INFINITY;
    int rc = json_unpack_ex(o, &je, 0, "{s:I, s:I, s:I, s:I, s?i, s?F, s?I}", "step", &step,
                            "tokens", &tokens, "seed", &seed, "rng_counter", &counter, "world_size",
                            &world, "best_val_loss", &best, "skipped", &skipped);
    json_decref(o);
    if (rc != 0)
        return gk_errf(e, GK_EFORMAT, "%s: trainer state: %s", origin, je.text);
    *s = (tr_state){step, tokens, (uint64_t)seed, (uint64_t)counter, best, world, skipped};
    return 0;
}

/* Host copies of every parameter (and moments): one buffer, filled through the backend. */
/* Host copies of every tensor (parameters, and the AdamW moments with with_opt) for a save: one
 * buffer, described by out[]. NULL with e set on failure. */
static float *host_copy(gk_gpt2 *m, gk_ckpt_param *out, int with_opt, gk_err *e)
{
    int n = gk_gpt2_n_params(m);
    size_t total = gk_gpt2_num_scalars(m) * (with_opt ? 3 : 1);
    float *buf = malloc(total * sizeof *buf), *p = buf;
    if (!buf) {
        gk_errf(e, GK_ENOMEM, "out of memory preparing the checkpoint");
        return NULL;
    }
    int rc = 0;
    for (int i = 0; !rc && i < n; i++) {
        const gk_param *t = gk_gpt2_param(m, i);
        out[i] = (gk_ckpt_param){t->name, t->ndim, {t->shape[0], t->ndim > 1 ? t->shape[1] : 0}, p, NULL, NULL};
        rc = gk_gpt2_tensor_get(m, i, GK_TENSOR_PARAM, p, e);
        p += t->numel;
        if (with_opt && !rc) {
            out[i].m = p;
            rc = gk_gpt2_tensor_get(m, i, GK_TENSOR_ADAM_M, p, e);
            p += t->numel;
            out[i].v = p;
            if (!rc) rc = gk_gpt2_tensor_get(m, i, GK_TENSOR_ADAM_V, p, e);
            p += t->numel;
        }
    }
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

int tr_save(const char *path, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
            const char *settings_json, int with_optimizer, gk_err *e)
{
    int n = gk_gpt2_n_params(m);
    gk_ckpt_param *params = calloc((size_t)n, sizeof *params);
    float *buf = params ? host_copy(m, params, with_optimizer, e) : NULL;
    char *cfg = gk_gpt2_config_json(gk_gpt2_cfg(m));
    char *state = st ? tr_state_json(st, settings_json) : NULL;
    int rc;
    if (params && !buf) {
        rc = e->code;
    } else if (!params || !cfg || (st && !state)) {
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory preparing the checkpoint", path);
    } else {
        gk_ckpt_info info = {cfg, state, v, 0};
        rc = gk_ckpt_save(path, params, (size_t)n, &info, e);
    }
    free(params);
    free(buf);
    free(cfg);
    free(state);
    return rc;
}

/* Every tensor of c into m: the parameters, and the AdamW moments with with_optimizer. A
 * checkpoint with a larger block_size than m's (crop) has its wpe tensors read whole and their
 * first rows kept (wpe is [block_size, C] row-major). */
int tr_load(const gk_ckpt *c, gk_gpt2 *m, int with_optimizer, gk_err *e)
{
    gk_gpt2_config full;
    int rc = gk_gpt2_ckpt_config(c, &full, e);
    if (rc)
        return rc;
    size_t max = (size_t)full.block_size * (size_t)full.n_embd; /* wpe as stored */
    for (int i = 0; i < gk_gpt2_n_params(m); i++)
        if (gk_gpt2_param(m, i)->numel > max)
            max = gk_gpt2_param(m, i)->numel;
    float *host = malloc(max * sizeof *host);
    if (!host)
        return gk_errf(e, GK_ENOMEM, "out of memory loading %s", gk_ckpt_path(c));
    static const int kinds[3] = {0, 'm', 'v'};
    static const enum gk_tensor_kind dst[3] = {GK_TENSOR_PARAM, GK_TENSOR_ADAM_M, GK_TENSOR_ADAM_V};
    for (int i = 0; rc == 0 && i < gk_gpt2_n_params(m); i++) {
        const gk_param *t = gk_gpt2_param(m, i);
        int64_t shape[2] = {t->shape[0], t->ndim > 1 ? t->shape[1] : 0};
        if (strcmp(t->name, "transformer.wpe.weight") == 0 && full.block_size > shape[0])
            shape[0] = full.block_size;
        for (int k = 0; rc == 0 && k < (with_optimizer ? 3 : 1); k++)
            if ((rc = gk_ckpt_read(c, kinds[k], t->name, t->ndim, shape, host, e)) == 0)
                rc = gk_gpt2_tensor_set(m, i, dst[k], host, e);
    }
    free(host);
    return rc;
}
