/* gpt2_head.c: ZeRO-2 and 3's head (wte, wpe) a stripe at a time, so that no rank holds wte's
 * gradient, nor at stage 3 its weights, whole (gpt2_internal.h: head_rows). ZeRO's layout cuts
 * the head bucket in whole rows of wte (gpt2_shard.c); a stripe is the next rows of every rank's
 * piece (about 4 MB in all), and the tail (wte's last rows and wpe) every rank's own.
 * Gradient: the backward makes the head's at its end, once the embedding's is known too, stripe
 * by stripe: dlogits^T @ lnf for its rows (a gemm a rank's range, from the logits, which hold
 * dlogits through the backward) plus the rows of dres of the tokens there (the encoder's
 * backward, the other tokens sent to a spare row), reduce-scattered so that each rank folds its
 * own rows into its shard; then the tail alike, all-reduced.
 * Weights (stage 3): each stripe all-gathered (into p_stripe and g_stripe in turn, the next
 * one's gather started as one is read), then the tail's rows, for the lm_head (its
 * columns of the logits), the backward's dlnf (summed in float32) and the embedding (each
 * token's row picked from the stripe that holds it into a float32 table, which a last encoder
 * pass over the rows in order turns into the forward's embedding, with wpe and dropout: stage
 * 0's bits): three all-gathers of wte a micro-step, a stripe at a time, where whole it was
 * gathered once a step. */
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

/* The floats of a stripe's buffer (every rank's stripe_rows rows and a spare row), the stripes,
 * and stripe j's rows of each rank's and buffer: g_stripe holds two, so that a stripe is made
 * while the one before is summed. */
static size_t stripe_floats(const gk_gpt2 *m)
{
    return ((size_t)m->comm->world * m->stripe_rows + 1) * (size_t)m->cfg.n_embd;
}
static size_t stripe_count(const gk_gpt2 *m)
{
    return (m->head_rows + m->stripe_rows - 1) / m->stripe_rows;
}
static size_t stripe_n(const gk_gpt2 *m, size_t j)
{
    size_t at = j * m->stripe_rows;
    return m->head_rows - at < m->stripe_rows ? m->head_rows - at : m->stripe_rows;
}
static float *grad_buf(const gk_gpt2 *m, size_t j)
{
    return m->g_stripe + j % 2 * stripe_floats(m);
}

int gk_gpt2_head_alloc(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t W = (size_t)m->comm->world, C = (size_t)m->cfg.n_embd,
           N = (size_t)m->max_B * (size_t)m->max_T;
    m->stripe_rows = gk_gpt2_stripe_rows(m->head_rows, (int)W, C);
    size_t stripe = 2 * stripe_floats(m) * sizeof(float), /* (two: stripe_start) */
           tail = (tail_rows(m) + 1) * C * sizeof(float),
           sink = (size_t)m->max_T * C * sizeof(float);
    m->g_stripe = be->ops->alloc(be, stripe);
    m->g_tail = be->ops->alloc(be, tail);
    m->g_sink = be->ops->alloc(be, sink);
    m->d_rows = be->ops->alloc(be, N * sizeof(int));
    m->h_rows = malloc(N * sizeof(int));
    m->h_tokens = malloc(N * sizeof(int));
    if (!m->g_stripe || !m->g_tail || !m->g_sink || !m->d_rows || !m->h_rows || !m->h_tokens)
        return gk_errf(err, GK_ENOMEM, "ZeRO: out of memory for %zu bytes of the head's gradient",
                       stripe + tail + sink + N * sizeof(int));
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
    be->ops->free(be, m->p_stripe);
    be->ops->free(be, m->w_stripe);
    be->ops->free(be, m->e_rows);
    be->ops->free(be, m->e_tmp);
    be->ops->free(be, m->d_ident);
    m->g_stripe = m->g_tail = m->g_sink = m->p_stripe = m->e_rows = m->e_tmp = NULL;
    m->d_rows = m->h_rows = m->h_tokens = m->d_ident = NULL;
    m->w_stripe = NULL;
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

/* Stripe j (rows [j S, + n) of every rank's) made in its buffer and its sum started (this rank's
 * rows in place), where the comm starts them; else summed now. */
static int stripe_start(gk_gpt2 *m, size_t j, int with_grads, float p, uint64_t key, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t W = (size_t)c->world, C = (size_t)m->cfg.n_embd, P = m->head_rows;
    size_t at = j * m->stripe_rows, n = stripe_n(m, j);
    float *buf = grad_buf(m, j), *mine = buf + (size_t)c->rank * n * C;
    int N = m->last_B * m->last_T;
    m->be->ops->zero(m->be, buf, (W * n + 1) * C * sizeof(float));
    if (with_grads) {
        for (size_t q = 0; q < W; q++) lm_rows(m, buf + q * n * C, q * P + at, n, N);
        for (int i = 0; i < N; i++) { /* rank q's row at + k is the stripe's row q n + k */
            size_t id = (size_t)m->h_tokens[i], q = id / P, k = id - q * P;
            m->h_rows[i] = q < W && k >= at && k < at + n ? (int)(q * n + k - at) : (int)(W * n);
        }
        embed_rows(m, buf, m->g_sink, p, key);
    }
    if (!c->ops->reduce_scatter_start) return c->ops->reduce_scatter(c, buf, mine, n * C, err);
    return c->ops->reduce_scatter_start(c, buf, mine, n * C, err);
}

/* Stripe j's sum waited for (with every sum started before the last keep) and this rank's rows
 * folded into the shard. */
static int stripe_end(gk_gpt2 *m, size_t j, int first, int keep, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t C = (size_t)m->cfg.n_embd, n = stripe_n(m, j);
    int rc = c->ops->reduce_scatter_start ? c->ops->started_wait(c, keep, err) : 0;
    if (!rc)
        fold(m, m->g_shard + m->buckets[0].at + j * m->stripe_rows * C,
             grad_buf(m, j) + (size_t)c->rank * n * C, n * C, first);
    return rc;
}

/* The tail's gradient (wte's rows from W P on, then wpe: gg[G_WPE] points there) into g_tail. */
static void tail_grads(gk_gpt2 *m, int with_grads, float p, uint64_t key)
{
    size_t C = (size_t)m->cfg.n_embd, tr = tail_rows(m),
           below = (size_t)m->comm->world * m->head_rows;
    m->be->ops->zero(m->be, m->g_tail, (tr + 1) * C * sizeof(float));
    if (!with_grads) return;
    int N = m->last_B * m->last_T;
    if ((size_t)m->Vp > below) lm_rows(m, m->g_tail, below, (size_t)m->Vp - below, N);
    for (int i = 0; i < N; i++) {
        size_t id = (size_t)m->h_tokens[i];
        m->h_rows[i] = id >= below ? (int)(id - below) : (int)tr;
    }
    embed_rows(m, m->g_tail, m->gg[G_WPE], p, key);
}

int gk_gpt2_head_grads(gk_gpt2 *m, int first, int with_grads, float p, uint64_t key,
                       gk_err *err)
{
    gk_comm *c = m->comm;
    const gk_bucket *k = &m->buckets[0];
    size_t tf = tail_floats(m), stripes = stripe_count(m);
    int rc = 0;
    for (size_t j = 0; !rc && j < stripes; j++) { /* stripe j made while j - 1 is summed */
        rc = stripe_start(m, j, with_grads, p, key, err);
        if (!rc && j > 0) rc = stripe_end(m, j - 1, first, 1, err);
    }
    if (tf && !rc) tail_grads(m, with_grads, p, key); /* (while the last stripe is summed) */
    if (!rc) rc = stripe_end(m, stripes - 1, first, 0, err);
    if (rc && c->ops->reduce_scatter_start) { /* (none left started: the comm is broken) */
        gk_err ignored;
        c->ops->started_wait(c, 0, &ignored);
    }
    if (rc || !tf) return rc;
    rc = c->ops->allreduce(c, m->g_tail, tf, err);
    if (!rc) fold(m, m->g_shard + k->at + k->piece, m->g_tail, tf, first);
    return rc;
}

/* ---- stage 3: the weights ---- */

/* The rows of wte a part holds: count ranges, range q rows [lo + q step, + n) of wte at row q n
 * of p_stripe (w_stripe). */
typedef struct head_part {
    size_t lo, step, n;
    int count;
} head_part;

int gk_gpt2_head_weights(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t W = (size_t)m->comm->world, C = (size_t)m->cfg.n_embd,
           N = (size_t)m->max_B * (size_t)m->max_T;
    m->stripe_rows = gk_gpt2_stripe_rows(m->head_rows, (int)W, C);
    size_t rows = W * m->stripe_rows + 1; /* (and the zero row) */
    m->p_stripe = be->ops->alloc(be, rows * C * sizeof(float));
    if (m->wt != GK_F32) m->w_stripe = be->ops->alloc(be, gk_elt_bytes(m->wt, rows * C));
    m->e_rows = be->ops->alloc(be, N * C * sizeof(float));
    if (m->act != GK_F32) m->e_tmp = be->ops->alloc(be, N * C * sizeof(float));
    m->d_ident = be->ops->alloc(be, N * sizeof(int));
    int *ident = malloc(N * sizeof(int));
    int ok = m->p_stripe && (m->wt == GK_F32 || m->w_stripe) && m->e_rows &&
             (m->act == GK_F32 || m->e_tmp) && m->d_ident && ident;
    if (ok) {
        for (size_t i = 0; i < N; i++) ident[i] = (int)i;
        be->ops->to_device(be, m->d_ident, ident, N * sizeof(int));
        be->ops->zero(be, m->p_stripe, rows * C * sizeof(float));
        if (m->w_stripe) be->ops->zero(be, m->w_stripe, gk_elt_bytes(m->wt, rows * C));
    }
    free(ident);
    if (!ok)
        return gk_errf(err, GK_ENOMEM, "zero_stage 3: out of memory for a stripe of wte and the "
                       "embedding's rows (%zu bytes)", (rows + 2 * N) * C * sizeof(float));
    return gk_backend_status(be, err);
}

/* Stripes and the tail: the parts head_load loads. */
static size_t head_parts(const gk_gpt2 *m)
{
    return stripe_count(m) + ((size_t)m->Vp > (size_t)m->comm->world * m->head_rows);
}

/* The buffer part j is loaded into: p_stripe and g_stripe in turn (the gradient's stripe, free
 * but at the backward's end), so that the next part's gather runs while this one's is read. */
static float *part_buf(const gk_gpt2 *m, size_t j)
{
    return j % 2 ? m->g_stripe : m->p_stripe;
}

/* Part j's gather started where the comm starts them (not the tail's rows, which are copied);
 * 0 or the error, kept as the gathers' are. */
static int part_start(gk_gpt2 *m, size_t j)
{
    gk_comm *c = m->comm;
    size_t C = (size_t)m->cfg.n_embd, at = j * m->stripe_rows;
    if (at >= m->head_rows || !c->ops->all_gather_start) return 0;
    int rc = c->ops->all_gather_start(c, m->p_shard + m->buckets[0].at + at * C, part_buf(m, j),
                                      stripe_n(m, j) * C, &m->gather_err);
    return rc ? (m->gather_rc = rc) : 0;
}

/* The parts to load, with the first one's gather started; 0 after a failure. */
static size_t head_begin(gk_gpt2 *m)
{
    return m->gather_rc || part_start(m, 0) ? 0 : head_parts(m);
}

/* Part j (head_begin started it) into its buffer (stripe j all-gathered; the last part, the
 * tail's rows, copied from the shard), part j + 1's gather started, its rows cast into w_stripe
 * (16-bit weights); what they are into *h, and their weights (w_stripe, or the buffer for
 * float32 ones) into *w. 0 or the gather's error, kept as the gathers' are. */
static int head_load(gk_gpt2 *m, size_t j, head_part *h, const void **w)
{
    gk_backend *be = m->be;
    gk_comm *c = m->comm;
    const gk_bucket *k = &m->buckets[0];
    size_t W = (size_t)c->world, C = (size_t)m->cfg.n_embd, P = m->head_rows, S = m->stripe_rows;
    size_t at = j * S;
    float *buf = part_buf(m, j);
    if (at < P) { /* stripe j */
        size_t n = stripe_n(m, j);
        int rc = c->ops->all_gather_start
                     ? c->ops->started_wait(c, 0, &m->gather_err)
                     : c->ops->all_gather(c, m->p_shard + k->at + at * C, buf, n * C,
                                          &m->gather_err);
        if (rc) return m->gather_rc = rc;
        *h = (head_part){at, P, n, (int)W};
    } else { /* the tail's rows of wte */
        size_t n = (size_t)m->Vp - W * P;
        be->ops->copy(be, buf, m->p_shard + k->at + k->piece, n * C * sizeof(float));
        *h = (head_part){W * P, 0, n, 1};
    }
    if (j + 1 < head_parts(m) && part_start(m, j + 1)) return m->gather_rc;
    if (m->w_stripe)
        be->ops->cast(be, m->w_stripe, m->wt, buf, GK_F32, (size_t)h->count * h->n * C);
    *w = m->w_stripe ? m->w_stripe : (const void *)buf;
    return 0;
}

/* Range q's rows of the weights w, and column col of the logits, as pointers. */
static const void *rows_at(const gk_gpt2 *m, const void *w, const head_part *h, int q)
{
    return (const char *)w + gk_elt_bytes(m->wt, (size_t)q * h->n * (size_t)m->cfg.n_embd);
}
static void *logits_at(const gk_gpt2 *m, size_t col)
{
    return (char *)m->logits + gk_elt_bytes(m->act, col);
}

void gk_gpt2_head_logits(gk_gpt2 *m, int N)
{
    gk_backend *be = m->be;
    int C = m->cfg.n_embd;
    head_part h;
    const void *w;
    for (size_t j = 0, parts = head_begin(m); j < parts; j++) {
        if (head_load(m, j, &h, &w)) return;
        for (int q = 0; q < h.count; q++) /* logits[:, lo:lo + n] = lnf @ rows^T */
            be->ops->gemm(be, 0, 1, N, (int)h.n, C, 1.0f, m->lnf, m->act, C, rows_at(m, w, &h, q),
                          m->wt, C, 0.0f, logits_at(m, h.lo + (size_t)q * h.step), m->act, m->Vp,
                          NULL, NULL);
    }
}

void gk_gpt2_head_dlnf(gk_gpt2 *m, void *dx, int N)
{
    gk_backend *be = m->be;
    int C = m->cfg.n_embd, first = 1;
    head_part h;
    const void *w;
    for (size_t j = 0, parts = head_begin(m); j < parts; j++) {
        if (head_load(m, j, &h, &w)) return;
        for (int q = 0; q < h.count; q++, first = 0) /* e_rows (+)= dlogits[:, lo:lo + n] @ rows */
            be->ops->gemm(be, 0, 0, N, C, (int)h.n, 1.0f, logits_at(m, h.lo + (size_t)q * h.step),
                          m->act, m->Vp, rows_at(m, w, &h, q), m->wt, C, first ? 0.0f : 1.0f,
                          m->e_rows, GK_F32, C, NULL, NULL);
    }
    be->ops->cast(be, dx, m->act, m->e_rows, GK_F32, (size_t)N * (size_t)C);
}

void gk_gpt2_head_gathers(gk_gpt2 *m)
{
    head_part h;
    const void *w;
    for (size_t j = 0, parts = head_begin(m); j < parts; j++)
        if (head_load(m, j, &h, &w)) return;
}

/* Each token's row in part h (p_stripe's), or the zero row after the stripe's, into h_rows. */
static void rows_of(gk_gpt2 *m, const head_part *h, int N)
{
    size_t zero = (size_t)m->comm->world * m->stripe_rows;
    for (int i = 0; i < N; i++) {
        size_t id = (size_t)m->h_tokens[i], q = h->step ? id / h->step : 0;
        size_t k = id - q * h->step; /* (its row in range q, if any) */
        int in = q < (size_t)h->count && k >= h->lo && k < h->lo + h->n;
        m->h_rows[i] = (int)(in ? q * h->n + (k - h->lo) : zero);
    }
}

void gk_gpt2_head_embed(gk_gpt2 *m, void *out, int B, int T, const int *t0, float p,
                        uint64_t key)
{
    gk_backend *be = m->be;
    int C = m->cfg.n_embd, N = B * T;
    size_t n = (size_t)N * (size_t)C;
    head_part h;
    const void *w;
    be->ops->zero(be, m->e_rows, n * sizeof(float));
    be->ops->zero(be, m->g_sink, (size_t)T * (size_t)C * sizeof(float)); /* (a zero wpe) */
    if (!m->w_stripe) /* (the zero row of g_stripe's parts, which the backward wrote) */
        be->ops->zero(be, part_buf(m, 1) + (size_t)m->comm->world * m->stripe_rows * (size_t)C,
                      (size_t)C * sizeof(float));
    for (size_t j = 0, parts = head_begin(m); j < parts; j++) {
        if (head_load(m, j, &h, &w)) return;
        rows_of(m, &h, N);
        be->ops->to_device(be, m->d_rows, m->h_rows, (size_t)N * sizeof(int));
        be->ops->encoder_fwd(be, out, m->d_rows, w, m->wt, m->g_sink, NULL, B, T, C, 0.0f, 0);
        if (m->act != GK_F32) be->ops->cast(be, m->e_tmp, GK_F32, out, m->act, n);
        be->ops->add(be, m->e_rows, m->act != GK_F32 ? m->e_tmp : (const float *)out, n);
    }
    /* the rows in order, as the forward's embedding: wte's row + wpe's, dropped out */
    be->ops->encoder_fwd(be, out, m->d_ident, m->e_rows, GK_F32, m->gp[G_WPE], t0, B, T, C, p,
                         key);
}
