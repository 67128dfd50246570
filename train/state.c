/* state.c: the trainer state's JSON, gptkit.train in every checkpoint (see state.h). */
#include "state.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>

/* A window as a JSON array, oldest value first (NULL when empty or out of memory: not written). */
static json_t *window_json(const tr_window *w)
{
    json_t *a = w->n ? json_array() : NULL;
    for (int i = 0; a && i < w->n; i++)
        if (json_array_append_new(a, json_real(w->v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* The array a (NULL: absent, an empty window) into w; GK_EFORMAT naming key when it is not an
 * array of at most TR_SPIKE_WINDOW finite numbers. */
static int window_parse(json_t *a, const char *origin, const char *key, tr_window *w, gk_err *e)
{
    w->n = 0;
    if (!a)
        return 0;
    if (!json_is_array(a) || json_array_size(a) > TR_SPIKE_WINDOW)
        return gk_errf(e, GK_EFORMAT, "%s: trainer state: %s: not an array of at most %d numbers",
                       origin, key, TR_SPIKE_WINDOW);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x) || !isfinite(json_number_value(x)))
            return gk_errf(e, GK_EFORMAT, "%s: trainer state: %s[%zu]: not a finite number", origin,
                           key, i);
        w->v[w->n++] = json_number_value(x);
    }
    return 0;
}

char *tr_state_json(const tr_state *s, const char *settings_json)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:i}", "step", (json_int_t)s->step, "tokens",
                          (json_int_t)s->tokens, "seed", (json_int_t)s->seed, "rng_counter",
                          (json_int_t)s->rng_counter, "world_size", s->world_size);
    if (!o)
        return NULL;
    if (isfinite(s->best_val_loss))
        json_object_set_new(o, "best_val_loss", json_real(s->best_val_loss));
    if (s->skipped)
        json_object_set_new(o, "skipped", json_integer((json_int_t)s->skipped));
    json_t *recent_loss = window_json(&s->recent_loss), *recent_norm = window_json(&s->recent_norm);
    if (recent_loss)
        json_object_set_new(o, "recent_loss", recent_loss);
    if (recent_norm)
        json_object_set_new(o, "recent_grad_norm", recent_norm);
    json_t *cfg = settings_json ? json_loads(settings_json, 0, NULL) : NULL;
    if (cfg)
        json_object_set_new(o, "config", cfg);
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    return text;
}

int tr_state_parse(const char *json, const char *origin, tr_state *s, gk_err *e)
{
    json_error_t je;
    json_t *o = json_loads(json ? json : "", 0, &je);
    if (!o)
        return gk_errf(e, GK_EFORMAT, "%s: bad trainer state JSON: %s", origin, je.text);
    json_int_t step = 0, tokens = 0, seed = 0, counter = 0, skipped = 0;
    int world = 1;
    double best = INFINITY;
    int rc = json_unpack_ex(o, &je, 0, "{s:I, s:I, s:I, s:I, s?i, s?F, s?I}", "step", &step,
                            "tokens", &tokens, "seed", &seed, "rng_counter", &counter, "world_size",
                            &world, "best_val_loss", &best, "skipped", &skipped);
    if (rc != 0) {
        json_decref(o);
        return gk_errf(e, GK_EFORMAT, "%s: trainer state: %s", origin, je.text);
    }
    *s = (tr_state){.step = step, .tokens = tokens, .seed = (uint64_t)seed,
                    .rng_counter = (uint64_t)counter, .best_val_loss = best, .world_size = world,
                    .skipped = skipped};
    rc = window_parse(json_object_get(o, "recent_loss"), origin, "recent_loss", &s->recent_loss, e);
    if (!rc)
        rc = window_parse(json_object_get(o, "recent_grad_norm"), origin, "recent_grad_norm",
                          &s->recent_norm, e);
    json_decref(o);
    return rc;
}
