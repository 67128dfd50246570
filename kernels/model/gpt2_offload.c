/* gpt2_offload.c: the optimizer in host memory (gk_gpt2_set_offload, ZeRO-Offload): where the
 * state lives and its access (the update itself is gpt2_offload_step.c's). The fp32 master
 * weights and both AdamW moments live in host memory (p_host, om, ov) and a host backend's AdamW
 * (the CPU backend's, on its threads) updates them; the device keeps what the graph reads: with
 * 16-bit weights the copies of the weight matrices (w_block) and a small fp32 block of the rest
 * (p_small: LayerNorms, biases, wpe; the matrices' fp32 are not on the device at all), else the
 * fp32 weights (p_block), and the gradients and activations. With ZeRO over several ranks
 * (gk_gpt2_offload_place) the host holds the moments of this rank's shard only, and the device
 * keeps that stage's fp32 weights (the whole block, or at stage 3 the shard), which the
 * all-gathers need and each update stages through the host. The update's staging (two chunks of
 * gradients, 16-bit copies or staged weights) is pinned where the backend has pinned memory. */
#include <stdlib.h>
#include <string.h>

#include "kernels/model/gpt2_internal.h"


/* Staging memory that the device's copies read and write: pinned where the backend has it. */
static void *staging_get(const gk_gpt2 *m, size_t bytes)
{
    gk_backend *be = m->be;
    return be->ops->pinned ? be->ops->pinned(be, NULL, bytes) : malloc(bytes);
}

static void staging_put(const gk_gpt2 *m, void *p)
{
    gk_backend *be = m->be;
    if (be->ops->pinned) be->ops->pinned(be, p, 0);
    else free(p);
}

void gk_gpt2_offload_free(gk_gpt2 *m)
{
    free(m->om), free(m->ov), free(m->p_host);
    m->om = m->ov = m->p_host = NULL;
    for (int b = 0; b < 2; b++) {
        staging_put(m, m->g_stage[b]), staging_put(m, m->p_stage[b]);
        staging_put(m, m->w_stage[b]);
        m->g_stage[b] = m->p_stage[b] = NULL, m->w_stage[b] = NULL;
    }
}

/* The small block's layout: s_off per entry without a copy (the rest (size_t)-1); its floats. */
static size_t small_layout(gk_gpt2 *m)
{
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++) {
        int small = m->params[i].copy == NULL;
        m->s_off[i] = small ? n : (size_t)-1;
        if (small) n += (m->params[i].numel + 15) / 16 * 16;
    }
    return n;
}

/* Entry i's weights from the host master to where the device reads them (its copy: cast by the
 * host backend into w_stage[0], a chunk at a time). */
static void push_entry(gk_gpt2 *m, int i)
{
    gk_backend *be = m->be, *host = m->offload;
    const gk_param *p = &m->params[i];
    const float *master = m->p_host + p->offset;
    if (p->data) be->ops->to_device(be, p->data, master, p->numel * sizeof(float));
    for (size_t j = 0; p->copy && j < p->numel; j += m->offload_chunk) {
        size_t n = p->numel - j < m->offload_chunk ? p->numel - j : m->offload_chunk;
        be->ops->sync(be); /* (a copy from pinned staging may still be reading it) */
        host->ops->cast(host, m->w_stage[0], m->wt, master + j, GK_F32, n);
        be->ops->to_device(be, (char *)p->copy + gk_elt_bytes(m->wt, j), m->w_stage[0],
                           gk_elt_bytes(m->wt, n));
    }
}

/* The device's fp32 weights: with 16-bit copies only the small block's. */
static int shrink_device(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    if (m->wt == GK_F32) return 0;
    size_t n = small_layout(m);
    if (!(m->p_small = be->ops->alloc(be, (n ? n : 16) * sizeof(float))))
        return gk_errf(err, GK_ENOMEM, "optimizer offload: out of device memory for %zu bytes",
                       n * sizeof(float));
    be->ops->free(be, m->p_block);
    m->p_block = NULL;
    gk_gpt2_point_all(m);
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].data) push_entry(m, i);
    return gk_backend_status(be, err);
}

int gk_gpt2_set_offload(gk_gpt2 *m, gk_backend *host, gk_err *err)
{
    gk_backend *be = m->be;
    if (m->flags & GK_GPT2_INFERENCE)
        return gk_errf(err, GK_EUSAGE, "optimizer offload: an inference model has no optimizer");
    if (m->tp)
        return gk_errf(err, GK_EUSAGE, "optimizer_offload with tensor_parallel = %d: not "
                       "supported yet (use one or the other)",
                       m->tp_n);
    if (m->zero || m->offload || !m->p_block)
        return gk_errf(err, GK_EUSAGE, "optimizer offload: before gk_gpt2_set_comm, once");
    if (!host->props.host_memory)
        return gk_errf(err, GK_EUSAGE, "optimizer offload: %s is not a host-memory backend",
                       host->ops->name);
    m->offload_chunk = gk_gpt2_offload_chunk(m->n_floats);
    size_t bytes = m->n_floats * sizeof(float), chunk = m->offload_chunk * sizeof(float),
           wbytes = gk_elt_bytes(m->wt, m->offload_chunk);
    m->p_host = malloc(bytes);
    m->om = calloc(m->n_floats, sizeof(float));
    m->ov = calloc(m->n_floats, sizeof(float));
    int staged = 1;
    for (int b = 0; b < 2; b++) {
        m->g_stage[b] = staging_get(m, chunk);
        m->w_stage[b] = m->n_copy ? staging_get(m, wbytes) : NULL;
        staged = staged && m->g_stage[b] && (!m->n_copy || m->w_stage[b]);
    }
    if (!m->p_host || !m->om || !m->ov || !staged)
        return gk_errf(err, GK_ENOMEM, "optimizer offload: out of host memory for %zu bytes",
                       3 * bytes + 2 * (chunk + wbytes));
    be->ops->to_host(be, m->p_host, m->p_block, bytes);
    if (m->m_block) be->ops->to_host(be, m->om, m->m_block, bytes);
    if (m->v_block) be->ops->to_host(be, m->ov, m->v_block, bytes);
    be->ops->free(be, m->m_block);
    be->ops->free(be, m->v_block);
    m->m_block = m->v_block = NULL;
    int rc = gk_backend_status(be, err);
    if (rc) return rc;
    m->offload = host;
    for (int i = 0; i < m->n_params; i++) m->params[i].m = m->params[i].v = NULL;
    return 0;
}

/* Host floats full (the parameter block's layout) into part (this rank's shard: ZeRO's). */
static void host_shard_copy(const gk_gpt2 *m, const float *full, float *part)
{
    size_t W = (size_t)m->comm->world, r = (size_t)m->comm->rank;
    for (int b = 0; b < m->nbuckets; b++) {
        const gk_bucket *k = &m->buckets[b];
        memcpy(part + k->at, full + k->lo + r * k->piece, k->piece * sizeof(float));
        memcpy(part + k->at + k->piece, full + k->lo + W * k->piece,
               gk_bucket_tail(k, (int)W) * sizeof(float));
    }
}

int gk_gpt2_offload_place(gk_gpt2 *m, gk_err *err)
{
    if (!m->zero) return shrink_device(m, err);
    /* the device's fp32 are the master, which the update stages (p_stage); no copies staged */
    free(m->p_host);
    m->p_host = NULL;
    for (int b = 0; b < 2; b++) {
        staging_put(m, m->w_stage[b]);
        m->w_stage[b] = NULL;
        m->p_stage[b] = staging_get(m, m->offload_chunk * sizeof(float));
    }
    size_t bytes = m->shard_floats * sizeof(float);
    float *om = malloc(bytes), *ov = malloc(bytes);
    if (!om || !ov || !m->p_stage[0] || !m->p_stage[1]) {
        free(om), free(ov);
        return gk_errf(err, GK_ENOMEM, "optimizer offload: out of host memory for %zu bytes",
                       2 * bytes + 2 * m->offload_chunk * sizeof(float));
    }
    host_shard_copy(m, m->om, om);
    host_shard_copy(m, m->ov, ov);
    free(m->om), free(m->ov);
    m->om = om, m->ov = ov;
    return 0;
}

float *gk_gpt2_offload_tensor(const gk_gpt2 *m, int i, enum gk_tensor_kind kind)
{
    if (m->zero) return NULL; /* (the shard's: gpt2_shard.c reads them) */
    size_t off = m->params[i].offset;
    switch (kind) {
    case GK_TENSOR_PARAM: return m->p_host + off;
    case GK_TENSOR_ADAM_M: return m->om + off;
    case GK_TENSOR_ADAM_V: return m->ov + off;
    default: return NULL;
    }
}

void gk_gpt2_offload_pushed(gk_gpt2 *m, int i) { push_entry(m, i); }
