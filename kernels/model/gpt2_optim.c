/* gpt2_optim.c: zero_grad, global gradient norm, clipping and AdamW over the parameter table
 * (summing the gradients of all ranks first in a data-parallel run), and under ZeRO-1 the update
 * of this rank's shard (the sharded moments' storage is gpt2_shard.c's).
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
    m->grads_pending_zero = m->g_block != NULL;
    m->grads_reduced = 0;
}

/* Carries out a pending zero_grad on the whole block. */
void gk_gpt2_grads_flush(gk_gpt2 *m)
{
    if (!m->grads_pending_zero) return;
    m->be->ops->zero(m->be, m->g_block, m->n_floats * sizeof(float));
    m->grads_pending_zero = 0;
}

/* Start of a backward: returns the beta (0 or 1) for the weight-matrix gradient gemms. When a
 * zero_grad is pending, zeroes every other gradient tensor (biases, LayerNorm, wpe), since
 * their ops accumulate. Padded wte rows and alignment gaps stay zero: the dwte gemm writes zero
 * rows for the zero padded columns of dlogits, and the gaps are never written. */
float gk_gpt2_grads_begin(gk_gpt2 *m)
{
    if (!m->grads_pending_zero) return 1.0f;
    gk_span *sp = malloc(sizeof *sp * (size_t)m->n_params);
    if (!sp) { /* one range at a time then */
        gk_gpt2_grads_flush(m);
        return 0.0f;
    }
    int n = 0;
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        if (p->ndim == 1 || p->grad == m->gg[G_WPE])
            sp[n].p = p->grad, sp[n++].n = p->numel * sizeof(float);
    }
    m->be->ops->zero_multi(m->be, sp, n); /* one launch on cuda */
    free(sp);
    m->grads_pending_zero = 0;
    return 0.0f;
}

/* Padded rows and alignment gaps hold zero gradients, so the whole block can be summed at once. */
double gk_gpt2_grad_norm(gk_gpt2 *m)
{
    if (!m->g_block) return 0.0; /* inference model */
    gk_gpt2_grads_flush(m);
    double s = 0;
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
 * moments at mom + (a - base); returns the new count. */
static int slices_of(const gk_gpt2 *m, gk_adamw_tensor *ts, int n, size_t a, size_t b, size_t base,
                     float *mm, float *vv)
{
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        size_t lo = p->offset > a ? p->offset : a,
               hi = p->offset + p->numel < b ? p->offset + p->numel : b;
        if (lo >= hi) continue;
        size_t j = lo - p->offset;
        void *copy = p->copy ? (char *)p->copy + j * gk_elt_size(m->wt) : NULL;
        ts[n++] = (gk_adamw_tensor){p->data + j, p->grad + j, mm + (lo - base), vv + (lo - base),
                                    copy,        hi - lo,     p->decay};
    }
    return n;
}

/* The global gradient norm: each rank's shard, the tail counted once (by rank 0). */
static int global_norm(gk_gpt2 *m, double *norm, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t cnt = m->shard_count, tail = gk_gpt2_shard_tail(m);
    double s = 0, t = 0;
    m->be->ops->sumsq(m->be, &s, m->g_block + (size_t)c->rank * cnt, cnt);
    if (tail && c->rank == 0)
        m->be->ops->sumsq(m->be, &t, m->g_block + cnt * (size_t)c->world, tail);
    s += t;
    int rc = gk_backend_status(m->be, err);
    if (!rc) rc = c->ops->allreduce_host(c, &s, 1, err);
    *norm = sqrt(s);
    return rc;
}

/* The update under ZeRO-1 (grads flushed): gradients reduce-scattered, AdamW on this rank's
 * shard and the tail, the weights all-gathered. */
static int update_sharded(gk_gpt2 *m, const gk_adamw *h, float lr, double *grad_norm, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t cnt = m->shard_count, tail = gk_gpt2_shard_tail(m), lo = (size_t)c->rank * cnt,
           main = cnt * (size_t)c->world;
    int rc = 0;
    if (!m->grads_reduced) { /* else summed whole during the backward (reduce_in_next_backward) */
        rc = c->ops->reduce_scatter(c, m->g_block, m->g_block + lo, cnt, err);
        if (!rc && tail) rc = c->ops->allreduce(c, m->g_block + main, tail, err);
    }
    m->grads_reduced = 0;
    double norm = NAN;
    if (!rc) rc = global_norm(m, &norm, err);
    if (grad_norm) *grad_norm = norm;
    if (rc || norm_skips(h, norm)) return rc ? rc : gk_backend_status(m->be, err);
    float scale = clip_scale(h, norm);
    /* this rank's shard and the tail: at most every tensor twice */
    gk_adamw_tensor *ts = malloc(sizeof *ts * 2 * (size_t)m->n_params);
    if (!ts) return gk_errf(err, GK_ENOMEM, "update: out of memory for %d tensors", m->n_params);
    int n = slices_of(m, ts, 0, lo, lo + cnt, lo, m->m_shard, m->v_shard);
    if (tail) n = slices_of(m, ts, n, main, m->n_floats, main - cnt, m->m_shard, m->v_shard);
    m->step++;
    m->be->ops->adamw_multi(m->be, ts, n, lr, h->beta1, h->beta2, h->eps, h->weight_decay,
                            (int)m->step, scale, m->wt);
    free(ts);
    if ((rc = gk_backend_status(m->be, err))) return rc;
    if ((rc = c->ops->all_gather(c, m->p_block + lo, m->p_block, cnt, err))) return rc;
    for (int i = 0; i < m->n_params; i++) { /* the other shards' weight copies */
        const gk_param *p = &m->params[i];
        if (p->copy) m->be->ops->cast(m->be, p->copy, m->wt, p->data, GK_F32, p->numel);
    }
    return gk_backend_status(m->be, err);
}

int gk_gpt2_update(gk_gpt2 *m, const gk_adamw *h, float lr, double *grad_norm, gk_err *err)
{
    gk_backend *be = m->be;
    if (!m->g_block) return gk_errf(err, GK_EUSAGE, "update: an inference model has no optimizer");
    gk_gpt2_grads_flush(m);
    if (m->zero) return update_sharded(m, h, lr, grad_norm, err);
    if (!m->m_block)
        return gk_errf(err, GK_EUSAGE, "update: the AdamW moments are not allocated yet "
                       "(GK_GPT2_DEFER_MOMENTS: gk_gpt2_set_comm first)");
    if (m->comm && m->comm->world > 1 && !m->grads_reduced) {
        int rc = m->comm->ops->allreduce(m->comm, m->g_block, m->n_floats, err);
        if (rc) return rc;
    }
    m->grads_reduced = 0;
    double norm = gk_gpt2_grad_norm(m);
    if (grad_norm) *grad_norm = norm;
    if (norm_skips(h, norm)) return gk_backend_status(be, err); /* the caller decides */
    float scale = clip_scale(h, norm);
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
