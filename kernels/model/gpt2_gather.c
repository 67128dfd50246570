/* gpt2_gather.c: ZeRO-3's parameters (gk_gpt2_set_comm with zero_stage 3). Each rank keeps the
 * fp32 parameters of its shard only (p_shard: its pieces and the tails of gpt2_shard.c's
 * buckets, which AdamW updates in place), and a bucket's parameters are all-gathered into one of
 * three buffers just before the forward or the backward reads them: wte and wpe into p_head
 * (once a pass: the embedding and the tied lm_head both read them, in the forward and in the
 * backward), layer l's into p_layer[l % 2] (two are held: the forward's layer l also reads layer
 * l + 1's ln_1, and the backward's layer l writes while layer l - 1's is gathered), with the
 * bf16 copies of the weight matrices cast there from the gathered fp32. A buffer that still holds
 * a bucket as the shard is now is not gathered again: the backward's first two layers are the
 * forward's last two, and the next forward's first is the backward's last. The parameter and copy
 * pointers (gk_param.data and .copy, LP, LW, gp, gw) point into the buffers for good. Where the
 * head bucket is cut in rows of wte (head_rows), wte is never gathered whole: gpt2_head.c reads
 * it a stripe at a time, and wpe in this rank's tail of the shard; p_head is not made. */
#include "kernels/model/gpt2_internal.h"

float *gk_gpt2_param_at(const gk_gpt2 *m, size_t off)
{
    if (!m->p_shard) return m->p_block + off;
    if (off < m->layers_at && m->p_stripe) { /* wte a stripe at a time: the tail read in place */
        const gk_bucket *k = &m->buckets[0];
        size_t below = k->piece * (size_t)m->comm->world;
        return off >= below ? m->p_shard + k->at + k->piece + (off - below) : NULL;
    }
    if (off < m->layers_at) return m->p_head + off;
    size_t lo, hi;
    int b = gk_gpt2_bucket_of(m, off);
    gk_gpt2_bwd_bucket(m, b, &lo, &hi);
    return m->p_layer[(b - 1) % 2] + (off - lo);
}

void *gk_gpt2_copy_at(const gk_gpt2 *m, size_t coff)
{
    if (!m->p_shard) return (char *)m->w_block + gk_elt_bytes(m->wt, coff);
    if (coff < m->copies_at && m->p_stripe) return NULL; /* (wte's: a stripe's, gpt2_head.c) */
    if (coff < m->copies_at) return (char *)m->w_head + gk_elt_bytes(m->wt, coff);
    size_t stride = (m->n_copy - m->copies_at) / (size_t)m->cfg.n_layer;
    size_t l = (coff - m->copies_at) / stride;
    return (char *)m->w_layer[l % 2] + gk_elt_bytes(m->wt, coff - m->copies_at - l * stride);
}

int gk_gpt2_shard_params(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t lo, hi, L = (size_t)m->cfg.n_layer;
    gk_gpt2_bwd_bucket(m, m->cfg.n_layer, &lo, &hi); /* the largest layer's (with ln_f) */
    size_t head = m->layers_at * sizeof(float), layer = (hi - lo) * sizeof(float);
    size_t whead = m->n_copy ? gk_elt_bytes(m->wt, m->copies_at) : 0,
           wlayer = m->n_copy ? gk_elt_bytes(m->wt, (m->n_copy - m->copies_at) / L) : 0;
    /* the shard first, and the buffers once the whole block and copies are gone: the peak is the
     * block and the shard, not the block and all the buffers */
    if (!(m->p_shard = be->ops->alloc(be, m->shard_floats * sizeof(float))))
        return gk_errf(err, GK_ENOMEM, "zero_stage 3: out of memory for %zu bytes of sharded "
                       "parameters", m->shard_floats * sizeof(float));
    gk_gpt2_shard_copy(m, m->p_block, m->p_shard, 1);
    be->ops->free(be, m->p_block);
    be->ops->free(be, m->w_block);
    m->p_block = NULL;
    m->w_block = NULL;
    int ok = 1;
    if (m->head_rows) { /* wte a stripe at a time (gpt2_head.c) */
        int rc = gk_gpt2_head_weights(m, err);
        if (rc) return rc;
    } else {
        m->p_head = be->ops->alloc(be, head);
        ok = m->p_head && (!whead || (m->w_head = be->ops->alloc(be, whead)));
    }
    for (int k = 0; k < 2; k++) {
        ok = ok && (m->p_layer[k] = be->ops->alloc(be, layer));
        ok = ok && (!wlayer || (m->w_layer[k] = be->ops->alloc(be, wlayer)));
    }
    if (!ok)
        return gk_errf(err, GK_ENOMEM, "zero_stage 3: out of memory for %zu bytes of gathered "
                       "parameters", head + whead + 2 * (layer + wlayer));
    m->prefetch = -1;
    gk_gpt2_params_stale(m);
    gk_gpt2_point_all(m);
    return gk_backend_status(be, err);
}

int gk_gpt2_params_held(const gk_gpt2 *m, int b)
{
    return !m->p_shard || (b == 0 && m->p_stripe) || m->gathered[b == 0 ? 0 : 1 + (b - 1) % 2] == b;
}

/* Bucket b's buffer: 0 p_head, 1 + (b - 1) % 2 p_layer's. */
static int slot_of(int b) { return b == 0 ? 0 : 1 + (b - 1) % 2; }

/* Bucket b's pieces all-gathered into its buffer (only started when start) and its tail copied
 * there from the shard. */
static int gather_pieces(gk_gpt2 *m, int b, int start)
{
    gk_backend *be = m->be;
    gk_comm *c = m->comm;
    const gk_bucket *k = &m->buckets[b];
    float *to = b == 0 ? m->p_head : m->p_layer[(b - 1) % 2];
    size_t W = (size_t)c->world, tail = gk_bucket_tail(k, c->world);
    int rc = 0;
    if (k->piece && start)
        rc = c->ops->all_gather_start(c, m->p_shard + k->at, to, k->piece, &m->gather_err);
    else if (k->piece)
        rc = c->ops->all_gather(c, m->p_shard + k->at, to, k->piece, &m->gather_err);
    if (!rc && tail)
        be->ops->copy(be, to + W * k->piece, m->p_shard + k->at + k->piece, tail * sizeof(float));
    return rc;
}

/* Bucket b gathered (rc 0) or not: its weight copies cast from the fp32, the buffer marked. */
static void mark_gathered(gk_gpt2 *m, int b, int rc)
{
    const gk_bucket *k = &m->buckets[b];
    for (int i = 0; !rc && i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        if (p->copy && p->offset >= k->lo && p->offset < k->lo + k->n)
            m->be->ops->cast(m->be, p->copy, m->wt, p->data, GK_F32, p->numel);
    }
    m->gathered[slot_of(b)] = rc ? -1 : b;
    if (rc) m->gather_rc = rc;
}

/* The started gather, if any, waited for (with every collective started before it). */
static void prefetch_end(gk_gpt2 *m)
{
    int b = m->prefetch;
    if (b < 0) return;
    m->prefetch = -1;
    mark_gathered(m, b, m->comm->ops->started_wait(m->comm, 0, &m->gather_err));
}

void gk_gpt2_params_prefetch(gk_gpt2 *m, int b)
{
    if (!m->p_shard || m->gather_rc || m->prefetch >= 0 || gk_gpt2_params_held(m, b) ||
        !m->comm->ops->all_gather_start)
        return;
    m->gathered[slot_of(b)] = -1; /* (its buffer is being written) */
    int rc = gather_pieces(m, b, 1);
    if (rc) mark_gathered(m, b, rc);
    else m->prefetch = b;
}

void gk_gpt2_params_need(gk_gpt2 *m, int b)
{
    if (!m->p_shard) return;
    prefetch_end(m); /* (no collective while one is started) */
    if (m->gather_rc || gk_gpt2_params_held(m, b)) return;
    mark_gathered(m, b, gather_pieces(m, b, 0));
}

void gk_gpt2_params_stale(gk_gpt2 *m)
{
    if (m->p_shard) prefetch_end(m);
    for (int k = 0; k < 3; k++) m->gathered[k] = -1;
}

int gk_gpt2_pass_status(gk_gpt2 *m, gk_err *err)
{
    int rc = gk_backend_status(m->be, err);
    if (rc || !m->gather_rc) return rc;
    *err = m->gather_err; /* kept: the comm is broken for good */
    return m->gather_rc;
}
