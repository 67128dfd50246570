/* choice.h: a multiple-choice item (common/io/choice.h) scored on a model as llm.c and
 * build-nanogpt score HellaSwag, completion style: row k is ctx's tokens followed by ending k's,
 * and the model's NLL of the ending's tokens, each given everything before it, is summed (acc:
 * the lowest sum is the prediction) and averaged over those tokens (acc_norm: the lowest mean).
 * A row of more than context + 1 tokens keeps its last context + 1: the start of ctx is dropped.
 * Ties go to the lower index, as torch.argmin.
 * Owns: nothing past a call. One thread (the model's). */
#ifndef GK_CHOICE_H
#define GK_CHOICE_H

#include "common/err.h"
#include "common/io/choice.h"
#include "kernels/gpt2.h"

typedef struct gk_choice_result {
    int pred, pred_norm;           /* lowest sum, lowest mean */
    double nll[GK_CHOICE_MAX];     /* summed NLL of each ending's tokens (nats) */
    int tokens[GK_CHOICE_MAX];     /* tokens scored per ending */
} gk_choice_result;

/* Scores it on m in forwards of at most max_rows rows (m was created with max_B >= max_rows and
 * max_T >= min(context, the longest row - 1); items of gk_choice_load(..., context, ...)). The
 * model should be in eval mode (gk_gpt2_set_training(m, 0)). */
int gk_choice_score(gk_gpt2 *m, const gk_choice_item *it, int context, int max_rows,
                    gk_choice_result *r, gk_err *e);

#endif
