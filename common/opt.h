/* opt.h: one option table per tool drives getopt_long parsing and --help.
 * Owns nothing: the table and the destinations belong to the tool. Not thread-safe (getopt
 * state); call once from main. -h/--help and --version are handled here for every tool.
 * Options are handled in command-line order (callbacks see them so); operands may come between
 * them and are gathered at the end (getopt_long permutes argv). */
#ifndef GK_OPT_H
#define GK_OPT_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

enum gk_opt_kind {
    GK_OPT_FLAG,   /* int *: set to 1 */
    GK_OPT_COUNT,  /* int *: incremented each time (-v -v) */
    GK_OPT_INT,    /* int64_t *: gk_parse_i64 with [min, max], K/M/G suffixes */
    GK_OPT_DOUBLE, /* double *: gk_parse_double with [min, max] */
    GK_OPT_STR,    /* const char **: the argument as given */
    GK_OPT_CALL,   /* gk_opt_call *: fn(ctx, argument), in command-line order */
    GK_OPT_KEYVAL, /* gk_opt_call *: gets every "--key=value" (or "--key") that names no
                    * option in the table, e.g. for gk_config_set_arg; long_name is only
                    * shown in --help */
};

/* For GK_OPT_CALL and GK_OPT_KEYVAL: fn returns 0 or a gk_err code (which ends the parse). */
typedef struct gk_opt_call {
    int (*fn)(void *ctx, const char *arg, gk_err *e);
    void *ctx;
} gk_opt_call;

typedef struct gk_opt {
    int short_name;       /* 'o', or 0 for long-only */
    const char *long_name;
    enum gk_opt_kind kind;
    void *dest;
    const char *arg_name; /* shown in --help, e.g. "FILE"; NULL for flags */
    const char *help;     /* one line */
    double min, max;      /* range for INT/DOUBLE; both 0 = no limit */
} gk_opt;

enum { GK_OPT_DONE = 0, GK_OPT_HELP = 1, GK_OPT_VERSION = 2 };

/* Parses argv against tab (terminated by an entry with long_name NULL). Returns GK_OPT_DONE
 * with *first_operand set, GK_OPT_HELP / GK_OPT_VERSION when asked for, or GK_EUSAGE. */
int gk_opt_parse(const gk_opt *tab, int argc, char **argv, int *first_operand, gk_err *e);
/* gk_opt_parse, and on -h/--help or --version prints the help (usage, the table, footer) or
 * "prog (gptkit) VERSION" on stdout before returning GK_OPT_HELP / GK_OPT_VERSION. */
int gk_opt_parse_main(const gk_opt *tab, const char *prog, const char *usage, const char *footer,
                      int argc, char **argv, int *first_operand, gk_err *e);
/* Prints "usage: ..." (usage may hold several lines), then one line per option. */
void gk_opt_help(FILE *f, const char *usage, const gk_opt *tab, const char *footer);
/* Prints "gpt-TOOL (gptkit) VERSION". */
void gk_opt_version(FILE *f, const char *prog);

/* Values of options several tools share. */
/* The checkpoint a tool uses by default: path if given, else env_model (the tool's $GPT_MODEL,
 * gk_env), else out/latest.safetensors (where gpt-train writes). */
const char *gk_opt_model_path(const char *path, const char *env_model);
/* --dtype TEXT for running a model (gk_dtype_from_user's spellings): NULL -> *bf16 = -1 (the
 * device's default), float32/fp32 -> 0, bfloat16/bf16 -> 1; float16 and anything else GK_EUSAGE. */
#define GK_OPT_DTYPE_CHOICES "float32 or bfloat16 (or fp32, bf16)"
int gk_opt_dtype(const char *dtype, int *bf16, gk_err *e);
/* --dtype TEXT for inference (gpt-sample, gpt-evalppl): the type the weight matrices are kept in.
 * The values of gk_opt_dtype's *bf16 for what both take. */
enum gk_weights { GK_WEIGHTS_DEFAULT = -1, GK_WEIGHTS_F32 = 0, GK_WEIGHTS_BF16 = 1,
                  GK_WEIGHTS_F16 = 2, GK_WEIGHTS_INT8 = 3 };
#define GK_OPT_WEIGHTS_CHOICES "float32, bfloat16, float16 or int8 (or fp32, bf16, fp16)"
/* NULL -> GK_WEIGHTS_DEFAULT (the device's default); else the type, or GK_EUSAGE. */
int gk_opt_weights(const char *dtype, int *weights, gk_err *e);
/* The backend's activation setting (gk_backend_opts.bf16) for weights: -1 (the device's default)
 * for GK_WEIGHTS_DEFAULT, 1 for bf16, else 0 (fp32 activations; fp16 and int8 weights need
 * them). */
int gk_opt_weights_bf16(int weights);

#endif
