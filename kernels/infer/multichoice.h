/* multichoice.h: a multiple-choice item (common/io/choice.h) scored on a model as llm.c and
 * build-nanogpt score HellaSwag, completion style: row k is ctx's tokens followed by ending k's,
 * and the model's NLL of the ending's tokens, each given everything before it, is summed (acc:
 * the lowest sum is the prediction) and averaged over those tokens (acc_norm: the lowest mean).
 * A row of more than context + 1 tokens keeps its last context + 1: the start of ctx is dropped.
 * Ties go to the lower index, as torch.argmin.
 * Owns: nothing past a call. One thread (the model's). */
#ifndef GK_MULTICHOICE_H
#define GK_MULTICHOICE_H

#include "common/err.h"
#include "common/io/choice.h"
#include "kernels/model/gpt2.h"

typedef struct gk_choice_result {
    int pred, pred_norm;           /* lowest sum, lowest mean */
    double nll[GK_CHOICE_MAX];     /* summed NLL of each ending's tokens (nats) */
    int tokens[GK_CHOICE_MAX];     /* tokens scored per ending */
} gk_choice_result;

/* Scores items[0..n) into r[0..n) on m, the rows of consecutive items packed into forwards of
 * at most max_rows rows (an item's rows may span two). m was created with max_B >= max_rows and
 * max_T >= min(context, the longest row - 1), the items by gk_choice_load(..., context, ...).
 * The model should be in eval mode (gk_gpt2_set_training(m, 0)). */
int gk_choice_score_many(gk_gpt2 *m, const gk_choice_item *items, size_t n, int context,
                         int max_rows, gk_choice_result *r, gk_err *e);
/* One item: gk_choice_score_many(m, it, 1, ...). */
int gk_choice_score(gk_gpt2 *m, const gk_choice_item *it, int context, int max_rows,
                    gk_choice_result *r, gk_err *e);

#endif
