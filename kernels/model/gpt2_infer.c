/* gpt2_infer.c: the incremental forward for sampling (see gk_gpt2_forward_at in gpt2.h), written
 * against backend.h ops like gpt2_fwd.c. Only the n new positions run through the blocks: every
 * op but attention is row-wise, so the row-wise activations hold the B*n new rows packed, while
 * each layer's qkv buffer is the cache, (max_B, max_T, 3C), rows at their positions. With n = 1
 * the matmuls are matrix-vector products (M = B rows), and the step's ops take the same pointers
 * and arguments at every position (the position is a device int, d_pos), so a backend that can
 * record (CUDA graphs) records the step once per batch size and replays it: one launch a token
 * instead of a dozen a layer. */
#include "kernels/model/gpt2_internal.h"

#define W(l, k) LW(m, l, k)

/* The ops of one incremental forward: tokens in d_inputs, t0 in d_pos -> logits (B*n rows). */
static void forward_at_ops(gk_gpt2 *m, int B, int n)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    const gk_gpt2_config *c = &m->cfg;
    int C = c->n_embd, NH = c->n_head, N = B * n;
    gk_gpt2_embed(m, B, n, m->d_pos, 0.0f, 0);
    // layer 0's ln_1; every later layernorm is fused with the residual add before it
    op->layernorm_fwd(be, m->acts[0].ln1, m->acts[0].ln1_mean, m->acts[0].ln1_rstd, m->acts[0].res,
                      LP(m, 0, L_LN1W), LP(m, 0, L_LN1B), N, C);
    for (int l = 0; l < c->n_layer; l++) {
        gk_layer_acts *a = &m->acts[l];
        // attention branch: ln1 (N,C) -> new q,k,v (N,3C) packed in fch, stored into the cache
        // by the attention op; res2 (N,C) = res + attn, and ln2
        gk_gpt2_matmul(m, a->fch, a->ln1, W(l, L_QKVW), LP(m, l, L_QKVB), NULL, N, C, 3 * C);
        op->attention_fwd_at(be, a->atty, a->qkv, a->fch, B, m->max_T, m->d_pos, n, C, NH);
        gk_gpt2_matmul(m, m->tmp, a->atty, W(l, L_ATTPW), NULL, NULL, N, C, C);
        op->residual_layernorm_fwd(be, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, a->res, m->tmp,
                                   LP(m, l, L_ATTPB), 0.0f, 0, LP(m, l, L_LN2W), LP(m, l, L_LN2B),
                                   N, C);
        // MLP branch: ln2 (N,C) -> next (N,C) = res2 + mlp, and the next layer's ln_1 (or ln_f)
        gk_gpt2_matmul(m, a->fch_gelu, a->ln2, W(l, L_FCW), LP(m, l, L_FCB), a->fch, N, C, 4 * C);
        gk_gpt2_matmul(m, m->tmp, a->fch_gelu, W(l, L_FCPW), NULL, NULL, N, 4 * C, C);
        int last = l + 1 == c->n_layer;
        gk_layer_acts *nx = &m->acts[last ? l : l + 1];
        op->residual_layernorm_fwd(be, last ? m->res_out : nx->res, last ? m->lnf : nx->ln1,
                                   last ? m->lnf_mean : nx->ln1_mean,
                                   last ? m->lnf_rstd : nx->ln1_rstd, a->res2, m->tmp,
                                   LP(m, l, L_FCPB), 0.0f, 0,
                                   last ? m->gp[G_LNFW] : LP(m, l + 1, L_LN1W),
                                   last ? m->gp[G_LNFB] : LP(m, l + 1, L_LN1B), N, C);
    }
    // lm_head tied to wte: logits (N,Vp) = lnf (N,C) @ wte^T (C,Vp)
    gk_gpt2_lm_head(m, N);
}

/* The one-row step for batch B, recorded the first time (or when B changes) and replayed;
 * run directly when the backend does not record. */
static void decode_step(gk_gpt2 *m, int B)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    if (m->decode_rec && m->decode_rec_B != B) {
        op->record_free(be, m->decode_rec);
        m->decode_rec = NULL;
    }
    if (!m->decode_rec && op->record_begin && op->record_begin(be) == 0) {
        forward_at_ops(m, B, 1);
        m->decode_rec = op->record_end(be);
        m->decode_rec_B = B;
    }
    if (m->decode_rec)
        op->replay(be, m->decode_rec);
    else if (!be->err.code)
        forward_at_ops(m, B, 1);
}

int gk_gpt2_forward_at(gk_gpt2 *m, const int *tokens, int B, int t0, int n, gk_err *err)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    int V = m->cfg.vocab_size, N = B * n, Tc = m->max_T;
    if (!op->attention_fwd_at)
        return gk_errf(err, GK_EUSAGE, "forward_at: backend %s has no KV-cache attention", op->name);
    if (B < 1 || B > m->max_B || t0 < 0 || n < 1 || t0 + n > Tc)
        return gk_errf(err, GK_EUSAGE, "forward_at: batch %d, positions %d..%d exceed the model's "
                       "%d x %d", B, t0, t0 + n - 1, m->max_B, Tc);
    for (int i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return gk_errf(err, GK_EUSAGE, "forward_at: token %d at %d is outside the vocab (%d)",
                           tokens[i], i, V);
    m->last_B = B;
    m->last_T = n;
    m->last_has_targets = 0;
    m->fwd_dropout = 0;

    op->to_device(be, m->d_inputs, tokens, sizeof(int) * N);
    op->to_device(be, m->d_pos, &t0, sizeof t0);
    if (n == 1)
        decode_step(m, B);
    else
        forward_at_ops(m, B, n);
    return gk_backend_status(be, err);
}
