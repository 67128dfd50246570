/* gpt2_head.c: ZeRO-2 and 3's gradient of the head (wte, wpe) in stripes, so that no rank holds
 * wte's gradient whole (gpt2_internal.h: head_rows). ZeRO's layout cuts the head bucket in whole
 * rows of wte (gpt2_shard.c), and the backward makes the head's gradient at its end, once the
 * embedding's is known too: a stripe at a time, the j-th stripe_rows rows of every rank's piece,
 * dlogits^T @ lnf for them (a gemm a rank's range, from the logits, which hold dlogits through
 * the backward) plus the rows of dres of the tokens there (the encoder's backward, the other
 * tokens sent to a spare row), reduce-scattered so that each rank folds its own rows into its
 * shard; then the tail (wte's last rows and wpe, every rank's) alike, all-reduced. */
#include <stdlib.h>

#include "kernels/model/gpt2_internal.h"

/* The head bucket's tail (floats), and the rows of g_tail before its spare row. */
static size_t tail_floats(const gk_gpt2 *m)
{
    return gk_bucket_tail(&m->buckets[0], m->comm->world);
}
static size_t tail_rows(const gk_gpt2 *m)
{
    size_t C = (size_t)m->cfg.n_embd;
    return (tail_floats(m) + C - 1) / C;
}

int gk_gpt2_head_alloc(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t W = (size_t)m->comm->world, C = (size_t)m->cfg.n_embd,
           N = (size_t)m->max_B * (size_t)m->max_T;
    m->stripe_rows = gk_gpt2_stripe_rows(m->head_rows, (int)W, C);
    size_t stripe = (W * m->stripe_rows + 1) * C * sizeof(float),
           tail = (tail_rows(m) + 1) * C * sizeof(float),
           sink = (size_t)m->max_T * C * sizeof(float);
    m->g_stripe = be->ops->alloc(be, stripe);
    m->g_tail = be->ops->alloc(be, tail);
    m->g_sink = be->ops->alloc(be, sink);
    m->d_rows = be->ops->alloc(be, N * sizeof(int));
    m->h_rows = malloc(N * sizeof(int));
    m->h_tokens = malloc(N * sizeof(int));
    if (!m->g_stripe || !m->g_tail || !m->g_sink || !m->d_rows || !m->h_rows || !m->h_tokens)
        return gk_errf(err, GK_ENOMEM, "zero_stage %d: out of memory for %zu bytes of the head's "
                       "gradient", m->zero, stripe + tail + sink + N * sizeof(int));
    return 0;
}

void gk_gpt2_head_free(gk_gpt2 *m)
{
    gk_backend *be = m->be;
    be->ops->free(be, m->g_stripe);
    be->ops->free(be, m->g_tail);
    be->ops->free(be, m->g_sink);
    be->ops->free(be, m->d_rows);
    free(m->h_rows);
    free(m->h_tokens);
    m->g_stripe = m->g_tail = m->g_sink = NULL;
    m->d_rows = m->h_rows = m->h_tokens = NULL;
}

/* dst (n rows of C, fp32) = dlogits[:, lo:lo + n]^T @ lnf over the last forward's N rows. */
static void lm_rows(gk_gpt2 *m, float *dst, size_t lo, size_t n, int N)
{
    gk_backend *be = m->be;
    int C = m->cfg.n_embd;
    const char *dlogits = (const char *)m->logits + gk_elt_bytes(m->act, lo);
    be->ops->gemm(be, 1, 0, (int)n, C, N, 1.0f, dlogits, m->act, m->Vp, m->lnf, m->act, C, 0.0f,
                  dst, GK_F32, C, NULL, NULL);
}

/* dwte's rows (h_rows: each token's row there) += the token's row of dres, dwpe += its
 * position's (the embedding's backward, with the forward's dropout). */
static void embed_rows(gk_gpt2 *m, float *dwte, float *dwpe, float p, uint64_t key)
{
    gk_backend *be = m->be;
    int B = m->last_B, T = m->last_T;
    be->ops->to_device(be, m->d_rows, m->h_rows, (size_t)B * (size_t)T * sizeof(int));
    be->ops->encoder_bwd(be, dwte, dwpe, m->dres, m->d_rows, B, T, m->cfg.n_embd, p, key);
}

/* The shard's n floats at to = from (the first backward after a zero_grad) or += from. */
static void fold(gk_gpt2 *m, float *to, const float *from, size_t n, int first)
{
    if (first) m->be->ops->copy(m->be, to, from, n * sizeof(float));
    else m->be->ops->add(m->be, to, from, n);
}

/* Stripe [at, at + n) of every rank's rows: made, summed, this rank's folded. */
static int stripe(gk_gpt2 *m, size_t at, size_t n, int first, int with_grads, float p,
                  uint64_t key, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t W = (size_t)c->world, C = (size_t)m->cfg.n_embd, P = m->head_rows;
    int N = m->last_B * m->last_T;
    m->be->ops->zero(m->be, m->g_stripe, (W * n + 1) * C * sizeof(float));
    if (with_grads) {
        for (size_t q = 0; q < W; q++) lm_rows(m, m->g_stripe + q * n * C, q * P + at, n, N);
        for (int i = 0; i < N; i++) { /* rank q's row at + k is the stripe's row q n + k */
            size_t id = (size_t)m->h_tokens[i], q = id / P, k = id - q * P;
            m->h_rows[i] = q < W && k >= at && k < at + n ? (int)(q * n + k - at) : (int)(W * n);
        }
        embed_rows(m, m->g_stripe, m->g_sink, p, key);
    }
    float *mine = m->g_stripe + (size_t)c->rank * n * C;
    int rc = c->ops->reduce_scatter(c, m->g_stripe, mine, n * C, err);
    if (!rc) fold(m, m->g_shard + m->buckets[0].at + at * C, mine, n * C, first);
    return rc;
}

int gk_gpt2_head_grads(gk_gpt2 *m, int first, int with_grads, float p, uint64_t key,
                       gk_err *err)
{
    gk_comm *c = m->comm;
    const gk_bucket *k = &m->buckets[0];
    size_t W = (size_t)c->world, C = (size_t)m->cfg.n_embd, P = m->head_rows;
    size_t S = m->stripe_rows, tf = tail_floats(m), tr = tail_rows(m), below = W * P;
    int rc = 0;
    for (size_t at = 0; !rc && at < P; at += S)
        rc = stripe(m, at, P - at < S ? P - at : S, first, with_grads, p, key, err);
    if (rc || !tf) return rc;
    m->be->ops->zero(m->be, m->g_tail, (tr + 1) * C * sizeof(float));
    if (with_grads) { /* wte's rows from W P on, then wpe (gg[G_WPE] points there) */
        int N = m->last_B * m->last_T;
        if ((size_t)m->Vp > below) lm_rows(m, m->g_tail, below, (size_t)m->Vp - below, N);
        for (int i = 0; i < N; i++) {
            size_t id = (size_t)m->h_tokens[i];
            m->h_rows[i] = id >= below ? (int)(id - below) : (int)tr;
        }
        embed_rows(m, m->g_tail, m->gg[G_WPE], p, key);
    }
    rc = c->ops->allreduce(c, m->g_tail, tf, err);
    if (!rc) fold(m, m->g_shard + k->at + k->piece, m->g_tail, tf, first);
    return rc;
}
