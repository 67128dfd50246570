/* vocab_split.c: the vocabulary split across ranks (vocab_split.h): the backend's encoder and
 * xent ops on this rank's rows and columns, the comm's sums and all-gather between, and a little
 * host arithmetic for the rows' log-sum-exp and target logits (N values a call). */
#include "kernels/model/vocab_split.h"

#include <math.h>
#include <stdlib.h>

struct gk_vocab_split {
    gk_backend *be;
    gk_comm *c;
    int V, C, max_N, max_T, lo, n;
    int *d_t;                   /* (max_N) this rank's targets or tokens for the ops */
    float *d_zwpe;              /* (max_T x C) zeros: the wpe of ranks but 0 */
    float *d_sum;               /* (max_N x C) a 16-bit embedding's sum in float32, or NULL */
    float *d_loss, *d_lse;      /* (max_N) the op's on this rank's columns */
    float *d_all;               /* (world x max_N) every rank's lse, gathered; then the sums */
    int *h_t;                   /* (max_N) host copies */
    float *h_all, *h_loss, *h_x; /* (world x max_N), (max_N), (max_N) */
};

void gk_vocab_split_free(gk_vocab_split *x)
{
    if (!x) return;
    gk_backend *be = x->be;
    be->ops->free(be, x->d_t), be->ops->free(be, x->d_loss), be->ops->free(be, x->d_lse);
    be->ops->free(be, x->d_all), be->ops->free(be, x->d_zwpe), be->ops->free(be, x->d_sum);
    free(x->h_t), free(x->h_all), free(x->h_loss), free(x->h_x);
    free(x);
}

int gk_vocab_split_new(gk_vocab_split **out, gk_backend *be, gk_comm *c, int V, int C, int max_N,
                       int max_T, gk_err *err)
{
    *out = NULL;
    if (V < 1 || C < 1 || max_N < 1 || max_T < 1)
        return gk_errf(err, GK_EUSAGE, "split vocabulary: V %d, C %d, max_N %d, max_T %d (1 or "
                       "more)", V, C, max_N, max_T);
    gk_vocab_split *x = calloc(1, sizeof *x);
    if (!x) return gk_errf(err, GK_ENOMEM, "split vocabulary: out of memory");
    size_t N = (size_t)max_N, W = (size_t)c->world, slice = ((size_t)V + W - 1) / W;
    *x = (gk_vocab_split){.be = be, .c = c, .V = V, .C = C, .max_N = max_N, .max_T = max_T};
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
    x->d_zwpe = be->ops->alloc(be, (size_t)max_T * (size_t)C * sizeof(float)); /* (zeroed) */
    if (be->act != GK_F32) x->d_sum = be->ops->alloc(be, N * (size_t)C * sizeof(float));
    if (!x->d_t || !x->d_loss || !x->d_lse || !x->d_all || !x->h_t || !x->h_all || !x->h_loss ||
        !x->h_x || !x->d_zwpe || (be->act != GK_F32 && !x->d_sum)) {
        gk_vocab_split_free(x);
        return gk_errf(err, GK_ENOMEM, "split vocabulary: out of memory for %d rows", max_N);
    }
    *out = x;
    return 0;
}

void gk_vocab_split_cols(const gk_vocab_split *x, int *lo, int *n) { *lo = x->lo, *n = x->n; }

/* ---- the embedding ---- */

/* The tokens for this rank's ops: its rows (from 0), the others its zero row n. */
static int local_tokens(gk_vocab_split *x, const int *tokens, int B, int T, gk_err *err)
{
    int N = B * T;
    if (B < 1 || T < 1 || T > x->max_T || N > x->max_N)
        return gk_errf(err, GK_EUSAGE, "split embedding: %d x %d tokens (at most %d, and %d "
                       "positions)", B, T, x->max_N, x->max_T);
    for (int i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= x->V)
            return gk_errf(err, GK_EUSAGE, "split embedding: token %d of a vocabulary of %d",
                           tokens[i], x->V);
        int t = tokens[i] - x->lo;
        x->h_t[i] = t >= 0 && t < x->n ? t : x->n;
    }
    x->be->ops->to_device(x->be, x->d_t, x->h_t, (size_t)N * sizeof(int));
    return gk_backend_status(x->be, err);
}

int gk_vocab_embed_fwd(gk_vocab_split *x, void *out, const int *tokens, const float *wte,
                       const float *wpe, int B, int T, float p, uint64_t key, gk_err *err)
{
    gk_backend *be = x->be;
    gk_comm *c = x->c;
    size_t n = (size_t)B * (size_t)T * (size_t)x->C;
    int rc = local_tokens(x, tokens, B, T, err);
    if (rc) return rc;
    be->ops->encoder_fwd(be, out, x->d_t, wte, GK_F32, c->rank ? x->d_zwpe : wpe, NULL, B, T,
                         x->C, p, key);
    if (be->act == GK_F32) {
        rc = c->ops->allreduce(c, out, n, err);
        return rc ? rc : gk_backend_status(be, err);
    }
    be->ops->cast(be, x->d_sum, GK_F32, out, be->act, n); /* (16-bit: summed in float32) */
    if ((rc = c->ops->allreduce(c, x->d_sum, n, err))) return rc;
    be->ops->cast(be, out, be->act, x->d_sum, GK_F32, n);
    return gk_backend_status(be, err);
}

int gk_vocab_embed_bwd(gk_vocab_split *x, float *dwte, float *dwpe, const void *dout,
                       const int *tokens, int B, int T, float p, uint64_t key, gk_err *err)
{
    gk_backend *be = x->be;
    int rc = local_tokens(x, tokens, B, T, err);
    if (rc) return rc;
    be->ops->encoder_bwd(be, dwte, dwpe, dout, x->d_t, B, T, x->C, p, key);
    be->ops->zero(be, dwte + (size_t)x->n * (size_t)x->C, (size_t)x->C * sizeof(float));
    return gk_backend_status(be, err);
}

/* ---- the cross-entropy ---- */

/* The ops' targets: a column of this rank's (from 0), else none (-1) or, for the backward,
 * another rank's (n: the softmax alone). */
static int local_targets(gk_vocab_split *x, const int *targets, int N, int other, gk_err *err)
{
    for (int i = 0; i < N; i++) {
        if (targets[i] >= x->V)
            return gk_errf(err, GK_EUSAGE, "split cross-entropy: target %d of a vocabulary of %d",
                           targets[i], x->V);
        int t = targets[i] - x->lo;
        x->h_t[i] = targets[i] < 0 ? -1 : t >= 0 && t < x->n ? t : other;
    }
    x->be->ops->to_device(x->be, x->d_t, x->h_t, (size_t)N * sizeof(int));
    return gk_backend_status(x->be, err);
}

static int rows_ok(const gk_vocab_split *x, int N, int Vp, gk_err *err)
{
    if (N < 1 || N > x->max_N || Vp < x->n)
        return gk_errf(err, GK_EUSAGE, "split cross-entropy: %d rows of %d (at most %d of %d or "
                       "more)", N, Vp, x->max_N, x->n);
    return 0;
}

/* Each row's log-sum-exp from every rank's (h_all: world rows of N), in double; into h_x. */
static void whole_lse(gk_vocab_split *x, int N)
{
    int W = x->c->world;
    for (int i = 0; i < N; i++) {
        double mx = -INFINITY, s = 0;
        for (int r = 0; r < W; r++) mx = fmax(mx, x->h_all[(size_t)r * N + i]);
        for (int r = 0; r < W && isfinite(mx); r++) s += exp(x->h_all[(size_t)r * N + i] - mx);
        x->h_x[i] = (float)(mx + log(s));
    }
}

int gk_vocab_xent_fwd(gk_vocab_split *x, float *losses, float *lse, const void *logits,
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

int gk_vocab_xent_bwd(gk_vocab_split *x, void *dlogits, const void *logits, const float *lse,
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
