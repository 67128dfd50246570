/* model_io.c: gk_gpt2 <-> checkpoint (see model_io.h). */
#include "model_io.h"

#include "kernels/model/gpt2_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- snapshots */

struct tr_snapshot {
    int n;                    /* parameter table entries */
    size_t numel;             /* scalars per kind (gk_gpt2_num_scalars) */
    int with_opt;
    char (*names)[64];        /* copies of the table's names: a save reads no model */
    gk_ckpt_param *params;    /* n entries pointing into buf */
    float *buf;               /* parameters [numel], then with_opt m [numel] and v [numel] */
    char *config_json, *state_json;
    const gk_vocab *vocab;    /* borrowed */
    int64_t step;
    int taken;                /* the last take succeeded */
};

int tr_snapshot_create(tr_snapshot **out, const gk_gpt2 *m, int with_optimizer, gk_err *e)
{
    tr_snapshot *s = calloc(1, sizeof *s);
    int n = gk_gpt2_n_params(m);
    size_t numel = gk_gpt2_num_scalars(m), kinds = with_optimizer ? 3 : 1;
    *out = NULL;
    if (s) {
        s->names = calloc((size_t)n, sizeof *s->names);
        s->params = calloc((size_t)n, sizeof *s->params);
        s->buf = malloc(numel * kinds * sizeof *s->buf);
    }
    if (!s || !s->names || !s->params || !s->buf) {
        tr_snapshot_free(s);
        return gk_errf(e, GK_ENOMEM, "out of memory for the checkpoint's host copy (%.1f MB)",
                       (double)(numel * kinds * sizeof(float)) / 1e6);
    }
    /* its pages mapped now, not at the first copy */
    memset(s->buf, 0, numel * kinds * sizeof *s->buf);
    s->n = n;
    s->numel = numel;
    s->with_opt = with_optimizer;
    s->step = -1;
    float *p = s->buf;
    for (int i = 0; i < n; i++) {
        const gk_param *t = gk_gpt2_param(m, i);
        snprintf(s->names[i], sizeof s->names[i], "%s", t->name);
        s->params[i] = (gk_ckpt_param){s->names[i], t->ndim,
                                       {t->shape[0], t->ndim > 1 ? t->shape[1] : 0}, p, NULL, NULL};
        if (with_optimizer) {
            s->params[i].m = p + numel;
            s->params[i].v = p + 2 * numel;
        }
        p += t->numel;
    }
    *out = s;
    return 0;
}

void tr_snapshot_free(tr_snapshot *s)
{
    if (!s)
        return;
    free(s->names);
    free(s->params);
    free(s->buf);
    free(s->config_json);
    free(s->state_json);
    free(s);
}

/* The tensors of m into s: parameters, and (with_opt) the moments: sharded ones gathered
 * straight into s (every entry's tensors follow one another in table order there, from buf,
 * buf + numel and buf + 2 numel, as gk_gpt2_shards_gather_packed writes them). */
static int take_tensors(tr_snapshot *s, gk_gpt2 *m, gk_err *e)
{
    if (gk_gpt2_n_params(m) != s->n || gk_gpt2_num_scalars(m) != s->numel)
        return gk_errf(e, GK_EUSAGE, "checkpoint snapshot: not made for this model");
    int params = gk_gpt2_params_sharded(m), gathered = s->with_opt && gk_gpt2_moments_sharded(m);
    int rc = 0;
    if (params || gathered)
        rc = gk_gpt2_shards_gather_packed(m, params ? s->buf : NULL,
                                          gathered ? s->buf + s->numel : NULL,
                                          gathered ? s->buf + 2 * s->numel : NULL, e);
    for (int i = 0; !rc && i < s->n; i++) {
        float *p = (float *)s->params[i].data; /* s->buf, which s owns */
        if (!params) rc = gk_gpt2_tensor_get(m, i, GK_TENSOR_PARAM, p, e);
        if (!rc && s->with_opt && !gathered)
            rc = gk_gpt2_tensor_get(m, i, GK_TENSOR_ADAM_M, p + s->numel, e);
        if (!rc && s->with_opt && !gathered)
            rc = gk_gpt2_tensor_get(m, i, GK_TENSOR_ADAM_V, p + 2 * s->numel, e);
    }
    return rc;
}

int tr_snapshot_take(tr_snapshot *s, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
                     const char *settings_json, gk_err *e)
{
    s->taken = 0;
    free(s->config_json);
    free(s->state_json);
    s->config_json = gk_gpt2_config_json(gk_gpt2_cfg(m));
    s->state_json = st ? tr_state_json(st, settings_json) : NULL;
    s->vocab = v;
    s->step = st ? st->step : -1;
    if (!s->config_json || (st && !s->state_json))
        return gk_errf(e, GK_ENOMEM, "out of memory preparing the checkpoint");
    int rc = take_tensors(s, m, e);
    s->taken = rc == 0;
    return rc;
}

int tr_snapshot_save(const tr_snapshot *s, const char *path, gk_err *e)
{
    if (!s->taken)
        return gk_errf(e, GK_EUSAGE, "%s: no snapshot taken to save", path);
    gk_ckpt_info info = {s->config_json, s->state_json, s->vocab, 0};
    return gk_ckpt_save(path, s->params, (size_t)s->n, &info, e);
}

int64_t tr_snapshot_step(const tr_snapshot *s)
{
    return s->taken ? s->step : -1;
}

int tr_save(const char *path, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
            const char *settings_json, int with_optimizer, gk_err *e)
{
    tr_snapshot *s;
    int rc = tr_snapshot_create(&s, m, with_optimizer, e);
    if (!rc)
        rc = tr_snapshot_take(s, m, v, st, settings_json, e);
    if (!rc)
        rc = tr_snapshot_save(s, path, e);
    tr_snapshot_free(s);
    return rc;
}

/* ---------------------------------------------------------------- loading */

/* The tensors of c that `what` names into m. A checkpoint with a larger block_size than m's
 * (crop) has its wpe tensors read whole and their first rows kept (wpe is [block_size, C]
 * row-major). */
int tr_load(const gk_ckpt *c, gk_gpt2 *m, int what, gk_err *e)
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
        for (int k = 0; rc == 0 && k < 3; k++)
            if ((what & (k ? TR_LOAD_MOMENTS : TR_LOAD_PARAMS)) &&
                (rc = gk_ckpt_read(c, kinds[k], t->name, t->ndim, shape, host, e)) == 0)
                rc = gk_gpt2_tensor_set(m, i, dst[k], host, e);
    }
    free(host);
    return rc;
}
