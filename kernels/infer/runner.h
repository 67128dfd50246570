/* runner.h: a checkpoint opened to run, for the tools that only run a model (gpt-sample,
 * gpt-evalppl), in two steps, so that a tool can use the config and vocabulary (encode a prompt,
 * check a context) before the model is made: open (the backend its device settings name, the
 * checkpoint, its config and vocabulary), then check and load (the model for a batch size).
 * The checkpoint may be an out_dir or in a bucket: common/io/ckpt_src.h resolves and downloads
 * it (the runner itself knows no object storage); the environment comes as the tool's gk_env.
 * Owns: what it opened (backend, checkpoint until load, vocabulary, model), until
 * gk_gpt2_runner_close. Thread safety: one call per runner at a time (it drives the backend). */
#ifndef GK_INFER_RUNNER_H
#define GK_INFER_RUNNER_H

#include "common/env.h"
#include "common/err.h"
#include "common/io/ckpt.h"
#include "common/text/vocab.h"
#include "kernels/backend.h"
#include "kernels/device_opt.h"
#include "kernels/model/gpt2.h"

typedef struct gk_gpt2_runner {
    gk_backend *be;      /* from gk_backend_open (NULL if it failed) */
    gk_ckpt *ckpt;       /* open from gk_gpt2_runner_open until gk_gpt2_runner_load */
    gk_gpt2_config cfg;  /* the checkpoint's, dropout 0 */
    gk_vocab *vocab;     /* NULL when not required and none found */
    gk_gpt2 *model;      /* from gk_gpt2_runner_load */
    int mem_check;       /* gk_mem_check_mode (the tool's GPT_MEM_CHECK): 2 turns
                          * gk_gpt2_runner_check off; the tool turns its error into a warning
                          * for 1, "warn" */
    char where[4400];    /* the checkpoint's path or s3:// URL (gk_ckpt_src), for messages */
    long retries;        /* S3 requests its download retried (the tool may say so) */
} gk_gpt2_runner;

/* Opens the backend dev names (gk_device_backend_opts: "--attention" in errors; activations
 * gk_opt_weights_bf16(weights), enum gk_weights of common/opt.h), the checkpoint model names
 * (gk_opt_model_path with env->model; gk_ckpt_src with env: an out_dir's latest, a download from
 * a bucket), its config and the vocabulary (gk_gpt2_vocab with vocab and required); mem_check
 * from env. An error in dev comes before any file is opened. On an error r holds what was
 * opened: close it. */
int gk_gpt2_runner_open(gk_gpt2_runner *r, const gk_device_args *dev, int weights,
                        const char *model, const char *vocab, int required, const gk_env *env,
                        gk_err *e);
/* gk_gpt2_mem_check for the model gk_gpt2_runner_load(r, max_B, max_T, weights) would make; 0
 * when r->mem_check is 2, "off" (the tool turns the error into a warning for "warn", 1). */
int gk_gpt2_runner_check(gk_gpt2_runner *r, int max_B, int max_T, int weights, const char *hint,
                         gk_err *e);
/* Creates r->model for inference with weights (enum gk_weights, common/opt.h: GK_WEIGHTS_BF16:
 * GK_GPT2_BF16, GK_WEIGHTS_F16: GK_GPT2_F16, GK_WEIGHTS_INT8: GK_GPT2_Q8; else fp32 or the
 * device's) for batches up to max_B x max_T, loads the checkpoint's weights into it and closes
 * the checkpoint. */
int gk_gpt2_runner_load(gk_gpt2_runner *r, int max_B, int max_T, int weights, gk_err *e);
/* Frees the model, the vocabulary, the checkpoint and the backend; zeroes r. */
void gk_gpt2_runner_close(gk_gpt2_runner *r);

#endif
