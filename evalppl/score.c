/* score.c: sliding-window scoring (see score.h). Per-token losses come from the model's forward
 * with targets (the backend's cross-entropy), so any backend scores the same way. */
#include "evalppl/score.h"

#include <stdlib.h>

struct ep_scorer {
    gk_gpt2 *m;
    int context, stride;
    int *in, *tg; /* host (context) */
};

int ep_scorer_create(ep_scorer **out, gk_gpt2 *m, int context, int stride, gk_err *e)
{
    if (stride < 1 || stride > context)
        return gk_errf(e, GK_EUSAGE, "--stride %d: must be 1..context (%d)", stride, context);
    ep_scorer *s = calloc(1, sizeof *s);
    if (!s) return gk_errf(e, GK_ENOMEM, "out of memory");
    *s = (ep_scorer){m, context, stride, NULL, NULL};
    s->in = malloc((size_t)context * sizeof *s->in);
    s->tg = malloc((size_t)context * sizeof *s->tg);
    if (!s->in || !s->tg) {
        ep_scorer_free(s);
        return gk_errf(e, GK_ENOMEM, "out of memory for windows of %d tokens", context);
    }
    *out = s;
    return 0;
}

void ep_scorer_free(ep_scorer *s)
{
    if (!s) return;
    free(s->in);
    free(s->tg);
    free(s);
}

int ep_score(ep_scorer *s, const uint32_t *ids, size_t n, ep_token_fn fn, void *ctx, double *sum,
             gk_err *e)
{
    size_t prev = 0; /* targets at positions 1..prev are scored */
    for (size_t begin = 0; prev + 1 < n; begin += (size_t)s->stride) {
        size_t end = begin + (size_t)s->context < n - 1 ? begin + (size_t)s->context : n - 1;
        int T = (int)(end - begin);
        for (int i = 0; i < T; i++) {
            size_t pos = begin + 1 + (size_t)i;
            s->in[i] = (int)ids[begin + i];
            s->tg[i] = pos > prev ? (int)ids[pos] : -1;
        }
        int rc = gk_gpt2_forward(s->m, s->in, s->tg, 1, T, NULL, e);
        if (rc) return rc;
        const float *loss = gk_gpt2_token_losses(s->m);
        for (int i = 0; i < T; i++)
            if (s->tg[i] >= 0) {
                *sum += loss[i];
                if (fn) fn(ctx, begin + 1 + (size_t)i, loss[i]);
            }
        prev = end;
    }
    return 0;
}
