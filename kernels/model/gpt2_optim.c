/* gpt2_optim.c: zero_grad, global gradient norm, clipping and AdamW over the parameter table
 * (summing the gradients of all ranks first in a data-parallel run), and under ZeRO the update
 * of this rank's shard (the sharded moments' and gradients' storage is gpt2_shard.c's).
 * AdamW and the zeroing of the small gradient tensors each go to the backend as one table
 * (ops->adamw_multi, ops->zero_multi): one launch apiece on cuda, not one per tensor. */
#include <math.h>
#include <stdlib.h>

#include "kernels/model/gpt2_internal.h"

/* Zeroing is deferred to the next backward: the weight matrices' gradients (wte and the four
 * per layer, nearly all of g_block) are then written by their gemms with beta 0 instead of being
 * zeroed here and added to there, which saves a pass over g_block per step (0.5 GB for GPT-2
 * 124M). The small tensors are zeroed by the backward before it adds to them
 * (gk_gpt2_grads_begin). Everything that reads gradients other than the backward (grad_norm,
 * update) zeroes the whole block first if it is still pending, so the deferral is invisible. */
void gk_gpt2_zero_grad(gk_gpt2 *m)
{
    m->grads_pending_zero = m->g_block || m->g_shard;
    m->grads_reduced = 0;
}

/* Carries out a pending zero_grad on the whole block (ZeRO-2: on the shard, which the first
 * backward after a zero_grad overwrites instead). */
void gk_gpt2_grads_flush(gk_gpt2 *m)
{
    if (!m->grads_pending_zero) return;
    if (m->g_block) m->be->ops->zero(m->be, m->g_block, m->n_floats * sizeof(float));
    if (m->g_shard) m->be->ops->zero(m->be, m->g_shard, m->shard_floats * sizeof(float));
    m->grads_pending_zero = 0;
}

/* Start of a backward: returns the beta (0 or 1) for the weight-matrix gradient gemms. When a
 * zero_grad is pending, zeroes every other gradient tensor (biases, LayerNorm, wpe), since
 * their ops accumulate. Padded wte rows and alignment gaps stay zero: the dwte gemm writes zero
 * rows for the zero padded columns of dlogits, and the gaps are never written. */
float gk_gpt2_grads_begin(gk_gpt2 *m)
{
    if (!m->grads_pending_zero) return 1.0f;
    gk_gpt2_zero_small(m, 0, m->n_floats);
    m->grads_pending_zero = 0;
    return 0.0f;
}

void gk_gpt2_zero_small(gk_gpt2 *m, size_t lo, size_t hi)
{
    gk_span *sp = malloc(sizeof *sp * (size_t)m->n_params);
    int n = 0;
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        if ((p->ndim == 1 || p->grad == m->gg[G_WPE]) && p->offset >= lo && p->offset < hi) {
            if (!sp) m->be->ops->zero(m->be, p->grad, p->numel * sizeof(float));
            else sp[n].p = p->grad, sp[n++].n = p->numel * sizeof(float);
        }
    }
    if (sp) m->be->ops->zero_multi(m->be, sp, n); /* one launch on cuda */
    free(sp);
}

/* Padded rows and alignment gaps hold zero gradients, so the whole block can be summed at once. */
double gk_gpt2_grad_norm(gk_gpt2 *m)
{
    if (m->g_shard) return NAN; /* ZeRO-2: each rank its shard */
    if (!m->g_block) return 0.0; /* inference model */
    gk_gpt2_grads_flush(m);
    double s = 0;
    gk_err e;
    if (m->tp) return gk_gpt2_tp_norm(m, &s, &e) ? NAN : sqrt(s); /* (a collective on tp) */
    m->be->ops->sumsq(m->be, &s, m->g_block, m->n_floats);
    return sqrt(s);
}

/* 1 when update leaves everything alone: a norm not finite or above h->skip_norm. */
static int norm_skips(const gk_adamw *h, double norm)
{
    return !isfinite(norm) || (h->skip_norm > 0 && norm > h->skip_norm);
}

/* The clip factor of torch's clip_grad_norm_. */
static float clip_scale(const gk_adamw *h, double norm)
{
    /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to <= 1 */
    if (h->grad_clip <= 0) return 1.0f;
    float coef = (float)(h->grad_clip / (norm + 1e-6));
    return coef < 1.0f ? coef : 1.0f;
}

/* Appends to ts the slices of the tensors in the floats [a, b) of the parameter block, their
 * parameters at pp, gradients at g, moments at mm and vv (float a's), and their weight copies
 * (none at stage 3: the gathers cast them; none offloaded: the casts after the all-gather make
 * them); returns the new count. */
static int slices_of(const gk_gpt2 *m, gk_adamw_tensor *ts, int n, size_t a, size_t b, float *pp,
                     const float *g, float *mm, float *vv)
{
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        size_t lo = p->offset > a ? p->offset : a,
               hi = p->offset + p->numel < b ? p->offset + p->numel : b;
        if (lo >= hi) continue;
        size_t j = lo - p->offset;
        void *copy = p->copy && !m->p_shard && !m->offload
                         ? (char *)p->copy + j * gk_elt_size(m->wt) : NULL;
        ts[n++] = (gk_adamw_tensor){pp + (lo - a), g + (lo - a), mm + (lo - a), vv + (lo - a),
                                    copy,          hi - lo,      p->decay};
    }
    return n;
}

/* Bucket b's gradients of this rank: its piece (tail 0) or the tail (1): in the gradient shard
 * (ZeRO-2) or where update's reduce-scatter left them in g_block (ZeRO-1). */
static float *shard_grad(const gk_gpt2 *m, const gk_bucket *k, int tail)
{
    size_t W = (size_t)m->comm->world;
    if (m->g_shard) return m->g_shard + k->at + (tail ? k->piece : 0);
    return m->g_block + k->lo + (tail ? W : (size_t)m->comm->rank) * k->piece;
}

/* The sums of squares of the gradients of the block's floats [a, b) (at g), into s[0], or with
 * tensor parallel by tensor: the split ones' into s[0], the replicated ones' into s[1]. */
static void sumsq_range(gk_gpt2 *m, const float *g, size_t a, size_t b, double s[2])
{
    double x = 0;
    if (!m->tp) {
        if (b > a) m->be->ops->sumsq(m->be, &x, g, b - a);
        s[0] += x;
        return;
    }
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        size_t lo = p->offset > a ? p->offset : a,
               hi = p->offset + p->numel < b ? p->offset + p->numel : b;
        if (lo >= hi) continue;
        x = 0;
        m->be->ops->sumsq(m->be, &x, g + (lo - a), hi - lo);
        s[p->split == GK_SPLIT_NONE] += x;
    }
}

/* The global gradient norm: each rank's pieces, the tails counted once (by rank 0); with tensor
 * parallel the split tensors' sums over the group too (a replicated one is every rank's). */
static int global_norm(gk_gpt2 *m, double *norm, gk_err *err)
{
    gk_comm *c = m->comm;
    double s[2] = {0, 0};
    for (int b = 0; b < m->nbuckets; b++) {
        const gk_bucket *k = &m->buckets[b];
        size_t tail = gk_bucket_tail(k, c->world), mine = k->lo + (size_t)c->rank * k->piece,
               rest = k->lo + (size_t)c->world * k->piece;
        sumsq_range(m, shard_grad(m, k, 0), mine, mine + k->piece, s);
        if (tail && c->rank == 0) sumsq_range(m, shard_grad(m, k, 1), rest, rest + tail, s);
    }
    int rc = gk_backend_status(m->be, err);
    if (!rc) rc = c->ops->allreduce_host(c, s, 2, err);
    if (!rc && m->tp) rc = m->tp->ops->allreduce_host(m->tp, s, 1, err);
    *norm = sqrt(s[0] + s[1]);
    return rc;
}

/* ZeRO-1: the gradients reduce-scattered over the buckets (the tails all-reduced), unless the
 * backward summed them whole (reduce_in_next_backward). ZeRO-2's backward did. */
static int scatter_grads(gk_gpt2 *m, gk_err *err)
{
    gk_comm *c = m->comm;
    int rc = 0;
    if (m->zero == 1 && !m->grads_reduced)
        for (int b = 0; b < m->nbuckets && !rc; b++) {
            const gk_bucket *k = &m->buckets[b];
            size_t tail = gk_bucket_tail(k, c->world);
            if (k->piece)
                rc = c->ops->reduce_scatter(c, m->g_block + k->lo, shard_grad(m, k, 0), k->piece,
                                            err);
            if (!rc && tail) rc = c->ops->allreduce(c, shard_grad(m, k, 1), tail, err);
        }
    m->grads_reduced = 0;
    return rc;
}

/* The update under ZeRO (grads flushed): the global norm, AdamW on this rank's pieces and the
 * tails (offloaded: on the host, with the host's moments), each bucket's weights all-gathered
 * (stage 3: left in the shard, which the next forward gathers from). */
static int update_sharded(gk_gpt2 *m, const gk_adamw *h, float lr, double *grad_norm, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t W = (size_t)c->world, r = (size_t)c->rank;
    int rc = scatter_grads(m, err);
    double norm = NAN;
    if (!rc) rc = global_norm(m, &norm, err);
    if (grad_norm) *grad_norm = norm;
    if (rc || norm_skips(h, norm)) return rc ? rc : gk_backend_status(m->be, err);
    float scale = clip_scale(h, norm);
    /* every piece and tail: each splits at most one tensor more */
    size_t cap = (size_t)m->n_params + 2 * (size_t)m->nbuckets;
    gk_adamw_tensor *ts = malloc(sizeof *ts * cap);
    if (!ts) return gk_errf(err, GK_ENOMEM, "update: out of memory for %zu tensors", cap);
    int n = 0;
    float *ms = m->offload ? m->om : m->m_shard, *vs = m->offload ? m->ov : m->v_shard;
    for (int b = 0; b < m->nbuckets; b++) {
        const gk_bucket *k = &m->buckets[b];
        size_t mine = k->lo + r * k->piece, tail = k->lo + W * k->piece;
        float *pp = m->p_shard ? m->p_shard + k->at : m->p_block + mine,
              *pt = m->p_shard ? m->p_shard + k->at + k->piece : m->p_block + tail;
        n = slices_of(m, ts, n, mine, mine + k->piece, pp, shard_grad(m, k, 0), ms + k->at,
                      vs + k->at);
        n = slices_of(m, ts, n, tail, k->lo + k->n, pt, shard_grad(m, k, 1),
                      ms + k->at + k->piece, vs + k->at + k->piece);
    }
    m->step++;
    if (m->offload) {
        rc = gk_gpt2_offload_sharded(m, h, lr, scale, ts, n, err);
    } else {
        m->be->ops->adamw_multi(m->be, ts, n, lr, h->beta1, h->beta2, h->eps, h->weight_decay,
                                (int)m->step, scale, m->wt);
        rc = gk_backend_status(m->be, err);
    }
    free(ts);
    if (rc) return rc;
    if (m->p_shard) {
        gk_gpt2_params_stale(m);
        return 0;
    }
    for (int b = 0; b < m->nbuckets && !rc; b++) {
        const gk_bucket *k = &m->buckets[b];
        if (k->piece)
            rc = c->ops->all_gather(c, m->p_block + k->lo + r * k->piece, m->p_block + k->lo,
                                    k->piece, err);
    }
    if (rc) return rc;
    for (int i = 0; i < m->n_params; i++) { /* the other shards' weight copies */
        const gk_param *p = &m->params[i];
        if (p->copy) m->be->ops->cast(m->be, p->copy, m->wt, p->data, GK_F32, p->numel);
    }
    return gk_backend_status(m->be, err);
}

int gk_gpt2_update(gk_gpt2 *m, const gk_adamw *h, float lr, double *grad_norm, gk_err *err)
{
    gk_backend *be = m->be;
    if (m->flags & GK_GPT2_INFERENCE)
        return gk_errf(err, GK_EUSAGE, "update: an inference model has no optimizer");
    gk_gpt2_grads_flush(m);
    if (m->zero) return update_sharded(m, h, lr, grad_norm, err);
    if ((!m->m_block && !m->offload) || !m->g_block)
        return gk_errf(err, GK_EUSAGE, "update: the AdamW moments or gradients are not allocated "
                       "yet (GK_GPT2_DEFER_MOMENTS, GK_GPT2_DEFER_GRADS: gk_gpt2_set_comm first)");
    if (m->comm && m->comm->world > 1 && !m->grads_reduced) {
        int rc = m->comm->ops->allreduce(m->comm, m->g_block, m->n_floats, err);
        if (rc) return rc;
    }
    m->grads_reduced = 0;
    double norm = 0;
    if (m->tp) { /* the whole model's norm from the parts: its collective's error returned */
        int rc = gk_gpt2_tp_norm(m, &norm, err);
        if (rc) return rc;
        norm = sqrt(norm);
    } else {
        norm = gk_gpt2_grad_norm(m);
    }
    if (grad_norm) *grad_norm = norm;
    if (norm_skips(h, norm)) return gk_backend_status(be, err); /* the caller decides */
    float scale = clip_scale(h, norm);
    if (m->offload) return gk_gpt2_offload_update(m, h, lr, scale, err);
    gk_adamw_tensor *ts = malloc(sizeof *ts * (size_t)m->n_params);
    if (!ts) return gk_errf(err, GK_ENOMEM, "update: out of memory for %d tensors", m->n_params);
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        /* numel is logical: wte's padded rows (zero, zero grads) are left alone */
        ts[i] = (gk_adamw_tensor){p->data, p->grad, p->m, p->v, p->copy, p->numel, p->decay};
    }
    m->step++;
    be->ops->adamw_multi(be, ts, m->n_params, lr, h->beta1, h->beta2, h->eps, h->weight_decay,
                         (int)m->step, scale, m->wt); /* one launch on cuda */
    free(ts);
    return gk_backend_status(be, err);
}
