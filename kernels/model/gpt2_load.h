/* gpt2_load.h: a gk_gpt2 from a checkpoint (common/io/ckpt.h): its config, weights and
 * vocabulary, for every tool that loads a model (gpt-train's model_io.c, gpt-ckpt, and the
 * runner of gpt-sample and gpt-evalppl, kernels/infer/runner.h).
 * Owns nothing past a call: the checkpoint and the model belong to the caller.
 * Thread safety: one call per model at a time (it drives the model's backend). */
#ifndef GK_GPT2_LOAD_H
#define GK_GPT2_LOAD_H

#include "common/io/ckpt.h"
#include "common/err.h"
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
 * when required, else 0 with *v = NULL (gpt-evalppl scores shards without one). A vocabulary with
 * more tokens than cfg->vocab_size is GK_EFORMAT naming the checkpoint and both sizes (a GPT-2
 * vocabulary on a char model). */
int gk_gpt2_vocab(const gk_ckpt *c, const gk_gpt2_config *cfg, const char *path_or_dir,
                  int required, gk_vocab **v, gk_err *e);

#endif
