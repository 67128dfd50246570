/* sampleout.h: printing the K samples of a generation (gpt-sample, gpt-train's samples) as
 * UTF-8-safe text through a streamer (textout.h) or as space-separated token ids.
 * Sample 0 streams: its prompt, then each token as it comes, flushed per token. Samples 1..K-1
 * are kept and follow when the generation ends, whole (prompt included), each after a line
 * "---"; every sample ends with a newline.
 * Owns: gk_sampleout, a copy of the prompt and the tokens of samples 1..K-1 (init/free).
 * One thread. */
#ifndef GS_SAMPLEOUT_H
#define GS_SAMPLEOUT_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/text/textout.h"
#include "common/text/vocab.h"

typedef struct gk_sample_toks {
    int *ids;
    int64_t n;
    size_t cap;
} gk_sample_toks;

typedef struct gk_sampleout {
    const gk_vocab *v;
    FILE *out;
    const char *name;       /* out's name in error messages: "standard output" */
    int ids;                /* ids instead of text */
    int K;
    gk_textout tx;          /* the streamer of the sample being printed */
    int first;              /* no token printed yet in this sample (ids: no space before) */
    gk_sample_toks prompt;  /* the visible prompt */
    gk_sample_toks *kept;   /* (K): the new tokens of samples 1..K-1 ([0] unused) */
} gk_sampleout;

/* For K samples from vocabulary v (its tokens' bytes; unused when ids) onto out, called name
 * in messages. 0 or GK_ENOMEM; gk_sampleout_free in either case. */
int gk_sampleout_init(gk_sampleout *s, const gk_vocab *v, int ids, int K, FILE *out,
                      const char *name, gk_err *e);
void gk_sampleout_free(gk_sampleout *s);
/* The prompt prompt[0..n), whose first `hidden` tokens (the implicit start token) are not
 * printed: sample 0's is printed and flushed. Call once, before any token. */
int gk_sampleout_prompt(gk_sampleout *s, const int *prompt, int64_t n, int hidden, gk_err *e);
/* New token tok of sample `sample`: printed and flushed for sample 0, kept for the others.
 * Its signature is gk_gen_hooks.token's (kernels/infer/generate.h), ctx a gk_sampleout. */
int gk_sampleout_token(void *ctx, int sample, int tok, gk_err *e);
/* Ends sample 0, then prints samples 1..K-1; flushes. */
int gk_sampleout_finish(gk_sampleout *s, gk_err *e);

#endif
