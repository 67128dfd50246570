/* choice.c: multiple-choice scoring (see choice.h). The per-token losses come from the model's
 * forward with targets, so every backend scores alike. */
#include "kernels/choice.h"

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

/* Rows k0..k0+B-1 in one forward: their sums and counts into r. */
static int score_rows(gk_gpt2 *m, const gk_choice_item *it, int context, int k0, int B,
                      gk_choice_result *r, gk_err *e)
{
    int T = 0;
    for (int k = k0; k < k0 + B; k++) {
        int len = it->n_ctx + it->end_len[k] - 1;
        if (len > T) T = len;
    }
    if (T > context) T = context;
    int *in = calloc(2 * (size_t)B * (size_t)T, sizeof *in);
    if (!in) return gk_errf(e, GK_ENOMEM, "out of memory");
    int *tg = in + (size_t)B * (size_t)T;
    for (int b = 0; b < B; b++) fill_row(it, k0 + b, context, T, in + b * T, tg + b * T);
    int rc = gk_gpt2_forward(m, in, tg, B, T, NULL, e);
    const float *loss = rc ? NULL : gk_gpt2_token_losses(m);
    for (int b = 0; loss && b < B; b++) {
        double sum = 0;
        int n = 0;
        for (int t = 0; t < T; t++)
            if (tg[b * T + t] >= 0) sum += loss[b * T + t], n++;
        r->nll[k0 + b] = sum;
        r->tokens[k0 + b] = n;
    }
    free(in);
    return rc;
}

int gk_choice_score(gk_gpt2 *m, const gk_choice_item *it, int context, int max_rows,
                    gk_choice_result *r, gk_err *e)
{
    if (max_rows < 1) return gk_errf(e, GK_EUSAGE, "gk_choice_score: max_rows %d", max_rows);
    int rc = 0;
    for (int k0 = 0; !rc && k0 < it->n_endings; k0 += max_rows) {
        int B = it->n_endings - k0 < max_rows ? it->n_endings - k0 : max_rows;
        rc = score_rows(m, it, context, k0, B, r, e);
    }
    r->pred = r->pred_norm = 0;
    for (int k = 1; !rc && k < it->n_endings; k++) {
        if (r->nll[k] < r->nll[r->pred]) r->pred = k;
        if (r->nll[k] / r->tokens[k] < r->nll[r->pred_norm] / r->tokens[r->pred_norm]) r->pred_norm = k;
    }
    return rc;
}
