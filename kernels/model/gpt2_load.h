/* gpt2_load.h: a gk_gpt2 from a checkpoint (common/io/ckpt.h), for the tools that only run a model
 * (gpt-sample, gpt-evalppl; gpt-train's model_io.c can use it too).
 * Owns nothing past a call: the checkpoint and the model belong to the caller.
 * Thread safety: one call per model at a time (it drives the model's backend). */
#ifndef GK_GPT2_LOAD_H
#define GK_GPT2_LOAD_H

#include "common/io/ckpt.h"
#include "common/err.h"
#include "common/s3/s3.h"
#include "kernels/backend.h"
#include "kernels/model/gpt2.h"

/* Parses model config JSON (nanoGPT key names: n_layer, n_head, n_embd, block_size, vocab_size,
 * optional bias, dropout) and checks it (gk_gpt2_config_check). Errors name origin. */
int gk_gpt2_config_parse(const char *json, const char *origin, gk_gpt2_config *cfg, gk_err *e);
/* The config as that JSON (the "gptkit.config" metadata); malloc'd, NULL when out of memory. */
char *gk_gpt2_config_json(const gk_gpt2_config *cfg);
/* The config in the checkpoint's "gptkit.config" metadata; GK_EFORMAT naming the file if absent. */
int gk_gpt2_ckpt_config(const gk_ckpt *c, gk_gpt2_config *cfg, gk_err *e);
/* Copies every parameter of m's table from c (shapes checked; BF16/F16 converted), not the AdamW
 * moments. Errors name the file and tensor. */
int gk_gpt2_load(gk_gpt2 *m, const gk_ckpt *c, gk_err *e);

/* The vocabulary for running the model of c (config cfg): path_or_dir (-V) if given, else the
 * checkpoint's own, else the default lookup (gk_vocab_find: $GPT_VOCAB, the HuggingFace cache)
 * unless the model has fewer tokens than GPT-2's (then the error names -V). None found: an error
 * when required, else 0 with *v = NULL (gpt-evalppl scores shards without one). A vocabulary with more tokens than cfg->vocab_size is GK_EFORMAT naming the checkpoint
 * and both sizes (a GPT-2 vocabulary on a char model). */
int gk_gpt2_vocab(const gk_ckpt *c, const gk_gpt2_config *cfg, const char *path_or_dir,
                  int required, gk_vocab **v, gk_err *e);

/* A checkpoint opened to run (gpt-sample, gpt-evalppl): two steps, so that a tool can use the
 * config and vocabulary (encode a prompt, check a context) before the model is made. */
typedef struct gk_gpt2_runner {
    gk_backend *be;      /* from gk_backend_open (NULL if it failed) */
    gk_ckpt *ckpt;       /* open from gk_gpt2_runner_open until gk_gpt2_runner_load */
    gk_gpt2_config cfg;  /* the checkpoint's, dropout 0 */
    gk_vocab *vocab;     /* NULL when not required and none found */
    gk_gpt2 *model;      /* from gk_gpt2_runner_load */
    int mem_check;       /* gk_mem_check_mode (the tool's GPT_MEM_CHECK), set by the tool after
                          * gk_gpt2_runner_open: 2 turns gk_gpt2_runner_check off */
} gk_gpt2_runner;

/* Opens the backend bo names, the checkpoint at path, its config and the vocabulary
 * (gk_gpt2_vocab with vocab and required). On an error r holds what was opened: close it. */
int gk_gpt2_runner_open(gk_gpt2_runner *r, const gk_backend_opts *bo, const char *path,
                        const char *vocab, int required, gk_err *e);
/* The same for path or a checkpoint at s3://BUCKET/KEY: downloaded (gk_s3_fetch_url, the client
 * from env) into an unlinked temporary file in tmpdir that the checkpoint reader maps, named by
 * its URL; *retries: the requests retried (0 for a path). */
int gk_gpt2_runner_open_url(gk_gpt2_runner *r, const gk_backend_opts *bo, const char *path,
                            const char *vocab, int required, gk_s3_getenv env, const char *tmpdir,
                            long *retries, gk_err *e);
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
