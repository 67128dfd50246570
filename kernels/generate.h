/* generate.h: the generation loop of gpt-sample: prompt -> K samples as one batch, through the
 * KV cache (gk_gpt2_forward_at), printed as UTF-8-safe text or as token ids.
 * Context: the model sees at most block_size tokens. A longer prompt is cropped to its last
 * block_size tokens; once a sequence fills block_size, every further step recomputes the whole
 * window of the last block_size tokens from position 0 (as nanoGPT's generate does: positions
 * are those of the window), so the cache only helps up to block_size.
 * Owns nothing past the call. Drives the model's backend from the calling thread. */
#ifndef GS_GENERATE_H
#define GS_GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/text/vocab.h"
#include "kernels/gpt2.h"
#include "kernels/sampler.h"

typedef struct gs_gen_opts {
    int64_t n_new;     /* tokens to generate per sample */
    int num_samples;   /* K: the batch (the model must have max_B >= K) */
    int stop_at_eot;   /* a sample ends at <|endoftext|> (not printed) */
    int ids;           /* print ids instead of text */
    gs_params sampling;
} gs_gen_opts;

typedef struct gs_gen_stats {
    int64_t prompt_tokens, new_tokens; /* new_tokens: over all samples, steps actually run */
    double prompt_secs, gen_secs;
} gs_gen_stats;

/* prompt[0..n) (n >= 1); the first `hidden` of them (0 or 1: the implicit start token) are not
 * printed. Sample 0 streams to out as it is generated (flushed per token); samples 1..K-1 follow,
 * each sample ending with a newline and separated by a line "---". */
int gs_generate(gk_gpt2 *m, const gk_vocab *v, const int *prompt, int64_t n,
                int hidden,
                const gs_gen_opts *o, FILE *out, gs_gen_stats *st, gk_err *e);

#endif
