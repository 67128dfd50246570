/* choice.h: multiple-choice evaluation in HellaSwag's JSON Lines format (hellaswag_val.jsonl: an
 * object a line with "ctx", "endings" (2..EP_CHOICE_MAX strings) and "label", the index of the
 * right ending; other keys are ignored), scored as llm.c and build-nanogpt score HellaSwag,
 * completion style: row k is the tokens of ctx followed by those of " " + endings[k] (encoded
 * apart, no <|endoftext|>), and the model's NLL of the ending's tokens given everything before
 * them is summed (acc: the lowest sum is the prediction) and averaged over those tokens
 * (acc_norm: the lowest mean). A row of more than context + 1 tokens keeps its last context + 1:
 * the start of ctx is dropped. Ties go to the lower index, as torch.argmin.
 * Owns: ep_choice_set's items and their tokens until ep_choice_free. One thread. */
#ifndef EP_CHOICE_H
#define EP_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/vocab.h"
#include "kernels/gpt2.h"

enum { EP_CHOICE_MAX = 16 };

typedef struct ep_choice_item {
    long line;                     /* 1-based line in its file */
    int label, n_endings, n_ctx;   /* n_ctx: tokens of ctx */
    int end_len[EP_CHOICE_MAX];    /* tokens of each ending */
    uint32_t *ids;                 /* ctx's tokens, then each ending's */
} ep_choice_item;

typedef struct ep_choice_set {
    char *name;                    /* path or "stdin" */
    ep_choice_item *items;
    size_t n;
    int max_endings, max_row;      /* over the items: endings, tokens of the longest row */
} ep_choice_set;

/* Reads path ("-" = stdin), a JSON object a line (blank lines skipped), encoding each text with
 * v. Every problem (not JSON, a missing or mistyped key, a label out of range, an empty ctx, a
 * token outside vocab_limit, an ending longer than context tokens) is GK_EFORMAT naming
 * "path:line". */
int ep_choice_load(ep_choice_set *s, const char *path, const gk_vocab *v, uint32_t vocab_limit,
                   int context, gk_err *e);
void ep_choice_free(ep_choice_set *s); /* zeroes s */

typedef struct ep_choice_result {
    int pred, pred_norm;           /* lowest sum, lowest mean */
    double nll[EP_CHOICE_MAX];     /* summed NLL of each ending's tokens (nats) */
    int tokens[EP_CHOICE_MAX];     /* tokens scored per ending */
} ep_choice_result;

/* Scores it in one forward of n_endings rows on m (created with max_B >= it->n_endings and
 * max_T >= min(context, the longest row - 1)). */
int ep_choice_score(gk_gpt2 *m, const ep_choice_item *it, int context, ep_choice_result *r,
                    gk_err *e);

#endif
