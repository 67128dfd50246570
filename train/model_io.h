/* model_io.h: moving a gk_gpt2 in and out of checkpoints (common/ckpt.h), and the JSON of the
 * model config (gptkit.config) and trainer state (gptkit.train).
 * Owns nothing past a call. Not thread-safe (drives the model's backend). */
#ifndef TR_MODEL_IO_H
#define TR_MODEL_IO_H

#include <stdint.h>

#include "common/io/ckpt.h"
#include "common/err.h"
#include "common/text/vocab.h"
#include "kernels/gpt2.h"

/* Trainer state stored in every training checkpoint. The data position is `step`: windows are a
 * function of (seed, step), see data.h. */
typedef struct tr_state {
    int64_t step;        /* optimizer updates completed */
    int64_t tokens;      /* training tokens seen */
    uint64_t seed;       /* data and dropout seed */
    uint64_t rng_counter;/* dropout RNG counter (training forwards done) */
    double best_val_loss;/* lowest val loss seen at an eval (INFINITY if none) */
    int world_size;      /* processes at save time (informational: checkpoints do not depend on it) */
    int64_t skipped;     /* steps whose update was skipped for a non-finite loss or gradient norm */
} tr_state;

/* The model config JSON (gptkit.config) is kernels/gpt2_load.h's gk_gpt2_config_json/_parse. */
/* Trainer state JSON; settings_json (the effective config object, may be NULL) is embedded as
 * "config". malloc'd. */
char *tr_state_json(const tr_state *s, const char *settings_json);
int tr_state_parse(const char *json, const char *origin, tr_state *s, gk_err *e);

/* Saves the model (and, with_optimizer, its AdamW moments) with metadata. */
int tr_save(const char *path, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
            const char *settings_json, int with_optimizer, gk_err *e);
/* Loads every parameter (gk_gpt2_load) and, with_optimizer, the AdamW moments from c. A model
 * with a smaller block_size than c's gets the first rows of wpe (and of its moments): nanoGPT's
 * crop_block_size. */
int tr_load(const gk_ckpt *c, gk_gpt2 *m, int with_optimizer, gk_err *e);

#endif
