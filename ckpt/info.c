/* info.c: gpt-ckpt info: what a checkpoint holds (config, parameters, dtype, tokenizer, training
 * state, tensors with optional statistics), as text or one JSON object. Reads any safetensors
 * file; the gptkit parts are shown when present. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/io/safetensors.h"

typedef struct info_opts {
    int stats, json;
} info_opts;

typedef struct stats {
    double mean, std;
    int64_t nan, inf;
} stats;

static int is_float(const gk_st_tensor *t)
{
    return t->dtype == GK_DT_F32 || t->dtype == GK_DT_BF16 || t->dtype == GK_DT_F16 ||
           t->dtype == GK_DT_F64;
}

/* Mean and standard deviation (population) of the finite values; NaN and Inf counted apart. */
static stats tensor_stats(const gk_st_tensor *t)
{
    stats s = {0};
    double sum = 0, sq = 0;
    int64_t n = 0;
    for (size_t i = 0; i < (size_t)t->numel; i++) {
        double x = ck_value_at(t, i);
        if (isnan(x)) {
            s.nan++;
        } else if (isinf(x)) {
            s.inf++;
        } else {
            sum += x;
            sq += x * x;
            n++;
        }
    }
    s.mean = n ? sum / (double)n : 0;
    double var = n ? sq / (double)n - s.mean * s.mean : 0;
    s.std = var > 0 ? sqrt(var) : 0;
    return s;
}

/* Summary of the parameters: count and their dtype ("mixed" when they differ). */
static const char *param_summary(const gk_st_file *f, int64_t *count, int *ntensors)
{
    const char *dt = NULL;
    *count = 0;
    *ntensors = 0;
    for (size_t i = 0; i < gk_st_count(f); i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        if (!ck_is_param(t))
            continue;
        *count += t->numel;
        (*ntensors)++;
        const char *d = gk_dtype_name(t->dtype);
        dt = !dt || strcmp(dt, d) == 0 ? d : "mixed";
    }
    return dt ? dt : "none";
}

/* ---------------------------------------------------------------- JSON */

static json_t *parse_meta(const char *text)
{
    return text ? json_loads(text, 0, NULL) : NULL;
}

static json_t *json_info(const gk_ckpt *c, const gk_vocab *v, const info_opts *o, long long bytes)
{
    const gk_st_file *f = gk_ckpt_file(c);
    int64_t count;
    int nt;
    const char *dt = param_summary(f, &count, &nt);
    json_t *root = json_object();
    json_object_set_new(root, "file", json_string(gk_ckpt_path(c)));
    json_object_set_new(root, "bytes", json_integer(bytes));
    json_t *cfg = parse_meta(gk_ckpt_config_json(c));
    json_object_set_new(root, "config", cfg ? cfg : json_null());
    json_object_set_new(root, "parameters", json_integer(count));
    json_object_set_new(root, "dtype", json_string(dt));
    json_t *tok = parse_meta(gk_st_meta(f, "gptkit.tokenizer"));
    if (tok && v)
        json_object_set_new(tok, "vocab_size", json_integer(gk_vocab_size(v)));
    if (tok && v && gk_vocab_type(v) == GK_VOCAB_BPE && gk_vocab_pattern(v) != GK_PATTERN_GPT2)
        json_object_set_new(tok, "pattern", json_string(gk_pattern_name(gk_vocab_pattern(v))));
    json_object_set_new(root, "tokenizer", tok ? tok : json_null());
    json_t *train = parse_meta(gk_ckpt_train_json(c));
    json_object_set_new(root, "train", train ? train : json_null());
    json_object_set_new(root, "optimizer", json_boolean(gk_ckpt_has_optimizer(c)));
    json_t *list = json_array();
    for (size_t i = 0; i < gk_st_count(f); i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *x = json_pack("{s:s, s:o, s:s}", "name", t->name, "shape", shape, "dtype",
                              gk_dtype_name(t->dtype));
        if (o->stats && is_float(t)) {
            stats s = tensor_stats(t);
            json_object_set_new(x, "mean", json_real(s.mean));
            json_object_set_new(x, "std", json_real(s.std));
            json_object_set_new(x, "nan", json_integer(s.nan));
            json_object_set_new(x, "inf", json_integer(s.inf));
        }
        json_array_append_new(list, x);
    }
    json_object_set_new(root, "tensors", list);
    return root;
}

/* ---------------------------------------------------------------- text */

static void print_config(const gk_ckpt *c)
{
    gk_gpt2_config cfg;
    gk_err e = {0};
    if (!gk_ckpt_config_json(c))
        printf("config:      none (not a gptkit checkpoint)\n");
    else if (gk_gpt2_config_parse(gk_ckpt_config_json(c), gk_ckpt_path(c), &cfg, &e) == 0)
        printf("config:      n_layer %d, n_head %d, n_embd %d, block_size %d, vocab_size %d, "
               "bias %s, dropout %g\n", cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size,
               cfg.vocab_size, cfg.bias ? "true" : "false", (double)cfg.dropout);
    else
        printf("config:      %s (unreadable: %s)\n", gk_ckpt_config_json(c), e.msg);
}

static void print_tokenizer(const gk_ckpt *c, const gk_vocab *v)
{
    json_t *tok = parse_meta(gk_st_meta(gk_ckpt_file(c), "gptkit.tokenizer"));
    const char *type = json_string_value(json_object_get(tok, "type"));
    int pattern = v && gk_vocab_type(v) == GK_VOCAB_BPE ? gk_vocab_pattern(v) : GK_PATTERN_GPT2;
    if (v)
        printf("tokenizer:   %s, %u tokens, fingerprint %u%s%s\n", type ? type : "?",
               gk_vocab_size(v), gk_vocab_fingerprint(v), pattern ? ", pattern " : "",
               pattern ? gk_pattern_name(pattern) : "");
    else
        printf("tokenizer:   none\n");
    json_decref(tok);
}

static void print_train(const gk_ckpt *c)
{
    json_t *t = parse_meta(gk_ckpt_train_json(c));
    json_t *step = json_object_get(t, "step"), *tokens = json_object_get(t, "tokens");
    if (!t)
        printf("training:    none");
    else
        printf("training:    step %lld, %lld tokens", (long long)json_integer_value(step),
               (long long)json_integer_value(tokens));
    json_t *best = json_object_get(t, "best_val_loss");
    if (best)
        printf(", best val loss %.4f", json_number_value(best));
    printf("%s\n", gk_ckpt_has_optimizer(c) ? ", optimizer state" : "");
    json_decref(t);
}

static void print_text(const gk_ckpt *c, const gk_vocab *v, const info_opts *o, long long bytes)
{
    const gk_st_file *f = gk_ckpt_file(c);
    int64_t count;
    int nt;
    const char *dt = param_summary(f, &count, &nt);
    printf("file:        %s (%lld bytes)\n", gk_ckpt_path(c), bytes);
    print_config(c);
    printf("parameters:  %lld (%.2fM) in %d tensors, %s\n", (long long)count, (double)count / 1e6,
           nt, dt);
    print_tokenizer(c, v);
    print_train(c);
    if (o->stats)
        printf("\n%-48s %-14s %-5s %13s %13s %6s %6s\n", "tensor", "shape", "dtype", "mean", "std",
               "nan", "inf");
    else
        printf("\n%-48s %-14s %s\n", "tensor", "shape", "dtype");
    for (size_t i = 0; i < gk_st_count(f); i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        char shape[64];
        ck_shape_text(shape, sizeof shape, t->ndim, t->shape);
        printf("%-48s %-14s %s", t->name, shape, gk_dtype_name(t->dtype));
        if (o->stats && is_float(t)) {
            printf("%*s", 5 - (int)strlen(gk_dtype_name(t->dtype)), "");
            stats s = tensor_stats(t);
            printf(" %13.6g %13.6g %6lld %6lld", s.mean, s.std, (long long)s.nan, (long long)s.inf);
        }
        printf("\n");
    }
}

/* ---------------------------------------------------------------- command */

static const char usage[] =
    "gpt-ckpt info [options] FILE\n"
    "Shows a checkpoint's config, parameter count, dtype, tokenizer, training state and tensors.";

int ck_info_main(int argc, char **argv, const gk_env *env, gk_err *e)
{
    ck_args a = {0};
    info_opts o = {0};
    const gk_opt tab[] = {
        {0, "stats", GK_OPT_FLAG, &o.stats, NULL,
         "also mean, std and NaN/Inf counts of each tensor", 0, 0},
        {0, "json", GK_OPT_FLAG, &o.json, NULL, "print one JSON object (for scripts)", 0, 0},
        {'q', "quiet", GK_OPT_FLAG, &a.quiet, NULL, "no warnings", 0, 0},
        CK_OPT_END,
    };
    int rc = ck_args_parse(&a, tab, "info", "checkpoint", usage, NULL, argc, argv, e);
    if (rc)
        return rc;
    gk_ckpt *c = NULL;
    gk_vocab *v = NULL;
    long long bytes = -1;
    if ((rc = ck_open_sized(a.operand, env, &c, NULL, &bytes, e)))
        return rc;
    gk_err ve = {0};
    int vrc = gk_ckpt_vocab(c, &v, &ve);
    if (vrc && vrc != GK_ENOTFOUND)
        gk_warn("%s", ve.msg);
    if (o.json) {
        json_t *j = json_info(c, v, &o, bytes);
        char *text =
            j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
        if (text)
            printf("%s\n", text);
        else
            rc = gk_errf(e, GK_ENOMEM, "out of memory");
        free(text);
        json_decref(j);
    } else {
        print_text(c, v, &o, bytes);
    }
    gk_vocab_free(v);
    gk_ckpt_close(c);
    return rc; /* main checks that stdout took it all (gk_std_finish) */
}
