/* generate.h: the generation loop of gpt-sample and gpt-train's samples: prompt -> K samples as
 * one batch, through the KV cache (gk_gpt2_forward_at) and the sampler. It prints nothing and
 * keeps no clock: it hands each new token to the caller (gk_gen_hooks), who prints it (e.g.
 * common/text/sampleout.h) and times the prompt and the generation from the hooks.
 * Context: the model sees at most block_size tokens. A longer prompt is cropped to its last
 * block_size tokens; once a sequence fills block_size, every further step recomputes the whole
 * window of the last block_size tokens from position 0 (as nanoGPT's generate does: positions
 * are those of the window), so the cache only helps up to block_size.
 * Owns nothing past the call. Drives the model's backend from the calling thread. */
#ifndef GS_GENERATE_H
#define GS_GENERATE_H

#include <stdint.h>

#include "common/err.h"
#include "kernels/model/gpt2.h"
#include "kernels/infer/sampler.h"

typedef struct gk_gen_opts {
    int64_t n_new;     /* tokens to generate per sample */
    int num_samples;   /* K: the batch (the model must have max_B >= K) */
    int eot;           /* a sample ends at this token (not handed on); -1: none */
    int n_vocab;       /* tokens are drawn from the first min(n_vocab, the model's vocab_size)
                        * logits (the vocabulary may be smaller than the padded model's);
                        * <= 0: all vocab_size */
    gk_params sampling;
} gk_gen_opts;

/* What the caller hears, from the calling thread. Either function may be NULL. */
typedef struct gk_gen_hooks {
    void *ctx;
    /* The prompt's forward pass is done (`tokens` of it ran, after cropping); the first new
     * token is drawn next. */
    void (*prompt_done)(void *ctx, int64_t tokens);
    /* New token `token` of sample `sample` (0..K-1), in order within each sample and step by
     * step across samples. A sample's end-of-text token and anything after it are not handed
     * on. Non-zero (a GK_E* code, with e set) stops the generation with that error. */
    int (*token)(void *ctx, int sample, int token, gk_err *e);
} gk_gen_hooks;

typedef struct gk_gen_counts {
    int64_t prompt_tokens; /* run through the model (the prompt after cropping) */
    int64_t new_tokens;    /* over all samples: K per step actually run */
} gk_gen_counts;

/* prompt[0..n) (n >= 1) -> K samples, each token through h->token. counts may be NULL.
 * Returns 0 or the first error (the model's, the sampler's or a hook's). */
int gk_generate(gk_gpt2 *m, const int *prompt, int64_t n, const gk_gen_opts *o,
                const gk_gen_hooks *h, gk_gen_counts *counts, gk_err *e);

#endif
