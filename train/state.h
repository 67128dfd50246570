/* state.h: the trainer state stored in every training checkpoint (gptkit.train), and its JSON.
 * The one parser of that metadata, which a resume reads from a checkpoint (outside input:
 * tests/fuzz/fuzz_state.c). Owns nothing past a call; thread-safe. */
#ifndef TR_STATE_H
#define TR_STATE_H

#include <stdint.h>

#include "common/err.h"
#include "spikes.h"

/* Trainer state stored in every training checkpoint. The data position is `step`: windows are a
 * function of (seed, step), see data.h. */
typedef struct tr_state {
    int64_t step;        /* optimizer updates completed */
    int64_t tokens;      /* training tokens seen */
    uint64_t seed;       /* data and dropout seed */
    uint64_t rng_counter;/* dropout RNG counter (training forwards done) */
    double best_val_loss;/* lowest val loss seen at an eval (INFINITY if none) */
    int world_size;      /* processes at save time (informational:
                          * checkpoints do not depend on it) */
    int64_t skipped;     /* steps whose update was skipped: a non-finite or spiking loss or norm */
    tr_window recent_loss, recent_norm; /* the last steps' losses and gradient norms (spikes.h) */
} tr_state;

/* Trainer state JSON; settings_json (the effective config object, may be NULL) is embedded as
 * "config". malloc'd (NULL: out of memory). */
char *tr_state_json(const tr_state *s, const char *settings_json);
/* json -> *s: 0, or GK_EFORMAT naming origin and what is wrong: not a JSON object; step, tokens,
 * seed or rng_counter missing or not an integer; a window not an array of at most
 * TR_SPIKE_WINDOW finite numbers. */
int tr_state_parse(const char *json, const char *origin, tr_state *s, gk_err *e);

#endif
