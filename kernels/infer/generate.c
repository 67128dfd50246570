/* generate.c: the batched generation loop (see generate.h). */
#include "kernels/infer/generate.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The loop's state: every sequence (prompt + generated), the model's input, the drawn tokens and
 * (drawn on the host) the host logits. */
typedef struct gen_state {
    gk_gpt2 *m;
    const gk_params *p;
    gk_sampler *smp; /* NULL: the model draws on the device (gk_gpt2_draw) */
    int K, bs, nv;
    int64_t cap;  /* tokens per sequence: prompt + n_new */
    int *seq;     /* (K, cap) */
    int *in;      /* (K, block_size): the next forward's input */
    int *ids;     /* (K): the tokens drawn last */
    char *done;   /* (K): the sample has ended at end-of-text */
    float *logits; /* (K, nv) */
} gen_state;

/* The tokens of step `step` after the last forward (the last of its n positions) -> ids: drawn
 * on the device where the model draws, else by the host's sampler from the host logits. */
static int draw_tokens(gen_state *g, int n, int64_t step, gk_err *e)
{
    if (!g->smp) return gk_gpt2_draw(g->m, g->p, g->nv, step, g->ids, e);
    int rc = 0;
    for (int b = 0; b < g->K && !rc; b++)
        rc = gk_gpt2_logits_host(g->m, b * n + n - 1, 1, g->nv, g->logits + (size_t)b * g->nv, e);
    for (int b = 0; b < g->K && !rc; b++)
        g->ids[b] = gk_sample(g->smp, g->logits + (size_t)b * g->nv, (uint32_t)b, (uint64_t)step);
    return rc;
}

/* Runs the model on the sequences of length len (their last token new) and draws step `step`'s
 * tokens from their last position: through the cache while they fit block_size (on the device,
 * the step and the draw in one replay), else the window of their last block_size tokens from
 * position 0. */
static int forward_next(gen_state *g, int64_t len, int64_t step, gk_err *e)
{
    int rc, ctx;
    if (len <= g->bs && !g->smp) return gk_gpt2_step_draw(g->m, g->p, g->nv, g->ids, e);
    if (len <= g->bs) {
        for (int b = 0; b < g->K; b++) g->in[b] = g->seq[(size_t)b * g->cap + len - 1];
        rc = gk_gpt2_forward_at(g->m, g->in, g->K, (int)(len - 1), 1, e);
        ctx = 1;
    } else {
        for (int b = 0; b < g->K; b++)
            memcpy(g->in + (size_t)b * g->bs, g->seq + (size_t)b * g->cap + len - g->bs,
                   sizeof(int) * g->bs);
        rc = gk_gpt2_forward_at(g->m, g->in, g->K, 0, g->bs, e);
        ctx = g->bs;
    }
    return rc ? rc : draw_tokens(g, ctx, step, e);
}

/* The prompt's forward pass (its last block_size tokens) and first draw; *ran = its tokens. */
static int forward_prompt(gen_state *g, const int *prompt, int64_t n, int64_t *ran, gk_err *e)
{
    int ctx = n < g->bs ? (int)n : g->bs;
    for (int b = 0; b < g->K; b++)
        memcpy(g->in + (size_t)b * ctx, prompt + n - ctx, sizeof(int) * ctx);
    *ran = ctx;
    int rc = gk_gpt2_forward_at(g->m, g->in, g->K, 0, ctx, e);
    return rc ? rc : draw_tokens(g, ctx, 0, e);
}

static int state_init(gen_state *g, gk_gpt2 *m, const int *prompt, int64_t n,
                      const gk_gen_opts *o, gk_err *e)
{
    const gk_gpt2_config *cfg = gk_gpt2_cfg(m);
    memset(g, 0, sizeof *g);
    g->m = m;
    g->p = &o->sampling;
    g->K = o->num_samples;
    g->bs = cfg->block_size;
    g->nv = o->n_vocab > 0 && o->n_vocab < cfg->vocab_size ? o->n_vocab : cfg->vocab_size;
    g->cap = n + o->n_new;
    int host = !gk_gpt2_can_draw(m);
    if (host) {
        int rc = gk_sampler_create(&g->smp, &o->sampling, g->nv, e);
        if (rc) return rc;
    }
    g->seq = malloc(sizeof(int) * (size_t)g->K * g->cap);
    g->in = malloc(sizeof(int) * (size_t)g->K * g->bs);
    g->ids = malloc(sizeof(int) * (size_t)g->K);
    g->done = calloc(g->K, 1);
    g->logits = host ? malloc(sizeof(float) * (size_t)g->K * g->nv) : NULL;
    if (!g->seq || !g->in || !g->ids || !g->done || (host && !g->logits))
        return gk_errf(e, GK_ENOMEM, "out of memory for %d samples of %" PRId64 " tokens", g->K,
                       g->cap);
    for (int b = 0; b < g->K; b++) memcpy(g->seq + (size_t)b * g->cap, prompt, sizeof(int) * n);
    return 0;
}

static void state_free(gen_state *g)
{
    gk_sampler_free(g->smp);
    free(g->seq);
    free(g->in);
    free(g->ids);
    free(g->done);
    free(g->logits);
}

/* Step `step`'s drawn tokens into seq[len], handing on those of live samples; *live = how many
 * were live. */
static int take(gen_state *g, const gk_gen_opts *o, const gk_gen_hooks *h, int64_t len,
                int *live, gk_err *e)
{
    *live = 0;
    for (int b = 0; b < g->K; b++) {
        int tok = g->ids[b];
        g->seq[(size_t)b * g->cap + len] = tok;
        if (g->done[b]) continue;
        if (tok == o->eot) {
            g->done[b] = 1;
            continue;
        }
        (*live)++;
        int rc = h && h->token ? h->token(h->ctx, b, tok, e) : 0;
        if (rc) return rc;
    }
    return 0;
}

int gk_generate(gk_gpt2 *m, const int *prompt, int64_t n, const gk_gen_opts *o,
                const gk_gen_hooks *h, gk_gen_counts *counts, gk_err *e)
{
    gk_gen_counts cnt = {0, 0};
    gen_state g;
    int rc = state_init(&g, m, prompt, n, o, e);
    if (!rc) rc = forward_prompt(&g, prompt, n, &cnt.prompt_tokens, e);
    if (!rc && h && h->prompt_done) h->prompt_done(h->ctx, cnt.prompt_tokens);
    int64_t len = n;
    for (int64_t step = 0; !rc && step < o->n_new; step++) {
        int live;
        rc = take(&g, o, h, len, &live, e);
        if (rc) break;
        len++;
        cnt.new_tokens += g.K;
        if (!live || step + 1 == o->n_new) break;
        rc = forward_next(&g, len, step + 1, e);
    }
    if (counts) *counts = cnt;
    state_free(&g);
    return rc;
}
