/* ck.h: gpt-ckpt's modules: the subcommands (import.c, info.c, export.c, convert.c,
 * verify.c), what they
 * share (cmd.c: the option prologue, opening a checkpoint, tensor helpers), the tensor table
 * (table.c), llm.c's checkpoint format (llmc.c) and s3:// outputs (s3.c; a checkpoint to read,
 * local or in a bucket, is common/io/ckpt_src.h's, opened in cmd.c).
 * Owns: ck_table (ck_table_make / ck_table_free). Subcommands own everything they open until they
 * return. Single-threaded. */
#ifndef CK_H
#define CK_H

#include <stddef.h>
#include <stdint.h>

#include "common/env.h"
#include "common/io/ckpt.h"
#include "common/io/safetensors.h"
#include "common/err.h"
#include "common/opt.h"
#include "common/text/vocab.h"
#include "kernels/model/gpt2.h"
#include "kernels/model/gpt2_load.h"

/* ---- subcommands: parse their own options; return 0 or a GK_E* code with e filled
 * (GK_OPT_HELP / GK_OPT_VERSION after printing help or the version). env: the environment,
 * read once by main (TMPDIR, the hub's variables) ---- */
int ck_import_main(int argc, char **argv, const gk_env *env, gk_err *e);
int ck_info_main(int argc, char **argv, const gk_env *env, gk_err *e);
int ck_export_main(int argc, char **argv, const gk_env *env, gk_err *e);
int ck_convert_main(int argc, char **argv, const gk_env *env, gk_err *e);
/* verify prints its own errors: e->msg left empty */
int ck_verify_main(int argc, char **argv, const gk_env *env, gk_err *e);

/* ---- what every subcommand shares (cmd.c) ---- */
/* The prologue: a subcommand's option table points its -q / -v entries at quiet / verbose. */
typedef struct ck_args {
    int quiet, verbose;
    const char *operand; /* the one operand */
} ck_args;
#define CK_OPT_QUIET(a) \
    {'q', "quiet", GK_OPT_FLAG, &(a).quiet, NULL, "no messages but errors", 0, 0}
#define CK_OPT_END {0, NULL, 0, NULL, NULL, NULL, 0, 0}
/* Parses argv against tab (-h/--help prints usage, the table and footer; --version the
 * version), sets up logging from a->quiet / a->verbose and requires exactly one operand, named
 * what in the message ("export takes one checkpoint"). Returns 0, GK_OPT_HELP, GK_OPT_VERSION
 * or GK_EUSAGE. */
int ck_args_parse(ck_args *a, const gk_opt *tab, const char *cmd, const char *what,
                  const char *usage, const char *footer, int argc, char **argv, gk_err *e);
/* Opens a gptkit checkpoint (a file, an out_dir standing for its latest, or an s3:// URL:
 * downloaded into env->tmpdir first; common/io/ckpt_src.h) and, when cfg is not NULL, reads its
 * model config. ck_open_sized also gives its size in bytes (-1 unknown). */
int ck_open(const char *path, const gk_env *env, gk_ckpt **c, gk_gpt2_config *cfg, gk_err *e);
int ck_open_sized(const char *path, const gk_env *env, gk_ckpt **c, gk_gpt2_config *cfg,
                  long long *bytes, gk_err *e);
/* A safetensors file (or out_dir, or s3:// URL) opened as gk_st_open does; *bytes its size when
 * it was downloaded, else -1. */
int ck_st_open(const char *path, const gk_env *env, gk_st_file **f, long long *bytes, gk_err *e);
/* s3.c: writing an output that may be an s3:// URL: ck_out_begin gives the local path to write
 * (out itself, or a file in a new temporary directory in env->tmpdir for a URL, whose form it
 * checks first);
 * ck_out_finish(out, path, rc of the write) uploads it when rc is 0, removes the temporary, and
 * returns the first failure. */
int ck_out_begin(const char *out, const gk_env *env, char *path, size_t cap, gk_err *e);
/* Checks the form of an s3:// output before any work (0 for a local path). */
int ck_out_check(const char *out, gk_err *e);
int ck_out_finish(const char *out, const char *path, int rc, gk_err *e);
/* Whether t is a model parameter: a floating-point or int8 tensor outside "optimizer.",
 * "tokenizer." and "q8_0." (an int8 parameter's scales: gpt-formats(5)). */
int ck_is_param(const gk_st_tensor *t);
/* Element i of a floating-point tensor (F32, F64, BF16, F16) as a double. */
double ck_value_at(const gk_st_tensor *t, size_t i);

/* ---- the tensor table (table.c) ----
 * The expected tensors of a GPT-2 config, derived from the model's own parameter table
 * (kernels/model/gpt2.h) so no list of names is repeated here, in its order: the head group (wte,
 * wpe), then per layer the layer group, then the tail group (ln_f). Dimensions are also kept
 * symbolically (the table's gk_gpt2_dim), for llm.c's layout (padded vocab rows). */
enum ck_group { CK_HEAD, CK_LAYER, CK_TAIL };

typedef struct ck_entry {
    char name[96];       /* HuggingFace name with "transformer." */
    int ndim;            /* 1 or 2 */
    int64_t shape[2];    /* shape[1] = 0 for 1-D */
    enum gk_gpt2_dim sym[2];
    enum ck_group group;
    int layer;           /* -1 for head and tail */
    int slot;            /* index inside the group (per layer for CK_LAYER) */
    size_t numel;
    int zero;            /* ck_table_make_biased: a bias the model lacks, exported as zeros */
} ck_entry;

typedef struct ck_table {
    gk_gpt2_config cfg;
    ck_entry *e;
    int n;
    int n_head, n_layer_slots, n_tail;
    size_t numel;        /* all entries */
} ck_table;

int ck_table_make(ck_table *t, const gk_gpt2_config *cfg, gk_err *e);
void ck_table_free(ck_table *t); /* NULL-safe, idempotent */
/* The table of cfg with biases, as HuggingFace's and llm.c's GPT-2 always have them; for a
 * bias = false config the biases its model lacks are marked zero (cmd.c). */
int ck_table_make_biased(ck_table *t, const gk_gpt2_config *cfg, gk_err *e);
/* The entry of (group, layer, slot). */
const ck_entry *ck_table_at(const ck_table *t, enum ck_group g, int layer, int slot);
/* Size of symbolic dim d under cfg (vocab padded to vp when vp > 0). */
int64_t ck_dim_size(const gk_gpt2_config *cfg, enum gk_gpt2_dim d, int64_t vp);
/* "[a, b]" into buf. */
void ck_shape_text(char *buf, size_t cap, int ndim, const int64_t *shape);

/* ---- model config JSON: gk_gpt2_config_json / _parse / gk_gpt2_ckpt_config (gpt2_load.h) ---- */
/* A HuggingFace config.json (GPT-2 keys) into c (bias 1, dropout 0); warns about settings our
 * model does not implement, refuses other model types. */
int ck_hf_config_load(const char *path, gk_gpt2_config *c, gk_err *e);

/* ---- llm.c checkpoints (llmc.c) ---- */
enum { CK_LLMC_MAGIC = 20240326 };
/* Reads an llm.c checkpoint into *params (table order, fp32, HF layout) backed by *buf (free it);
 * fills *cfg and *tab (free with ck_table_free). */
int ck_llmc_read(const char *path, gk_gpt2_config *cfg, ck_table *tab, gk_ckpt_param **params,
                 float **buf, gk_err *e);
/* Writes checkpoint c (config cfg) as an llm.c version 3 (fp32) checkpoint, atomically. */
int ck_llmc_write(const gk_ckpt *c, const gk_gpt2_config *cfg, const char *path, gk_err *e);

/* ---- shared helpers ---- */
/* Loads the vocabulary for an import: option, else the files in dir (may be NULL), else none
 * (*v = NULL, with a warning). vocab_size: the model's, which the vocab must not exceed. */
int ck_import_vocab(const char *option, const char *dir, int vocab_size, gk_vocab **v, gk_err *e);
/* Saves params as a gptkit checkpoint with config and vocab (out: ck_out_begin's, with env);
 * prints the summary. */
int ck_save_imported(const char *out, const gk_env *env, const char *from,
                     const gk_gpt2_config *cfg, const gk_ckpt_param *params, size_t n,
                     const gk_vocab *v, gk_err *e);

#endif
