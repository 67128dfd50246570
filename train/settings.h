/* settings.h: every gpt-train setting, with nanoGPT's key names and train.py's defaults, in one
 * typed key table that drives config files, --key=value overrides, --help, the effective-config
 * printout and the copy stored in checkpoints.
 * Owns: the key table (static, read-only) and gpt-train's option table (tr_cli, filled by
 * tr_cli_init). A tr_settings is plain values; string fields point into the gk_config that filled
 * them. The key table is thread-safe (read-only); a tr_cli is one parse's, on one thread. */
#ifndef TR_SETTINGS_H
#define TR_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/opt.h"

typedef struct tr_settings {
    /* data and I/O */
    const char *train_data, *val_data, *out_dir, *init_from, *vocab;
    const char *hellaswag;
    int64_t eval_interval, log_interval, checkpoint_interval, eval_iters, keep_last, keep_every;
    int64_t sample_tokens, data_readahead;
    bool eval_only, always_save_checkpoint, checkpoint_copy;
    /* model */
    int64_t n_layer, n_head, n_embd, block_size, vocab_size;
    double dropout;
    bool bias;
    /* optimizer and schedule */
    int64_t batch_size, gradient_accumulation_steps, max_iters, warmup_iters, lr_decay_iters;
    double learning_rate, weight_decay, beta1, beta2, grad_clip, min_lr;
    bool decay_lr, skip_nonfinite;
    const char *lr_schedule;
    double wsd_decay_frac, skip_loss_z, skip_grad_z;
    /* system */
    const char *device, *dtype, *recompute, *attention;
    int64_t seed, threads;
    double peak_tflops;
    /* data parallel (dist.h, launch.h) */
    int64_t total_batch_size, nproc_per_node, zero_stage, tensor_parallel;
    bool optimizer_offload;
    const char *reduce_dtype;
    double dist_timeout;
} tr_settings;

extern const gk_config_key tr_settings_keys[];

/* lr_schedule = wsd: the step at which the decay starts (lr_decay_iters less its
 * wsd_decay_frac, rounded). */
int64_t tr_wsd_decay_start(const tr_settings *s);

/* Keys that describe the model (stored as gptkit.config in checkpoints). */
int tr_settings_is_model_key(const char *key);

/* Checks what no single key can (n_head divides n_embd, lr_decay_iters above warmup_iters, min_lr
 * at most learning_rate, dtype for the device, ...) and writes dtype and reduce_dtype as nanoGPT
 * names them. cfg is
 * the config that filled s. GK_EUSAGE with one line led by the FILE:LINE (or --key) of a key at
 * fault and naming the other key's origin. Call before anything is printed, read or written. */
int tr_settings_check(tr_settings *s, gk_config *cfg, gk_err *e);

/* gpt-train's command line, one option table: -c FILE (a config file or preset, loaded into cfg
 * where it stands), --key=value (one setting of cfg), -q, -v, --print-config, --plan,
 * --plan-memory, --plan-host-memory (the flags below). tab points into the struct itself: fill
 * it in place with tr_cli_init, never copy it. */
typedef struct tr_cli {
    int quiet, verbose, print_only, plan;
    int64_t plan_memory; /* --plan-memory=SIZE (it implies --plan); 0: not given */
    int64_t plan_host_memory; /* --plan-host-memory=SIZE (it implies --plan); 0: not given */
    gk_opt_call load, set;
    gk_opt tab[9];
} tr_cli;

/* How -c finds and loads NAME into cfg (a gk_config *): gpt-train's is tr_settings_load_config. */
typedef int (*tr_cli_load_fn)(void *cfg, const char *name, gk_err *e);
void tr_cli_init(tr_cli *c, gk_config *cfg, tr_cli_load_fn load);
/* -c NAME as gpt-train reads it: a path, else a preset (gk_config_resolve_path), loaded into
 * cfg. */
int tr_settings_load_config(void *cfg, const char *name, gk_err *e);

#endif
