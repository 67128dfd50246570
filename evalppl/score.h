/* score.h: sliding-window negative log-likelihood of a token stream, as in HuggingFace's
 * perplexity guide, with nanoGPT's windows: a window is `context` input tokens
 * ids[begin .. begin+context) predicting ids[begin+1 .. begin+context]; windows start every
 * `stride` tokens and each scores only the targets the previous one did not, so every token but
 * the first (which has no context) is scored exactly once, with between context-stride+1 and
 * context tokens before it (the whole window when stride = context). The last window is
 * shorter when the stream ends. With stride = context = block_size the windows are gpt-train's
 * val windows laid end to end.
 * Owns: ep_scorer, the model's device buffers for per-token losses (create/free). One thread. */
#ifndef EP_SCORE_H
#define EP_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/model/gpt2.h"

typedef struct ep_scorer ep_scorer;

/* m was created with max_B >= 1, max_T >= context. 1 <= stride <= context. */
int ep_scorer_create(ep_scorer **out, gk_gpt2 *m, int context, int stride, gk_err *e);
void ep_scorer_free(ep_scorer *s); /* NULL-safe */

/* Called per scored token: position in the stream and its NLL (nats). */
typedef void (*ep_token_fn)(void *ctx, size_t pos, double nll);

/* Scores ids[0..n): calls fn for positions 1..n-1 in order; *sum += their NLL. */
int ep_score(ep_scorer *s, const uint32_t *ids, size_t n, ep_token_fn fn, void *ctx, double *sum,
             gk_err *e);

#endif
