/* multichoice.c: multiple-choice scoring (see multichoice.h). The per-token losses come from the
 * model's forward with targets, so every backend scores alike. */
#include "kernels/infer/multichoice.h"

#include <stdlib.h>

/* Row k's inputs and targets, padded to T (pad: input 0, target -1): the last context + 1 tokens
 * of ctx ++ ending k, the targets before the ending -1. */
static void fill_row(const gk_choice_item *it, int k, int context, int T, int *in, int *tg)
{
    const uint32_t *end = it->ids + it->n_ctx;
    for (int j = 0; j < k; j++) end += it->end_len[j];
    int len = it->n_ctx + it->end_len[k];
    int drop = len - 1 > context ? len - 1 - context : 0;
    for (int t = 0; t < T; t++) {
        int i = drop + t; /* position of the input token in the row */
        in[t] = 0;
        tg[t] = -1;
        if (i + 1 >= len) continue;
        in[t] = (int)(i < it->n_ctx ? it->ids[i] : end[i - it->n_ctx]);
        if (i + 1 >= it->n_ctx) tg[t] = (int)end[i + 1 - it->n_ctx];
    }
}

/* A row: item i's ending k. */
typedef struct row_ref {
    int item, k;
} row_ref;

static int row_inputs(const gk_choice_item *it, int k, int context)
{
    int len = it->n_ctx + it->end_len[k] - 1;
    return len < context ? len : context;
}

/* The rows rows[0..B) in one forward: their sums and counts into r[row.item]. in, tg: scratch
 * of B x context. */
static int score_rows(gk_gpt2 *m, const gk_choice_item *items, const row_ref *rows, int B,
                      int context, int *in, int *tg, gk_choice_result *r, gk_err *e)
{
    int T = 0;
    for (int b = 0; b < B; b++) {
        int n = row_inputs(&items[rows[b].item], rows[b].k, context);
        if (n > T) T = n;
    }
    for (int b = 0; b < B; b++)
        fill_row(&items[rows[b].item], rows[b].k, context, T, in + b * T, tg + b * T);
    int rc = gk_gpt2_forward(m, in, tg, B, T, NULL, e);
    const float *loss = rc ? NULL : gk_gpt2_token_losses(m);
    for (int b = 0; loss && b < B; b++) {
        double sum = 0;
        int n = 0;
        for (int t = 0; t < T; t++)
            if (tg[b * T + t] >= 0) sum += loss[b * T + t], n++;
        r[rows[b].item].nll[rows[b].k] = sum;
        r[rows[b].item].tokens[rows[b].k] = n;
    }
    return rc;
}

static void predict(const gk_choice_item *it, gk_choice_result *r)
{
    r->pred = r->pred_norm = 0;
    for (int k = 1; k < it->n_endings; k++) {
        if (r->nll[k] < r->nll[r->pred]) r->pred = k;
        if (r->nll[k] / r->tokens[k] < r->nll[r->pred_norm] / r->tokens[r->pred_norm])
            r->pred_norm = k;
    }
}

int gk_choice_score_many(gk_gpt2 *m, const gk_choice_item *items, size_t n, int context,
                         int max_rows, gk_choice_result *r, gk_err *e)
{
    if (max_rows < 1 || context < 1)
        return gk_errf(e, GK_EUSAGE, "gk_choice_score: max_rows %d, context %d", max_rows, context);
    row_ref *rows = malloc((size_t)max_rows * sizeof *rows);
    int *in = calloc(2 * (size_t)max_rows * (size_t)context, sizeof *in);
    int rc = rows && in ? 0 : gk_errf(e, GK_ENOMEM, "out of memory");
    int B = 0;
    for (size_t i = 0; !rc && i < n; i++)
        for (int k = 0; !rc && k < items[i].n_endings; k++) {
            rows[B++] = (row_ref){(int)i, k};
            int last = i + 1 == n && k + 1 == items[i].n_endings;
            if (B == max_rows || last) {
                rc = score_rows(m, items, rows, B, context, in,
                                in + (size_t)max_rows * (size_t)context, r, e);
                B = 0;
            }
        }
    for (size_t i = 0; !rc && i < n; i++) predict(&items[i], &r[i]);
    free(rows);
    free(in);
    return rc;
}

int gk_choice_score(gk_gpt2 *m, const gk_choice_item *it, int context, int max_rows,
                    gk_choice_result *r, gk_err *e)
{
    return gk_choice_score_many(m, it, 1, context, max_rows, r, e);
}
