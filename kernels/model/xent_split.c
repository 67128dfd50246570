/* xent_split.c: the cross-entropy of logits split by vocabulary across ranks (xent_split.h):
 * the backend's xent ops on this rank's columns, the comm's all-gather and sum for the rows'
 * log-sum-exp and target logits, and a little host arithmetic between (N values a row). */
#include "kernels/model/xent_split.h"

#include <math.h>
#include <stdlib.h>

struct gk_xent_split {
    gk_backend *be;
    gk_comm *c;
    int V, max_N, lo, n;
    int *d_t;                   /* (max_N) this rank's targets for the ops */
    float *d_loss, *d_lse;      /* (max_N) the op's on this rank's columns */
    float *d_all;               /* (world x max_N) every rank's lse, gathered; then the sums */
    int *h_t;                   /* (max_N) host copies */
    float *h_all, *h_loss, *h_x; /* (world x max_N), (max_N), (max_N) */
};

void gk_xent_split_free(gk_xent_split *x)
{
    if (!x) return;
    gk_backend *be = x->be;
    be->ops->free(be, x->d_t), be->ops->free(be, x->d_loss), be->ops->free(be, x->d_lse);
    be->ops->free(be, x->d_all);
    free(x->h_t), free(x->h_all), free(x->h_loss), free(x->h_x);
    free(x);
}

int gk_xent_split_new(gk_xent_split **out, gk_backend *be, gk_comm *c, int V, int max_N,
                      gk_err *err)
{
    *out = NULL;
    if (V < 1 || max_N < 1)
        return gk_errf(err, GK_EUSAGE, "split cross-entropy: V %d, max_N %d (1 or more)", V,
                       max_N);
    gk_xent_split *x = calloc(1, sizeof *x);
    if (!x) return gk_errf(err, GK_ENOMEM, "split cross-entropy: out of memory");
    size_t N = (size_t)max_N, W = (size_t)c->world, slice = ((size_t)V + W - 1) / W;
    *x = (gk_xent_split){.be = be, .c = c, .V = V, .max_N = max_N};
    size_t lo = slice * (size_t)c->rank;
    x->lo = lo < (size_t)V ? (int)lo : V;
    x->n = lo < (size_t)V ? (int)((size_t)V - lo < slice ? (size_t)V - lo : slice) : 0;
    x->d_t = be->ops->alloc(be, N * sizeof(int));
    x->d_loss = be->ops->alloc(be, N * sizeof(float));
    x->d_lse = be->ops->alloc(be, N * sizeof(float));
    x->d_all = be->ops->alloc(be, W * N * sizeof(float));
    x->h_t = malloc(N * sizeof(int));
    x->h_all = malloc(W * N * sizeof(float));
    x->h_loss = malloc(N * sizeof(float));
    x->h_x = malloc(N * sizeof(float));
    if (!x->d_t || !x->d_loss || !x->d_lse || !x->d_all || !x->h_t || !x->h_all || !x->h_loss ||
        !x->h_x) {
        gk_xent_split_free(x);
        return gk_errf(err, GK_ENOMEM, "split cross-entropy: out of memory for %d rows", max_N);
    }
    *out = x;
    return 0;
}

void gk_xent_split_cols(const gk_xent_split *x, int *lo, int *n) { *lo = x->lo, *n = x->n; }

/* The ops' targets: a column of this rank's (from 0), else none (-1) or, for the backward,
 * another rank's (n: the softmax alone). */
static int local_targets(gk_xent_split *x, const int *targets, int N, int other, gk_err *err)
{
    for (int i = 0; i < N; i++) {
        int t = targets[i] - x->lo;
        x->h_t[i] = targets[i] < 0 ? -1 : t >= 0 && t < x->n ? t : other;
    }
    x->be->ops->to_device(x->be, x->d_t, x->h_t, (size_t)N * sizeof(int));
    return gk_backend_status(x->be, err);
}

static int rows_ok(const gk_xent_split *x, int N, int Vp, gk_err *err)
{
    if (N < 1 || N > x->max_N || Vp < x->n)
        return gk_errf(err, GK_EUSAGE, "split cross-entropy: %d rows of %d (at most %d of %d or "
                       "more)", N, Vp, x->max_N, x->n);
    return 0;
}

/* Each row's log-sum-exp from every rank's (h_all: world rows of N), in double; into h_x. */
static void whole_lse(gk_xent_split *x, int N)
{
    int W = x->c->world;
    for (int i = 0; i < N; i++) {
        double mx = -INFINITY, s = 0;
        for (int r = 0; r < W; r++) mx = fmax(mx, x->h_all[(size_t)r * N + i]);
        for (int r = 0; r < W && isfinite(mx); r++) s += exp(x->h_all[(size_t)r * N + i] - mx);
        x->h_x[i] = (float)(mx + log(s));
    }
}

int gk_xent_split_fwd(gk_xent_split *x, float *losses, float *lse, const void *logits,
                      const int *targets, int N, int Vp, gk_err *err)
{
    gk_backend *be = x->be;
    gk_comm *c = x->c;
    size_t rows = (size_t)N * sizeof(float);
    int rc = rows_ok(x, N, Vp, err);
    if (!rc) rc = local_targets(x, targets, N, -1, err);
    if (rc) return rc;
    if (x->n) {
        be->ops->xent_fwd(be, x->d_loss, x->d_lse, logits, x->d_t, N, x->n, Vp);
    } else { /* no columns: their sum of exponentials is 0 */
        for (int i = 0; i < N; i++) x->h_x[i] = -INFINITY, x->h_loss[i] = 0.0f;
        be->ops->to_device(be, x->d_lse, x->h_x, rows);
        be->ops->to_device(be, x->d_loss, x->h_loss, rows);
    }
    if ((rc = c->ops->all_gather(c, x->d_lse, x->d_all, (size_t)N, err))) return rc;
    be->ops->to_host(be, x->h_all, x->d_all, (size_t)c->world * rows);
    be->ops->to_host(be, x->h_loss, x->d_loss, rows);
    /* the target's logit where this rank holds it (its lse less its loss), summed over ranks */
    const float *mine = x->h_all + (size_t)c->rank * N;
    for (int i = 0; i < N; i++) x->h_loss[i] = x->h_t[i] >= 0 ? mine[i] - x->h_loss[i] : 0.0f;
    be->ops->to_device(be, x->d_all, x->h_loss, rows);
    if ((rc = c->ops->allreduce(c, x->d_all, (size_t)N, err))) return rc;
    whole_lse(x, N);
    be->ops->to_host(be, x->h_loss, x->d_all, rows);
    for (int i = 0; i < N; i++) x->h_loss[i] = targets[i] >= 0 ? x->h_x[i] - x->h_loss[i] : 0.0f;
    be->ops->to_device(be, losses, x->h_loss, rows);
    be->ops->to_device(be, lse, x->h_x, rows);
    return gk_backend_status(be, err);
}

int gk_xent_split_bwd(gk_xent_split *x, void *dlogits, const void *logits, const float *lse,
                      const int *targets, float dloss, int N, int Vp, gk_err *err)
{
    gk_backend *be = x->be;
    int rc = rows_ok(x, N, Vp, err);
    if (!rc) rc = local_targets(x, targets, N, x->n, err);
    if (rc) return rc;
    if (x->n) be->ops->xent_bwd(be, dlogits, logits, lse, x->d_t, dloss, N, x->n, Vp);
    else be->ops->zero(be, dlogits, (size_t)N * (size_t)Vp * gk_elt_size(be->act));
    return gk_backend_status(be, err);
}
