/* gpt2_params.c: the parameter table, model create/free, accessors and random init, and the
 * sizes a model would take (gk_gpt2_sizes_of, for gpt2_mem.c's fit check).
 * The table below is the only list of GPT-2 tensors: allocation, iteration (checkpoints) and
 * the per-layer pointers the graph uses are all derived from it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/model/gpt2_internal.h"
#include "kernels/rng.h"

enum init { I_NORMAL, I_PROJ, I_ONE, I_ZERO };

typedef struct pdesc {
    const char *name;  /* after "transformer." (and "h.%d." for per-layer ones) */
    int slot;          /* L_* or G_* */
    int is_bias;       /* absent when cfg.bias == 0 */
    enum gk_gpt2_dim d0, d1; /* d1 == GK_DIM_1: 1-D */
    enum init init;
} pdesc;

static const pdesc g_head[] = {
    {"wte.weight", G_WTE, 0, GK_DIM_V, GK_DIM_C, I_NORMAL},
    {"wpe.weight", G_WPE, 0, GK_DIM_T, GK_DIM_C, I_NORMAL},
};
static const pdesc g_layer[L_COUNT] = {
    {"ln_1.weight", L_LN1W, 0, GK_DIM_C, GK_DIM_1, I_ONE},
    {"ln_1.bias", L_LN1B, 1, GK_DIM_C, GK_DIM_1, I_ZERO},
    {"attn.c_attn.weight", L_QKVW, 0, GK_DIM_C, GK_DIM_3C, I_NORMAL},
    {"attn.c_attn.bias", L_QKVB, 1, GK_DIM_3C, GK_DIM_1, I_ZERO},
    {"attn.c_proj.weight", L_ATTPW, 0, GK_DIM_C, GK_DIM_C, I_PROJ},
    {"attn.c_proj.bias", L_ATTPB, 1, GK_DIM_C, GK_DIM_1, I_ZERO},
    {"ln_2.weight", L_LN2W, 0, GK_DIM_C, GK_DIM_1, I_ONE},
    {"ln_2.bias", L_LN2B, 1, GK_DIM_C, GK_DIM_1, I_ZERO},
    {"mlp.c_fc.weight", L_FCW, 0, GK_DIM_C, GK_DIM_4C, I_NORMAL},
    {"mlp.c_fc.bias", L_FCB, 1, GK_DIM_4C, GK_DIM_1, I_ZERO},
    {"mlp.c_proj.weight", L_FCPW, 0, GK_DIM_4C, GK_DIM_C, I_PROJ},
    {"mlp.c_proj.bias", L_FCPB, 1, GK_DIM_C, GK_DIM_1, I_ZERO},
};
static const pdesc g_tail[] = {
    {"ln_f.weight", G_LNFW, 0, GK_DIM_C, GK_DIM_1, I_ONE},
    {"ln_f.bias", G_LNFB, 1, GK_DIM_C, GK_DIM_1, I_ZERO},
};

int64_t gk_gpt2_dim_size(const gk_gpt2_config *c, enum gk_gpt2_dim d)
{
    switch (d) {
    case GK_DIM_V: return c->vocab_size;
    case GK_DIM_T: return c->block_size;
    case GK_DIM_C: return c->n_embd;
    case GK_DIM_3C: return 3 * (int64_t)c->n_embd;
    case GK_DIM_4C: return 4 * (int64_t)c->n_embd;
    default: return 1;
    }
}

int gk_gpt2_config_check(const gk_gpt2_config *c, gk_err *err)
{
    if (c->n_layer < 1 || c->n_layer > 1000)
        return gk_errf(err, GK_EUSAGE, "n_layer = %d: must be 1..1000", c->n_layer);
    if (c->n_head < 1) return gk_errf(err, GK_EUSAGE, "n_head = %d: must be >= 1", c->n_head);
    if (c->n_embd < 1 || c->n_embd > 65536 || c->n_embd % c->n_head)
        return gk_errf(err, GK_EUSAGE, "n_embd = %d: must be a positive multiple of n_head (%d)",
                       c->n_embd, c->n_head);
    if (c->block_size < 1 || c->block_size > 1 << 20)
        return gk_errf(err, GK_EUSAGE, "block_size = %d: must be 1..1048576", c->block_size);
    if (c->vocab_size < 1 || c->vocab_size > 1 << 24)
        return gk_errf(err, GK_EUSAGE, "vocab_size = %d: must be 1..16777216", c->vocab_size);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return gk_errf(err, GK_EUSAGE, "dropout = %g: must be in [0, 1)", c->dropout);
    return 0;
}

/* The weight matrices (wte and the four per layer; not wpe) have a copy of type wt when that is
 * not fp32; an inference model then keeps no fp32 master of them. */
static int has_copy(const gk_gpt2 *m, const pdesc *d)
{
    return m->wt != GK_F32 && d->d1 != GK_DIM_1 && d->d0 != GK_DIM_T;
}

/* The flags as the model keeps them (16-bit weights imply INFERENCE, which drops recompute), and
 * the type of the weight matrices the matmuls read. */
static int model_flags(int flags)
{
    if (flags & (GK_GPT2_BF16 | GK_GPT2_F16 | GK_GPT2_Q8)) flags |= GK_GPT2_INFERENCE;
    if (flags & GK_GPT2_INFERENCE) flags &= ~(GK_GPT2_RECOMPUTE | GK_GPT2_RECOMPUTE_LN);
    return flags;
}
static gk_elt weight_type(int flags, gk_elt act)
{
    if (flags & GK_GPT2_F16) return GK_F16;
    if (flags & GK_GPT2_Q8) return GK_Q8;
    return (flags & GK_GPT2_BF16) || act == GK_BF16 ? GK_BF16 : GK_F32;
}

/* 0, or GK_EUSAGE for weight flags the backend (NULL: any) or the model cannot run. */
static int weights_check(int flags, const gk_gpt2_config *c, const gk_backend *be, gk_elt act,
                         gk_err *err)
{
    int wf = flags & (GK_GPT2_BF16 | GK_GPT2_F16 | GK_GPT2_Q8);
    if (wf & (wf - 1))
        return gk_errf(err, GK_EUSAGE, "gpt2: more than one weight type (flags 0x%x)", wf);
    const char *what = wf == GK_GPT2_F16 ? "fp16" : wf == GK_GPT2_Q8 ? "int8" : NULL;
    if (what &&
        (act != GK_F32 || (be && strcmp(be->ops->name, "cpu") && strcmp(be->ops->name, "ref"))))
        return gk_errf(err, GK_EUSAGE,
                       "%s weights run on the CPU backends only, cpu and ref (this is %s)", what,
                       be ? be->ops->name : "a bf16 device");
    if (wf == GK_GPT2_Q8 && c->n_embd % GK_Q8_BLOCK)
        return gk_errf(err, GK_EUSAGE, "int8 weights: n_embd %d is not a multiple of %d (their "
                       "block)", c->n_embd, GK_Q8_BLOCK);
    return 0;
}
static int has_master(const gk_gpt2 *m, const pdesc *d)
{
    return !(has_copy(m, d) && (m->flags & GK_GPT2_INFERENCE));
}

/* Appends one table entry (offsets assigned, pointers filled in later). */
static void add_param(gk_gpt2 *m, const pdesc *d, int layer)
{
    const gk_gpt2_config *c = &m->cfg;
    gk_param *p = &m->params[m->n_params++];
    if (layer >= 0) snprintf(p->name, sizeof p->name, "transformer.h.%d.%s", layer, d->name);
    else snprintf(p->name, sizeof p->name, "transformer.%s", d->name);
    p->ndim = d->d1 == GK_DIM_1 ? 1 : 2;
    p->dim[0] = d->d0;
    p->dim[1] = d->d1;
    p->full_shape[0] = (int)gk_gpt2_dim_size(c, d->d0);
    p->full_shape[1] = p->ndim == 2 ? (int)gk_gpt2_dim_size(c, d->d1) : 0;
    p->full_numel = (size_t)p->full_shape[0] * (p->ndim == 2 ? (size_t)p->full_shape[1] : 1);
    p->split = m->tp_n > 1 ? gk_gpt2_tp_split_of(layer, d->slot) : GK_SPLIT_NONE;
    gk_tp_part_shape(p->split, p->ndim, p->full_shape, m->tp_n, m->tp_rank, p->shape);
    p->numel = (size_t)p->shape[0] * (p->ndim == 2 ? (size_t)p->shape[1] : 1);
    size_t stored = d->d0 == GK_DIM_V ? (size_t)m->Vp * p->shape[1] : p->numel;
    p->decay = p->ndim == 2;
    m->p_init[m->n_params - 1] = d->init;
    /* offsets keep every tensor 64-byte aligned (copies too) */
    if (m->c_off) m->c_off[m->n_params - 1] = has_copy(m, d) ? m->n_copy : (size_t)-1;
    if (has_copy(m, d)) {
        if (layer == 0 && d->slot == L_QKVW) m->copies_at = m->n_copy;
        m->n_copy += (stored + 31) / 32 * 32;
    } else {
        m->small_floats += (p->numel + 15) / 16 * 16;
    }
    if (has_master(m, d)) {
        if (layer == 0 && d->slot == L_LN1W) m->layers_at = m->n_floats;
        if (layer < 0 && d->slot == G_LNFW) m->layers_end = m->n_floats;
        p->offset = m->n_floats;
        m->n_floats += (stored + 15) / 16 * 16;
    }
}

/* Visits the table in order: fn(m, desc, layer) (layer -1 for the global tensors). */
static void walk(gk_gpt2 *m, void (*fn)(gk_gpt2 *, const pdesc *, int))
{
    for (size_t i = 0; i < sizeof g_head / sizeof *g_head; i++) fn(m, &g_head[i], -1);
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (int k = 0; k < L_COUNT; k++)
            if (m->cfg.bias || !g_layer[k].is_bias) fn(m, &g_layer[k], l);
    for (size_t i = 0; i < sizeof g_tail / sizeof *g_tail; i++)
        if (m->cfg.bias || !g_tail[i].is_bias) fn(m, &g_tail[i], -1);
}

/* Points one gradient (gk_param.grad and the graph's pointer to it) where gk_gpt2_grad_at says. */
static void set_grad(gk_gpt2 *m, const pdesc *d, int layer)
{
    gk_param *p = &m->params[m->n_params++];
    if (m->flags & GK_GPT2_INFERENCE) return; /* (no gradients; an offloaded matrix has no data) */
    p->grad = gk_gpt2_grad_at(m, p->offset);
    if (layer >= 0) LG(m, layer, d->slot) = p->grad;
    else m->gg[d->slot] = p->grad;
}

void gk_gpt2_point_grads(gk_gpt2 *m)
{
    int n = m->n_params;
    m->n_params = 0;
    walk(m, set_grad);
    m->n_params = n;
}

static void set_ptrs(gk_gpt2 *m, const pdesc *d, int layer);
void gk_gpt2_point_all(gk_gpt2 *m)
{
    int n = m->n_params;
    m->n_params = 0;
    walk(m, set_ptrs);
    m->n_params = n;
}

static void set_ptrs(gk_gpt2 *m, const pdesc *d, int layer)
{
    gk_param *p = &m->params[m->n_params++];
    if (has_copy(m, d)) p->copy = gk_gpt2_copy_at(m, m->c_off[m->n_params - 1]);
    if (has_master(m, d)) {
        size_t small = m->s_off[m->n_params - 1];
        p->data = !m->p_small           ? gk_gpt2_param_at(m, p->offset)
                  : small != (size_t)-1 ? m->p_small + small
                                        : NULL; /* (offloaded: the host keeps it) */
        if (!(m->flags & GK_GPT2_INFERENCE)) {
            p->grad = gk_gpt2_grad_at(m, p->offset); /* NULL: deferred */
            p->m = m->m_block ? m->m_block + p->offset : NULL; /* NULL: deferred, or sharded */
            p->v = m->v_block ? m->v_block + p->offset : NULL;
        }
    }
    void *w = p->copy ? p->copy : (void *)p->data;
    if (layer >= 0) {
        LP(m, layer, d->slot) = p->data;
        LG(m, layer, d->slot) = p->grad;
        LW(m, layer, d->slot) = w;
    } else {
        m->gp[d->slot] = p->data;
        m->gg[d->slot] = p->grad;
        m->gw[d->slot] = w;
    }
}

/* Carves the activation block (base NULL: just count). Returns its size in bytes. Activations
 * (A) have the backend's type, statistics (F) and token ids (I) 4 bytes. Inference models:
 * layer 0's buffers serve every layer (nothing is kept for a backward), but qkv, the KV cache.
 * GK_GPT2_RECOMPUTE: layer 0's fch_gelu serves every layer (the backward recomputes it);
 * GK_GPT2_RECOMPUTE_LN: likewise its ln1 and ln2. */
static size_t layout(gk_gpt2 *m, char *base)
{
    size_t off = 0, BT = (size_t)m->max_B * m->max_T, C = m->cfg.n_embd;
    size_t Ca = (size_t)m->Ca, Cm = (size_t)m->Cm; /* this rank's widths (tensor parallel) */
    size_t A = gk_elt_size(m->act), F = sizeof(float), I = sizeof(int);
    int infer = m->flags & GK_GPT2_INFERENCE, recompute = m->flags & GK_GPT2_RECOMPUTE;
    int recompute_ln = m->flags & GK_GPT2_RECOMPUTE_LN;
    size_t lse = (size_t)m->max_B * m->NHa * m->max_T;
#define TAKE(ptr, n, size)                                    \
    do {                                                      \
        if (base) ptr = (void *)(base + off);                 \
        off += ((size_t)(n) * (size) + 63) / 64 * 64;         \
    } while (0)
    for (int l = 0; l < m->cfg.n_layer; l++) {
        gk_layer_acts *a = &m->acts[l];
        if (infer && l > 0) {
            void *qkv = NULL;
            TAKE(qkv, BT * 3 * Ca, A);
            *a = m->acts[0];
            a->qkv = qkv;
            continue;
        }
        TAKE(a->res, BT * C, A);
        if (recompute_ln && l > 0)
            a->ln1 = m->acts[0].ln1;
        else
            TAKE(a->ln1, BT * C, A);
        TAKE(a->ln1_mean, BT, F);
        TAKE(a->ln1_rstd, BT, F);
        TAKE(a->qkv, BT * 3 * Ca, A);
        TAKE(a->atty, BT * Ca, A);
        TAKE(a->lse, lse, F);
        TAKE(a->res2, BT * C, A);
        if (recompute_ln && l > 0)
            a->ln2 = m->acts[0].ln2;
        else
            TAKE(a->ln2, BT * C, A);
        TAKE(a->ln2_mean, BT, F);
        TAKE(a->ln2_rstd, BT, F);
        TAKE(a->fch, BT * Cm, A);
        if (recompute && l > 0)
            a->fch_gelu = m->acts[0].fch_gelu;
        else
            TAKE(a->fch_gelu, BT * Cm, A);
    }
    TAKE(m->res_out, BT * C, A);
    TAKE(m->lnf, BT * C, A);
    TAKE(m->lnf_mean, BT, F);
    TAKE(m->lnf_rstd, BT, F);
    TAKE(m->logits, BT * m->Vp, A);
    TAKE(m->losses, BT, F);
    TAKE(m->xent_lse, BT, F);
    TAKE(m->tmp, BT * C, A);
    if (!infer) {
        TAKE(m->dres, BT * C, A);
        TAKE(m->dtmp, BT * C, A);
        TAKE(m->ddrop, BT * C, A);
        TAKE(m->dqkv, BT * 3 * Ca, A);
        TAKE(m->dfch, BT * Cm, A);
    }
    TAKE(m->d_inputs, BT, I);
    TAKE(m->d_targets, BT, I);
    TAKE(m->d_pos, 2, I);
#undef TAKE
    return off;
}

int gk_gpt2_create(gk_gpt2 **out, const gk_gpt2_config *cfg, gk_backend *be, int max_B, int max_T,
                   gk_err *err)
{
    return gk_gpt2_create_ex(out, cfg, be, max_B, max_T, 0, err);
}

int gk_gpt2_create_ex(gk_gpt2 **out, const gk_gpt2_config *cfg, gk_backend *be, int max_B,
                      int max_T, int flags, gk_err *err)
{
    return gk_gpt2_create_tp(out, cfg, be, max_B, max_T, flags, NULL, err);
}

/* The widths of one rank's part of the blocks, and its padded vocabulary (the logits' columns:
 * with tensor parallel its slice of wte's rows and a zero row, vocab_split.h's). */
static void set_widths(gk_gpt2 *m, int tp_n, int tp_rank)
{
    const gk_gpt2_config *c = &m->cfg;
    m->tp_n = tp_n > 1 ? tp_n : 1;
    m->tp_rank = tp_n > 1 ? tp_rank : 0;
    m->Ca = c->n_embd / m->tp_n;
    m->Cm = 4 * c->n_embd / m->tp_n;
    m->NHa = c->n_head / m->tp_n;
    int slice = (c->vocab_size + m->tp_n - 1) / m->tp_n;
    m->Vp = m->tp_n > 1 ? (slice + 1 + 63) / 64 * 64 : (c->vocab_size + 63) / 64 * 64;
}

int gk_gpt2_create_tp(gk_gpt2 **out, const gk_gpt2_config *cfg, gk_backend *be, int max_B,
                      int max_T, int flags, gk_comm *tp, gk_err *err)
{
    int rc = gk_gpt2_config_check(cfg, err);
    if (!rc) rc = gk_gpt2_tp_check(cfg, flags, tp ? tp->world : 1, err);
    if (!rc) rc = weights_check(flags, cfg, be, be->act, err);
    if (rc) return rc;
    if (max_B < 1 || max_T < 1 || max_T > cfg->block_size)
        return gk_errf(err, GK_EUSAGE, "batch %d x %d: need B >= 1 and 1 <= T <= block_size (%d)",
                       max_B, max_T, cfg->block_size);
    gk_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return gk_errf(err, GK_ENOMEM, "gpt2: out of memory");
    m->cfg = *cfg;
    m->be = be;
    m->tp = tp && tp->world > 1 ? tp : NULL;
    set_widths(m, m->tp ? tp->world : 1, m->tp ? tp->rank : 0);
    m->max_B = max_B;
    m->max_T = max_T;
    m->draw_pos = m->last_t0 = -1;
    flags = model_flags(flags); /* an inference model keeps nothing to recompute */
    m->flags = flags;
    m->act = be->act;
    m->wt = weight_type(flags, be->act);
    int L = cfg->n_layer, maxp = 4 + L * L_COUNT;
    size_t BT = (size_t)max_B * max_T;
    m->params = calloc(maxp, sizeof *m->params);
    m->p_init = calloc(maxp, sizeof *m->p_init);
    m->c_off = calloc(maxp, sizeof *m->c_off);
    m->s_off = calloc(maxp, sizeof *m->s_off);
    m->lp = calloc((size_t)L * L_COUNT, sizeof *m->lp);
    m->lg = calloc((size_t)L * L_COUNT, sizeof *m->lg);
    m->lw = calloc((size_t)L * L_COUNT, sizeof *m->lw);
    m->acts = calloc(L, sizeof *m->acts);
    m->h_targets = malloc(BT * sizeof *m->h_targets);
    m->h_losses = malloc(BT * sizeof *m->h_losses);
    if (!m->params || !m->p_init || !m->c_off || !m->s_off || !m->lp || !m->lg || !m->lw ||
        !m->acts || !m->h_targets || !m->h_losses)
        goto nomem;
    walk(m, add_param);
    size_t bytes = m->n_floats * sizeof(float);
    m->p_block = be->ops->alloc(be, bytes);
    if (!m->p_block) goto nomem;
    if (m->n_copy && !(m->w_block = be->ops->alloc(be, gk_elt_bytes(m->wt, m->n_copy))))
        goto nomem;
    if (!(flags & GK_GPT2_INFERENCE)) { /* else gk_gpt2_set_comm's */
        int moments = !(flags & GK_GPT2_DEFER_MOMENTS), grads = !(flags & GK_GPT2_DEFER_GRADS);
        m->g_block = grads ? be->ops->alloc(be, bytes) : NULL;
        m->m_block = moments ? be->ops->alloc(be, bytes) : NULL;
        m->v_block = moments ? be->ops->alloc(be, bytes) : NULL;
        if ((grads && !m->g_block) || (moments && (!m->m_block || !m->v_block))) goto nomem;
    }
    m->n_params = 0;
    walk(m, set_ptrs);
    size_t nact = layout(m, NULL);
    if (!(m->act_block = be->ops->alloc(be, nact))) goto nomem;
    layout(m, m->act_block);
    if (m->tp && (rc = gk_gpt2_tp_setup(m, err))) {
        gk_gpt2_free(m);
        return rc;
    }
    /* widest row any reduction sees: C or 4C (bias_bwd of c_fc), or 3C (c_attn) */
    rc = be->ops->reserve(be, BT, 4 * (size_t)cfg->n_embd, cfg->n_embd / cfg->n_head, max_T, err);
    if (rc) {
        gk_gpt2_free(m);
        return rc;
    }
    *out = m;
    return 0;
nomem:
    gk_gpt2_free(m);
    return gk_errf(err, GK_ENOMEM,
                   "gpt2: out of memory for a %d-layer, %d-wide model, batch %d x %d", L,
                   cfg->n_embd, max_B, max_T);
}

void gk_gpt2_free(gk_gpt2 *m)
{
    if (!m) return;
    gk_backend *be = m->be;
    if (m->decode_rec) be->ops->record_free(be, m->decode_rec);
    if (m->draw_rec) be->ops->record_free(be, m->draw_rec);
    be->ops->free(be, m->p_block);
    be->ops->free(be, m->g_block);
    be->ops->free(be, m->m_block);
    be->ops->free(be, m->v_block);
    be->ops->free(be, m->m_shard);
    be->ops->free(be, m->v_shard);
    be->ops->free(be, m->g_shard);
    be->ops->free(be, m->g_head), gk_gpt2_head_free(m);
    for (int k = 0; k < 2; k++) be->ops->free(be, m->g_layer[k]);
    be->ops->free(be, m->p_shard);
    be->ops->free(be, m->p_head);
    be->ops->free(be, m->w_head);
    for (int k = 0; k < 2; k++) {
        be->ops->free(be, m->p_layer[k]);
        be->ops->free(be, m->w_layer[k]);
    }
    free(m->buckets);
    be->ops->free(be, m->w_block);
    be->ops->free(be, m->act_block);
    free(m->m_host);
    free(m->v_host);
    free(m->params);
    free(m->p_init);
    free(m->c_off);
    free(m->s_off);
    be->ops->free(be, m->p_small);
    gk_gpt2_offload_free(m);
    gk_gpt2_tp_free(m);
    free(m->lp);
    free(m->lg);
    free(m->lw);
    free(m->acts);
    free(m->h_targets);
    free(m->h_losses);
    free(m);
}

const gk_gpt2_config *gk_gpt2_cfg(const gk_gpt2 *m) { return &m->cfg; }
int gk_gpt2_padded_vocab(const gk_gpt2 *m) { return m->Vp; }
int gk_gpt2_n_params(const gk_gpt2 *m) { return m->n_params; }
const gk_param *gk_gpt2_param(const gk_gpt2 *m, int i)
{
    return i >= 0 && i < m->n_params ? &m->params[i] : NULL;
}
size_t gk_gpt2_num_scalars(const gk_gpt2 *m)
{
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += m->params[i].full_numel;
    return n;
}
int gk_gpt2_flags(const gk_gpt2 *m) { return m->flags; }
void gk_gpt2_set_training(gk_gpt2 *m, int on) { m->training = on; }
void gk_gpt2_set_rng(gk_gpt2 *m, uint64_t seed, uint64_t counter)
{
    m->rng_seed = seed;
    m->rng_counter = counter;
}
void gk_gpt2_get_rng(const gk_gpt2 *m, uint64_t *seed, uint64_t *counter)
{
    if (seed) *seed = m->rng_seed;
    if (counter) *counter = m->rng_counter;
}
int64_t gk_gpt2_get_step(const gk_gpt2 *m) { return m->step; }
void gk_gpt2_set_step(gk_gpt2 *m, int64_t step) { m->step = step; }

int gk_gpt2_init(gk_gpt2 *m, uint64_t seed, gk_err *err)
{
    gk_backend *be = m->be;
    if (m->p_shard || m->offload)
        return gk_errf(err, GK_EUSAGE, "gpt2 init: the parameters are %s: initialize before %s",
                       m->p_shard ? "sharded (zero_stage 3)" : "offloaded",
                       m->p_shard ? "gk_gpt2_set_comm" : "gk_gpt2_set_offload");
    size_t maxn = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].full_numel > maxn) maxn = m->params[i].full_numel;
    float *h = malloc(maxn * sizeof *h), *part = m->tp ? malloc(maxn * sizeof *part) : NULL;
    if (!h || (m->tp && !part)) {
        free(h);
        free(part);
        return gk_errf(err, GK_ENOMEM, "gpt2 init: out of memory");
    }
    double proj_std = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        uint64_t key = gk_rng_key(seed, 0, (uint32_t)i, 0x1417);
        for (size_t j = 0; j < p->full_numel; j++) { /* the whole tensor's, then the part */
            switch (m->p_init[i]) {
            case I_ONE: h[j] = 1.0f; break;
            case I_ZERO: h[j] = 0.0f; break;
            default: { /* Box-Muller on two counter-based uniforms */
                double u1 = gk_rng_uniform(key, 2 * j) + 0x1p-25,
                       u2 = gk_rng_uniform(key, 2 * j + 1);
                double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
                h[j] = (float)(z * (m->p_init[i] == I_PROJ ? proj_std : 0.02));
            }
            }
        }
        if (p->split != GK_SPLIT_NONE) {
            gk_tp_part_copy(p->split, p->ndim, p->full_shape, m->tp_n, m->tp_rank, h, part, 0,
                            p->numel, 0);
            gk_gpt2_param_set(m, i, part);
        } else {
            gk_gpt2_param_set(m, i, h);
        }
    }
    free(h);
    free(part);
    size_t bytes = m->n_floats * sizeof(float);
    if (m->g_block) be->ops->zero(be, m->g_block, bytes);
    if (m->m_block) be->ops->zero(be, m->m_block, bytes);
    if (m->v_block) be->ops->zero(be, m->v_block, bytes);
    if (m->m_shard) { /* ZeRO: the shard's moments */
        be->ops->zero(be, m->m_shard, m->shard_floats * sizeof(float));
        be->ops->zero(be, m->v_shard, m->shard_floats * sizeof(float));
    }
    if (m->g_shard) be->ops->zero(be, m->g_shard, m->shard_floats * sizeof(float));
    m->grads_pending_zero = 0;
    m->step = 0;
    return gk_backend_status(be, err);
}

int gk_gpt2_param_table(const gk_gpt2_config *cfg, gk_param *out, int cap)
{
    gk_gpt2 t = {0};
    t.cfg = *cfg;
    set_widths(&t, 1, 0);
    int maxp = 4 + cfg->n_layer * L_COUNT;
    t.params = calloc(maxp, sizeof *t.params);
    t.p_init = calloc(maxp, sizeof *t.p_init);
    if (!t.params || !t.p_init) {
        free(t.params);
        free(t.p_init);
        return GK_ENOMEM;
    }
    walk(&t, add_param);
    for (int i = 0; i < t.n_params && i < cap && out; i++) {
        out[i] = t.params[i];
        out[i].offset = 0;
        out[i].copy = NULL;
    }
    free(t.params);
    free(t.p_init);
    return t.n_params;
}

/* Rough activation bytes in floating point, to see whether layout()'s size_t sums could wrap. */
static double act_bytes_approx(const gk_gpt2_config *c, int max_B, int max_T, size_t A)
{
    double BT = (double)max_B * max_T, C = c->n_embd;
    double per_layer = 16 * C * A + 4.0 * 8 + (double)c->n_head * 4; /* without recompute */
    return BT * (c->n_layer * per_layer + (c->vocab_size + 64.0) * A + 16 * C * A + 32);
}

int gk_gpt2_sizes_of(const gk_gpt2_config *cfg, gk_elt act, int max_B, int max_T, int flags,
                     int tp, gk_gpt2_sizes *out, gk_err *err)
{
    int rc = gk_gpt2_config_check(cfg, err);
    if (!rc) rc = weights_check(flags, cfg, NULL, act, err);
    if (!rc) rc = gk_gpt2_tp_check(cfg, flags, tp, err);
    if (rc) return rc;
    if (max_B < 1 || max_T < 1 || max_T > cfg->block_size)
        return gk_errf(err, GK_EUSAGE, "batch %d x %d: need B >= 1 and 1 <= T <= block_size (%d)",
                       max_B, max_T, cfg->block_size);
    gk_gpt2 t = {0};
    t.cfg = *cfg;
    set_widths(&t, tp, 0); /* (tensor parallel: rank 0's, which holds the most of wte) */
    t.max_B = max_B;
    t.max_T = max_T;
    t.flags = model_flags(flags);
    t.act = act;
    t.wt = weight_type(t.flags, act);
    int maxp = 4 + cfg->n_layer * L_COUNT;
    t.params = calloc(maxp, sizeof *t.params);
    t.p_init = calloc(maxp, sizeof *t.p_init);
    t.acts = calloc(cfg->n_layer, sizeof *t.acts);
    if (!t.params || !t.p_init || !t.acts) rc = gk_errf(err, GK_ENOMEM, "out of memory");
    if (!rc) {
        walk(&t, add_param);
        double approx = act_bytes_approx(cfg, max_B, max_T, gk_elt_size(act));
        out->n_floats = t.n_floats;
        out->layers_at = t.layers_at;
        out->layers_end = t.layers_end;
        out->copies_at = t.copies_at;
        out->copy_elems = t.n_copy;
        out->small_floats = t.small_floats;
        out->copy_bytes = gk_elt_bytes(t.wt, t.n_copy);
        out->inference = (t.flags & GK_GPT2_INFERENCE) != 0;
        out->vocab_rows = tp < 2 ? (size_t)t.Vp : 0, out->width = (size_t)cfg->n_embd; /* (ZeRO) */
        out->embed_floats = (size_t)max_B * max_T * out->width * (act == GK_F32 ? 1 : 2);
        out->act_bytes = approx < 0x1p60 ? layout(&t, NULL) : (size_t)0x1p60; /* saturated */
        out->whole_floats = 0;
        for (int i = 0; tp > 1 && i < t.n_params; i++)
            if (t.params[i].full_numel > out->whole_floats)
                out->whole_floats = t.params[i].full_numel;
        if (tp > 1 && approx < 0x1p59) /* gk_gpt2_tp_setup's scratch and vocab_split's */
            out->act_bytes += gk_gpt2_tp_scratch(cfg, act, max_B, max_T, tp);
    }
    free(t.params);
    free(t.p_init);
    free(t.acts);
    return rc;
}
