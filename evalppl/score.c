/* score.c: sliding-window scoring (see score.h). Per-token losses come from the backend's
 * xent_fwd op on the forward's logits, so any backend scores the same way. */
#include "evalppl/score.h"

#include <stdlib.h>

struct ep_scorer {
    gk_gpt2 *m;
    gk_backend *be;
    int context, stride;
    int *in, *tg;          /* host (context) */
    float *h_loss;         /* host (context) */
    int *d_tg;             /* device (context) */
    float *d_loss, *d_lse; /* device (context) */
};

int ep_scorer_create(ep_scorer **out, gk_gpt2 *m, gk_backend *be, int context, int stride,
                     gk_err *e)
{
    if (stride < 1 || stride > context)
        return gk_errf(e, GK_EUSAGE, "--stride %d: must be 1..context (%d)", stride, context);
    ep_scorer *s = calloc(1, sizeof *s);
    if (!s) return gk_errf(e, GK_ENOMEM, "out of memory");
    *s = (ep_scorer){m, be, context, stride, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t n = (size_t)context;
    s->in = malloc(n * sizeof *s->in);
    s->tg = malloc(n * sizeof *s->tg);
    s->h_loss = malloc(n * sizeof *s->h_loss);
    s->d_tg = be->ops->alloc(be, n * sizeof(int));
    s->d_loss = be->ops->alloc(be, n * sizeof(float));
    s->d_lse = be->ops->alloc(be, n * sizeof(float));
    if (!s->in || !s->tg || !s->h_loss || !s->d_tg || !s->d_loss || !s->d_lse) {
        ep_scorer_free(s);
        return gk_errf(e, GK_ENOMEM, "out of memory for windows of %d tokens", context);
    }
    *out = s;
    return 0;
}

void ep_scorer_free(ep_scorer *s)
{
    if (!s) return;
    s->be->ops->free(s->be, s->d_tg);
    s->be->ops->free(s->be, s->d_loss);
    s->be->ops->free(s->be, s->d_lse);
    free(s->in);
    free(s->tg);
    free(s->h_loss);
    free(s);
}

int ep_score(ep_scorer *s, const uint32_t *ids, size_t n, ep_token_fn fn, void *ctx, double *sum,
             gk_err *e)
{
    gk_backend *be = s->be;
    const gk_gpt2_config *c = gk_gpt2_cfg(s->m);
    int Vp = gk_gpt2_padded_vocab(s->m);
    size_t prev = 0; /* targets at positions 1..prev are scored */
    for (size_t begin = 0; prev + 1 < n; begin += (size_t)s->stride) {
        size_t end = begin + (size_t)s->context < n - 1 ? begin + (size_t)s->context : n - 1;
        int T = (int)(end - begin);
        for (int i = 0; i < T; i++) {
            size_t pos = begin + 1 + (size_t)i;
            s->in[i] = (int)ids[begin + i];
            s->tg[i] = pos > prev ? (int)ids[pos] : -1;
        }
        int rc = gk_gpt2_forward(s->m, s->in, NULL, 1, T, NULL, e);
        if (rc) return rc;
        be->ops->to_device(be, s->d_tg, s->tg, sizeof(int) * T);
        be->ops->xent_fwd(be, s->d_loss, s->d_lse, gk_gpt2_logits(s->m), s->d_tg, T, c->vocab_size, Vp);
        be->ops->to_host(be, s->h_loss, s->d_loss, sizeof(float) * T);
        for (int i = 0; i < T; i++)
            if (s->tg[i] >= 0) {
                *sum += s->h_loss[i];
                if (fn) fn(ctx, begin + 1 + (size_t)i, s->h_loss[i]);
            }
        prev = end;
    }
    return 0;
}
