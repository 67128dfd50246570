/* gpt2_shard.c: the model in a data-parallel run (gk_gpt2_set_comm) and ZeRO-1's storage: the
 * AdamW moments sharded across ranks, gathering them for checkpoints, tensor access to them (the
 * sharded update itself is gpt2_optim.c's).
 * The parameter block (n floats) splits into W shards of `count` floats (a multiple of 16, so
 * every shard starts 64-byte aligned) and a tail of the n - W count floats left over, which every
 * rank updates alike (its gradients are all-reduced), so the collectives always move equal parts.
 * With GK_GPT2_DEFER_MOMENTS the full moments are never on the device: set_comm allocates the
 * shard, and a checkpoint gathers them in pieces into host memory. */
#include <stdlib.h>
#include <string.h>

#include "kernels/model/gpt2_internal.h"

/* Allocates the shard buffers (zero): this rank's count floats and the tail, for m and v. */
static int alloc_shards(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t bytes = (m->shard_count + gk_gpt2_shard_tail(m)) * sizeof(float);
    m->m_shard = be->ops->alloc(be, bytes);
    m->v_shard = be->ops->alloc(be, bytes);
    if (!m->m_shard || !m->v_shard)
        return gk_errf(err, GK_ENOMEM, "zero_stage 1: out of memory for %zu bytes of moments",
                       2 * bytes);
    return 0;
}

/* Moves the moments of this rank's shard and the tail out of the full blocks into the shard
 * buffers, then frees the full blocks. */
static int shard_moments(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t cnt = m->shard_count, tail = gk_gpt2_shard_tail(m), lo = (size_t)m->comm->rank * cnt;
    int rc = alloc_shards(m, err);
    if (rc) return rc;
    float *full[2] = {m->m_block, m->v_block}, *part[2] = {m->m_shard, m->v_shard};
    for (int k = 0; k < 2; k++) {
        be->ops->copy(be, part[k], full[k] + lo, cnt * sizeof(float));
        if (tail)
            be->ops->copy(be, part[k] + cnt, full[k] + cnt * (size_t)m->comm->world,
                          tail * sizeof(float));
    }
    be->ops->free(be, m->m_block); /* the full blocks go */
    be->ops->free(be, m->v_block);
    m->m_block = m->v_block = NULL;
    for (int i = 0; i < m->n_params; i++) m->params[i].m = m->params[i].v = NULL;
    return gk_backend_status(be, err);
}

/* GK_GPT2_DEFER_MOMENTS without sharding: the full blocks, now. */
static int alloc_full_moments(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t bytes = m->n_floats * sizeof(float);
    m->m_block = be->ops->alloc(be, bytes);
    m->v_block = be->ops->alloc(be, bytes);
    if (!m->m_block || !m->v_block) {
        be->ops->free(be, m->m_block);
        be->ops->free(be, m->v_block);
        m->m_block = m->v_block = NULL;
        return gk_errf(err, GK_ENOMEM, "gpt2: out of memory for %zu bytes of AdamW moments",
                       2 * bytes);
    }
    for (int i = 0; i < m->n_params; i++) {
        gk_param *p = &m->params[i];
        p->m = m->m_block + p->offset;
        p->v = m->v_block + p->offset;
    }
    return 0;
}

int gk_gpt2_set_comm(gk_gpt2 *m, gk_comm *c, int zero_stage, gk_err *err)
{
    m->comm = c;
    if (!m->g_block || m->zero) return 0;
    if (!zero_stage || !c || c->world == 1)
        return m->m_block ? 0 : alloc_full_moments(m, err);
    m->shard_count = gk_gpt2_shard_count(m->n_floats, c->world);
    if (m->shard_count == 0)
        return gk_errf(err, GK_EUSAGE, "zero_stage 1: %zu parameters do not shard over %d ranks",
                       m->n_floats, c->world);
    m->zero = 1;
    return m->m_block ? shard_moments(m, err) : alloc_shards(m, err);
}

/* Floats of each rank's shard that one all_gather moves (its device buffer: world of them). */
#define GATHER_PIECE ((size_t)1 << 20)

/* One kind of moments (part: this rank's shard and tail) of every rank into host (n_floats),
 * piece by piece: each all_gather brings the same stretch of every rank's shard into stage
 * (world x piece floats); host NULL: this rank only takes part. */
static int gather_kind(gk_gpt2 *m, const float *part, float *host, float *stage, size_t piece,
                       gk_err *err)
{
    gk_backend *be = m->be;
    gk_comm *c = m->comm;
    size_t cnt = m->shard_count, W = (size_t)c->world, tail = gk_gpt2_shard_tail(m);
    int rc = 0;
    for (size_t off = 0; off < cnt && !rc; off += piece) {
        size_t n = cnt - off < piece ? cnt - off : piece;
        rc = c->ops->all_gather(c, part + off, stage, n, err);
        for (size_t r = 0; r < W && !rc && host; r++)
            be->ops->to_host(be, host + r * cnt + off, stage + r * n, n * sizeof(float));
    }
    if (!rc && host && tail) be->ops->to_host(be, host + cnt * W, part + cnt, tail * sizeof(float));
    return rc ? rc : gk_backend_status(be, err);
}

int gk_gpt2_moments_gather(gk_gpt2 *m, int keep, gk_err *err)
{
    if (!m->zero || m->m_host) return 0;
    gk_backend *be = m->be;
    size_t piece = m->shard_count < GATHER_PIECE ? m->shard_count : GATHER_PIECE;
    float *stage = be->ops->alloc(be, piece * (size_t)m->comm->world * sizeof(float));
    if (keep) {
        m->m_host = malloc(m->n_floats * sizeof(float));
        m->v_host = malloc(m->n_floats * sizeof(float));
    }
    /* the ranks agree first, so that none waits in a collective that another has left */
    double failed = !stage || (keep && (!m->m_host || !m->v_host));
    int rc = m->comm->ops->allreduce_host(m->comm, &failed, 1, err);
    if (!rc && failed > 0)
        rc = gk_errf(err, GK_ENOMEM, "zero_stage 1: out of memory gathering %zu bytes of moments "
                     "(on %g of the ranks)", 2 * m->n_floats * sizeof(float), failed);
    float *host[2] = {m->m_host, m->v_host}, *part[2] = {m->m_shard, m->v_shard};
    for (int k = 0; k < 2 && !rc; k++)
        rc = gather_kind(m, part[k], host[k], stage, piece, err);
    be->ops->free(be, stage);
    if (rc) gk_gpt2_moments_release(m);
    return rc;
}

void gk_gpt2_moments_release(gk_gpt2 *m)
{
    free(m->m_host);
    free(m->v_host);
    m->m_host = m->v_host = NULL;
}

int gk_gpt2_shard_moment_get(gk_gpt2 *m, int i, enum gk_tensor_kind kind, float *host, gk_err *err)
{
    const gk_param *p = &m->params[i];
    const float *all = kind == GK_TENSOR_ADAM_M ? m->m_host : m->v_host;
    if (!all)
        return gk_errf(err, GK_EUSAGE,
                       "%s: the %s moment is sharded across ranks (gk_gpt2_moments_gather first)",
                       p->name, kind == GK_TENSOR_ADAM_M ? "first" : "second");
    memcpy(host, all + p->offset, p->numel * sizeof(float));
    return 0;
}

int gk_gpt2_shard_moment_set(gk_gpt2 *m, int i, enum gk_tensor_kind kind, const float *host,
                             gk_err *err)
{
    const gk_param *p = &m->params[i];
    size_t cnt = m->shard_count, lo = (size_t)m->comm->rank * cnt,
           main = cnt * (size_t)m->comm->world;
    /* a, b, base */
    const size_t range[2][3] = {{lo, lo + cnt, lo}, {main, m->n_floats, main - cnt}};
    float *mom = kind == GK_TENSOR_ADAM_M ? m->m_shard : m->v_shard;
    for (int k = 0; k < 2; k++) {
        size_t a = p->offset > range[k][0] ? p->offset : range[k][0];
        size_t b = p->offset + p->numel < range[k][1] ? p->offset + p->numel : range[k][1];
        if (a < b)
            m->be->ops->to_device(m->be, mom + (a - range[k][2]), host + (a - p->offset),
                                  (b - a) * sizeof(float));
    }
    return gk_backend_status(m->be, err);
}
