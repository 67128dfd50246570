/* fuzz_choice.c: the HellaSwag reader (common/io/choice.c, gpt-evalppl --hellaswag, gpt-train's
 * hellaswag key) on arbitrary bytes as a .jsonl file, with a char vocabulary of printable ASCII
 * and newline, and a context of CONTEXT tokens; what loads is scored (kernels/infer/multichoice.c)
 * on a tiny random model (the ref backend).
 * Properties: a failure is one gk_err with a message naming the file; a load that succeeds has
 * items with 2..GK_CHOICE_MAX endings, a label among them, a non-empty ctx, endings of 1..CONTEXT
 * tokens, ids inside the vocabulary, and max_row / max_endings that bound every item; scoring an
 * item succeeds, scores exactly each ending's tokens, with finite non-negative NLLs, its
 * predictions are the argmins of the sums and of the means, and scoring in forwards of fewer
 * rows (1 + the item's line mod 3), or the items together with their rows packed 5 a forward,
 * gives the same sums. */
#include <math.h>
#include <string.h>

#include "common/io/choice.h"
#include "kernels/infer/multichoice.h"
#include "kernels/ref/ref.h"
#include "tests/fuzz/fuzz.h"

enum { CONTEXT = 24, SCORED_MAX = 8 };

static gk_vocab *vocab;
static gk_gpt2 *model;

static void setup(void)
{
    uint32_t cps[96];
    int n = 0;
    cps[n++] = '\n';
    for (uint32_t c = 32; c < 127; c++) cps[n++] = c;
    gk_err e = {0};
    gk_backend *be = NULL;
    gk_gpt2_config cfg = {1, 2, 8, CONTEXT, n, 1, 0.0f};
    FZ_ASSERT(gk_vocab_from_chars(&vocab, cps, (size_t)n, &e) == 0, "%s", e.msg);
    FZ_ASSERT(gk_ref_create(&be, &e) == 0, "%s", e.msg);
    FZ_ASSERT(gk_gpt2_create(&model, &cfg, be, GK_CHOICE_MAX, CONTEXT, &e) == 0, "%s", e.msg);
    FZ_ASSERT(gk_gpt2_init(model, 3, &e) == 0, "%s", e.msg);
}

static void check_item(const gk_choice_set *s, const gk_choice_item *it,
                       int score, /* out: when score */
                       gk_choice_result *out)
{
    FZ_ASSERT(it->n_endings >= 2 && it->n_endings <= GK_CHOICE_MAX &&
                  it->n_endings <= s->max_endings,
              "%d endings", it->n_endings);
    FZ_ASSERT(it->label >= 0 && it->label < it->n_endings, "label %d", it->label);
    FZ_ASSERT(it->n_ctx >= 1, "empty ctx");
    size_t n = (size_t)it->n_ctx;
    for (int k = 0; k < it->n_endings; k++) {
        FZ_ASSERT(it->end_len[k] >= 1 && it->end_len[k] <= CONTEXT, "ending of %d", it->end_len[k]);
        FZ_ASSERT(it->n_ctx + it->end_len[k] <= s->max_row, "row over max_row %d", s->max_row);
        n += (size_t)it->end_len[k];
    }
    for (size_t i = 0; i < n; i++) FZ_ASSERT(it->ids[i] < 96, "id %u", it->ids[i]);
    if (!score) return;
    gk_choice_result r;
    gk_err e = {0};
    FZ_ASSERT(gk_choice_score(model, it, CONTEXT, GK_CHOICE_MAX, &r, &e) == 0, "%s", e.msg);
    for (int k = 0; k < it->n_endings; k++) {
        FZ_ASSERT(r.tokens[k] == it->end_len[k], "ending %d: %d tokens scored of %d", k,
                  r.tokens[k], it->end_len[k]);
        FZ_ASSERT(isfinite(r.nll[k]) && r.nll[k] >= 0, "nll %g", r.nll[k]);
        FZ_ASSERT(r.nll[r.pred] <= r.nll[k], "pred %d is not the lowest sum", r.pred);
        FZ_ASSERT(r.nll[r.pred_norm] / r.tokens[r.pred_norm] <= r.nll[k] / r.tokens[k],
                  "pred_norm %d is not the lowest mean", r.pred_norm);
    }
    gk_choice_result few;
    int rows = 1 + (int)(it->line % 3);
    FZ_ASSERT(gk_choice_score(model, it, CONTEXT, rows, &few, &e) == 0, "%s", e.msg);
    for (int k = 0; k < it->n_endings; k++)
        FZ_ASSERT(few.tokens[k] == r.tokens[k] &&
                      fabs(few.nll[k] - r.nll[k]) <= 1e-5 * r.nll[k] + 1e-6,
                  "ending %d: %g in rows of %d, %g in one forward", k, few.nll[k], rows, r.nll[k]);
    *out = r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vocab) setup();
    const char *path = fz_file(0, data, size);
    if (!path) return 0;
    gk_choice_set s;
    gk_err e = {0};
    int rc = gk_choice_load(&s, path, vocab, 96, CONTEXT, &e);
    if (rc) {
        FZ_ASSERT(rc < 0 && e.code == rc && strstr(e.msg, path), "rc %d, code %d, message '%s'",
                  rc, e.code, e.msg);
    } else {
        gk_choice_result one[SCORED_MAX], many[SCORED_MAX];
        for (size_t i = 0; i < s.n; i++)
            check_item(&s, &s.items[i], i < SCORED_MAX, i < SCORED_MAX ? &one[i] : NULL);
        size_t n = s.n < SCORED_MAX ? s.n : SCORED_MAX;
        FZ_ASSERT(gk_choice_score_many(model, s.items, n, CONTEXT, 5, many, &e) == 0, "%s", e.msg);
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < s.items[i].n_endings; k++)
                FZ_ASSERT(many[i].tokens[k] == one[i].tokens[k] &&
                              fabs(many[i].nll[k] - one[i].nll[k]) <= 1e-5 * one[i].nll[k] + 1e-6,
                          "item %zu ending %d: %g packed, %g alone", i, k, many[i].nll[k],
                          one[i].nll[k]);
    }
    gk_choice_free(&s);
    return 0;
}
