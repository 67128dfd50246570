/* gpt2_bwd.c: the backward pass of gpt2_fwd.c, layer by layer in reverse, against backend.h ops.
 * Parameter gradients accumulate (+=); dres carries the gradient of the residual stream. In a
 * data-parallel run each layer's gradients are summed over the ranks as soon as they are written:
 * all-reduced when asked (gk_gpt2_reduce_in_next_backward), and under ZeRO-2 and 3 always
 * reduce-scattered into this rank's gradient shard, the layer's bucket buffer then free for the
 * layer after the next (gpt2_shard.c's layout); under ZeRO-3 each layer's parameters are
 * gathered before its backward (gpt2_gather.c). */
#include <string.h>

#include "kernels/model/gpt2_internal.h"
#include "kernels/model/vocab_split.h"
#include "kernels/rng.h"

/* Backward of out (N,OC) = inp (N,IC) @ w (IC,OC) + bias: dw (IC,OC) = beta dw + inp^T @ dout
 * (beta 1: accumulate; 0: after a zero_grad) and dbias (OC) += the column sums of dout (when
 * dbias), in one gemm_bwd; dinp (N,IC) = dout @ w^T (when dinp), times gelu'(pre) when the
 * layer's input was gelu(pre) (pre not NULL). */
static void matmul_bwd(gk_gpt2 *m, void *dinp, const void *pre, float *dw, float *dbias,
                       float beta, const void *dout, const void *inp, const void *w, int N, int IC,
                       int OC)
{
    gk_backend *be = m->be;
    be->ops->gemm_bwd(be, 1, 0, IC, OC, N, 1.0f, inp, m->act, IC, dout, m->act, OC, beta, dw,
                      GK_F32, OC, NULL, dbias);
    if (dinp)
        be->ops->gemm_bwd(be, 0, 1, N, IC, OC, 1.0f, dout, m->act, OC, w, m->wt, OC, 0.0f, dinp,
                          m->act, IC, pre, NULL);
}

/* matmul_bwd of a column-split projection under tensor parallel (c_attn, c_fc): dinp (N,IC) is
 * this rank's part of the input's gradient, summed over the group; its all-reduce starts as soon
 * as dinp is made and runs while dw's gemm does (the order reversed for that), and ends before
 * this returns. Without tensor parallel, matmul_bwd. */
static void matmul_bwd_summed(gk_gpt2 *m, void *dinp, float *dw, float *dbias, float beta,
                              const void *dout, const void *inp, const void *w, int N, int IC,
                              int OC)
{
    gk_backend *be = m->be;
    if (!m->tp) {
        matmul_bwd(m, dinp, NULL, dw, dbias, beta, dout, inp, w, N, IC, OC);
        return;
    }
    be->ops->gemm_bwd(be, 0, 1, N, IC, OC, 1.0f, dout, m->act, OC, w, m->wt, OC, 0.0f, dinp,
                      m->act, IC, NULL, NULL);
    gk_gpt2_tp_sum_start(m, dinp, (size_t)N * IC);
    be->ops->gemm_bwd(be, 1, 0, IC, OC, N, 1.0f, inp, m->act, IC, dout, m->act, OC, beta, dw,
                      GK_F32, OC, NULL, dbias);
    gk_gpt2_tp_sum_wait(m, dinp, (size_t)N * IC);
}

/* Tensor parallel: a failed collective of vocab_split.h kept as a gather's (pass_status). */
static void tp_status(gk_gpt2 *m, int rc)
{
    if (rc && !m->gather_rc) m->gather_rc = rc;
}

/* ---- sums over the ranks inside the backward (gk_gpt2_reduce_in_next_backward) ---- */

enum { PENDING_MAX = 3 }; /* two layers' buckets and the head's */
typedef struct bwd_sums {
    gk_comm *comm; /* NULL: this backward sums nothing */
    int scatter;   /* ZeRO-2: reduce-scatter each bucket into the shard (comm set) */
    int first;     /* ... overwriting the shard: the first backward after a zero_grad */
    int rc;        /* the first failure */
    gk_err err;
    int npend;     /* ZeRO-2: buckets whose collectives are started, not yet folded (oldest */
    int pend[PENDING_MAX], pend_ops[PENDING_MAX]; /* first), and how many each started */
} bwd_sums;

void gk_gpt2_reduce_in_next_backward(gk_gpt2 *m) { m->reduce_next = 1; }

/* Whether this backward sums the gradients (consumes the request). */
static bwd_sums sums_begin(gk_gpt2 *m)
{
    bwd_sums s = {NULL, 0, 0, 0, {0, {0}}, 0, {0}, {0}};
    if ((m->reduce_next || m->zero >= 2) && m->comm && m->comm->world > 1)
        s.comm = m->comm; /* ZeRO-1 too */
    s.scatter = m->zero >= 2;
    s.first = s.scatter && m->grads_pending_zero;
    m->reduce_next = m->grads_reduced = 0;
    return s;
}

/* ZeRO-2: bucket b's buffer. */
static float *bucket_buf(gk_gpt2 *m, int b)
{
    return b == 0 ? m->g_head : m->g_layer[(b - 1) % 2];
}

/* ZeRO-2: the oldest started bucket's collectives waited for (not those started after it; after
 * a failure too, so that none is left running), and its sums folded into the gradient shard. */
static void finish_oldest(gk_gpt2 *m, bwd_sums *s)
{
    int b = s->pend[0], keep = 0;
    for (int i = 1; i < s->npend; i++) keep += s->pend_ops[i];
    gk_err e;
    int rc = s->pend_ops[0] ? s->comm->ops->started_wait(s->comm, keep, &e) : 0;
    if (rc && !s->rc) s->rc = rc, s->err = e;
    if (!s->rc) gk_gpt2_shard_fold(m, b, bucket_buf(m, b), s->first);
    s->npend--;
    memmove(s->pend, s->pend + 1, sizeof *s->pend * (size_t)s->npend);
    memmove(s->pend_ops, s->pend_ops + 1, sizeof *s->pend_ops * (size_t)s->npend);
}

/* ZeRO-2: bucket b's reduce-scatter (in place) and its tail's all-reduce started; they run while
 * the backward goes on (finish_oldest folds them). */
static void scatter_bucket(gk_gpt2 *m, bwd_sums *s, int b)
{
    const gk_bucket *k = &m->buckets[b];
    gk_comm *c = s->comm;
    float *buf = bucket_buf(m, b);
    size_t tail = gk_bucket_tail(k, c->world), W = (size_t)c->world;
    int ops = 0;
    if (s->npend == PENDING_MAX) finish_oldest(m, s);
    if (!s->rc && k->piece && ++ops)
        s->rc = c->ops->reduce_scatter_start(c, buf, buf + (size_t)c->rank * k->piece, k->piece,
                                             &s->err);
    if (!s->rc && tail && ++ops)
        s->rc = c->ops->allreduce_start(c, buf + W * k->piece, tail, &s->err);
    s->pend[s->npend] = b, s->pend_ops[s->npend++] = ops;
}

/* ZeRO-2: bucket b's buffer free for it: the bucket started before in the same buffer finished. */
static void bucket_free(gk_gpt2 *m, bwd_sums *s, int b)
{
    int last = -1;
    for (int i = 0; i < s->npend; i++)
        if (bucket_buf(m, s->pend[i]) == bucket_buf(m, b)) last = i;
    for (; last >= 0; last--) finish_oldest(m, s);
}

/* ZeRO-2: before bucket b's gradients are written: its buffer free, and the gradients the
 * backward adds to zeroed. */
static void bucket_begin(gk_gpt2 *m, bwd_sums *s, int b)
{
    size_t lo, hi;
    if (!s->scatter) return;
    bucket_free(m, s, b);
    gk_gpt2_bwd_bucket(m, b, &lo, &hi);
    gk_gpt2_zero_small(m, lo, hi);
}

/* ZeRO-3: bucket b's parameters gathered before its backward reads them. A gather is a
 * collective, so the sums started before end first (comm.h: none other while they run); the
 * backward starts a layer's gather as the layer above's backward starts (gk_gpt2_params_prefetch:
 * it runs meanwhile, in the buffer of the layer above that, which is done) and waits for it here,
 * before it starts the sums of the layer above; the forward left the last two layers'
 * gathered. */
static void params_before(gk_gpt2 *m, bwd_sums *s, int b)
{
    if (!gk_gpt2_params_held(m, b))
        while (s->npend) finish_oldest(m, s);
    gk_gpt2_params_need(m, b);
}

/* The gradient floats of layer l: from its first tensor to the next layer's; the last layer's
 * run to the end of the block (ln_f's, written before it), layer -1 is wte and wpe (the head). */
static void sum_layer(gk_gpt2 *m, bwd_sums *s, int l)
{
    size_t lo, hi;
    if (s->scatter) {
        scatter_bucket(m, s, l + 1);
        return;
    }
    gk_gpt2_bwd_bucket(m, l + 1, &lo, &hi);
    if (s->comm && !s->rc)
        s->rc = s->comm->ops->allreduce_start(s->comm, m->g_block + lo, hi - lo, &s->err);
}

/* The head's gradient summed: in stripes (gpt2_head.c: once the other sums have ended, since its
 * collectives are not started ones), else its bucket's sums started. */
static void sum_head(gk_gpt2 *m, bwd_sums *s, int with_grads, float p, uint64_t key)
{
    if (!m->g_stripe) {
        sum_layer(m, s, -1);
        return;
    }
    while (s->npend) finish_oldest(m, s);
    gk_err e;
    int rc = s->rc ? 0 : gk_gpt2_head_grads(m, s->first, with_grads, p, key, &e);
    if (rc) s->rc = rc, s->err = e;
}

/* Waits for the sums; the backend's error first, then the comm's. */
static int sums_end(gk_gpt2 *m, bwd_sums *s, gk_err *err)
{
    while (s->npend) finish_oldest(m, s);
    if (s->scatter) m->grads_pending_zero = 0; /* the shard holds this backward's sums */
    if (s->comm && !s->scatter) {
        gk_err e;
        int rc = s->comm->ops->allreduce_wait(s->comm, &e);
        if (rc && !s->rc) s->rc = rc, s->err = e;
        m->grads_reduced = !s->rc;
    }
    int rc = gk_gpt2_pass_status(m, err);
    if (rc || !s->rc) return rc;
    m->grads_reduced = 0;
    *err = s->err;
    return s->rc;
}

int gk_gpt2_backward(gk_gpt2 *m, float loss_scale, gk_err *err)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    const gk_gpt2_config *c = &m->cfg;
    int B = m->last_B, T = m->last_T, N = B * T, C = c->n_embd, NHa = m->NHa;
    int Ca = m->Ca, Cm = m->Cm; /* this rank's widths (tensor parallel) */
    int V = c->vocab_size, Vp = m->Vp;
    if (m->flags & GK_GPT2_INFERENCE)
        return gk_errf(err, GK_EUSAGE, "backward: an inference model has no gradients");
    if (!m->g_block && !m->g_shard)
        return gk_errf(err, GK_EUSAGE, "backward: the gradients are not allocated yet "
                       "(GK_GPT2_DEFER_GRADS: gk_gpt2_set_comm first)");
    if (!m->last_has_targets)
        return gk_errf(err, GK_EUSAGE, "backward: the last forward had no targets");
    int n_valid = 0;
    for (int i = 0; i < N; i++) n_valid += m->h_targets[i] >= 0;
    bwd_sums sums = sums_begin(m);
    if (!n_valid) { /* no gradient; the ranks still make the same sums (and ZeRO-3's gathers) */
        if (!sums.scatter) gk_gpt2_grads_flush(m);
        params_before(m, &sums, 0);
        params_before(m, &sums, c->n_layer);
        if (m->p_stripe) gk_gpt2_head_gathers(m); /* (dlnf's) */
        for (int l = c->n_layer - 1; l >= -1; l--) {
            size_t lo, hi;
            if (l >= 0) params_before(m, &sums, l + 1);
            if (l > 0) gk_gpt2_params_prefetch(m, l);
            if (l > 0) params_before(m, &sums, l);
            gk_gpt2_bwd_bucket(m, l + 1, &lo, &hi);
            if (l < 0 && m->g_stripe) { /* the head in stripes: zeros, summed alike */
                sum_head(m, &sums, 0, 0.0f, 0);
                continue;
            }
            if (sums.scatter) { /* zero gradients in the bucket, not those before */
                bucket_free(m, &sums, l + 1);
                op->zero(be, bucket_buf(m, l + 1), (hi - lo) * sizeof(float));
            }
            sum_layer(m, &sums, l);
        }
        return sums_end(m, &sums, err);
    }
    float p = m->fwd_dropout ? c->dropout : 0.0f;
    uint64_t ctr = m->fwd_counter;
#define KEY(l, site) (p > 0 ? gk_rng_key(m->rng_seed, ctr, (uint32_t)(l), (site)) : 0)
    m->last_has_targets = 0; /* logits become dlogits: a second backward would be wrong */
    /* for the weight-matrix gradients (ZeRO-2: each bucket starts from zero) */
    float beta = sums.scatter ? 0.0f : gk_gpt2_grads_begin(m);
    if (!m->g_stripe) bucket_begin(m, &sums, 0); /* (in stripes: made at the end) */
    bucket_begin(m, &sums, c->n_layer);
    params_before(m, &sums, 0); /* ZeRO-3: wte (for dlnf) and ln_f (the last layer's bucket) */
    params_before(m, &sums, c->n_layer);

    // loss -> dlogits (N,Vp), in place (tensor parallel: this rank's vocabulary's columns)
    if (!m->tp)
        op->xent_bwd(be, m->logits, m->logits, m->xent_lse, m->d_targets, loss_scale / n_valid,
                     N, V, Vp);
    else if (!m->gather_rc)
        tp_status(m, gk_vocab_xent_bwd(m->vs, m->logits, m->logits, m->xent_lse, m->h_targets,
                                       loss_scale / n_valid, N, Vp, &m->gather_err));
    // lm_head: dwte (Vp,C) += dlogits^T @ lnf (in stripes: at the end); dlnf (N,C) = dlogits @ wte
    if (!m->g_stripe)
        op->gemm(be, 1, 0, Vp, C, N, 1.0f, m->logits, m->act, Vp, m->lnf, m->act, C, beta,
                 m->gg[G_WTE], GK_F32, C, NULL, NULL);
    if (m->p_stripe) /* ZeRO-3: wte a stripe at a time */
        gk_gpt2_head_dlnf(m, m->dtmp, N);
    else
        op->gemm(be, 0, 0, N, C, Vp, 1.0f, m->logits, m->act, Vp, m->gw[G_WTE], m->wt, C, 0.0f,
                 m->dtmp, m->act, C, NULL, NULL);
    gk_gpt2_tp_sum(m, m->dtmp, (size_t)N * C); /* tensor parallel: the vocabulary's parts */
    op->zero(be, m->dres, gk_elt_size(m->act) * N * C);
    op->layernorm_bwd(be, m->dres, m->gg[G_LNFW], m->gg[G_LNFB], m->dtmp, m->res_out,
                      m->gp[G_LNFW], m->lnf_mean, m->lnf_rstd, N, C);

    for (int l = c->n_layer - 1; l >= 0; l--) {
        gk_layer_acts *a = &m->acts[l];
        if (l < c->n_layer - 1) bucket_begin(m, &sums, l + 1); /* (the last one's: above) */
        params_before(m, &sums, l + 1);
        if (l > 0) gk_gpt2_params_prefetch(m, l); /* ZeRO-3: the layer below's, meanwhile */
        /* ln1 and ln2 shared by all layers: they still hold the last layer's from the forward */
        int recompute_ln = (m->flags & GK_GPT2_RECOMPUTE_LN) && l < c->n_layer - 1;
        // MLP branch: dres (N,C) is d next; -> d res2 accumulated into dres
        const void *dbranch = m->dres;
        if (p > 0) {
            op->dropout_bwd(be, m->ddrop, m->dres, (size_t)N * C, p, KEY(l, SITE_MLP_RESID));
            dbranch = m->ddrop;
        }
        /* recompute: one buffer, which still holds the last layer's from the forward */
        if ((m->flags & GK_GPT2_RECOMPUTE) && l < c->n_layer - 1)
            op->gelu_fwd(be, a->fch_gelu, a->fch, N, Cm);
        /* dfch: the gradient of the pre-GELU values (GELU's backward in the gemm) */
        matmul_bwd(m, m->dfch, a->fch, LG(m, l, L_FCPW), LG(m, l, L_FCPB), beta, dbranch,
                   a->fch_gelu, LW(m, l, L_FCPW), N, Cm, C);
        if (recompute_ln) /* ln_2 of res2, as the fused residual add + LayerNorm stored it */
            op->layernorm_fwd(be, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, LP(m, l, L_LN2W),
                              LP(m, l, L_LN2B), N, C);
        matmul_bwd_summed(m, m->dtmp, LG(m, l, L_FCW), LG(m, l, L_FCB), beta, m->dfch, a->ln2,
                          LW(m, l, L_FCW), N, C, Cm); /* (the hidden units' parts summed) */
        op->layernorm_bwd(be, m->dres, LG(m, l, L_LN2W), LG(m, l, L_LN2B), m->dtmp, a->res2,
                          LP(m, l, L_LN2W), a->ln2_mean, a->ln2_rstd, N, C);
        // attention branch: dres is d res2; -> d res accumulated into dres
        dbranch = m->dres;
        if (p > 0) {
            op->dropout_bwd(be, m->ddrop, m->dres, (size_t)N * C, p, KEY(l, SITE_ATTN_RESID));
            dbranch = m->ddrop;
        }
        matmul_bwd(m, m->dtmp, NULL, LG(m, l, L_ATTPW), LG(m, l, L_ATTPB), beta, dbranch,
                   a->atty, LW(m, l, L_ATTPW), N, Ca, C);
        op->attention_bwd(be, m->dqkv, m->dtmp, a->qkv, a->atty, a->lse, B, T, Ca, NHa, p,
                          KEY(l, GK_GPT2_SITE_ATTN(m)));
        if (recompute_ln)
            op->layernorm_fwd(be, a->ln1, a->ln1_mean, a->ln1_rstd, a->res, LP(m, l, L_LN1W),
                              LP(m, l, L_LN1B), N, C);
        matmul_bwd_summed(m, m->dtmp, LG(m, l, L_QKVW), LG(m, l, L_QKVB), beta, m->dqkv, a->ln1,
                          LW(m, l, L_QKVW), N, C, 3 * Ca); /* (the heads' parts summed) */
        op->layernorm_bwd(be, m->dres, LG(m, l, L_LN1W), LG(m, l, L_LN1B), m->dtmp, a->res,
                          LP(m, l, L_LN1W), a->ln1_mean, a->ln1_rstd, N, C);
        /* ZeRO-3: the layer below's parameters gathered before this layer's sums start, so that
         * those run on during the layer below's backward instead of holding up its gather */
        if (l > 0) params_before(m, &sums, l);
        sum_layer(m, &sums, l); /* layer l's gradients are final */
    }
    if (m->tp && !m->gather_rc)
        tp_status(m, gk_vocab_embed_bwd(m->vs, m->gg[G_WTE], m->gg[G_WPE], m->dres, m->h_inputs,
                                        B, T, p, KEY(0, SITE_EMB), &m->gather_err));
    else if (!m->tp && !m->g_stripe) /* (in stripes: sum_head's) */
        op->encoder_bwd(be, m->gg[G_WTE], m->gg[G_WPE], m->dres, m->d_inputs, B, T, C, p,
                        KEY(0, SITE_EMB));
    sum_head(m, &sums, 1, p, KEY(0, SITE_EMB));
#undef KEY
    return sums_end(m, &sums, err);
}
