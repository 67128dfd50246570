/* sampleout.c: printing generated samples (see sampleout.h). */
#include "common/text/sampleout.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

static int toks_push(gk_sample_toks *t, int id)
{
    if (gk_grow(&t->ids, &t->cap, t->n + 1, sizeof *t->ids, 64)) return -1;
    t->ids[t->n++] = id;
    return 0;
}

int gk_sampleout_init(gk_sampleout *s, const gk_vocab *v, int ids, int K, FILE *out,
                      const char *name, gk_err *e)
{
    memset(s, 0, sizeof *s);
    s->v = v;
    s->out = out;
    s->name = name;
    s->ids = ids;
    s->K = K;
    s->first = 1;
    gk_textout_init(&s->tx, out);
    if (K > 1 && !(s->kept = calloc((size_t)K, sizeof *s->kept)))
        return gk_errf(e, GK_ENOMEM, "out of memory for %d samples", K);
    return 0;
}

void gk_sampleout_free(gk_sampleout *s)
{
    gk_textout_free(&s->tx);
    for (int b = 1; s->kept && b < s->K; b++) free(s->kept[b].ids);
    free(s->kept);
    free(s->prompt.ids);
    memset(s, 0, sizeof *s);
}

/* Prints one token of the current sample: text through its streamer, or the id. */
static int put_token(gk_sampleout *s, int tok)
{
    if (s->ids) {
        int rc = fprintf(s->out, "%s%d", s->first ? "" : " ", tok) < 0 ? -1 : 0;
        s->first = 0;
        return rc;
    }
    size_t len;
    const unsigned char *b = gk_vocab_token(s->v, (uint32_t)tok, &len);
    s->first = 0;
    return gk_textout_push(&s->tx, b, b ? len : 0);
}

/* Ends the current sample (what the streamer holds, a newline) and starts the next. */
static int end_sample(gk_sampleout *s)
{
    if (!s->ids && gk_textout_finish(&s->tx)) return -1;
    gk_textout_free(&s->tx);
    gk_textout_init(&s->tx, s->out);
    s->first = 1;
    return fputc('\n', s->out) == EOF ? -1 : 0;
}

int gk_sampleout_prompt(gk_sampleout *s, const int *prompt, int64_t n, int hidden, gk_err *e)
{
    int rc = 0;
    for (int64_t i = hidden; i < n && rc == 0; i++)
        if (toks_push(&s->prompt, prompt[i]))
            return gk_errf(e, GK_ENOMEM, "out of memory for a prompt of %lld tokens", (long long)n);
    for (int64_t i = 0; i < s->prompt.n && rc == 0; i++) rc = put_token(s, s->prompt.ids[i]);
    if (rc == 0 && fflush(s->out)) rc = -1;
    return rc ? gk_errno(e, s->name) : 0;
}

int gk_sampleout_token(void *ctx, int sample, int tok, gk_err *e)
{
    gk_sampleout *s = ctx;
    if (sample > 0) {
        if (sample < s->K && toks_push(&s->kept[sample], tok) == 0) return 0;
        return sample < s->K ? gk_errf(e, GK_ENOMEM, "out of memory for sample %d", sample)
                             : gk_errf(e, GK_EUSAGE, "sample %d of %d", sample, s->K);
    }
    if (put_token(s, tok) || fflush(s->out)) return gk_errno(e, s->name);
    return 0;
}

int gk_sampleout_finish(gk_sampleout *s, gk_err *e)
{
    int rc = end_sample(s);
    for (int b = 1; b < s->K && rc == 0; b++) {
        if (fputs("---\n", s->out) == EOF) rc = -1;
        for (int64_t i = 0; i < s->prompt.n && rc == 0; i++) rc = put_token(s, s->prompt.ids[i]);
        for (int64_t i = 0; i < s->kept[b].n && rc == 0; i++) rc = put_token(s, s->kept[b].ids[i]);
        if (rc == 0) rc = end_sample(s);
    }
    if (rc == 0 && fflush(s->out)) rc = -1;
    return rc ? gk_errno(e, s->name) : 0;
}
