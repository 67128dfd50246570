/* gpt2_access.c: how tools move data in and out of a model without touching device memory:
 * parameters and optimizer state (checkpoints; 16-bit and int8 weight copies converted on the
 * host), logits and per-token losses (sampling, scoring), host-side conversion from the
 * activation type. */
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/model/gpt2_internal.h"

/* ---- int8 (GK_Q8) weights: quantized and widened block by block, through to_device/to_host of
 * one 34-byte block (Q8 runs on host-memory backends: a memcpy). The Conv1D matrices, [in, out]
 * in the table, are kept [out, in] so that blocks run along the input; wte is kept as it is.
 * ---- */

/* Visits every block of p's copy: fn(m, p, host, x, dev) with x the block's 32 values in host
 * (gathered into x), dev its place in the copy. */
static void q8_blocks(gk_gpt2 *m, const gk_param *p, float *host,
                      void (*fn)(gk_gpt2 *, float *x, float *host, size_t stride, char *dev))
{
    int tr = p->copy != m->gw[G_WTE];
    size_t in = (size_t)p->shape[0], out = (size_t)p->shape[1];
    if (!tr) { /* rows of out values: blocks are consecutive */
        for (size_t b = 0; b < p->numel / GK_Q8_BLOCK; b++)
            fn(m, host + b * GK_Q8_BLOCK, host + b * GK_Q8_BLOCK, 1,
               (char *)p->copy + b * GK_Q8_BLOCK_BYTES);
        return;
    }
    size_t kb_n = in / GK_Q8_BLOCK; /* blocks per kept row (one output) */
    for (size_t kb = 0; kb < kb_n; kb++) /* 32 input rows at a time: they stay in cache */
        for (size_t j = 0; j < out; j++)
            fn(m, NULL, host + kb * GK_Q8_BLOCK * out + j, out,
               (char *)p->copy + (j * kb_n + kb) * GK_Q8_BLOCK_BYTES);
}

static void q8_put(gk_gpt2 *m, float *x, float *host, size_t stride, char *dev)
{
    float g[GK_Q8_BLOCK];
    uint8_t q[GK_Q8_BLOCK_BYTES];
    if (!x)
        for (int i = 0; i < GK_Q8_BLOCK; i++) g[i] = host[(size_t)i * stride];
    gk_q8_quantize_block(x ? x : g, q);
    m->be->ops->to_device(m->be, dev, q, sizeof q);
}

static void q8_get(gk_gpt2 *m, float *x, float *host, size_t stride, char *dev)
{
    (void)x;
    uint8_t q[GK_Q8_BLOCK_BYTES];
    m->be->ops->to_host(m->be, q, dev, sizeof q);
    for (int i = 0; i < GK_Q8_BLOCK; i++) host[(size_t)i * stride] = gk_q8_get(q, (size_t)i);
}

void gk_gpt2_param_set(gk_gpt2 *m, int i, float *host)
{
    gk_backend *be = m->be;
    const gk_param *p = &m->params[i];
    if (!p->data && m->wt == GK_Q8) {
        q8_blocks(m, p, host, q8_put);
        return;
    }
    if (p->data) {
        be->ops->to_device(be, p->data, host, p->numel * sizeof(float));
        if (p->copy) be->ops->cast(be, p->copy, m->wt, p->data, GK_F32, p->numel);
        return;
    }
    /* bf16 or fp16 only: in place, element j's 2 bytes land at byte 2j, over floats already read */
    uint16_t *h = (uint16_t *)host;
    for (size_t j = 0; j < p->numel; j++) {
        float f;
        memcpy(&f, (char *)host + 4 * j, 4);
        uint16_t b = m->wt == GK_F16 ? gk_f2f16(f) : gk_f2bf16(f);
        memcpy(h + j, &b, 2);
    }
    be->ops->to_device(be, p->copy, host, p->numel * sizeof(uint16_t));
}

/* The device tensor of a kind, or NULL when the model has none. */
static float *tensor_of(const gk_param *p, enum gk_tensor_kind kind)
{
    switch (kind) {
    case GK_TENSOR_PARAM: return p->data;
    case GK_TENSOR_GRAD: return p->grad;
    case GK_TENSOR_ADAM_M: return p->m;
    case GK_TENSOR_ADAM_V: return p->v;
    }
    return NULL;
}

static const char *kind_name(enum gk_tensor_kind kind)
{
    static const char *names[] = {"parameter", "gradient", "first moment", "second moment"};
    return names[kind];
}

/* A training model made with GK_GPT2_DEFER_MOMENTS (GRADS) before gk_gpt2_set_comm. */
static int moments_deferred(const gk_param *p, enum gk_tensor_kind kind, gk_err *err)
{
    return gk_errf(err, GK_EUSAGE, "%s: the %s is not allocated yet (GK_GPT2_DEFER_MOMENTS, "
                   "GK_GPT2_DEFER_GRADS: gk_gpt2_set_comm first)", p->name, kind_name(kind));
}

/* Before a gradient is read or written: none under ZeRO-2 (each rank holds its shard, summed),
 * else the pending zero_grad carried out. */
static int grads_usable(gk_gpt2 *m, const gk_param *p, enum gk_tensor_kind kind, gk_err *err)
{
    if (kind != GK_TENSOR_GRAD) return 0;
    if (m->zero >= 2)
        return gk_errf(err, GK_EUSAGE, "%s: the gradients are sharded across ranks (zero_stage %d)",
                       p->name, m->zero);
    gk_gpt2_grads_flush(m);
    return 0;
}

int gk_gpt2_tensor_get(gk_gpt2 *m, int i, enum gk_tensor_kind kind, float *host, gk_err *err)
{
    gk_backend *be = m->be;
    if (i < 0 || i >= m->n_params)
        return gk_errf(err, GK_EUSAGE, "tensor %d: the model has %d", i, m->n_params);
    const gk_param *p = &m->params[i];
    int rc = grads_usable(m, p, kind, err);
    if (rc) return rc;
    if (kind == GK_TENSOR_PARAM && m->p_shard)
        return gk_errf(err, GK_EUSAGE, "%s: the parameters are sharded across ranks (zero_stage 3:"
                       " gk_gpt2_shards_gather_packed gathers them)", p->name);
    if (m->offload && !m->zero && kind != GK_TENSOR_GRAD) { /* the host's */
        memcpy(host, gk_gpt2_offload_tensor(m, i, kind), p->numel * sizeof(float));
        return 0;
    }
    float *d = tensor_of(p, kind);
    if (!d && !(m->flags & GK_GPT2_INFERENCE) && kind != GK_TENSOR_PARAM)
        return m->zero ? gk_gpt2_shard_moment_get(m, i, kind, host, err)
                       : moments_deferred(p, kind, err);
    if (d) {
        be->ops->to_host(be, host, d, p->numel * sizeof(float));
    } else if (kind == GK_TENSOR_PARAM && p->copy && m->wt == GK_Q8) {
        q8_blocks(m, p, host, q8_get);
    } else if (kind == GK_TENSOR_PARAM && p->copy) {
        /* widen in place from the back: element j (2 bytes at 2j) -> 4 bytes at 4j */
        be->ops->to_host(be, host, p->copy, p->numel * sizeof(uint16_t));
        for (size_t j = p->numel; j-- > 0;) {
            uint16_t b;
            memcpy(&b, (char *)host + 2 * j, 2);
            host[j] = m->wt == GK_F16 ? gk_f16f(b) : gk_bf16f(b);
        }
    } else {
        return gk_errf(err, GK_EUSAGE, "%s: an inference model has no %s", p->name,
                       kind_name(kind));
    }
    return gk_backend_status(be, err);
}

int gk_gpt2_tensor_set(gk_gpt2 *m, int i, enum gk_tensor_kind kind, const float *host, gk_err *err)
{
    gk_backend *be = m->be;
    if (i < 0 || i >= m->n_params)
        return gk_errf(err, GK_EUSAGE, "tensor %d: the model has %d", i, m->n_params);
    const gk_param *p = &m->params[i];
    if (kind == GK_TENSOR_PARAM && m->p_shard) return gk_gpt2_shard_set(m, i, kind, host, err);
    if (m->offload && !m->zero && kind != GK_TENSOR_GRAD) { /* the host's, and the device's */
        memcpy(gk_gpt2_offload_tensor(m, i, kind), host, p->numel * sizeof(float));
        if (kind == GK_TENSOR_PARAM) gk_gpt2_offload_pushed(m, i);
        return gk_backend_status(be, err);
    }
    if (kind == GK_TENSOR_PARAM && !p->data) {
        float *tmp = malloc(p->numel * sizeof *tmp);
        if (!tmp) return gk_errf(err, GK_ENOMEM, "%s: out of memory", p->name);
        memcpy(tmp, host, p->numel * sizeof *tmp);
        gk_gpt2_param_set(m, i, tmp);
        free(tmp);
        return gk_backend_status(be, err);
    }
    int rc = grads_usable(m, p, kind, err);
    if (rc) return rc;
    float *d = tensor_of(p, kind);
    if (!d && !(m->flags & GK_GPT2_INFERENCE) && kind != GK_TENSOR_PARAM)
        return m->zero ? gk_gpt2_shard_set(m, i, kind, host, err)
                       : moments_deferred(p, kind, err);
    if (!d)
        return gk_errf(err, GK_EUSAGE, "%s: an inference model has no %s", p->name,
                       kind_name(kind));
    be->ops->to_device(be, d, host, p->numel * sizeof(float));
    if (kind == GK_TENSOR_PARAM && p->copy) be->ops->cast(be, p->copy, m->wt, d, GK_F32, p->numel);
    return gk_backend_status(be, err);
}

int gk_gpt2_logits_host(gk_gpt2 *m, int row0, int nrows, int ncols, float *host, gk_err *err)
{
    gk_backend *be = m->be;
    int rows = m->last_B * m->last_T;
    if (row0 < 0 || nrows < 0 || row0 + nrows > rows || ncols < 0 || ncols > m->Vp)
        return gk_errf(err, GK_EUSAGE, "logits: rows %d..%d, %d columns: the last forward has %d "
                       "rows of %d", row0, row0 + nrows - 1, ncols, rows, m->Vp);
    size_t esz = gk_elt_size(m->act);
    for (int r = 0; r < nrows; r++) {
        float *dst = host + (size_t)r * ncols;
        be->ops->to_host(be, dst, gk_gpt2_row(m, m->logits, (size_t)(row0 + r), m->Vp),
                         (size_t)ncols * esz);
        if (m->act == GK_BF16) /* widen in place from the back */
            for (int j = ncols; j-- > 0;) {
                uint16_t b;
                memcpy(&b, (char *)dst + 2 * (size_t)j, 2);
                dst[j] = gk_bf16f(b);
            }
    }
    return gk_backend_status(be, err);
}

const float *gk_gpt2_token_losses(const gk_gpt2 *m) { return m->h_losses; }
