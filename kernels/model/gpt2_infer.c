/* gpt2_infer.c: the incremental forward for sampling (see gk_gpt2_forward_at in gpt2.h): the
 * forward's one layer loop (gpt2_fwd.c's gk_gpt2_forward_ops) with a position, d_pos. Only the n
 * new positions run through the blocks: every op but attention is row-wise, so the row-wise
 * activations hold the B*n new rows packed, while each layer's qkv buffer is the cache, (max_B,
 * max_T, 3C), rows at their positions. With n = 1 the matmuls are matrix-vector products (M = B
 * rows), and the step's ops take the same pointers and arguments at every position (the position is
 * a device int, d_pos), so a backend that can record (CUDA graphs) records the step once per batch
 * size and replays it: one launch a token instead of a dozen a layer. Where the backend has the
 * fused few-row product (gk_ops.matvec) the step takes it: each layernorm in the product after it,
 * each residual add in the product before it (6 launches a layer instead of 8, the same bits),
 * and where it has the MLP's two products in one launch (gk_ops.mlp) that too (4 a layer: the
 * same bits but for the order of the MLP's second sum).
 * Where the backend draws (backend.h's sample) the next tokens are drawn on the device
 * (gk_gpt2_draw) and the step of the drawn tokens records with its draw (gk_gpt2_step_draw): one
 * replay and a copy of B ids a token, no logits on the host. */
#include "kernels/model/gpt2_internal.h"

#include <string.h>

#define W(l, k) LW(m, l, k)

/* Whether the one-row step can run on matvec (its reach, backend.h). */
static int fused_step(const gk_gpt2 *m, int B)
{
    int C = m->cfg.n_embd;
    return m->be->ops->matvec && m->act == GK_BF16 && m->wt == GK_BF16 && !m->tp && !m->p_shard &&
           B <= 4 && C % 8 == 0 && m->Vp % 8 == 0 && sizeof(float) * (size_t)B * C <= 48 * 1024;
}

/* The one-row step on matvec: tokens in d_inputs (B) at d_pos -> logits (B,Vp), the forward's
 * ops (gpt2_fwd.c) with every layernorm and residual add inside a product. */
static void fused_step_ops(gk_gpt2 *m, int B)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    int C = m->cfg.n_embd, L = m->cfg.n_layer;
    op->encoder_fwd(be, m->acts[0].res, m->d_inputs, m->gw[G_WTE], m->wt, m->gp[G_WPE], m->d_pos,
                    B, 1, C, 0.0f, 0);
    for (int l = 0; l < L; l++) {
        gk_layer_acts *a = &m->acts[l];
        void *next = l + 1 < L ? m->acts[l + 1].res : m->res_out;
        op->matvec(be, a->fch, a->res, LP(m, l, L_LN1W), LP(m, l, L_LN1B), W(l, L_QKVW), 0,
                   LP(m, l, L_QKVB), 0, NULL, B, 3 * C, C);
        op->attention_fwd_at(be, a->atty, a->qkv, a->fch, B, m->max_T, m->d_pos, 1, C,
                             m->NHa);
        op->matvec(be, a->res2, a->atty, NULL, NULL, W(l, L_ATTPW), 0, LP(m, l, L_ATTPB), 0,
                   a->res, B, C, C);
        if (op->mlp) {
            op->mlp(be, next, a->res2, LP(m, l, L_LN2W), LP(m, l, L_LN2B), W(l, L_FCW),
                    LP(m, l, L_FCB), W(l, L_FCPW), LP(m, l, L_FCPB), B, C, m->Cm);
            continue;
        }
        op->matvec(be, a->fch_gelu, a->res2, LP(m, l, L_LN2W), LP(m, l, L_LN2B), W(l, L_FCW), 0,
                   LP(m, l, L_FCB), 1, NULL, B, m->Cm, C);
        op->matvec(be, next, a->fch_gelu, NULL, NULL, W(l, L_FCPW), 0, LP(m, l, L_FCPB), 0,
                   a->res2, B, C, m->Cm);
    }
    op->matvec(be, m->logits, m->res_out, m->gp[G_LNFW], m->gp[G_LNFB], m->gw[G_WTE], 1, NULL, 0,
               NULL, B, m->Vp, C);
}

/* The one-row step's ops: fused where the backend can, else the forward's. */
static void step_ops(gk_gpt2 *m, int B)
{
    if (fused_step(m, B)) fused_step_ops(m, B);
    else gk_gpt2_forward_ops(m, B, 1, m->d_pos, 0.0f, 0);
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
    /* (not with ZeRO-3: a replay would not gather the parameters) */
    if (!m->decode_rec && !m->p_shard && op->record_begin && op->record_begin(be) == 0) {
        step_ops(m, B);
        m->decode_rec = op->record_end(be);
        m->decode_rec_B = B;
    }
    if (m->decode_rec)
        op->replay(be, m->decode_rec);
    else if (!be->err.code)
        step_ops(m, B);
}

int gk_gpt2_forward_at(gk_gpt2 *m, const int *tokens, int B, int t0, int n, gk_err *err)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    int V = m->cfg.vocab_size, N = B * n, Tc = m->max_T;
    if (!op->attention_fwd_at)
        return gk_errf(err, GK_EUSAGE, "forward_at: backend %s has no KV-cache attention",
                       op->name);
    if (m->tp)
        return gk_errf(err, GK_EUSAGE, "forward_at: not with tensor parallel (sample from the "
                       "checkpoint: it is whole)");
    if (B < 1 || B > m->max_B || t0 < 0 || n < 1 || t0 + n > Tc)
        return gk_errf(err, GK_EUSAGE, "forward_at: batch %d, positions %d..%d exceed the model's "
                       "%d x %d", B, t0, t0 + n - 1, m->max_B, Tc);
    for (int i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return gk_errf(err, GK_EUSAGE, "forward_at: token %d at %d is outside the vocab (%d)",
                           tokens[i], i, V);
    m->last_B = B;
    m->last_T = n;
    m->last_t0 = t0;
    m->draw_pos = -1;
    m->last_has_targets = 0;
    m->fwd_dropout = 0;

    op->to_device(be, m->d_inputs, tokens, sizeof(int) * N);
    if (m->h_tokens) memcpy(m->h_tokens, tokens, sizeof(int) * N); /* (ZeRO's head) */
    op->to_device(be, m->d_pos, &t0, sizeof t0);
    if (n == 1)
        decode_step(m, B);
    else
        gk_gpt2_forward_ops(m, B, n, m->d_pos, 0.0f, 0);
    return gk_gpt2_pass_status(m, err);
}

/* (not with wte in stripes: its embedding maps the tokens on the host, gpt2_head.c) */
int gk_gpt2_can_draw(const gk_gpt2 *m) { return m->be->ops->sample && !m->tp && !m->p_stripe; }

/* The draw of the B rows at logits row stride ld: ids to d_inputs (the next step's input). */
static void draw_ops(gk_gpt2 *m, const gk_params *p, int nv, int B, const void *logits,
                     size_t ld)
{
    m->be->ops->sample(m->be, m->d_inputs, logits, ld, B, nv, p, m->d_pos);
}

/* The draw's parameters as sampler.h checks them. */
static int draw_check(const gk_gpt2 *m, const gk_params *p, int nv, gk_err *err)
{
    if (nv < 1 || nv > m->cfg.vocab_size)
        return gk_errf(err, GK_EUSAGE, "draw: %d of the %d logits", nv, m->cfg.vocab_size);
    if (!gk_gpt2_can_draw(m))
        return gk_errf(err, GK_EUSAGE, "draw: backend %s does not sample", m->be->ops->name);
    if (!(p->temperature >= 0) || !(p->top_p > 0 && p->top_p <= 1) || p->top_k < 0)
        return gk_errf(err, GK_EUSAGE, "draw: need temperature >= 0, 0 < top-p <= 1, top-k >= 0");
    return 0;
}

int gk_gpt2_draw(gk_gpt2 *m, const gk_params *p, int nv, int64_t step, int *ids, gk_err *err)
{
    gk_backend *be = m->be;
    int rc = draw_check(m, p, nv, err), B = m->last_B, n = m->last_T;
    if (rc) return rc;
    if (m->last_t0 < 0 || step < 0 || step > INT32_MAX)
        return gk_errf(err, GK_EUSAGE, "draw: needs a forward_at before it (step %lld)",
                       (long long)step);
    int st[2] = {m->last_t0 + n - 1, (int)step}; /* the sample op moves them on by one */
    size_t esz = m->act == GK_BF16 ? 2 : 4;
    be->ops->to_device(be, m->d_pos, st, sizeof st);
    draw_ops(m, p, nv, B, (const char *)m->logits + (size_t)(n - 1) * m->Vp * esz,
             (size_t)n * m->Vp);
    be->ops->to_host(be, ids, m->d_inputs, sizeof(int) * B);
    if ((rc = gk_gpt2_pass_status(m, err))) return rc;
    m->draw_pos = m->last_t0 + n;
    return 0;
}

/* The one-row step of the drawn tokens and their draw, recorded with p for batch B (again when
 * either changes) and replayed; run directly when the backend does not record. */
static void step_draw(gk_gpt2 *m, const gk_params *p, int nv, int B)
{
    gk_backend *be = m->be;
    const gk_ops *op = be->ops;
    if (m->draw_rec &&
        (m->draw_rec_B != B || m->draw_rec_n != nv || memcmp(&m->draw_rec_p, p, sizeof *p))) {
        op->record_free(be, m->draw_rec);
        m->draw_rec = NULL;
    }
    if (!m->draw_rec && !m->p_shard && op->record_begin && op->record_begin(be) == 0) {
        step_ops(m, B);
        draw_ops(m, p, nv, B, m->logits, (size_t)m->Vp);
        m->draw_rec = op->record_end(be);
        m->draw_rec_B = B;
        m->draw_rec_n = nv;
        m->draw_rec_p = *p;
    }
    if (m->draw_rec) {
        op->replay(be, m->draw_rec);
    } else if (!be->err.code) {
        step_ops(m, B);
        draw_ops(m, p, nv, B, m->logits, (size_t)m->Vp);
    }
}

int gk_gpt2_step_draw(gk_gpt2 *m, const gk_params *p, int nv, int *ids, gk_err *err)
{
    gk_backend *be = m->be;
    int rc = draw_check(m, p, nv, err), B = m->last_B;
    if (rc) return rc;
    if (m->draw_pos < 0 || m->draw_pos >= m->max_T)
        return gk_errf(err, GK_EUSAGE, "step_draw: %s", m->draw_pos < 0 ? "needs a draw before it"
                       : "the cache is full");
    m->last_T = 1;
    m->last_t0 = m->draw_pos;
    step_draw(m, p, nv, B);
    be->ops->to_host(be, ids, m->d_inputs, sizeof(int) * B);
    if ((rc = gk_gpt2_pass_status(m, err))) return rc;
    m->draw_pos++;
    return 0;
}
