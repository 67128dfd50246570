/* gpt2_offload.c: the optimizer in host memory (gk_gpt2_set_offload, ZeRO-Offload). The fp32
 * master weights and both AdamW moments live in host memory (p_host, om, ov) and a host
 * backend's AdamW (the CPU backend's, on its threads) updates them; the device keeps what the
 * graph reads: with 16-bit weights the copies of the weight matrices (w_block) and a small fp32
 * block of the rest (p_small: LayerNorms, biases, wpe; the matrices' fp32 are not on the device
 * at all), else the fp32 weights (p_block), and the gradients and activations. Each update: the
 * gradients summed and their norm taken on the device as without offload, then a chunk of the
 * parameter block at a time (OFFLOAD_CHUNK floats) its gradients to the host (g_host), AdamW
 * there (writing the 16-bit copies into w_host in the same pass) and the weights the device reads
 * back to it. With ZeRO over several ranks (gk_gpt2_offload_place) the host holds the moments of
 * this rank's shard only, and the device keeps that stage's fp32 weights (the whole block, or
 * at stage 3 the shard), which the all-gathers need: each update stages a chunk of the shard's
 * gradients and weights to the host, runs AdamW there and puts the weights back
 * (gk_gpt2_offload_sharded). */
#include <stdlib.h>
#include <string.h>

#include "kernels/model/gpt2_internal.h"

#define OFFLOAD_CHUNK GK_GPT2_OFFLOAD_CHUNK

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
    free(m->om), free(m->ov);
    if (m->zero) staging_put(m, m->p_host); /* (with ZeRO a staging chunk) */
    else free(m->p_host);
    staging_put(m, m->g_host);
    staging_put(m, m->w_host);
    m->om = m->ov = m->p_host = m->g_host = NULL;
    m->w_host = NULL;
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
 * host backend into w_host, a chunk at a time). */
static void push_entry(gk_gpt2 *m, int i)
{
    gk_backend *be = m->be, *host = m->offload;
    const gk_param *p = &m->params[i];
    const float *master = m->p_host + p->offset;
    if (p->data) be->ops->to_device(be, p->data, master, p->numel * sizeof(float));
    for (size_t j = 0; p->copy && j < p->numel; j += OFFLOAD_CHUNK) {
        size_t n = p->numel - j < OFFLOAD_CHUNK ? p->numel - j : OFFLOAD_CHUNK;
        host->ops->cast(host, m->w_host, m->wt, master + j, GK_F32, n);
        be->ops->to_device(be, (char *)p->copy + gk_elt_bytes(m->wt, j), m->w_host,
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
    if (m->zero || m->offload || !m->p_block)
        return gk_errf(err, GK_EUSAGE, "optimizer offload: before gk_gpt2_set_comm, once");
    if (!host->props.host_memory)
        return gk_errf(err, GK_EUSAGE, "optimizer offload: %s is not a host-memory backend",
                       host->ops->name);
    size_t bytes = m->n_floats * sizeof(float), wbytes = gk_elt_bytes(m->wt, OFFLOAD_CHUNK);
    m->p_host = malloc(bytes);
    m->om = calloc(m->n_floats, sizeof(float));
    m->ov = calloc(m->n_floats, sizeof(float));
    m->g_host = staging_get(m, OFFLOAD_CHUNK * sizeof(float));
    m->w_host = m->n_copy ? staging_get(m, wbytes) : NULL;
    if (!m->p_host || !m->om || !m->ov || !m->g_host || (m->n_copy && !m->w_host))
        return gk_errf(err, GK_ENOMEM, "optimizer offload: out of host memory for %zu bytes",
                       3 * bytes + OFFLOAD_CHUNK * sizeof(float) + wbytes);
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
    /* the device's fp32 are the master: p_host stages a chunk of them (first, so that p_host is
     * staging whenever m->zero is set: gk_gpt2_offload_free) */
    free(m->p_host);
    m->p_host = staging_get(m, OFFLOAD_CHUNK * sizeof(float));
    size_t bytes = m->shard_floats * sizeof(float);
    float *om = malloc(bytes), *ov = malloc(bytes);
    if (!om || !ov || !m->p_host) {
        free(om), free(ov);
        return gk_errf(err, GK_ENOMEM, "optimizer offload: out of host memory for %zu bytes",
                       2 * bytes + OFFLOAD_CHUNK * sizeof(float));
    }
    host_shard_copy(m, m->om, om);
    host_shard_copy(m, m->ov, ov);
    free(m->om), free(m->ov), staging_put(m, m->w_host);
    m->om = om, m->ov = ov, m->w_host = NULL;
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

/* AdamW on the host over the parameter block's floats [a, b): their gradients copied to g_host,
 * the new weights (16-bit copies staged in w_host) back to the device, slice by slice of each
 * tensor in it (the padding rows and gaps between are left alone). ts and entry: room for every
 * table entry (each slice and the entry it is of). */
static int update_chunk(gk_gpt2 *m, const gk_adamw *h, float lr, float scale, size_t a, size_t b,
                        gk_adamw_tensor *ts, int *entry, gk_err *err)
{
    gk_backend *be = m->be, *host = m->offload;
    be->ops->to_host(be, m->g_host, m->g_block + a, (b - a) * sizeof(float));
    int rc = gk_backend_status(be, err), n = 0;
    size_t staged = 0;
    for (int i = 0; !rc && i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        size_t lo = p->offset > a ? p->offset : a,
               hi = p->offset + p->numel < b ? p->offset + p->numel : b;
        if (lo >= hi) continue;
        void *copy = p->copy ? (char *)m->w_host + gk_elt_bytes(m->wt, staged) : NULL;
        staged += p->copy ? hi - lo : 0;
        entry[n] = i;
        ts[n++] = (gk_adamw_tensor){m->p_host + lo, m->g_host + (lo - a), m->om + lo, m->ov + lo,
                                    copy,           hi - lo,              p->decay};
    }
    if (!rc)
        host->ops->adamw_multi(host, ts, n, lr, h->beta1, h->beta2, h->eps, h->weight_decay,
                               (int)m->step, scale, m->wt);
    if (!rc) rc = gk_backend_status(host, err);
    for (int k = 0; !rc && k < n; k++) { /* each slice's weights where the device reads them */
        const gk_param *p = &m->params[entry[k]];
        size_t j = (size_t)(ts[k].param - (m->p_host + p->offset));
        if (p->data) be->ops->to_device(be, p->data + j, ts[k].param, ts[k].n * sizeof(float));
        if (p->copy)
            be->ops->to_device(be, (char *)p->copy + gk_elt_bytes(m->wt, j), ts[k].copy,
                               gk_elt_bytes(m->wt, ts[k].n));
    }
    return rc ? rc : gk_backend_status(be, err);
}

int gk_gpt2_offload_update(gk_gpt2 *m, const gk_adamw *h, float lr, float scale, gk_err *err)
{
    gk_adamw_tensor *ts = malloc(sizeof *ts * (size_t)m->n_params);
    int *entry = malloc(sizeof *entry * (size_t)m->n_params);
    if (!ts || !entry) {
        free(ts), free(entry);
        return gk_errf(err, GK_ENOMEM, "update: out of memory");
    }
    m->step++;
    int rc = 0;
    for (size_t a = 0; !rc && a < m->n_floats; a += OFFLOAD_CHUNK) {
        size_t b = m->n_floats - a < OFFLOAD_CHUNK ? m->n_floats : a + OFFLOAD_CHUNK;
        rc = update_chunk(m, h, lr, scale, a, b, ts, entry, err);
    }
    free(ts), free(entry);
    return rc;
}

/* A piece of a sharded update: slice k of its table, from its float `from`, len floats. */
typedef struct offload_piece {
    int k;
    size_t from, len;
} offload_piece;

/* AdamW on the host over the n pieces pc of the slices ts (device parameters and gradients,
 * host moments, no copies): their gradients and weights staged in g_host and p_host, the new
 * weights put back; hs: room for n host slices. */
static int sharded_chunk(gk_gpt2 *m, const gk_adamw *h, float lr, float scale,
                         const gk_adamw_tensor *ts, const offload_piece *pc, int n,
                         gk_adamw_tensor *hs, gk_err *err)
{
    gk_backend *be = m->be, *host = m->offload;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const gk_adamw_tensor *t = &ts[pc[i].k];
        size_t j = pc[i].from, len = pc[i].len;
        be->ops->to_host(be, m->g_host + at, t->grad + j, len * sizeof(float));
        be->ops->to_host(be, m->p_host + at, t->param + j, len * sizeof(float));
        hs[i] = (gk_adamw_tensor){m->p_host + at, m->g_host + at, t->m + j, t->v + j, NULL, len,
                                  t->decay};
        at += len;
    }
    int rc = gk_backend_status(be, err);
    if (!rc)
        host->ops->adamw_multi(host, hs, n, lr, h->beta1, h->beta2, h->eps, h->weight_decay,
                               (int)m->step, scale, GK_F32);
    if (!rc) rc = gk_backend_status(host, err);
    for (int i = 0; !rc && i < n; i++)
        be->ops->to_device(be, ts[pc[i].k].param + pc[i].from, hs[i].param,
                           pc[i].len * sizeof(float));
    return rc ? rc : gk_backend_status(be, err);
}

int gk_gpt2_offload_sharded(gk_gpt2 *m, const gk_adamw *h, float lr, float scale,
                            const gk_adamw_tensor *ts, int n, gk_err *err)
{
    /* a chunk holds at most OFFLOAD_CHUNK floats: the slices in turn, split where one ends it */
    offload_piece *pc = malloc(sizeof *pc * (size_t)(n ? n : 1));
    gk_adamw_tensor *hs = malloc(sizeof *hs * (size_t)(n ? n : 1));
    if (!pc || !hs) {
        free(pc), free(hs);
        return gk_errf(err, GK_ENOMEM, "update: out of memory");
    }
    int rc = 0, c = 0;
    size_t room = OFFLOAD_CHUNK, j = 0;
    for (int k = 0; k < n && !rc;) {
        size_t len = ts[k].n - j < room ? ts[k].n - j : room;
        pc[c++] = (offload_piece){k, j, len};
        j += len, room -= len;
        if (j == ts[k].n) k++, j = 0;
        if (room && k < n) continue;
        rc = sharded_chunk(m, h, lr, scale, ts, pc, c, hs, err);
        c = 0, room = OFFLOAD_CHUNK;
    }
    free(pc), free(hs);
    return rc;
}
