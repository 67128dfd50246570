/* run.h: one training run: settings, model, data, state, and the loop over it.
 * Owns: everything a run holds (backend, model, vocab, data, metrics, batch buffers), from
 * tr_run_setup to tr_run_free. Not thread-safe: one host thread drives a run. */
#ifndef TR_RUN_H
#define TR_RUN_H

#include <signal.h>
#include <stdio.h>

#include "common/config.h"
#include "common/env.h"
#include "common/io/choice.h"
#include "common/io/ckpt.h"
#include "common/text/vocab.h"
#include "data.h"
#include "dist.h"
#include "kernels/backend.h"
#include "kernels/model/gpt2.h"
#include "lock.h"
#include "metrics.h"
#include "model_io.h"
#include "s3out.h"
#include "settings.h"

typedef struct tr_run {
    tr_settings s;
    gk_config *cfg;
    tr_dist dist;               /* this rank's place in the run (world 1: one process) */
    char *settings_json;        /* effective config, stored in checkpoints */
    gk_backend *be;
    gk_backend *host_be;        /* optimizer_offload: the CPU backend that updates on the host */
    gk_gpt2 *model;
    gk_vocab *vocab;            /* embedded in checkpoints; NULL when unknown */
    char vocab_found[4200];     /* where vocab was found without a `vocab` setting, or "" */
    tr_data *train, *val;
    gk_choice_set hellaswag;    /* the hellaswag key's items (n = 0: none) */
    tr_state st;
    tr_metrics metrics;
    tr_lock lock;               /* out_dir/gpt-train.lock, held while training */
    int *x, *y;                 /* one micro-batch (B,T) of inputs and targets */
    uint32_t *window;           /* scratch for one window */
    int resumed;                /* started from out_dir/latest */
    int64_t last_saved_step;    /* -1: none this run */
    volatile sig_atomic_t *stop;/* set by SIGINT/SIGTERM: finish the step, checkpoint, exit */
    int stop_all;               /* the ranks agreed at the last step to stop after it */
    int log_errno;              /* a write to stdout failed (errno): checkpoint, then exit 1 */
    double peak_tflops;         /* the MFU column's peak: peak_tflops, else the GPU's (0: none) */
    struct tr_ckpt_writer *writer; /* the background checkpoint writer
                                    * (checkpoint.c); NULL: none yet */
    tr_s3out *s3out;            /* out_dir in a bucket (rank 0):
                                 * s.out_dir is its staging directory */
    int s3data;                 /* train_data or val_data in a bucket */
    gk_s3_conf s3conf;          /* a bucket's client settings (main.c: data or out_dir in one) */
    gk_env env;                 /* the environment's settings, read once by main (TMPDIR,
                                 * GPT_MEM_CHECK, GPT_CUDA_*, ...) */
    int start_fd;               /* the checkpoint to start from, downloaded (another machine than
                                 * rank 0's; decide_start), else -1 */
    gk_ckpt *moments_from;      /* the resumed checkpoint while its AdamW moments wait for
                                 * gk_gpt2_set_comm (tr_run_setup); NULL: none to load */
    int plan;                   /* --plan: print the memory plan, train nothing */
    int64_t plan_host_memory;   /* --plan-host-memory: one host's for the plan (0: this one's) */
    int64_t plan_memory;        /* --plan-memory: one device's memory for the plan (0: the
                                 * device's own) */
    int unfit;                  /* tr_model_flags refused the model: unfit_mc's plan explains */
    gk_gpt2_config unfit_mc;
} tr_run;

/* Resolves init_from, creates backend and model, loads weights/state, opens the data, opens the
 * collectives (r->dist must be open). Writes nothing: out_dir is only locked when it exists
 * already (so that a second run stops before reading it) and a run that fails here leaves no
 * trace. The shape keys of r->cfg become the model's as trained (from the checkpoint; vocab_size
 * from the data). With several ranks, rank 0 decides where to start and every rank loads the
 * same checkpoint (out_dir must be on a volume they all see); a rank that fails here makes all
 * of them fail, naming it. */
int tr_run_setup(tr_run *r, gk_err *e);
/* The model's gk_gpt2_create_ex flags (*flags), checking before anything is allocated that the
 * model and batch fit r->be: parameters, gradients, AdamW moments and activations for
 * batch_size x block_size, and on rank 0 the host copy a checkpoint is written from
 * (tr_snapshot: 3 x the fp32 parameters). recompute = auto starts from the device's default
 * (gelu on cuda, where GPU memory limits the batch; false on the CPU, where it cost 1% to 7% of
 * a step on the development machines and memory is seldom the limit) and, when that does not
 * fit, takes the first of gelu and gelu+ln that does, saying so (each rank for its own device:
 * the choice changes memory, not the numbers beyond rounding). 0, or GK_ENOMEM naming what is
 * needed and available (GPT_MEM_CHECK=warn: a warning and 0; off: no check). */
int tr_model_flags(tr_run *r, const gk_gpt2_config *mc, int *flags, gk_err *e);
/* --plan (plan.c): the memory plan of the configured run, on stdout, before any model memory is
 * allocated (the backend opened; train_data's first shard read when vocab_size is not set):
 * the model and run lines, then a table with a column for rank 0 and one for the other ranks
 * (world: nproc_per_node, else the launcher's WORLD_SIZE), a row per part (gk_gpt2_plan), the
 * recompute level (auto: chosen as tr_model_flags would), the peak, the memory available
 * (r->plan_memory per device when set), the largest batch_size that fits, and whether it fits.
 * When it does not fit, what would (as tr_plan_explain). The format is gpt-train(1)'s MEMORY
 * section's. */
int tr_run_plan(tr_run *r, gk_err *e);
/* After tr_model_flags refused the model (r->unfit): its plan's table and each setting alone
 * that would make it fit (recompute, batch_size, zero_stage = 1 over more ranks), on f (main:
 * stderr, after the error line, unless -q). */
void tr_plan_explain(tr_run *r, FILE *f);
/* The model's shape from the settings (setup.c), and the backend they ask for, opened into r->be
 * (the device line logged; dtype = bfloat16 checked against it). */
gk_gpt2_config tr_model_config(const tr_settings *s);
int tr_open_backend(tr_run *r, gk_err *e);
/* --plan: the shape of the checkpoint the run would start from (init_from: a file or out_dir,
 * or resume and auto's latest in out_dir) into mc, as the run takes it (a shape key set to
 * another value an error, block_size only shrinking); mc as it was to start from scratch or
 * from a bucket (not read). */
int tr_start_shape(tr_run *r, gk_gpt2_config *mc, gk_err *e);
/* Training starts: creates out_dir, locks it, opens the metrics log. */
int tr_run_start(tr_run *r, gk_err *e);
/* Trains until max_iters (or a stop signal), evaluating, logging and checkpointing. */
int tr_run_train(tr_run *r, gk_err *e);
/* eval_only: estimates train and val loss once and prints them. */
int tr_run_eval_only(tr_run *r, gk_err *e);
void tr_run_free(tr_run *r);

/* The learning rate of step: nanoGPT's get_lr (linear warmup, then a cosine decay to min_lr at
 * lr_decay_iters, min_lr after), or with lr_schedule = linear | wsd | constant llm.c's other
 * schedules (the same warmup; wsd keeps learning_rate until tr_wsd_decay_start). */
double tr_learning_rate(const tr_settings *s, int64_t step);
/* Mean loss over eval_iters batches of data (stream: TR_STREAM_EVAL_TRAIN or _VAL). */
int tr_estimate_loss(tr_run *r, const tr_data *d, int stream, double *loss, gk_err *e);
/* Accuracy on the hellaswag items: each rank scores its world-size-th of them (in forwards of
 * batch_size rows); the counts are summed over the ranks. */
int tr_hellaswag(tr_run *r, double *acc, double *acc_norm, gk_err *e);
/* Saves out_dir/ckpt_STEP.safetensors, re-points latest, prunes to keep_last. */
int tr_checkpoint(tr_run *r, gk_err *e);
/* Waits for the checkpoint write under way, if any; returns its error. */
int tr_checkpoint_wait(tr_run *r, gk_err *e);
/* Waits for the write under way (its error ignored) and frees the writer. */
void tr_checkpoint_close(tr_run *r);
/* The step of a step checkpoint's file name ("ckpt_00000250.safetensors" -> 250), else -1. */
int64_t tr_ckpt_step(const char *name);

#endif
