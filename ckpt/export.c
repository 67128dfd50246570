/* export.c: gpt-ckpt export: a gptkit checkpoint -> a HuggingFace model directory (config.json,
 * model.safetensors, vocab.json, merges.txt, tokenizer.json, generation_config.json;
 * GPT2LMHeadModel and AutoTokenizer load it as it is) and/or an llm.c checkpoint (llmc.c).
 * A bias = false model is written with zero biases (both formats always have them), which gives
 * the same outputs. A new directory is built as DIR.tmp.PID.N beside it and renamed into place;
 * for an existing directory the files are written into DIR/.export.tmp.PID.N and moved into it
 * once all are written, so that a failure (a full disk) leaves no mix of old and new files; an
 * earlier export's tokenizer files that this one does not write are then removed. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ck.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/io/outfile.h"
#include "common/io/safetensors.h"

static int write_text(const char *dir, const char *name, const char *text, size_t len, gk_err *e)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gk_outfile o;
    int rc = gk_outfile_open(&o, path, e);
    if (rc)
        return rc;
    if ((rc = gk_outfile_write(&o, text, len, e))) {
        gk_outfile_abort(&o);
        return rc;
    }
    return gk_outfile_commit(&o, e);
}

static int write_json(const char *dir, const char *name, json_t *j, gk_err *e)
{
    char *text =
        j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (!text)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (!withnl) {
        free(text);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    withnl[n] = '\n';
    withnl[n + 1] = '\0';
    int rc = write_text(dir, name, withnl, n + 1, e);
    free(withnl);
    return rc;
}

static const char *torch_dtype(enum gk_dtype dt)
{
    return dt == GK_DT_BF16 ? "bfloat16" : dt == GK_DT_F16 ? "float16" : "float32";
}

/* config.json as transformers' GPT2Config writes it (the keys it reads). */
static json_t *hf_config(const gk_gpt2_config *c, int eot, enum gk_dtype dt)
{
    double p = (double)c->dropout;
    json_t *o =
        json_pack("{s:s, s:[s], s:f, s:f, s:f, s:f, s:f, s:s, s:i, s:i, s:i, s:i, s:n, s:i, s:b, "
                  "s:b, s:b, s:b, s:s, s:b, s:i}",
                  "model_type", "gpt2", "architectures", "GPT2LMHeadModel", "attn_pdrop", p,
                  "embd_pdrop", p, "resid_pdrop", p, "initializer_range", 0.02,
                  "layer_norm_epsilon", 1e-5, "activation_function", "gelu_new", "n_ctx",
                  c->block_size, "n_embd", c->n_embd, "n_head", c->n_head, "n_layer", c->n_layer,
                  "n_inner", "n_positions", c->block_size, "scale_attn_weights", 1,
                  "scale_attn_by_inverse_layer_idx", 0, "reorder_and_upcast_attn", 0,
                  "tie_word_embeddings", 1, "torch_dtype", torch_dtype(dt), "use_cache", 1,
                  "vocab_size", c->vocab_size);
    /* without an end-of-text token, null: GPT2Config's default 50256 lies outside a smaller
     * vocabulary (a char-level model), and transformers warns about it */
    if (o && (eot >= 0 || c->vocab_size <= 50256)) {
        json_object_set_new(o, "bos_token_id", eot >= 0 ? json_integer(eot) : json_null());
        json_object_set_new(o, "eos_token_id", eot >= 0 ? json_integer(eot) : json_null());
    }
    return o;
}

/* The stored tensor of entry x, checked against the shape its config implies. */
static int stored_tensor(const gk_ckpt *c, const ck_entry *x, const gk_st_tensor **out, gk_err *e)
{
    const gk_st_tensor *s = gk_st_find(gk_ckpt_file(c), x->name);
    int same = s && s->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++)
        same = s->shape[d] == x->shape[d];
    if (!s)
        return gk_errf(e, GK_EFORMAT, "%s: no tensor '%s'", gk_ckpt_path(c), x->name);
    if (!same)
        return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' does not have the shape its config implies",
                       gk_ckpt_path(c), x->name);
    if (s->dtype != GK_DT_F32 && s->dtype != GK_DT_BF16 && s->dtype != GK_DT_F16)
        return gk_errf(e, GK_EFORMAT, "%s: tensor '%s' has dtype %s%s", gk_ckpt_path(c), x->name,
                       gk_dtype_name(s->dtype), s->dtype == GK_DT_I8 ? " (an int8 copy for "
                       "inference: gpt-ckpt convert --dtype float32 widens it)" : "");
    *out = s;
    return 0;
}

/* model.safetensors: the parameters as stored; the biases of a bias-free model as zeros in the
 * type of wte (the first entry), which leaves every output of the model unchanged. */
static int write_model(const gk_ckpt *c, const ck_table *t, const char *dir, enum gk_dtype *dt,
                       gk_err *e)
{
    gk_st_writer *w;
    char path[4400];
    size_t widest = 0;
    for (int i = 0; i < t->n; i++)
        widest = t->e[i].zero && t->e[i].numel > widest ? t->e[i].numel : widest;
    void *zeros = calloc(widest ? widest : 1, sizeof(float));
    if (!zeros)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int rc = gk_st_writer_create(&w, e);
    for (int i = 0; rc == 0 && i < t->n; i++) {
        const ck_entry *x = &t->e[i];
        const gk_st_tensor *s = NULL;
        if (x->zero)
            rc = gk_st_writer_add(w, x->name, *dt, x->ndim, x->shape, zeros, e);
        else if ((rc = stored_tensor(c, x, &s, e)) == 0)
            rc = gk_st_writer_add(w, x->name, s->dtype, s->ndim, s->shape, s->data, e);
        if (rc == 0 && i == 0)
            *dt = s->dtype;
    }
    if (rc == 0)
        rc = gk_st_writer_meta(w, "format", "pt", e);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (rc == 0)
        rc = gk_st_writer_write(w, path, e);
    gk_st_writer_free(w);
    free(zeros);
    return rc;
}

/* transformers' GPT2Tokenizer pre-tokenizes with GPT-2's regex whatever tokenizer.json says:
 * for another pattern AutoTokenizer is sent to tokenizer.json as it is. */
static const char tokenizer_config[] =
    "{\"tokenizer_class\": \"PreTrainedTokenizerFast\", \"bos_token\": \"<|endoftext|>\", "
    "\"eos_token\": \"<|endoftext|>\"}\n";

/* vocab.json + merges.txt + tokenizer.json (+ tokenizer_config.json for another pattern than
 * GPT-2's); *eot = the end-of-text id (-1 without a BPE vocabulary). */
static int write_vocab(const gk_ckpt *c, const char *dir, int *eot, gk_err *e)
{
    gk_vocab *v = NULL;
    *eot = -1;
    int rc = gk_ckpt_vocab(c, &v, e);
    if (rc == GK_ENOTFOUND) {
        gk_warn("%s: no embedded vocabulary: no vocab.json / merges.txt / tokenizer.json written",
                gk_ckpt_path(c));
        return 0;
    }
    if (rc)
        return rc;
    if (gk_vocab_type(v) != GK_VOCAB_BPE) {
        gk_warn("%s: a char-level vocabulary has no HuggingFace GPT-2 tokenizer form: no "
                "vocab.json / merges.txt / tokenizer.json written", gk_ckpt_path(c));
        gk_vocab_free(v);
        return 0;
    }
    char *json = NULL, *merges = NULL, *tok = NULL;
    size_t jl = 0, ml = 0, tl = 0;
    rc = gk_vocab_to_json(v, &json, &jl, e);
    if (rc == 0)
        rc = gk_vocab_merges(v, &merges, &ml, e);
    if (rc == 0)
        rc = gk_vocab_hf_json(v, &tok, &tl, e);
    if (rc == 0)
        rc = write_text(dir, "vocab.json", json, jl, e);
    if (rc == 0)
        rc = write_text(dir, "merges.txt", merges, ml, e);
    if (rc == 0)
        rc = write_text(dir, "tokenizer.json", tok, tl, e);
    if (rc == 0 && gk_vocab_pattern(v) != GK_PATTERN_GPT2)
        rc = write_text(dir, "tokenizer_config.json", tokenizer_config,
                        sizeof tokenizer_config - 1, e);
    *eot = gk_vocab_eot(v);
    free(json);
    free(merges);
    free(tok);
    gk_vocab_free(v);
    return rc;
}

static int write_hf_files(const gk_ckpt *c, const gk_gpt2_config *cfg, const char *dir, gk_err *e)
{
    ck_table t;
    enum gk_dtype dt = GK_DT_F32;
    int eot = -1;
    int rc = ck_table_make_biased(&t, cfg, e);
    if (rc)
        return rc;
    rc = write_model(c, &t, dir, &dt, e);
    if (rc == 0)
        rc = write_vocab(c, dir, &eot, e);
    if (rc == 0)
        rc = write_json(dir, "config.json", hf_config(cfg, eot, dt), e);
    json_t *gen = json_pack("{s:b}", "_from_model_config", 1);
    if (gen && eot >= 0) {
        json_object_set_new(gen, "bos_token_id", json_integer(eot));
        json_object_set_new(gen, "eos_token_id", json_integer(eot));
    }
    if (rc == 0)
        rc = write_json(dir, "generation_config.json", gen, e);
    else
        json_decref(gen);
    ck_table_free(&t);
    return rc;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *x;
    char path[4600];
    while (d && (x = readdir(d))) {
        if (strcmp(x->d_name, ".") && strcmp(x->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, x->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Makes a new directory for the files (mode 0777 less the umask, as mkdir applies it: no
 * umask() call, which would race with other threads): beside dir ("out.tmp.PID.N" for "out/"),
 * or with inside, in it (".export.tmp.PID.N": the same file system as the files it replaces). */
static int make_temp_dir(const char *dir, int inside, char *tmp, size_t cap, gk_err *e)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    for (unsigned k = 0; k < 1000; k++) {
        snprintf(tmp, cap, "%.*s%s.tmp.%ld.%u", (int)n, dir, inside ? "/.export" : "",
                 (long)getpid(), k);
        if (mkdir(tmp, 0777) == 0)
            return 0;
        if (errno == ENOENT) { /* say which: the output's parent, not the output */
            char parent[4200];
            snprintf(parent, sizeof parent, "%.*s", (int)n, dir);
            return gk_errf(e, GK_ENOTFOUND, "%s: directory %s does not exist", dir,
                           dirname(parent));
        }
        if (errno != EEXIST)
            return gk_errno(e, dir);
    }
    return gk_errf(e, GK_EIO, "%s: cannot make a temporary directory %s", dir,
                   inside ? "in it" : "beside it");
}

/* An error about a file in the temporary directory names the file as it would have been named. */
static void name_as_final(gk_err *e, const char *tmp, const char *dir)
{
    size_t n = strlen(tmp), d = strlen(dir);
    while (d > 1 && dir[d - 1] == '/')
        d--;
    if (strncmp(e->msg, tmp, n) != 0 || e->msg[n] != '/')
        return;
    char rest[sizeof e->msg];
    snprintf(rest, sizeof rest, "%s", e->msg + n);
    gk_errf(e, e->code, "%.*s%s", (int)d, dir, rest);
}

/* Moves every file of tmp into dir (the same file system: renames, which need no data space). */
static int move_files(const char *tmp, const char *dir, gk_err *e)
{
    DIR *d = opendir(tmp);
    if (!d)
        return gk_errno(e, tmp);
    char from[4600], to[4600];
    int rc = 0, moved = 0;
    for (struct dirent *x; rc == 0 && (x = readdir(d));) {
        if (!strcmp(x->d_name, ".") || !strcmp(x->d_name, ".."))
            continue;
        snprintf(from, sizeof from, "%s/%s", tmp, x->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, x->d_name);
        if (rename(from, to) != 0)
            rc = gk_errno(e, to);
        moved = 1;
    }
    closedir(d);
    if (rc == 0 && moved)
        gk_sync_dir_of(to); /* the renames survive a power cut */
    return rc;
}

/* The files an export may write and not always does (a model without a BPE vocabulary), and
 * tokenizer files of other origins, which transformers would load beside the model (the first,
 * tokenizer_config.json, this export writes for a vocabulary of another pattern than GPT-2's). */
static const char *const vocab_files[] = {"vocab.json", "merges.txt", "tokenizer.json"};
static const char *const foreign_files[] = {"tokenizer_config.json", "special_tokens_map.json",
                                            "added_tokens.json"};
#define COUNT(a) (sizeof (a) / sizeof *(a))

/* After an export into an existing dir (files of tmp moved in): an earlier export's vocab.json,
 * merges.txt and tokenizer.json that this one did not write go (they would pair the model with
 * another tokenizer); other tokenizer files (but a tokenizer_config.json this one wrote) are
 * named in a warning. */
static int drop_stale(const char *dir, int wrote_vocab, int wrote_config, gk_err *e)
{
    char path[4600], seen[200] = "";
    int removed = 0;
    for (size_t i = 0; !wrote_vocab && i < COUNT(vocab_files); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, vocab_files[i]);
        if (unlink(path) == 0)
            removed++;
        else if (errno != ENOENT)
            return gk_errno(e, path);
    }
    if (removed)
        gk_info("%s: removed vocab.json / merges.txt / tokenizer.json of an earlier export (this "
                "model has no BPE tokenizer)", dir);
    for (size_t i = wrote_config; i < COUNT(foreign_files); i++) { /* ([0]: tokenizer_config) */
        snprintf(path, sizeof path, "%s/%s", dir, foreign_files[i]);
        if (access(path, F_OK) == 0)
            snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s", *seen ? ", " : "",
                     foreign_files[i]);
    }
    if (*seen)
        gk_warn("%s: also holds %s, not written by this export: transformers may load it with "
                "the model", dir, seen);
    return 0;
}

/* Every file is written into a temporary directory first, so that a failure (a full disk)
 * leaves dir as it was: a new dir is that directory renamed; into an existing one the files
 * are moved once all of them are written, then an earlier export's files this one does not
 * write are removed. */
static int export_hf(const gk_ckpt *c, const gk_gpt2_config *cfg, const char *dir, gk_err *e)
{
    struct stat st;
    int exists = stat(dir, &st) == 0;
    if (exists && !S_ISDIR(st.st_mode))
        return gk_errf(e, GK_EIO, "%s: exists and is not a directory", dir);
    char tmp[4200];
    int rc = make_temp_dir(dir, exists, tmp, sizeof tmp, e);
    if (rc)
        return rc;
    char vocab[4300], config[4300];
    snprintf(vocab, sizeof vocab, "%s/%s", tmp, vocab_files[0]);
    snprintf(config, sizeof config, "%s/%s", tmp, foreign_files[0]);
    if ((rc = write_hf_files(c, cfg, tmp, e)))
        name_as_final(e, tmp, dir);
    else if (exists) {
        int wrote_vocab = access(vocab, F_OK) == 0, wrote_config = access(config, F_OK) == 0;
        if ((rc = move_files(tmp, dir, e)) == 0)
            rc = drop_stale(dir, wrote_vocab, wrote_config, e);
    }
    else if (rename(tmp, dir) != 0)
        rc = gk_errno(e, dir);
    if (rc || exists)
        remove_tree(tmp);
    return rc;
}

static const char usage[] =
    "gpt-ckpt export [options] FILE (--hf DIR | --llmc FILE.bin)\n"
    "Writes a checkpoint as a HuggingFace GPT-2 directory (loads with transformers'\n"
    "GPT2LMHeadModel.from_pretrained) and/or an llm.c checkpoint (version 3, fp32).\n"
    "A model without biases (bias = false) is written with zero biases: the same outputs.";

int ck_export_main(int argc, char **argv, const gk_env *env, gk_err *e)
{
    ck_args a = {0};
    const char *hf = NULL, *llmc = NULL;
    const gk_opt tab[] = {
        {0, "hf", GK_OPT_STR, &hf, "DIR", "write a HuggingFace model directory", 0, 0},
        {0, "llmc", GK_OPT_STR, &llmc, "FILE", "write an llm.c checkpoint (gpt2_124M.bin style)", 0,
         0},
        CK_OPT_QUIET(a),
        CK_OPT_END,
    };
    int rc = ck_args_parse(&a, tab, "export", "checkpoint", usage, NULL, argc, argv, e);
    if (rc)
        return rc;
    if (!hf && !llmc)
        return gk_errf(e, GK_EUSAGE, "export needs --hf DIR or --llmc FILE");
    gk_ckpt *c = NULL;
    gk_gpt2_config cfg;
    if ((rc = ck_open(a.operand, env, &c, &cfg, e)))
        return rc;
    const char *zeros = cfg.bias ? "" : "; the model has no biases: zeros written";
    if (hf && (rc = export_hf(c, &cfg, hf, e)) == 0)
        gk_info("%s -> %s (HuggingFace%s)", a.operand, hf, zeros);
    if (rc == 0 && llmc && (rc = ck_llmc_write(c, &cfg, llmc, e)) == 0)
        gk_info("%s -> %s (llm.c, fp32%s)", a.operand, llmc, zeros);
    gk_ckpt_close(c);
    return rc;
}
