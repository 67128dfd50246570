/* checkpoint.h: the background checkpoint writer's extras (tr_checkpoint, _wait and _close are in
 * run.h). Owns: r->writer, from tr_checkpoint_prepare or the first tr_checkpoint to
 * tr_checkpoint_close. Thread safety: called from the run's thread only; the writer's own thread
 * touches only its snapshot and out_dir, never the backend, and the model only to read the state
 * that lies in host memory in place (gk_gpt2_slice_read) until tr_checkpoint_settle returns. */
#ifndef TR_CHECKPOINT_H
#define TR_CHECKPOINT_H

#include "run.h"

/* The writer and its host copy of the state, made (once) before the first step, so that the first
 * checkpointing step does not pay for them and a copy that does not fit fails at the start. On
 * every rank (each snapshots its slice); tr_checkpoint makes them itself where this was not
 * called. */
int tr_checkpoint_prepare(tr_run *r, gk_err *e);

/* Without waiting: the last write's error (once) if it has ended in one, else 0 (none, still
 * under way, or written). For the loop to stop soon after a failed write rather than at the
 * next checkpoint. */
int tr_checkpoint_poll(tr_run *r, gk_err *e);

/* Waits until the write in hand no longer reads the model's state in place (at once when the
 * snapshot copied it all: checkpoint_copy, or a device's memory): call before anything changes
 * the parameters or moments (an update). The rest of the write goes on; its error comes later. */
void tr_checkpoint_settle(tr_run *r);

/* Removes the temporary files a killed run left in out_dir (checkpoints' and loss.svg's
 * NAME.tmp.XXXXXX that no process holds, latest's latest.safetensors.tmp.PID symlinks), never
 * any other file; says which on the log. For rank 0 with out_dir's lock held, before training.
 * Returns how many it removed. */
int tr_checkpoint_clean_stale(const char *out_dir);

#endif
