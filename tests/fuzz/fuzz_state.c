/* fuzz_state.c: the trainer state a resume reads from a checkpoint's gptkit.train metadata
 * (train/state.c: tr_state_parse, its spike windows included) on arbitrary bytes. Properties: a
 * failure is one GK_EFORMAT with a message; an accepted state has windows of at most
 * TR_SPIKE_WINDOW finite values, and the JSON written for it (tr_state_json, as every checkpoint
 * stores it) parses back to the same state, bit for bit. */
#include <math.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
/* train/state.c and spikes.c themselves, compiled in as fuzz_conf.c does train/settings.c: a
 * target named fuzz_train_* would link train's other modules, which pull in the kernels. */
#include "train/spikes.c"
#include "train/state.c"

static void check_window(const tr_window *w, const char *what)
{
    FZ_ASSERT(w->n >= 0 && w->n <= TR_SPIKE_WINDOW, "%s: %d values", what, w->n);
    for (int i = 0; i < w->n; i++)
        FZ_ASSERT(isfinite(w->v[i]), "%s[%d] = %g", what, i, w->v[i]);
}

static int same_window(const tr_window *a, const tr_window *b)
{
    return a->n == b->n && !memcmp(a->v, b->v, sizeof a->v[0] * (size_t)a->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = malloc(size + 1);
    if (!json) return 0;
    memcpy(json, data, size);
    json[size] = '\0';
    tr_state s, back;
    gk_err e = {0};
    int rc = tr_state_parse(json, "fuzz", &s, &e);
    free(json);
    if (rc) {
        FZ_ASSERT(rc == GK_EFORMAT && e.code == rc && e.msg[0], "rc %d, code %d, '%s'", rc, e.code,
                  e.msg);
        return 0;
    }
    check_window(&s.recent_loss, "recent_loss");
    check_window(&s.recent_norm, "recent_grad_norm");
    char *out = tr_state_json(&s, "{\"n_layer\":2}");
    FZ_ASSERT(out, "no JSON");
    rc = tr_state_parse(out, "fuzz", &back, &e);
    FZ_ASSERT(rc == 0, "%s does not parse back: %s", out, e.msg);
    FZ_ASSERT(back.step == s.step && back.tokens == s.tokens && back.seed == s.seed &&
                  back.rng_counter == s.rng_counter && back.world_size == s.world_size &&
                  back.skipped == s.skipped &&
                  (back.best_val_loss == s.best_val_loss ||
                   (!isfinite(s.best_val_loss) && isinf(back.best_val_loss))) &&
                  same_window(&back.recent_loss, &s.recent_loss) &&
                  same_window(&back.recent_norm, &s.recent_norm),
              "%s reads back otherwise", out);
    free(out);
    return 0;
}
