/* model_io.c: gk_gpt2 <-> checkpoint (see model_io.h). */
#include "model_io.h"

#include "kernels/model/gpt2_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tr_save(const char *path, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
            const char *settings_json, int with_optimizer, gk_err *e)
{
    tr_snapshot *s;
    int rc = tr_snapshot_create(&s, m, with_optimizer, NULL, 1, e); /* (saved at once) */
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
 * row-major). Under tensor parallel each tensor is read whole and this rank's part kept
 * (gk_tp_part_copy). */
int tr_load(const gk_ckpt *c, gk_gpt2 *m, int what, gk_err *e)
{
    gk_gpt2_config full;
    int rc = gk_gpt2_ckpt_config(c, &full, e);
    if (rc)
        return rc;
    size_t max = (size_t)full.block_size * (size_t)full.n_embd; /* wpe as stored */
    for (int i = 0; i < gk_gpt2_n_params(m); i++)
        if (gk_gpt2_param(m, i)->full_numel > max)
            max = gk_gpt2_param(m, i)->full_numel;
    int tp = gk_gpt2_tp_world(m), tr = gk_gpt2_tp_rank(m);
    float *host = malloc(max * sizeof *host), *part = tp > 1 ? malloc(max * sizeof *part) : NULL;
    if (!host || (tp > 1 && !part)) {
        free(host);
        return gk_errf(e, GK_ENOMEM, "out of memory loading %s", gk_ckpt_path(c));
    }
    static const int kinds[3] = {0, 'm', 'v'};
    static const enum gk_tensor_kind dst[3] = {GK_TENSOR_PARAM, GK_TENSOR_ADAM_M, GK_TENSOR_ADAM_V};
    for (int i = 0; rc == 0 && i < gk_gpt2_n_params(m); i++) {
        const gk_param *t = gk_gpt2_param(m, i);
        int64_t shape[2] = {t->full_shape[0], t->ndim > 1 ? t->full_shape[1] : 0};
        if (strcmp(t->name, "transformer.wpe.weight") == 0 && full.block_size > shape[0])
            shape[0] = full.block_size;
        int cut = t->split != GK_SPLIT_NONE;
        for (int k = 0; rc == 0 && k < 3; k++) {
            if (!(what & (k ? TR_LOAD_MOMENTS : TR_LOAD_PARAMS)) ||
                (rc = gk_ckpt_read(c, kinds[k], t->name, t->ndim, shape, host, e)))
                continue;
            if (cut)
                gk_tp_part_copy(t->split, t->ndim, t->full_shape, tp, tr, host, part, 0, t->numel,
                                0);
            rc = gk_gpt2_tensor_set(m, i, dst[k], cut ? part : host, e);
        }
    }
    free(host);
    free(part);
    return rc;
}
