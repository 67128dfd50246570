/* gpt2_shard.c: the model in a data-parallel run (gk_gpt2_set_comm) and ZeRO-1: the AdamW
 * moments sharded across ranks, the sharded update, gathering the moments for checkpoints.
 * The parameter block (n floats) splits into W shards of `count` floats (a multiple of 16, so
 * every shard starts 64-byte aligned) and a tail of the n - W count floats left over, which every
 * rank updates alike (its gradients are all-reduced), so the collectives always move equal parts. */
#include <math.h>

#include "kernels/gpt2_internal.h"

static size_t tail_of(const gk_gpt2 *m) { return m->n_floats - m->shard_count * (size_t)m->comm->world; }

/* Moves the moments of this rank's shard and the tail out of the full blocks into the shard
 * buffers, then frees the full blocks. */
static int shard_moments(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t cnt = m->shard_count, tail = tail_of(m), lo = (size_t)m->comm->rank * cnt;
    size_t bytes = (cnt + tail) * sizeof(float);
    m->m_shard = be->ops->alloc(be, bytes);
    m->v_shard = be->ops->alloc(be, bytes);
    if (!m->m_shard || !m->v_shard)
        return gk_errf(err, GK_ENOMEM, "zero_stage 1: out of memory for %zu bytes of moments", 2 * bytes);
    float *full[2] = {m->m_block, m->v_block}, *part[2] = {m->m_shard, m->v_shard};
    for (int k = 0; k < 2; k++) {
        be->ops->copy(be, part[k], full[k] + lo, cnt * sizeof(float));
        if (tail) be->ops->copy(be, part[k] + cnt, full[k] + cnt * (size_t)m->comm->world, tail * sizeof(float));
    }
    gk_gpt2_moments_release(m); /* the full blocks go */
    return gk_backend_status(be, err);
}

int gk_gpt2_set_comm(gk_gpt2 *m, gk_comm *c, int zero_stage, gk_err *err)
{
    m->comm = c;
    if (!zero_stage || !c || c->world == 1 || !m->g_block || m->zero) return 0;
    m->shard_count = m->n_floats / (size_t)c->world / 16 * 16;
    if (m->shard_count == 0)
        return gk_errf(err, GK_EUSAGE, "zero_stage 1: %zu parameters do not shard over %d ranks",
                       m->n_floats, c->world);
    m->zero = 1;
    return shard_moments(m, err);
}

/* AdamW on the floats [a, b) of the parameter block, their moments at mom + (a - base). */
static void adamw_range(gk_gpt2 *m, const gk_adamw *h, float lr, float scale, size_t a, size_t b,
                        size_t base, float *mm, float *vv)
{
    gk_backend *be = m->be;
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        size_t lo = p->offset > a ? p->offset : a, hi = p->offset + p->numel < b ? p->offset + p->numel : b;
        if (lo >= hi) continue;
        size_t j = lo - p->offset;
        void *copy = p->copy ? (char *)p->copy + j * gk_elt_size(m->wt) : NULL;
        be->ops->adamw(be, p->data + j, p->grad + j, mm + (lo - base), vv + (lo - base), hi - lo, lr,
                       h->beta1, h->beta2, h->eps, p->decay ? h->weight_decay : 0.0f, (int)m->step,
                       scale, copy, m->wt);
    }
}

/* The global gradient norm: each rank's shard, the tail counted once (by rank 0). */
static int global_norm(gk_gpt2 *m, double *norm, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t cnt = m->shard_count, tail = tail_of(m);
    double s = 0, t = 0;
    m->be->ops->sumsq(m->be, &s, m->g_block + (size_t)c->rank * cnt, cnt);
    if (tail && c->rank == 0) m->be->ops->sumsq(m->be, &t, m->g_block + cnt * (size_t)c->world, tail);
    s += t;
    int rc = gk_backend_status(m->be, err);
    if (!rc) rc = c->ops->allreduce_host(c, &s, 1, err);
    *norm = sqrt(s);
    return rc;
}

int gk_gpt2_update_sharded(gk_gpt2 *m, const gk_adamw *h, float lr, double *grad_norm, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t cnt = m->shard_count, tail = tail_of(m), lo = (size_t)c->rank * cnt, main = cnt * (size_t)c->world;
    int rc = c->ops->reduce_scatter(c, m->g_block, m->g_block + lo, cnt, err);
    if (!rc && tail) rc = c->ops->allreduce(c, m->g_block + main, tail, err);
    double norm = NAN;
    if (!rc) rc = global_norm(m, &norm, err);
    if (grad_norm) *grad_norm = norm;
    if (rc || gk_gpt2_norm_skips(h, norm)) return rc ? rc : gk_backend_status(m->be, err);
    float scale = gk_gpt2_clip_scale(h, norm);
    m->step++;
    adamw_range(m, h, lr, scale, lo, lo + cnt, lo, m->m_shard, m->v_shard);
    if (tail) adamw_range(m, h, lr, scale, main, m->n_floats, main - cnt, m->m_shard, m->v_shard);
    if ((rc = gk_backend_status(m->be, err))) return rc;
    if ((rc = c->ops->all_gather(c, m->p_block + lo, m->p_block, cnt, err))) return rc;
    for (int i = 0; i < m->n_params; i++) { /* the other shards' weight copies */
        const gk_param *p = &m->params[i];
        if (p->copy) m->be->ops->cast(m->be, p->copy, m->wt, p->data, GK_F32, p->numel);
    }
    return gk_backend_status(m->be, err);
}

/* Points every entry's moments into the full blocks (NULL: none). */
static void point_moments(gk_gpt2 *m)
{
    for (int i = 0; i < m->n_params; i++) {
        gk_param *p = &m->params[i];
        p->m = m->m_block ? m->m_block + p->offset : NULL;
        p->v = m->v_block ? m->v_block + p->offset : NULL;
    }
}

int gk_gpt2_moments_gather(gk_gpt2 *m, gk_err *err)
{
    if (!m->zero || m->m_block) return 0;
    gk_backend *be = m->be;
    gk_comm *c = m->comm;
    size_t cnt = m->shard_count, tail = tail_of(m), bytes = m->n_floats * sizeof(float);
    m->m_block = be->ops->alloc(be, bytes);
    m->v_block = be->ops->alloc(be, bytes);
    if (!m->m_block || !m->v_block) {
        gk_gpt2_moments_release(m);
        return gk_errf(err, GK_ENOMEM, "zero_stage 1: out of memory gathering %zu bytes of moments", 2 * bytes);
    }
    float *full[2] = {m->m_block, m->v_block}, *part[2] = {m->m_shard, m->v_shard};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        rc = c->ops->all_gather(c, part[k], full[k], cnt, err);
        if (tail) be->ops->copy(be, full[k] + cnt * (size_t)c->world, part[k] + cnt, tail * sizeof(float));
    }
    if (!rc) rc = gk_backend_status(be, err);
    if (rc) gk_gpt2_moments_release(m);
    else point_moments(m);
    return rc;
}

void gk_gpt2_moments_release(gk_gpt2 *m)
{
    if (!m->zero) return;
    m->be->ops->free(m->be, m->m_block);
    m->be->ops->free(m->be, m->v_block);
    m->m_block = m->v_block = NULL;
    point_moments(m);
}

int gk_gpt2_shard_moment_set(gk_gpt2 *m, int i, enum gk_tensor_kind kind, const float *host,
                             gk_err *err)
{
    const gk_param *p = &m->params[i];
    size_t cnt = m->shard_count, lo = (size_t)m->comm->rank * cnt, main = cnt * (size_t)m->comm->world;
    const size_t range[2][3] = {{lo, lo + cnt, lo}, {main, m->n_floats, main - cnt}}; /* a, b, base */
    float *mom = kind == GK_TENSOR_ADAM_M ? m->m_shard : m->v_shard;
    for (int k = 0; k < 2; k++) {
        size_t a = p->offset > range[k][0] ? p->offset : range[k][0];
        size_t b = p->offset + p->numel < range[k][1] ? p->offset + p->numel : range[k][1];
        if (a < b)
            m->be->ops->to_device(m->be, mom + (a - range[k][2]), host + (a - p->offset), (b - a) * sizeof(float));
    }
    return gk_backend_status(m->be, err);
}
