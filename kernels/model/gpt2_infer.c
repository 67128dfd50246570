/* gpt2_infer.c: the incremental forward for sampling (see gk_gpt2_forward_at in gpt2.h): the
 * forward's one layer loop (gpt2_fwd.c's gk_gpt2_forward_ops) with a position, d_pos. Only the n
 * new positions run through the blocks: every op but attention is row-wise, so the row-wise
 * activations hold the B*n new rows packed, while each layer's qkv buffer is the cache, (max_B,
 * max_T, 3C), rows at their positions. With n = 1 the matmuls are matrix-vector products (M = B
 * rows), and the step's ops take the same pointers and arguments at every position (the position is
 * a device int, d_pos), so a backend that can record (CUDA graphs) records the step once per batch
 * size and replays it: one launch a token instead of a dozen a layer. */
#include "kernels/model/gpt2_internal.h"

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
        gk_gpt2_forward_ops(m, B, 1, m->d_pos, 0.0f, 0);
        m->decode_rec = op->record_end(be);
        m->decode_rec_B = B;
    }
    if (m->decode_rec)
        op->replay(be, m->decode_rec);
    else if (!be->err.code)
        gk_gpt2_forward_ops(m, B, 1, m->d_pos, 0.0f, 0);
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
    m->last_has_targets = 0;
    m->fwd_dropout = 0;

    op->to_device(be, m->d_inputs, tokens, sizeof(int) * N);
    op->to_device(be, m->d_pos, &t0, sizeof t0);
    if (n == 1)
        decode_step(m, B);
    else
        gk_gpt2_forward_ops(m, B, n, m->d_pos, 0.0f, 0);
    return gk_gpt2_pass_status(m, err);
}
