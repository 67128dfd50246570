/* gpt2_fwd.c: the forward pass, written once against backend.h ops (never branching on the device).
 * Pre-LN blocks: x += attn(ln_1(x)); x += mlp(ln_2(x)); then ln_f and the tied lm_head. Each
 * residual add is one op with the layernorm that reads its output (ln_2, the next ln_1, ln_f). */
#include <stdlib.h>
#include <string.h>

#include "kernels/model/gpt2_internal.h"
#include "kernels/model/vocab_split.h"
#include "kernels/rng.h"

void gk_gpt2_matmul(gk_gpt2 *m, void *out, const void *inp, const void *w, const float *bias,
                    void *pre_gelu, int N, int IC, int OC)
{
    int tq = m->wt == GK_Q8; /* int8 weights are kept [out, in] (gpt2.h: GK_GPT2_Q8) */
    m->be->ops->gemm(m->be, 0, tq, N, OC, IC, 1.0f, inp, m->act, IC, w, m->wt, tq ? IC : OC, 0.0f,
                     out, m->act, OC, bias, pre_gelu);
}

/* logits (N,Vp) = lnf (N,C) @ wte^T (the tied lm_head) */
static void lm_head(gk_gpt2 *m, int N)
{
    int C = m->cfg.n_embd, Vp = m->Vp;
    if (m->p_stripe) { /* ZeRO-3: wte a stripe at a time (gpt2_head.c) */
        gk_gpt2_head_logits(m, N);
        return;
    }
    m->be->ops->gemm(m->be, 0, 1, N, Vp, C, 1.0f, m->lnf, m->act, C, m->gw[G_WTE], m->wt, C, 0.0f,
                     m->logits, m->act, Vp, NULL, NULL);
}

/* acts[0].res (B,T,C) = dropout(wte[d_inputs] + wpe[t0 + t]), t0 a device int (NULL: 0) */
static void embed(gk_gpt2 *m, int B, int T, const int *t0, float p, uint64_t key)
{
    if (m->tp) { /* this rank's rows of wte, summed over the ranks (vocab_split.h) */
        int rc = m->gather_rc ? 0
                              : gk_vocab_embed_fwd(m->vs, m->acts[0].res, m->h_inputs,
                                                   m->gp[G_WTE], m->gp[G_WPE], B, T, p, key,
                                                   &m->gather_err);
        if (rc) m->gather_rc = rc;
        return;
    }
    if (m->p_stripe) { /* ZeRO-3: wte a stripe at a time (gpt2_head.c) */
        gk_gpt2_head_embed(m, m->acts[0].res, B, T, t0, p, key);
        return;
    }
    m->be->ops->encoder_fwd(m->be, m->acts[0].res, m->d_inputs, m->gw[G_WTE], m->wt,
                            m->gp[G_WPE], t0, B, T, m->cfg.n_embd, p, key);
}

#define W(l, k) LW(m, l, k)
#define KEY(l, site) (p > 0 ? gk_rng_key(m->rng_seed, ctr, (uint32_t)(l), (site)) : 0)

void gk_gpt2_forward_ops(gk_gpt2 *m, int B, int T, const int *d_pos, float p, uint64_t ctr)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    const gk_gpt2_config *c = &m->cfg;
    int C = c->n_embd, Ca = m->Ca, Cm = m->Cm, NHa = m->NHa, N = B * T; /* (this rank's) */
    gk_gpt2_params_need(m, 0); /* ZeRO-3: wte and wpe, then layer 0's (gpt2_gather.c) */
    gk_gpt2_params_need(m, 1);
    embed(m, B, T, d_pos, p, KEY(0, SITE_EMB));
    // layer 0's ln_1; every later layernorm is fused with the residual add before it
    op->layernorm_fwd(be, m->acts[0].ln1, m->acts[0].ln1_mean, m->acts[0].ln1_rstd, m->acts[0].res,
                      LP(m, 0, L_LN1W), LP(m, 0, L_LN1B), N, C);
    for (int l = 0; l < c->n_layer; l++) {
        gk_layer_acts *a = &m->acts[l];
        int last = l + 1 == c->n_layer;
        if (!last) gk_gpt2_params_prefetch(m, l + 2); /* ZeRO-3: the next layer's, meanwhile */
        // attention branch: ln1 (N,C) -> res2 (N,C) = res + attn, and ln2 = ln_2(res2). With
        // d_pos the new rows' q,k,v go to fch, and the attention op stores them in the cache (qkv)
        if (d_pos) {
            gk_gpt2_matmul(m, a->fch, a->ln1, W(l, L_QKVW), LP(m, l, L_QKVB), NULL, N, C, 3 * C);
            op->attention_fwd_at(be, a->atty, a->qkv, a->fch, B, m->max_T, d_pos, T, C, NHa);
        } else {
            gk_gpt2_matmul(m, a->qkv, a->ln1, W(l, L_QKVW), LP(m, l, L_QKVB), NULL, N, C, 3 * Ca);
            op->attention_fwd(be, a->atty, a->lse, a->qkv, B, T, Ca, NHa, p,
                              KEY(l, GK_GPT2_SITE_ATTN(m)));
        }
        gk_gpt2_matmul(m, m->tmp, a->atty, W(l, L_ATTPW), NULL, NULL, N, Ca, C);
        gk_gpt2_tp_sum(m, m->tmp, (size_t)N * C); /* tensor parallel: the heads' parts summed */
        op->residual_layernorm_fwd(be, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, a->res, m->tmp,
                                   LP(m, l, L_ATTPB), p, KEY(l, SITE_ATTN_RESID),
                                   LP(m, l, L_LN2W), LP(m, l, L_LN2B), N, C);
        // MLP branch: ln2 (N,C) -> next (N,C) = res2 + mlp, and the next layer's ln_1 (or ln_f)
        gk_gpt2_matmul(m, a->fch_gelu, a->ln2, W(l, L_FCW), LP(m, l, L_FCB), a->fch, N, C, Cm);
        gk_gpt2_matmul(m, m->tmp, a->fch_gelu, W(l, L_FCPW), NULL, NULL, N, Cm, C);
        gk_gpt2_tp_sum(m, m->tmp, (size_t)N * C); /* (the hidden units' parts) */
        gk_layer_acts *nx = &m->acts[last ? l : l + 1];
        if (!last) gk_gpt2_params_need(m, l + 2); /* the next layer's, for its ln_1 here */
        op->residual_layernorm_fwd(be, last ? m->res_out : nx->res, last ? m->lnf : nx->ln1,
                                   last ? m->lnf_mean : nx->ln1_mean,
                                   last ? m->lnf_rstd : nx->ln1_rstd, a->res2, m->tmp,
                                   LP(m, l, L_FCPB), p, KEY(l, SITE_MLP_RESID),
                                   last ? m->gp[G_LNFW] : LP(m, l + 1, L_LN1W),
                                   last ? m->gp[G_LNFB] : LP(m, l + 1, L_LN1B), N, C);
    }
    // lm_head tied to wte: logits (N,Vp) = lnf (N,C) @ wte^T (C,Vp)
    lm_head(m, N);
}
#undef KEY

int gk_gpt2_forward(gk_gpt2 *m, const int *inputs, const int *targets, int B, int T, float *loss,
                    gk_err *err)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    const gk_gpt2_config *c = &m->cfg;
    int V = c->vocab_size, Vp = m->Vp, N = B * T;
    if (B < 1 || T < 1 || B > m->max_B || T > m->max_T)
        return gk_errf(err, GK_EUSAGE, "forward: batch %d x %d exceeds the model's %d x %d", B, T,
                       m->max_B, m->max_T);
    int n_valid = 0;
    for (int i = 0; i < N; i++) {
        if (inputs[i] < 0 || inputs[i] >= V)
            return gk_errf(err, GK_EUSAGE,
                           "forward: input token %d at %d is outside the vocab (%d)", inputs[i], i,
                           V);
        if (targets) {
            if (targets[i] < -1 || targets[i] >= V)
                return gk_errf(err, GK_EUSAGE, "forward: target %d at %d is outside the vocab (%d)",
                               targets[i], i, V);
            n_valid += targets[i] >= 0;
        }
    }
    float p = m->training && !(m->flags & GK_GPT2_INFERENCE) ? c->dropout : 0.0f;
    uint64_t ctr = m->rng_counter;
    if (p > 0) m->rng_counter++;
    m->fwd_counter = ctr;
    m->fwd_dropout = p > 0;
    m->last_B = B;
    m->draw_pos = m->last_t0 = -1; /* the cache and the logits are this forward's */
    m->last_T = T;
    m->last_has_targets = targets != NULL;
    op->to_device(be, m->d_inputs, inputs, sizeof(int) * N);
    if (m->tp) memcpy(m->h_inputs, inputs, sizeof(int) * N);
    if (m->h_tokens) memcpy(m->h_tokens, inputs, sizeof(int) * N); /* (ZeRO's head: backward) */
    gk_gpt2_forward_ops(m, B, T, NULL, p, ctr);
    if (!targets) return gk_gpt2_pass_status(m, err);

    for (int i = 0; i < N; i++) m->h_targets[i] = targets[i];
    op->to_device(be, m->d_targets, targets, sizeof(int) * N);
    int rc = 0;
    if (!m->tp) op->xent_fwd(be, m->losses, m->xent_lse, m->logits, m->d_targets, N, V, Vp);
    else if (!m->gather_rc) /* the logits' columns of this rank's vocabulary (vocab_split.h) */
        rc = gk_vocab_xent_fwd(m->vs, m->losses, m->xent_lse, m->logits, targets, N, Vp, err);
    if (rc) return rc;
    op->to_host(be, m->h_losses, m->losses, sizeof(float) * N);
    rc = gk_gpt2_pass_status(m, err);
    if (rc) return rc;
    double s = 0;
    for (int i = 0; i < N; i++) s += m->h_losses[i];
    if (loss) *loss = n_valid ? (float)(s / n_valid) : 0.0f;
    return 0;
}
