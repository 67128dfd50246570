/* model_io.h: moving a gk_gpt2 in and out of checkpoints (common/ckpt.h).
 * Owns: a tr_snapshot (host copy of a checkpoint) from tr_snapshot_create to _free; the other
 * functions own nothing past a call. Thread safety: whatever takes a gk_gpt2 drives its backend
 * (the model's thread only); tr_snapshot_save touches no model and may run on another thread. */
#ifndef TR_MODEL_IO_H
#define TR_MODEL_IO_H

#include <stdint.h>

#include "common/io/ckpt.h"
#include "common/err.h"
#include "common/text/vocab.h"
#include "kernels/model/gpt2.h"
#include "state.h"

/* The model config JSON (gptkit.config) is kernels/model/gpt2_load.h's gk_gpt2_config_json/_parse;
 * the trainer state's (gptkit.train) is state.h's. */

/* A host copy of everything a checkpoint holds (or, in place, the note of where to read it), to
 * be written later (by another thread, snapshot.c): this rank's slice (gk_gpt2_slices) of every
 * parameter table entry's parameter and, with_optimizer, its AdamW moments, the model config and
 * trainer state JSON, and the vocabulary (borrowed: a gk_vocab is read-only; it must outlive the
 * snapshot's last save). The copies are allocated once by create and reused by every take: with
 * the moments 3 x the parameters x 4 bytes over the ranks (GPT-2 124M: 1.5 GB with one rank, 0.75
 * GB a rank with two), 1 x without; nothing for a kind read in place. */
typedef struct tr_snapshot tr_snapshot;

/* Allocates a snapshot for m's parameter table (GK_ENOMEM naming the size). comm: with several
 * ranks, the comm the ranks' writers stream the slices over (every rank makes a snapshot, takes
 * it at the same step and saves or serves it); NULL or one rank: the snapshot holds everything.
 * in_place: the kinds whose slice lies in host memory (gk_gpt2_slice_in_place: all of them on
 * the CPU, the offloaded ones on a GPU) are not copied but read from the model at the save, so
 * that the state is not held twice; the model must then stay as the take found it until the
 * save or serve has returned (tr_snapshot_in_place says whether that is so). Make it once m's
 * layout is set (gk_gpt2_set_comm). */
int tr_snapshot_create(tr_snapshot **out, const gk_gpt2 *m, int with_optimizer, gk_comm *comm,
                       int in_place, gk_err *e);
/* Copies this rank's slice of m's tensors (gk_gpt2_slice_get: no collective; none of the kinds
 * read in place), the config, st (NULL: not a training checkpoint) with settings_json embedded,
 * and v (may be NULL) into s. Drives m's backend. On failure s holds nothing that may be saved. */
int tr_snapshot_take(tr_snapshot *s, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
                     const char *settings_json, gk_err *e);
/* Writes the last take to path atomically (temp file, fsync, rename: gk_ckpt_save); with
 * several ranks rank 0 does, its tensors streamed from every rank's slice while the others call
 * tr_snapshot_serve (a collective on the comm: the same takes in the same order). Touches no
 * model. */
int tr_snapshot_save(tr_snapshot *s, const char *path, gk_err *e);
/* A rank other than 0: sends its part of the last take to rank 0's tr_snapshot_save. */
int tr_snapshot_serve(tr_snapshot *s, gk_err *e);
/* Whether the save reads some of the model's state in place (the model may not change until it
 * returns). */
int tr_snapshot_in_place(const tr_snapshot *s);
/* The trainer state's step of the last take (-1: none, or it had no state). */
int64_t tr_snapshot_step(const tr_snapshot *s);
void tr_snapshot_free(tr_snapshot *s); /* NULL-safe */

/* Saves the model (and, with_optimizer, its AdamW moments) with metadata: a snapshot taken and
 * saved at once, by one process (a model whose state is sharded across ranks is refused by the
 * take: use the checkpoint writer). */
int tr_save(const char *path, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
            const char *settings_json, int with_optimizer, gk_err *e);
/* What tr_load reads: the parameters, the AdamW moments, or both (|). */
enum { TR_LOAD_PARAMS = 1, TR_LOAD_MOMENTS = 2 };
/* Loads what (TR_LOAD_*) from c into m. A model with a smaller block_size than c's gets the
 * first rows of wpe (and of its moments): nanoGPT's crop_block_size. */
int tr_load(const gk_ckpt *c, gk_gpt2 *m, int what, gk_err *e);

#endif
