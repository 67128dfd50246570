/* generate.c: the batched generation loop (see generate.h). */
#include "kernels/generate.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text/textout.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints one token of a sample: text through its streamer, or the id. */
static int put_token(const gk_vocab *v, gs_textout *tx, int ids, int *first, int tok, FILE *out)
{
    if (ids) {
        int rc = fprintf(out, "%s%d", *first ? "" : " ", tok) < 0 ? -1 : 0;
        *first = 0;
        return rc;
    }
    size_t len;
    const unsigned char *b = gk_vocab_token(v, (uint32_t)tok, &len);
    *first = 0;
    return gs_textout_push(tx, b, b ? len : 0);
}

static int end_sample(gs_textout *tx, int ids, FILE *out)
{
    if (!ids && gs_textout_finish(tx)) return -1;
    return fputc('\n', out) == EOF ? -1 : 0;
}

/* The logits row of the last position of each sequence -> host rows (K, nv). */
static int last_logits(gk_gpt2 *m, float *host, int K, int n, int nv, gk_err *e)
{
    int rc = 0;
    for (int b = 0; b < K && !rc; b++)
        rc = gk_gpt2_logits_host(m, b * n + n - 1, 1, nv, host + (size_t)b * nv, e);
    return rc;
}

int gs_generate(gk_gpt2 *m, const gk_vocab *v, const int *prompt, int64_t n,
                int hidden,
                const gs_gen_opts *o, FILE *out, gs_gen_stats *st, gk_err *e)
{
    const gk_gpt2_config *cfg = gk_gpt2_cfg(m);
    int K = o->num_samples, bs = cfg->block_size;
    int nv = cfg->vocab_size < (int)gk_vocab_size(v) ? cfg->vocab_size : (int)gk_vocab_size(v);
    int eot = o->stop_at_eot ? gk_vocab_eot(v) : -1;
    int64_t cap = n + o->n_new;
    memset(st, 0, sizeof *st);
    int *seq = malloc(sizeof(int) * (size_t)K * cap), *in = malloc(sizeof(int) * (size_t)K * bs);
    int64_t *shown = calloc(K, sizeof *shown); /* generated tokens visible, per sample */
    char *done = calloc(K, 1);
    float *logits = malloc(sizeof(float) * (size_t)K * nv);
    gs_sampler *smp = NULL;
    gs_textout tx;
    gs_textout_init(&tx, out);
    int rc = 0, first = 1;
    if (!seq || !in || !shown || !done || !logits) {
        rc = gk_errf(e, GK_ENOMEM, "out of memory for %d samples of %" PRId64 " tokens", K, cap);
        goto out;
    }
    if ((rc = gs_sampler_create(&smp, &o->sampling, nv, e))) goto out;
    for (int b = 0; b < K; b++) memcpy(seq + (size_t)b * cap, prompt, sizeof(int) * n);

    // sample 0 streams: its prompt first
    for (int64_t i = hidden; i < n && rc == 0; i++)
        rc = put_token(v, &tx, o->ids, &first, prompt[i], out);
    if (rc == 0 && fflush(out)) rc = -1;
    if (rc) {
        rc = gk_errno(e, "standard output");
        goto out;
    }

    double t0 = now();
    int64_t len = n;
    int ctx = n < bs ? (int)n : bs;
    for (int b = 0; b < K; b++) memcpy(in + (size_t)b * ctx, prompt + n - ctx, sizeof(int) * ctx);
    if ((rc = gk_gpt2_forward_at(m, in, K, 0, ctx, e))) goto out;
    if ((rc = last_logits(m, logits, K, ctx, nv, e))) goto out;
    st->prompt_tokens = ctx;
    st->prompt_secs = now() - t0;
    t0 = now();
    for (int64_t step = 0; step < o->n_new; step++) {
        int live = 0;
        for (int b = 0; b < K; b++) {
            int tok = gs_sample(smp, logits + (size_t)b * nv, (uint32_t)b, (uint64_t)step);
            seq[(size_t)b * cap + len] = tok;
            if (done[b]) continue;
            if (tok == eot) {
                done[b] = 1;
                continue;
            }
            shown[b]++;
            live++;
            if (b == 0 && (put_token(v, &tx, o->ids, &first, tok, out) || fflush(out))) {
                rc = gk_errno(e, "standard output");
                goto out;
            }
        }
        len++;
        st->new_tokens += K;
        if (!live || step + 1 == o->n_new) break;
        if (len <= bs) {
            for (int b = 0; b < K; b++) in[b] = seq[(size_t)b * cap + len - 1];
            rc = gk_gpt2_forward_at(m, in, K, (int)(len - 1), 1, e);
            ctx = 1;
        } else { // the window slides: recompute the last block_size tokens
            for (int b = 0; b < K; b++)
                memcpy(in + (size_t)b * bs, seq + (size_t)b * cap + len - bs, sizeof(int) * bs);
            rc = gk_gpt2_forward_at(m, in, K, 0, bs, e);
            ctx = bs;
        }
        if (rc) goto out;
        if ((rc = last_logits(m, logits, K, ctx, nv, e))) goto out;
    }
    st->gen_secs = now() - t0;

    // sample 0 ends; then the others, whole
    if (end_sample(&tx, o->ids, out)) {
        rc = gk_errno(e, "standard output");
        goto out;
    }
    for (int b = 1; b < K && rc == 0; b++) {
        gs_textout_free(&tx);
        gs_textout_init(&tx, out);
        first = 1;
        if (fputs("---\n", out) == EOF) rc = -1;
        const int *s = seq + (size_t)b * cap;
        for (int64_t i = hidden; i < n + shown[b] && rc == 0; i++)
            rc = put_token(v, &tx, o->ids, &first, s[i], out);
        if (rc == 0) rc = end_sample(&tx, o->ids, out);
        if (rc) rc = gk_errno(e, "standard output");
    }
    if (rc == 0 && fflush(out)) rc = gk_errno(e, "standard output");
out:
    gs_textout_free(&tx);
    gs_sampler_free(smp);
    free(seq);
    free(in);
    free(shown);
    free(done);
    free(logits);
    return rc;
}
