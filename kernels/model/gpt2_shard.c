/* gpt2_shard.c: the model in a data-parallel run (gk_gpt2_set_comm) and ZeRO's storage: the
 * layout (gk_bucket: stage 1 one bucket, the whole block; stage 2 the backward's, one per layer),
 * the AdamW moments sharded across ranks, gathering them for checkpoints, tensor access to them,
 * and stage 2's gradients: the backward's bucket buffers and this rank's gradient shard (the
 * sharded update itself is gpt2_optim.c's, the backward's reduce-scatters gpt2_bwd.c's, the
 * head's in stripes gpt2_head.c's).
 * With GK_GPT2_DEFER_MOMENTS (GK_GPT2_DEFER_GRADS) the full moments (gradients) are never on the
 * device: set_comm allocates the shard, and a checkpoint gathers the moments in pieces into host
 * memory. */
#include <stdlib.h>
#include <string.h>

#include "kernels/model/gpt2_internal.h"

/* This rank's moments of kind under ZeRO: the device's shard, or offloaded the host's. */
static float *moment_shard(const gk_gpt2 *m, enum gk_tensor_kind kind)
{
    if (m->offload) return kind == GK_TENSOR_ADAM_M ? m->om : m->ov;
    return kind == GK_TENSOR_ADAM_M ? m->m_shard : m->v_shard;
}

int gk_gpt2_slice_on_host(int host_backend, int offload, int zero_stage, enum gk_tensor_kind kind)
{
    return kind != GK_TENSOR_GRAD &&
           (host_backend || (offload && (kind != GK_TENSOR_PARAM || zero_stage == 0)));
}

/* Whether this rank keeps kind in host memory: offloaded moments, and the parameters unless
 * ZeRO left them on the device. */
static int host_kind(const gk_gpt2 *m, enum gk_tensor_kind kind)
{
    return gk_gpt2_slice_on_host(0, m->offload != NULL, m->zero, kind);
}

void gk_gpt2_bwd_bucket(const gk_gpt2 *m, int b, size_t *lo, size_t *hi)
{
    int L = m->cfg.n_layer;
    size_t stride = (m->layers_end - m->layers_at) / (size_t)L;
    *lo = b == 0 ? 0 : m->layers_at + (size_t)(b - 1) * stride;
    *hi = b == 0 ? m->layers_at : b == L ? m->n_floats : *lo + stride;
}

int gk_gpt2_bucket_of(const gk_gpt2 *m, size_t off)
{
    if (off < m->layers_at) return 0;
    int L = m->cfg.n_layer;
    size_t l = (off - m->layers_at) / ((m->layers_end - m->layers_at) / (size_t)L);
    return 1 + (l < (size_t)L ? (int)l : L - 1);
}

float *gk_gpt2_grad_at(const gk_gpt2 *m, size_t off)
{
    if (m->g_block) return m->g_block + off;
    if (!m->g_layer[0]) return NULL;
    if (off < m->layers_at && m->g_tail) { /* the head in stripes: only its tail is held */
        size_t below = m->buckets[0].piece * (size_t)m->comm->world;
        return off >= below ? m->g_tail + (off - below) : NULL;
    }
    if (off < m->layers_at) return m->g_head + off;
    size_t lo, hi;
    int b = gk_gpt2_bucket_of(m, off);
    gk_gpt2_bwd_bucket(m, b, &lo, &hi);
    return m->g_layer[(b - 1) % 2] + (off - lo);
}

/* ZeRO's layout for stage over world ranks (gk_bucket); GK_EUSAGE when no bucket has a piece. */
static int make_buckets(gk_gpt2 *m, int stage, int world, gk_err *err)
{
    int nb = stage == 1 ? 1 : m->cfg.n_layer + 1;
    m->buckets = calloc((size_t)nb, sizeof *m->buckets);
    if (!m->buckets) return gk_errf(err, GK_ENOMEM, "zero_stage %d: out of memory", stage);
    /* the head in whole rows of wte (gpt2_head.c), wte first in the block */
    size_t C = (size_t)m->cfg.n_embd;
    m->head_rows = gk_gpt2_head_rows((size_t)m->Vp, world, stage, m->tp_n); /* (Vp x C first) */
    size_t at = 0, pieces = 0;
    for (int b = 0; b < nb; b++) {
        gk_bucket *k = &m->buckets[b];
        size_t lo = 0, hi = m->n_floats;
        if (stage > 1) gk_gpt2_bwd_bucket(m, b, &lo, &hi);
        size_t piece = b == 0 && m->head_rows ? m->head_rows * C : gk_gpt2_piece(hi - lo, world);
        *k = (gk_bucket){lo, hi - lo, piece, at};
        at += k->piece + gk_bucket_tail(k, world);
        pieces += k->piece;
    }
    m->nbuckets = nb;
    m->shard_floats = at;
    if (!pieces)
        return gk_errf(err, GK_EUSAGE, "zero_stage %d: %zu parameters do not shard over %d ranks",
                       stage, m->n_floats, world);
    return 0;
}

/* Allocates the shard buffers (zero): the moments (on the device, unless offloaded), and from
 * stage 2 the gradients' shard and the backward's buckets (two of the largest layer's: the last,
 * with ln_f; and wte and wpe's, or where the head is cut in rows of wte its stripe and tail). */
static int alloc_shards(gk_gpt2 *m, int stage, gk_err *err)
{
    gk_backend *be = m->be;
    size_t bytes = m->shard_floats * sizeof(float), lo, hi;
    if (!m->offload) { /* (offloaded: the host's, gk_gpt2_offload_place) */
        m->m_shard = be->ops->alloc(be, bytes);
        m->v_shard = be->ops->alloc(be, bytes);
        if (!m->m_shard || !m->v_shard)
            return gk_errf(err, GK_ENOMEM, "zero_stage %d: out of memory for %zu bytes of "
                           "moments", stage, 2 * bytes);
    }
    if (stage < 2) return 0;
    gk_gpt2_bwd_bucket(m, m->cfg.n_layer, &lo, &hi);
    m->g_shard = be->ops->alloc(be, bytes);
    if (!m->head_rows) m->g_head = be->ops->alloc(be, m->layers_at * sizeof(float));
    for (int k = 0; k < 2; k++) m->g_layer[k] = be->ops->alloc(be, (hi - lo) * sizeof(float));
    if (!m->g_shard || (!m->head_rows && !m->g_head) || !m->g_layer[0] || !m->g_layer[1])
        return gk_errf(err, GK_ENOMEM, "zero_stage %d: out of memory for %zu bytes of gradients",
                       stage, bytes + (m->layers_at + 2 * (hi - lo)) * sizeof(float));
    int rc = m->head_rows ? gk_gpt2_head_alloc(m, err) : 0;
    if (rc) return rc;
    be->ops->free(be, m->g_block); /* (a model made without GK_GPT2_DEFER_GRADS) */
    m->g_block = NULL;
    gk_gpt2_point_grads(m);
    return 0;
}

void gk_gpt2_shard_copy(gk_gpt2 *m, float *full, float *part, int to_part)
{
    gk_backend *be = m->be;
    size_t W = (size_t)m->comm->world, r = (size_t)m->comm->rank;
    for (int b = 0; b < m->nbuckets; b++) {
        const gk_bucket *k = &m->buckets[b];
        size_t tail = gk_bucket_tail(k, (int)W);
        float *f[2] = {full + k->lo + r * k->piece, full + k->lo + W * k->piece},
              *s[2] = {part + k->at, part + k->at + k->piece};
        size_t n[2] = {k->piece, tail};
        for (int i = 0; i < 2; i++)
            if (n[i]) be->ops->copy(be, to_part ? s[i] : f[i], to_part ? f[i] : s[i],
                                    n[i] * sizeof(float));
    }
}

/* Moves the moments of this rank's shard out of the full blocks into the shard buffers, then
 * frees the full blocks. */
static void shard_moments(gk_gpt2 *m)
{
    gk_backend *be = m->be;
    gk_gpt2_shard_copy(m, m->m_block, m->m_shard, 1);
    gk_gpt2_shard_copy(m, m->v_block, m->v_shard, 1);
    be->ops->free(be, m->m_block); /* the full blocks go */
    be->ops->free(be, m->v_block);
    m->m_block = m->v_block = NULL;
    for (int i = 0; i < m->n_params; i++) m->params[i].m = m->params[i].v = NULL;
}

/* The full gradients, where still deferred. */
static int alloc_full_grads(gk_gpt2 *m, gk_err *err)
{
    size_t bytes = m->n_floats * sizeof(float);
    if (m->g_block) return 0;
    if (!(m->g_block = m->be->ops->alloc(m->be, bytes)))
        return gk_errf(err, GK_ENOMEM, "gpt2: out of memory for %zu bytes of gradients", bytes);
    gk_gpt2_point_grads(m);
    return 0;
}

/* Without sharding: the full moments (and gradients), where still deferred. */
static int alloc_full(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t bytes = m->n_floats * sizeof(float);
    int rc = alloc_full_grads(m, err);
    if (rc || m->m_block || m->offload) return rc; /* (offloaded: the host holds them) */
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
    if ((m->flags & GK_GPT2_INFERENCE) || m->zero) return 0;
    if (zero_stage < 0 || zero_stage > 3)
        return gk_errf(err, GK_EUSAGE, "zero_stage %d: 0, 1, 2 or 3", zero_stage);
    if (zero_stage == 3 && (!c || c->world == 1))
        return gk_errf(err, GK_EUSAGE, "zero_stage 3 shards the parameters over the ranks: with "
                       "one process there is nothing to shard them over (use zero_stage 0)");
    if (!zero_stage || !c || c->world == 1) {
        int rc = m->offload ? gk_gpt2_offload_place(m, err) : 0; /* (the fp32 shrunk first) */
        return rc ? rc : alloc_full(m, err);
    }
    int rc = make_buckets(m, zero_stage, c->world, err);
    if (!rc && zero_stage == 3) rc = gk_gpt2_shard_params(m, err); /* (its block freed first) */
    if (!rc) rc = alloc_shards(m, zero_stage, err);
    if (!rc && zero_stage < 2) rc = alloc_full_grads(m, err);
    if (rc) return rc;
    m->zero = zero_stage;
    if (m->m_block) shard_moments(m);
    if (m->offload && (rc = gk_gpt2_offload_place(m, err))) return rc;
    return gk_backend_status(m->be, err);
}

void gk_gpt2_shard_fold(gk_gpt2 *m, int b, const float *buf, int first)
{
    gk_backend *be = m->be;
    const gk_bucket *k = &m->buckets[b];
    size_t W = (size_t)m->comm->world, n = gk_bucket_tail(k, (int)W);
    const float *from[2] = {buf + (size_t)m->comm->rank * k->piece, buf + W * k->piece};
    float *to[2] = {m->g_shard + k->at, m->g_shard + k->at + k->piece};
    size_t len[2] = {k->piece, n};
    for (int i = 0; i < 2; i++) {
        if (!len[i]) continue;
        if (first) be->ops->copy(be, to[i], from[i], len[i] * sizeof(float));
        else be->ops->add(be, to[i], from[i], len[i]);
    }
}

/* Floats of each rank's piece that one all_gather moves (its device buffer: world of them). */
#define GATHER_PIECE ((size_t)1 << 20)

/* Where a gather puts the moments: the parameter block's layout (block, n_floats), or each
 * tensor's numel packed in table order (packed, at its entry of packed_at); both NULL: nowhere
 * (this rank only takes part). */
typedef struct gather_sink {
    float *block, *packed;
    const size_t *packed_at;
} gather_sink;

/* Device floats src, the parameter block's [at, at + n), to the sink. */
static void sink_put(gk_gpt2 *m, const gather_sink *s, size_t at, const float *src, size_t n)
{
    gk_backend *be = m->be;
    if (s->block) be->ops->to_host(be, s->block + at, src, n * sizeof(float));
    for (int i = 0; s->packed && i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        size_t lo = p->offset > at ? p->offset : at,
               hi = p->offset + p->numel < at + n ? p->offset + p->numel : at + n;
        if (lo < hi)
            be->ops->to_host(be, s->packed + s->packed_at[i] + (lo - p->offset), src + (lo - at),
                             (hi - lo) * sizeof(float));
    }
}

/* One kind of moments (part: this rank's shard, in host memory when host) of every rank into
 * the sink, bucket by bucket and piece by piece: each all_gather brings the same stretch of every
 * rank's piece into stage (world x chunk floats, then chunk more that a host part's stretch is
 * put in first). */
static int gather_kind(gk_gpt2 *m, const float *part, int host, const gather_sink *sink,
                       float *stage, size_t chunk, gk_err *err)
{
    gk_comm *c = m->comm;
    size_t W = (size_t)c->world;
    float *sent = stage + W * chunk;
    int rc = 0;
    for (int b = 0; b < m->nbuckets && !rc; b++) {
        const gk_bucket *k = &m->buckets[b];
        size_t tail = gk_bucket_tail(k, (int)W);
        for (size_t off = 0; off < k->piece && !rc; off += chunk) {
            size_t n = k->piece - off < chunk ? k->piece - off : chunk;
            if (host) m->be->ops->to_device(m->be, sent, part + k->at + off, n * sizeof(float));
            rc = c->ops->all_gather(c, host ? sent : part + k->at + off, stage, n, err);
            for (size_t r = 0; r < W && !rc; r++)
                sink_put(m, sink, k->lo + r * k->piece + off, stage + r * n, n);
        }
        for (size_t off = 0; off < tail && !rc; off += chunk) { /* this rank's own */
            size_t n = tail - off < chunk ? tail - off : chunk;
            const float *src = part + k->at + k->piece + off;
            if (host) m->be->ops->to_device(m->be, sent, src, n * sizeof(float));
            sink_put(m, sink, k->lo + W * k->piece + off, host ? sent : src, n);
        }
    }
    return rc ? rc : gk_backend_status(m->be, err);
}

/* The nk sharded kinds part[] (this rank's shards) into sinks (NULL outputs: this rank only
 * takes part); host_failed: this rank could not make its sinks, which every rank learns first,
 * so that none waits in a collective another has left. */
static int gather_kinds(gk_gpt2 *m, const float *const part[], const gather_sink sink[], int nk,
                        int host_failed, gk_err *err)
{
    gk_backend *be = m->be;
    size_t chunk = 16;
    for (int b = 0; b < m->nbuckets; b++)
        if (m->buckets[b].piece > chunk) chunk = m->buckets[b].piece;
    if (chunk > GATHER_PIECE) chunk = GATHER_PIECE;
    size_t sent = m->offload ? 1 : 0; /* (a host part's stretch is put on the device first) */
    float *stage = be->ops->alloc(be, chunk * ((size_t)m->comm->world + sent) * sizeof(float));
    double failed = !stage || host_failed;
    int rc = m->comm->ops->allreduce_host(m->comm, &failed, 1, err);
    if (!rc && failed > 0)
        rc = gk_errf(err, GK_ENOMEM, "zero_stage %d: out of memory gathering %zu bytes of "
                     "sharded state (on %g of the ranks)", m->zero,
                     (size_t)nk * m->n_floats * sizeof(float), failed);
    for (int k = 0; k < nk && !rc; k++) /* (offloaded moments: the host's) */
        rc = gather_kind(m, part[k], m->offload && part[k] != m->p_shard, &sink[k], stage, chunk,
                         err);
    be->ops->free(be, stage);
    return rc;
}

int gk_gpt2_moments_gather(gk_gpt2 *m, int keep, gk_err *err)
{
    if (!m->zero || m->m_host) return 0;
    if (keep) {
        m->m_host = malloc(m->n_floats * sizeof(float));
        m->v_host = malloc(m->n_floats * sizeof(float));
    }
    const gather_sink sink[2] = {{m->m_host, NULL, NULL}, {m->v_host, NULL, NULL}};
    const float *const part[2] = {moment_shard(m, GK_TENSOR_ADAM_M),
                                  moment_shard(m, GK_TENSOR_ADAM_V)};
    int rc = gather_kinds(m, part, sink, 2, keep && (!m->m_host || !m->v_host), err);
    if (rc) gk_gpt2_moments_release(m);
    return rc;
}

int gk_gpt2_moments_sharded(const gk_gpt2 *m) { return m->zero != 0; }
int gk_gpt2_params_sharded(const gk_gpt2 *m) { return m->p_shard != NULL; }

int gk_gpt2_shards_gather_packed(gk_gpt2 *m, float *p_out, float *m_out, float *v_out,
                                 gk_err *err)
{
    if (!m->zero) return 0;
    int wants = p_out || m_out || v_out, nk = 0;
    size_t *at = wants ? malloc(sizeof *at * (size_t)m->n_params) : NULL, n = 0;
    for (int i = 0; at && i < m->n_params; i++) at[i] = n, n += m->params[i].numel;
    const float *part[3];
    gather_sink sink[3];
    if (m->p_shard) part[nk] = m->p_shard, sink[nk++] = (gather_sink){NULL, p_out, at};
    part[nk] = moment_shard(m, GK_TENSOR_ADAM_M), sink[nk++] = (gather_sink){NULL, m_out, at};
    part[nk] = moment_shard(m, GK_TENSOR_ADAM_V), sink[nk++] = (gather_sink){NULL, v_out, at};
    int rc = gather_kinds(m, part, sink, nk, wants && !at, err);
    free(at);
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

int gk_gpt2_shard_set(gk_gpt2 *m, int i, enum gk_tensor_kind kind, const float *src,
                      gk_err *err)
{
    const gk_param *p = &m->params[i];
    size_t W = (size_t)m->comm->world, r = (size_t)m->comm->rank;
    float *mom = kind == GK_TENSOR_PARAM ? m->p_shard : moment_shard(m, kind);
    int host = kind != GK_TENSOR_PARAM && m->offload;
    if (kind == GK_TENSOR_PARAM) gk_gpt2_params_stale(m);
    for (int b = 0; b < m->nbuckets; b++) {
        const gk_bucket *k = &m->buckets[b];
        /* this rank's piece and the tail: [from, to) of the block, at `at` in the shard */
        const size_t range[2][3] = {{k->lo + r * k->piece, k->lo + (r + 1) * k->piece, k->at},
                                    {k->lo + W * k->piece, k->lo + k->n, k->at + k->piece}};
        for (int j = 0; j < 2; j++) {
            size_t a = p->offset > range[j][0] ? p->offset : range[j][0];
            size_t e = p->offset + p->numel < range[j][1] ? p->offset + p->numel : range[j][1];
            if (a >= e) continue;
            float *to = mom + range[j][2] + (a - range[j][0]);
            if (host) memcpy(to, src + (a - p->offset), (e - a) * sizeof(float));
            else m->be->ops->to_device(m->be, to, src + (a - p->offset), (e - a) * sizeof(float));
        }
    }
    return gk_backend_status(m->be, err);
}

/* ---- a checkpoint's slices (gpt2.h) ---- */

struct gk_gpt2_slices {
    int world, nb;
    gk_bucket *b;  /* ZeRO's buckets, at: where each starts in rank 0's slice (its pieces and the
                    * tails); the model's one bucket, the whole block, without sharding */
    size_t *piece_before; /* per bucket: the pieces before it (where it starts in another's) */
};

gk_gpt2_slices *gk_gpt2_slices_new(const gk_gpt2 *m)
{
    gk_gpt2_slices *s = calloc(1, sizeof *s);
    int nb = m->nbuckets ? m->nbuckets : 1;
    if (s) s->b = malloc(sizeof *s->b * (size_t)nb);
    if (s) s->piece_before = malloc(sizeof *s->piece_before * (size_t)nb);
    if (!s || !s->b || !s->piece_before) {
        gk_gpt2_slices_free(s);
        return NULL;
    }
    s->world = m->comm ? m->comm->world : 1;
    s->nb = nb;
    size_t at = 0, pieces = 0;
    for (int i = 0; i < nb; i++) {
        gk_bucket whole = {0, m->n_floats, gk_gpt2_piece(m->n_floats, s->world), 0};
        s->b[i] = m->nbuckets ? m->buckets[i] : whole;
        s->b[i].at = at;
        s->piece_before[i] = pieces;
        at += s->b[i].piece + gk_bucket_tail(&s->b[i], s->world);
        pieces += s->b[i].piece;
    }
    return s;
}

void gk_gpt2_slices_free(gk_gpt2_slices *s)
{
    if (!s) return;
    free(s->b);
    free(s->piece_before);
    free(s);
}

int gk_gpt2_slices_world(const gk_gpt2_slices *s) { return s->world; }

size_t gk_gpt2_slice_floats(const gk_gpt2_slices *s, int rank)
{
    const gk_bucket *k = &s->b[s->nb - 1];
    return rank ? s->piece_before[s->nb - 1] + k->piece
                : k->at + k->piece + gk_bucket_tail(k, s->world);
}

void gk_gpt2_slice_owner(const gk_gpt2_slices *s, size_t off, int *rank, size_t *at, size_t *run)
{
    int i = 0;
    while (i + 1 < s->nb && off >= s->b[i].lo + s->b[i].n) i++;
    const gk_bucket *k = &s->b[i];
    size_t W = (size_t)s->world, in = off - k->lo, r = k->piece ? in / k->piece : W;
    if (r >= W) { /* the tail: rank 0's, after its piece of the bucket */
        *rank = 0, *at = k->at + k->piece + (in - W * k->piece), *run = k->n - in;
        return;
    }
    *rank = (int)r;
    *at = (r ? s->piece_before[i] : k->at) + (in - r * k->piece);
    *run = (r + 1) * k->piece - in;
}

/* Where this rank keeps the floats [lo, lo + n) of kind that it owns: its shard (ZeRO: the
 * moments, and the parameters at stage 3), else the whole block. */
static const float *owned_at(const gk_gpt2 *m, const gk_bucket *k, int b, enum gk_tensor_kind kind,
                             size_t lo, int tail)
{
    const float *shard = kind == GK_TENSOR_PARAM ? m->p_shard : moment_shard(m, kind);
    int host = host_kind(m, kind);
    const float *block = kind == GK_TENSOR_PARAM    ? (host ? m->p_host : m->p_block)
                         : kind == GK_TENSOR_ADAM_M ? (host ? m->om : m->m_block)
                                                    : (host ? m->ov : m->v_block);
    if (shard && m->nbuckets)
        return shard + m->buckets[b].at + (tail ? k->piece : 0);
    return block ? block + lo : NULL;
}

int gk_gpt2_slice_in_place(const gk_gpt2 *m, enum gk_tensor_kind kind)
{
    int k = m->be->props.kind;
    return !(m->flags & GK_GPT2_INFERENCE) &&
           gk_gpt2_slice_on_host(k == GK_KIND_CPU || k == GK_KIND_REF, m->offload != NULL, m->zero,
                                 kind);
}

/* The floats [from, from + n) of this rank's slice of kind into host, in the slice's order (each
 * bucket's piece, then on rank 0 its tail): memcpy where they lie in host memory that this
 * thread may read (in_place), else the backend's copy. */
static int slice_copy(const gk_gpt2 *m, const gk_gpt2_slices *s, enum gk_tensor_kind kind,
                      size_t from, size_t n, float *host, int in_place, gk_err *err)
{
    if (kind == GK_TENSOR_GRAD || (m->flags & GK_GPT2_INFERENCE))
        return gk_errf(err, GK_EUSAGE, "slice: parameters and moments of a training model only");
    int r = m->comm ? m->comm->rank : 0;
    size_t W = (size_t)s->world, at = 0, end = from + n;
    for (int b = 0; b < s->nb && at < end; b++) {
        const gk_bucket *k = &s->b[b];
        size_t tail = r ? 0 : gk_bucket_tail(k, s->world);
        size_t lo[2] = {k->lo + (size_t)r * k->piece, k->lo + W * k->piece};
        size_t len[2] = {k->piece, tail};
        for (int t = 0; t < 2; at += len[t], t++) {
            size_t a = at > from ? at : from, z = at + len[t] < end ? at + len[t] : end;
            if (a >= z) continue; /* (none of this run is asked) */
            const float *src = owned_at(m, k, b, kind, lo[t], t);
            if (!src)
                return gk_errf(err, GK_EUSAGE, "slice: the model holds no %s yet",
                               kind == GK_TENSOR_PARAM ? "parameters" : "moments");
            src += a - at;
            if (in_place) memcpy(host + (a - from), src, (z - a) * sizeof(float));
            else m->be->ops->to_host(m->be, host + (a - from), src, (z - a) * sizeof(float));
        }
    }
    if (at < end)
        return gk_errf(err, GK_EUSAGE, "slice: floats %zu to %zu asked of a slice of %zu", from,
                       end, at);
    return 0;
}

int gk_gpt2_slice_get(gk_gpt2 *m, const gk_gpt2_slices *s, enum gk_tensor_kind kind, float *host,
                      gk_err *err)
{
    int r = m->comm ? m->comm->rank : 0;
    int rc = slice_copy(m, s, kind, 0, gk_gpt2_slice_floats(s, r), host, host_kind(m, kind), err);
    return rc ? rc : gk_backend_status(m->be, err);
}

int gk_gpt2_slice_read(const gk_gpt2 *m, const gk_gpt2_slices *s, enum gk_tensor_kind kind,
                       size_t from, size_t n, float *host, gk_err *err)
{
    if (!gk_gpt2_slice_in_place(m, kind))
        return gk_errf(err, GK_EUSAGE, "slice: the %s are not in host memory to read in place",
                       kind == GK_TENSOR_PARAM ? "parameters" : "moments");
    return slice_copy(m, s, kind, from, n, host, 1, err);
}
