/* import.c: gpt-ckpt import: a HuggingFace GPT-2 (hub name, model directory or model.safetensors)
 * or an llm.c checkpoint -> a gptkit checkpoint.
 *
 * What is accepted from a HuggingFace model.safetensors: every tensor of the table (ck.h) under
 * its name with or without the "transformer." prefix (GPT2LMHeadModel vs GPT2Model saves), in
 * F32, F16 or BF16, with exactly the shape config.json implies; besides those only the attention
 * buffers "*.attn.bias" / "*.attn.masked_bias" and the tied "lm_head.weight" (all skipped). */
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ck.h"
#include "common/env.h"
#include "common/hub/hub.h"
#include "common/le.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/io/safetensors.h"

typedef struct import_opts {
    const char *output, *vocab;
    const char *label; /* the source as messages name it (the hub name), or NULL */
    const gk_env *env; /* the environment, read once by main */
} import_opts;

static const char pickle_help[] =
    "pickle files can run arbitrary code when loaded, so gptkit does not read them; convert the "
    "model to safetensors with Python: from transformers import GPT2LMHeadModel; "
    "GPT2LMHeadModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True)";

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static int overwrite_error(const char *out, gk_err *e)
{
    return gk_errf(e, GK_EUSAGE, "%s: the output would overwrite the input; choose another with -o",
                   out);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---------------------------------------------------------------- vocabulary and saving */

int ck_import_vocab(const char *option, const char *dir, int vocab_size, gk_vocab **v, gk_err *e)
{
    char a[4200], b[4200];
    *v = NULL;
    const char *from = option;
    if (!from && dir) {
        snprintf(a, sizeof a, "%s/vocab.json", dir);
        snprintf(b, sizeof b, "%s/merges.txt", dir);
        if (is_file(a) && is_file(b))
            from = dir;
    }
    if (!from) {
        gk_warn("no vocabulary (vocab.json + merges.txt)%s%s: the checkpoint will have none "
                "(give one with -V)", dir ? " in " : "", dir ? dir : "");
        return 0;
    }
    int rc = gk_vocab_load(v, from, e);
    if (rc == 0 && gk_vocab_size(*v) > (uint32_t)vocab_size) {
        rc = gk_errf(e, GK_EFORMAT, "%s: the vocabulary has %u tokens, more than the model's "
                     "vocab_size %d", from, gk_vocab_size(*v), vocab_size);
        gk_vocab_free(*v);
        *v = NULL;
    } else if (rc == 0 && gk_vocab_size(*v) < (uint32_t)vocab_size) {
        gk_verbose("%s: %u tokens for a model vocab_size of %d", from, gk_vocab_size(*v),
                   vocab_size);
    }
    return rc;
}

int ck_save_imported(const char *out, const gk_env *env, const char *from,
                     const gk_gpt2_config *cfg, const gk_ckpt_param *params, size_t n,
                     const gk_vocab *v, gk_err *e)
{
    char *json = gk_gpt2_config_json(cfg);
    if (!json)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    gk_ckpt_info info = {json, NULL, v, GK_DT_F32, NULL, NULL};
    char dst[4400];
    int rc = ck_out_begin(out, env, dst, sizeof dst, e);
    if (!rc)
        rc = ck_out_finish(out, dst, gk_ckpt_save(dst, params, n, &info, e), e);
    free(json);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (size_t)params[i].shape[0] * (params[i].ndim > 1 ? (size_t)params[i].shape[1] : 1);
    if (rc == 0)
        gk_info("%s -> %s: %d layers, %d heads, n_embd %d, block_size %d, vocab_size %d, "
                "%.2fM parameters%s", from, out, cfg->n_layer, cfg->n_head, cfg->n_embd,
                cfg->block_size, cfg->vocab_size, (double)total / 1e6, v ? "" : ", no vocabulary");
    return rc;
}

/* ---------------------------------------------------------------- HuggingFace safetensors */

static int skippable(const char *name)
{
    return strcmp(name, "lm_head.weight") == 0 || ends_with(name, ".attn.bias") ||
           ends_with(name, ".attn.masked_bias");
}

static const gk_st_tensor *find_tensor(const gk_st_file *f, const char *name)
{
    const gk_st_tensor *t = gk_st_find(f, name);
    return t ? t : gk_st_find(f, name + strlen("transformer."));
}

static int check_tensor(const gk_st_file *f, const gk_st_tensor *t, const ck_entry *x,
                        const char *config, const gk_gpt2_config *c, gk_err *e)
{
    if (!t)
        return gk_errf(e, GK_EFORMAT, "%s: missing tensor '%s'", gk_st_path(f), x->name);
    int same = t->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++)
        same = t->shape[d] == x->shape[d];
    if (!same) {
        char got[64], want[64];
        ck_shape_text(got, sizeof got, t->ndim, t->shape);
        ck_shape_text(want, sizeof want, x->ndim, x->shape);
        return gk_errf(e, GK_EFORMAT,
                       "%s: tensor '%s' has shape %s, but %s (n_layer %d, n_head %d, n_embd %d, "
                       "n_positions %d, vocab_size %d) needs %s",
                       gk_st_path(f), t->name, got, config, c->n_layer, c->n_head, c->n_embd,
                       c->block_size, c->vocab_size, want);
    }
    if (t->dtype != GK_DT_F32 && t->dtype != GK_DT_F16 && t->dtype != GK_DT_BF16)
        return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' has dtype %s (F32, F16 or BF16 expected)",
                       gk_st_path(f), t->name, gk_dtype_name(t->dtype));
    return 0;
}

/* F32 tensors are used where they lie (the reader aligns them); half types are widened. */
static int tensor_f32(const gk_st_tensor *t, const float **out, float **owned, gk_err *e)
{
    *owned = NULL;
    if (t->dtype == GK_DT_F32) {
        *out = t->data;
        return 0;
    }
    float *p = malloc((size_t)t->numel * sizeof *p);
    if (!p)
        return gk_errf(e, GK_ENOMEM, "out of memory for tensor '%s'", t->name);
    if (t->dtype == GK_DT_BF16)
        gk_bf16_to_f32_n(p, t->data, (size_t)t->numel);
    else
        gk_f16_to_f32_n(p, t->data, (size_t)t->numel);
    *out = *owned = p;
    return 0;
}

/* Every tensor of the file must be in the table or skippable. */
static int check_extra(const gk_st_file *f, const ck_table *tab, gk_err *e)
{
    for (size_t i = 0; i < gk_st_count(f); i++) {
        const char *name = gk_st_at(f, i)->name;
        if (skippable(name))
            continue;
        int known = 0;
        for (int k = 0; !known && k < tab->n; k++)
            known = strcmp(name, tab->e[k].name) == 0 || strcmp(name, tab->e[k].name + 12) == 0;
        if (!known)
            return gk_errf(e, GK_EFORMAT, "%s: unexpected tensor '%s' (not a GPT-2 model, or a "
                           "config.json that does not match it)", gk_st_path(f), name);
    }
    return 0;
}

static void check_tied_head(const gk_st_file *f, const gk_st_tensor *wte)
{
    const gk_st_tensor *head = gk_st_find(f, "lm_head.weight");
    if (head && (head->nbytes != wte->nbytes || head->dtype != wte->dtype ||
                 memcmp(head->data, wte->data, wte->nbytes) != 0))
        gk_warn("%s: lm_head.weight differs from wte.weight; gptkit ties them and uses wte",
                gk_st_path(f));
}

static int import_hf(const char *st_path, const char *dir, const char *out, const import_opts *o,
                     gk_err *e)
{
    char config[4200];
    snprintf(config, sizeof config, "%s/config.json", dir);
    gk_gpt2_config cfg;
    ck_table tab = {0};
    gk_st_file *f = NULL;
    gk_vocab *v = NULL;
    gk_ckpt_param *params = NULL;
    float **owned = NULL;
    int rc = gk_st_open(&f, st_path, e);
    if (!rc && gk_st_meta(f, "gptkit.config"))
        rc = gk_errf(e, GK_EFORMAT, "%s: already a gptkit checkpoint: use it as it is (or copy "
                     "it; gpt-ckpt convert writes it in another dtype)", st_path);
    else if (!rc && same_file(st_path, out))
        rc = overwrite_error(out, e);
    else if (!rc && !is_file(config))
        rc = gk_errf(e, GK_ENOTFOUND, "%s: no config.json beside it (%s): it gives the model's "
                     "n_layer, n_head, n_embd", st_path, config);
    if (!rc)
        rc = ck_hf_config_load(config, &cfg, e);
    if (!rc)
        rc = ck_table_make(&tab, &cfg, e);
    if (!rc && !(params = calloc((size_t)tab.n, sizeof *params)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    if (!rc && !(owned = calloc((size_t)tab.n, sizeof *owned)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < tab.n; i++) {
        const ck_entry *x = &tab.e[i];
        const gk_st_tensor *t = find_tensor(f, x->name);
        if ((rc = check_tensor(f, t, x, config, &cfg, e)) == 0)
            rc = tensor_f32(t, &params[i].data, &owned[i], e);
        params[i].name = x->name;
        params[i].ndim = x->ndim;
        params[i].shape[0] = x->shape[0];
        params[i].shape[1] = x->shape[1];
        if (rc == 0 && x->group == CK_HEAD && x->sym[0] == GK_DIM_V)
            check_tied_head(f, t);
    }
    if (!rc)
        rc = check_extra(f, &tab, e);
    if (!rc)
        rc = ck_import_vocab(o->vocab, dir, cfg.vocab_size, &v, e);
    if (!rc)
        rc = ck_save_imported(out, o->env, o->label ? o->label : st_path, &cfg, params,
                              (size_t)tab.n, v, e);
    for (int i = 0; owned && i < tab.n; i++)
        free(owned[i]);
    free(owned);
    free(params);
    gk_vocab_free(v);
    gk_st_close(f);
    ck_table_free(&tab);
    return rc;
}

/* ---------------------------------------------------------------- llm.c */

static int import_llmc(const char *path, const char *out, const import_opts *o, gk_err *e)
{
    gk_gpt2_config cfg;
    ck_table tab = {0};
    gk_ckpt_param *params = NULL;
    float *buf = NULL;
    gk_vocab *v = NULL;
    int rc = ck_llmc_read(path, &cfg, &tab, &params, &buf, e);
    if (!rc && o->vocab) {
        rc = ck_import_vocab(o->vocab, NULL, cfg.vocab_size, &v, e);
    } else if (!rc) { /* llm.c keeps its tokenizer elsewhere: look where the tools look */
        char found[4096];
        gk_err ignore = {0};
        if (gk_vocab_find(found, sizeof found, NULL, &ignore) == 0 &&
            gk_vocab_load(&v, found, &ignore) == 0 &&
            gk_vocab_size(v) != (uint32_t)cfg.vocab_size) {
            gk_vocab_free(v);
            v = NULL;
        }
        if (!v)
            gk_warn("%s: llm.c checkpoints carry no vocabulary and none of %d tokens was found: "
                    "the checkpoint will have none (give one with -V)", path, cfg.vocab_size);
    }
    if (!rc)
        rc = ck_save_imported(out, o->env, path, &cfg, params, (size_t)tab.n, v, e);
    gk_vocab_free(v);
    free(params);
    free(buf);
    ck_table_free(&tab);
    return rc;
}

/* ---------------------------------------------------------------- sources */

enum kind { K_SAFETENSORS, K_LLMC, K_PICKLE };

static int sniff(const char *path, enum kind *k, gk_err *e)
{
    unsigned char b[8] = {0};
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* (a FIFO: refused, not waited on) */
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = gk_errno(e, path);
        if (fd >= 0) close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return gk_errf(e, GK_EFORMAT, "%s: not a regular file", path);
    }
    ssize_t got = pread(fd, b, sizeof b, 0);
    close(fd);
    size_t n = got > 0 ? (size_t)got : 0;
    int32_t magic = (int32_t)gk_le32(b);
    if (n >= 4 && magic == CK_LLMC_MAGIC)
        *k = K_LLMC;
    else if ((n >= 4 && memcmp(b, "PK\3\4", 4) == 0) || (n >= 2 && b[0] == 0x80 && b[1] <= 5))
        *k = K_PICKLE; /* torch.save: a zip of pickles, or (before torch 1.6) a bare pickle */
    else
        *k = K_SAFETENSORS;
    return 0;
}

/* The default output: NAME.safetensors in the current directory. */
static void default_output(char *out, size_t cap, const char *src, int hub)
{
    char copy[4096], name[1024];
    snprintf(copy, sizeof copy, "%s", src);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    snprintf(name, sizeof name, "%s",
             hub && strchr(copy, '/') ? strchr(copy, '/') + 1 : basename(copy));
    if (!hub && strcmp(name, "model.safetensors") == 0) { /* a HF file: name it after its dir */
        snprintf(copy, sizeof copy, "%s", src);
        snprintf(name, sizeof name, "%s", basename(dirname(copy)));
    }
    const char *exts[] = {".safetensors", ".bin"};
    for (int i = 0; i < 2; i++)
        if (ends_with(name, exts[i]) && strlen(name) > strlen(exts[i]))
            name[strlen(name) - strlen(exts[i])] = '\0';
    if (!strcmp(name, ".") || !strcmp(name, "/") || !strcmp(name, ".."))
        snprintf(name, sizeof name, "model");
    snprintf(out, cap, "%s.safetensors", name);
}

static int import_dir(const char *dir, const char *out, const import_opts *o, gk_err *e)
{
    char st[4200], pt[4200];
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    snprintf(pt, sizeof pt, "%s/pytorch_model.bin", dir);
    if (is_file(st))
        return import_hf(st, dir, out, o, e);
    if (is_file(pt))
        return gk_errf(e, GK_EFORMAT, "%s: only pytorch_model.bin, no model.safetensors: %s",
                       dir, pickle_help);
    return gk_errf(e, GK_ENOTFOUND, "%s: no model.safetensors in this directory", dir);
}

/* Imports repo from the hub, with the hub settings from the environment (o->env: HF_HUB_CACHE,
 * HF_HOME, HOME, HF_HUB_OFFLINE, HF_ENDPOINT, HF_TOKEN, GPT_HUB_STALL_S). */
static int import_hub(const char *repo, const char *out, import_opts *o, gk_err *e)
{
    static const char *const need[] = {"config.json", "vocab.json", "merges.txt",
                                       "model.safetensors"};
    static const char *const want[] = {"generation_config.json"};
    char dir[4096], cache[2048];
    const gk_env *vars = o->env;
    gk_hub_conf hub = {vars->hf_endpoint, vars->hf_token, vars->hf_offline, cache,
                       vars->hub_stall_s};
    int rc =
        gk_hub_cache_dir(cache, sizeof cache, vars->hf_hub_cache, vars->hf_home, vars->home, e);
    if (!rc)
        rc = gk_hub_snapshot(dir, sizeof dir, repo, need, 4, want, 1, &hub, e);
    if (rc == GK_ENOTFOUND && strstr(e->msg, "no file model.safetensors"))
        return gk_errf(e, GK_ENOTFOUND, "%s: the hub has no model.safetensors for this model "
                       "(only pytorch_model.bin?): %s", repo, pickle_help);
    if (rc)
        return rc;
    gk_verbose("%s: %s", repo, dir);
    o->label = repo;
    return import_dir(dir, out, o, e);
}

static int import_path(const char *src, const char *out, const import_opts *o, gk_err *e)
{
    struct stat s;
    if (stat(src, &s) != 0)
        return gk_errno(e, src);
    if (S_ISDIR(s.st_mode))
        return import_dir(src, out, o, e);
    enum kind k = K_SAFETENSORS;
    int rc = sniff(src, &k, e);
    if (rc)
        return rc;
    if (k == K_PICKLE)
        return gk_errf(e, GK_EFORMAT, "%s: a PyTorch pickle file: %s", src, pickle_help);
    if (k == K_LLMC)
        return same_file(src, out) ? overwrite_error(out, e) : import_llmc(src, out, o, e);
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", src);
    return import_hf(src, dirname(copy), out, o, e);
}

/* ---------------------------------------------------------------- command */

static const char usage[] =
    "gpt-ckpt import [options] NAME|DIR|FILE\n"
    "Makes a gptkit checkpoint from a HuggingFace GPT-2 (hub name such as gpt2, gpt2-medium,\n"
    "gpt2-large, gpt2-xl, distilgpt2 or ORG/NAME; a model directory; a model.safetensors with\n"
    "config.json beside it) or from an llm.c checkpoint (gpt2_124M.bin).";

static const char footer[] =
    "An argument naming an existing path is read as a path, anything else as a hub name. Hub\n"
    "models come from the HuggingFace cache ($HF_HOME, default ~/.cache/huggingface) and are\n"
    "downloaded into it from $HF_ENDPOINT (default https://huggingface.co) when missing.\n"
    "Example: gpt-ckpt import gpt2-xl   (writes gpt2-xl.safetensors)\n";

int ck_import_main(int argc, char **argv, const gk_env *env, gk_err *e)
{
    ck_args a = {0};
    import_opts o = {.env = env};
    const gk_opt tab[] = {
        {'o', "output", GK_OPT_STR, &o.output, "FILE",
         "the checkpoint to write (default: NAME.safetensors here)", 0, 0},
        {'V', "vocab", GK_OPT_STR, &o.vocab, "DIR|FILE",
         "vocabulary to embed (default: the model's vocab.json + merges.txt)", 0, 0},
        CK_OPT_QUIET(a),
        {'v', "verbose", GK_OPT_COUNT, &a.verbose, NULL, "more messages", 0, 0},
        CK_OPT_END,
    };
    int rc = ck_args_parse(&a, tab, "import", "model (NAME, DIR or FILE)", usage, footer, argc,
                           argv, e);
    if (rc)
        return rc;
    const char *src = a.operand;
    struct stat s;
    int is_path = stat(src, &s) == 0;
    if (!is_path && !gk_hub_valid_repo(src))
        return gk_errf(e, GK_ENOTFOUND, "%s: no such file or directory (and not a hub name)", src);
    char out[4200];
    if (o.output && (rc = ck_out_check(o.output, e)))
        return rc;
    if (o.output)
        snprintf(out, sizeof out, "%s", o.output);
    else
        default_output(out, sizeof out, src, !is_path);
    return is_path ? import_path(src, out, &o, e) : import_hub(src, out, &o, e);
}
