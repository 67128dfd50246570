/* setup.c: getting a run ready: init_from (scratch, resume, auto, a checkpoint), the model and
 * its backend (in the checkpoint's shape), the vocabulary to embed, the data; then, when training
 * starts, out_dir, its lock and the metrics log (see run.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/ckpt_where.h"
#include "common/log.h"
#include "common/mem.h"
#include "kernels/backend.h"
#include "kernels/device_opt.h"
#include "kernels/model/gpt2_load.h"
#include "checkpoint.h"
#include "run.h"

static int make_dirs(const char *path, gk_err *e)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return gk_errno(e, buf);
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return gk_errno(e, buf);
    return 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

gk_gpt2_config tr_model_config(const tr_settings *s)
{
    return (gk_gpt2_config){(int)s->n_layer, (int)s->n_head, (int)s->n_embd, (int)s->block_size,
                            (int)s->vocab_size, s->bias, (float)s->dropout};
}

/* The newest step checkpoint in out_dir into path (temporaries never match): 1, else 0. For a run
 * killed between its first checkpoint's rename and latest's, or a latest whose file is gone. */
static int newest_ckpt(const char *out_dir, char *path, size_t cap)
{
    int64_t newest = -1;
    DIR *d = opendir(out_dir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (tr_ckpt_step(de->d_name) > newest) {
            newest = tr_ckpt_step(de->d_name);
            snprintf(path, cap, "%s/%s", out_dir, de->d_name);
        }
    if (d)
        closedir(d);
    return newest >= 0;
}

/* Which checkpoint to start from: NULL for scratch. *resume: it is this run's own latest. */
static int pick_start(const tr_settings *s, const gk_s3_conf *conf, char *path, size_t cap,
                      int *resume, gk_err *e)
{
    *resume = 0;
    snprintf(path, cap, "%s/latest.safetensors", s->out_dir);
    int exists = access(path, F_OK) == 0;
    if (strcmp(s->init_from, "scratch") == 0) {
        path[0] = '\0';
        return 0;
    }
    if (strcmp(s->init_from, "resume") == 0 || strcmp(s->init_from, "auto") == 0) {
        if (!exists && strcmp(s->init_from, "resume") == 0)
            return gk_errf(e, GK_ENOTFOUND, "init_from=resume: %s not found", path);
        if (!exists && (exists = newest_ckpt(s->out_dir, path, cap)))
            gk_info("%s/latest.safetensors missing: continuing from %s", s->out_dir, path);
        *resume = exists;
        if (!exists)
            path[0] = '\0';
        return 0;
    }
    int rc = gk_ckpt_where_conf(s->init_from, conf, path, cap, e); /* an out_dir: its latest */
    if (!rc && !gk_s3_is_url(path) && access(path, R_OK) != 0)
        rc = gk_errno(e, path);
    return rc;
}

/* A run that does not resume refuses an out_dir holding another run's checkpoints: its own would
 * be pruned as the older ones (they count from step 0) and latest would mix the two runs. */
static int check_fresh_out_dir(const tr_settings *s, gk_err *e)
{
    char latest[4096];
    struct stat st;
    snprintf(latest, sizeof latest, "%s/latest.safetensors", s->out_dir);
    int64_t newest = lstat(latest, &st) == 0 ? 0 : -1;
    DIR *d = opendir(s->out_dir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (tr_ckpt_step(de->d_name) > newest)
            newest = tr_ckpt_step(de->d_name);
    if (d)
        closedir(d);
    if (newest < 0)
        return 0;
    return gk_errf(e, GK_EUSAGE, "out_dir %s already holds the checkpoints of a run (up to step "
                   "%lld): continue it with --init_from=auto, or train into another out_dir, or "
                   "remove them", s->out_dir, (long long)newest);
}

/* A shape key's value as config text: an integer, or true/false for bias. */
static const char *shape_text(const char *key, int64_t v, char *buf, size_t cap)
{
    if (strcmp(key, "bias") == 0)
        snprintf(buf, cap, "%s", v ? "true" : "false");
    else
        snprintf(buf, cap, "%lld", (long long)v);
    return buf;
}

/* The model keeps its checkpoint's shape: a shape key set (in a config file or on the command
 * line) to another value is an error naming both; block_size may shrink, as nanoGPT's
 * crop_block_size (the position embeddings lose their last rows). */
static int reconcile_shape(tr_run *r, const char *ck, gk_gpt2_config *mc, gk_err *e)
{
    const tr_settings *s = &r->s;
    const struct { const char *key; int64_t want, have; } k[] = {
        {"n_layer", s->n_layer, mc->n_layer}, {"n_head", s->n_head, mc->n_head},
        {"n_embd", s->n_embd, mc->n_embd}, {"vocab_size", s->vocab_size, mc->vocab_size},
        {"bias", s->bias, mc->bias}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        const char *origin = gk_config_origin(r->cfg, k[i].key);
        char want[32], have[32];
        if (origin && k[i].want != k[i].have)
            return gk_errf(e, GK_EUSAGE,
                           "%s: %s = %s, but the model in %s has %s = %s (its shape cannot change)",
                           origin, k[i].key, shape_text(k[i].key, k[i].want, want, sizeof want), ck,
                           k[i].key, shape_text(k[i].key, k[i].have, have, sizeof have));
    }
    const char *origin = gk_config_origin(r->cfg, "block_size");
    if (origin && s->block_size > mc->block_size)
        return gk_errf(e, GK_EUSAGE,
                       "%s: block_size = %lld, but the model in %s "
                       "has block_size = %d (it can only shrink)",
                       origin, (long long)s->block_size, ck, mc->block_size);
    if (origin && s->block_size < mc->block_size) {
        gk_info("block_size %d -> %lld: cropping the position embeddings of %s", mc->block_size,
                (long long)s->block_size, ck);
        mc->block_size = (int)s->block_size;
    }
    return 0;
}

/* Refuses to resume a run that has nothing left to train (init_from=auto at exactly max_iters is
 * a finished run: tr_run_train says so and exits 0). */
static int check_steps_left(const tr_run *r, const char *ck, gk_err *e)
{
    const tr_settings *s = &r->s;
    int finished = s->max_iters == r->st.step && strcmp(s->init_from, "auto") == 0;
    if (s->eval_only || s->max_iters > r->st.step || finished)
        return 0;
    return gk_errf(e, GK_EUSAGE, "max_iters = %lld, but %s is at step %lld already: nothing to "
                   "train (set max_iters above %lld to continue)", (long long)s->max_iters, ck,
                   (long long)r->st.step, (long long)r->st.step);
}

/* Model shape from the checkpoint; the state too when resuming. */
static int read_checkpoint_meta(tr_run *r, const gk_ckpt *c, int resume, gk_gpt2_config *mc,
                                gk_err *e)
{
    int rc = gk_gpt2_ckpt_config(c, mc, e);
    if (!rc)
        rc = reconcile_shape(r, gk_ckpt_path(c), mc, e);
    if (rc)
        return rc;
    mc->dropout = (float)r->s.dropout; /* dropout may change (fine-tuning); shapes may not */
    if (!resume)
        return 0;
    const char *st = gk_ckpt_train_json(c);
    if (!st)
        return gk_errf(e, GK_EFORMAT, "%s: not a training checkpoint (no gptkit.train)",
                       gk_ckpt_path(c));
    if ((rc = tr_state_parse(st, gk_ckpt_path(c), &r->st, e)))
        return rc;
    return check_steps_left(r, gk_ckpt_path(c), e);
}

int tr_start_shape(tr_run *r, gk_gpt2_config *mc, gk_err *e)
{
    char path[4096];
    int resume = 0;
    gk_ckpt *c = NULL;
    int rc = pick_start(&r->s, &r->s3conf, path, sizeof path, &resume, e);
    if (rc || !path[0])
        return rc;
    if (gk_s3_is_url(path)) {
        gk_info("planning the settings' shape, not reading %s", path);
        return 0;
    }
    if (!(rc = gk_ckpt_open(&c, path, e)) && !(rc = gk_gpt2_ckpt_config(c, mc, e)))
        rc = reconcile_shape(r, path, mc, e);
    gk_ckpt_close(c);
    return rc;
}

/* The config printed and stored in checkpoints is the one trained: the model's shape as resolved
 * (from the checkpoint; vocab_size from the data) replaces the settings', `from` its origin. */
static int record_shape(tr_run *r, const gk_gpt2_config *mc, const char *from, gk_err *e)
{
    const tr_settings *s = &r->s;
    const struct { const char *key; int64_t now, val; } k[] = {
        {"n_layer", s->n_layer, mc->n_layer}, {"n_head", s->n_head, mc->n_head},
        {"n_embd", s->n_embd, mc->n_embd}, {"block_size", s->block_size, mc->block_size},
        {"vocab_size", s->vocab_size, mc->vocab_size}, {"bias", s->bias, mc->bias}};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof k / sizeof *k; i++) {
        char v[32];
        if (k[i].now != k[i].val)
            rc = gk_config_set(r->cfg, k[i].key, shape_text(k[i].key, k[i].val, v, sizeof v), from,
                               e);
    }
    return rc;
}

/* The vocabulary to embed: the checkpoint's, else `vocab`, else the data's when found (beside
 * the shards or by the default lookup). A mismatch with the data is an error. */
static int pick_vocab(tr_run *r, const gk_ckpt *c, gk_err *e)
{
    uint32_t data_fp = tr_data_fingerprint(r->train);
    int rc = GK_ENOTFOUND;
    if (c)
        rc = gk_ckpt_vocab(c, &r->vocab, e);
    if (rc == GK_ENOTFOUND && r->s.vocab[0]) {
        char path[4096];
        if ((rc = gk_vocab_find(path, sizeof path, r->s.vocab, e)) == 0)
            rc = gk_vocab_load(&r->vocab, path, e);
        if (rc)
            return rc;
    } else if (rc == GK_ENOTFOUND) {
        r->vocab = tr_data_find_vocab(r->train, r->vocab_found, sizeof r->vocab_found);
        rc = 0;
    }
    if (rc)
        return rc;
    if (r->vocab && data_fp && gk_vocab_fingerprint(r->vocab) != data_fp)
        return gk_errf(e, GK_EUSAGE,
                       "train_data was tokenized with another "
                       "vocabulary (fingerprint %08x) than %s (%08x)",
                       data_fp, c ? gk_ckpt_path(c) : r->s.vocab, gk_vocab_fingerprint(r->vocab));
    if (!r->vocab)
        gk_warn("vocabulary unknown: checkpoints will not carry one (set vocab = DIR|FILE)");
    return 0;
}

/* Every shard of train_data and val_data against the model, before anything is built: the
 * vocabulary's fingerprint (else the first shard's), the vocab size (header or tokens). */
static int check_data(tr_run *r, const gk_gpt2_config *mc, const gk_ckpt *c, gk_err *e)
{
    uint32_t fp = r->vocab ? gk_vocab_fingerprint(r->vocab) : 0;
    const char *whose = !r->vocab       ? "the first shard"
                        : c             ? gk_ckpt_path(c)
                        : r->s.vocab[0] ? r->s.vocab
                                        : r->vocab_found;
    int rc = tr_data_check(r->train, (uint32_t)mc->vocab_size, &fp, whose, "train_data", e);
    if (!rc && r->val)
        rc = tr_data_check(r->val, (uint32_t)mc->vocab_size, &fp, whose, "val_data", e);
    return rc;
}

static int open_data(tr_run *r, int T, uint32_t vocab_limit, gk_err *e)
{
    tr_data_remote remote = {&r->s3conf, (size_t)r->s.data_readahead << 20, TR_DATA_CONNECTIONS};
    const tr_data_remote *rem = r->s3data ? &remote : NULL;
    int rc = tr_data_open(&r->train, r->s.train_data, T, vocab_limit, rem, "train_data", e);
    if (!rc && r->s.val_data[0])
        rc = tr_data_open(&r->val, r->s.val_data, T, vocab_limit, rem, "val_data", e);
    return rc;
}

int tr_open_backend(tr_run *r, gk_err *e)
{
    if (r->be)
        return 0; /* (tensor_parallel opened it first) */
    int bf16 = strcmp(r->s.dtype, "bfloat16") == 0  ? 1
               : strcmp(r->s.dtype, "float32") == 0 ? 0
                                                    : -1;
    gk_backend_opts bo = {0}; /* attention is a CHOICE key: known */
    int rc =
        gk_device_backend_opts(&bo, r->s.device, r->s.attention, "attention", bf16, &r->env, e);
    bo.threads = (int)r->s.threads;
    bo.gpu = r->dist.where.local_rank; /* GPU LOCAL_RANK */
    int local = r->dist.where.local_world_size;
    if (bo.threads <= 0 && local > 1) { /* ranks on one machine share its cores */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        bo.threads = cores > local ? (int)(cores / local) : 1;
    }
    if (!rc)
        rc = gk_backend_open(&r->be, &bo, e);
    char what[128];
    if (!rc)
        gk_info("device %s", gk_backend_describe(r->be, what, sizeof what));
    if (!rc)
        gk_warn_note(r->be->note); /* e.g. why device auto is not cuda */
    r->peak_tflops = r->s.peak_tflops;
    if (!rc && r->peak_tflops == 0 && r->be->act == GK_BF16) {
        r->peak_tflops = r->be->props.bf16_peak_flops / 1e12;
        if (r->peak_tflops > 0)
            gk_verbose("mfu: against %g TFLOP/s, the GPU's bf16 peak (peak_tflops to set another)",
                       r->peak_tflops);
    }
    if (!rc && bf16 == 1 && r->be->act != GK_BF16)
        rc = gk_errf(e, GK_EUSAGE, "dtype = bfloat16: device %s trains in float32 only", what);
    return rc;
}

static int create_model(tr_run *r, const gk_gpt2_config *mc, gk_err *e)
{
    int rc = gk_gpt2_config_check(mc, e);
    if (!rc)
        rc = tr_open_backend(r, e);
    int flags = 0;
    if (!rc)
        rc = tr_model_flags(r, mc, &flags, e);
    if (!rc)
        rc = gk_gpt2_create_tp(&r->model, mc, r->be, (int)r->s.batch_size, mc->block_size,
                               flags | GK_GPT2_DEFER_MOMENTS | GK_GPT2_DEFER_GRADS,
                               r->dist.tp_comm, e);
        /* (moments(): maybe a shard) */
    size_t n = (size_t)r->s.batch_size * (size_t)mc->block_size;
    r->x = malloc(n * sizeof *r->x);
    r->y = malloc(n * sizeof *r->y);
    r->window = malloc(2 * (size_t)mc->block_size * sizeof *r->window);
    if (!rc && (!r->x || !r->y || !r->window))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    return rc;
}

/* The parameters; a resumed checkpoint's moments are loaded once set_comm has allocated them
 * (r->moments_from: c, which the caller then keeps open). */
static int init_weights(tr_run *r, gk_ckpt *c, int resume, gk_err *e)
{
    if (!resume)
        r->st = (tr_state){.seed = (uint64_t)r->s.seed, .best_val_loss = INFINITY, .world_size = 1};
    if (!c)
        return gk_gpt2_init(r->model, (uint64_t)r->s.seed, e);
    int with_opt = resume && gk_ckpt_has_optimizer(c);
    if (resume && !with_opt)
        gk_warn("%s holds no optimizer state: AdamW moments start at zero", gk_ckpt_path(c));
    int rc = tr_load(c, r->model, TR_LOAD_PARAMS, e);
    gk_gpt2_set_step(r->model, r->st.step);
    if (!rc && with_opt)
        r->moments_from = c;
    return rc;
}

/* Where to start: rank 0 looks at out_dir (locking it first when it exists, so that a second
 * run stops before reading it) and every other rank starts from the same checkpoint: the path,
 * and with out_dir in a bucket the object's URL after a newline, which a rank that cannot open
 * the path (on another machine than rank 0's staging directory) downloads (r->start_fd). */
static int decide_start(tr_run *r, char *path, size_t cap, int *resume, gk_err *e)
{
    char text[8400] = "", url[4096] = "";
    int rc = 0;
    if (tr_dist_is_root(&r->dist)) {
        if (!r->s.eval_only && is_dir(r->s.out_dir))
            rc = tr_lock_take(&r->lock, r->s.out_dir, e);
        if (!rc)
            rc = pick_start(&r->s, &r->s3conf, path, cap, resume, e);
        if (!rc && !*resume && !r->s.eval_only && is_dir(r->s.out_dir))
            rc = check_fresh_out_dir(&r->s, e);
        if (!rc && r->s3out && path[0] && tr_s3out_object_url(r->s3out, path, url, sizeof url))
            url[0] = '\0';
        if (!rc && gk_s3_is_url(path)) { /* init_from in a bucket: every rank downloads it */
            snprintf(url, sizeof url, "%s", path);
            rc = tr_s3out_fetch_ckpt(&r->s3conf, url, r->env.tmpdir, &r->start_fd, e);
        }
        if (rc)
            snprintf(text, sizeof text, "%s", e->msg);
        else
            snprintf(text, sizeof text, "%d%s\n%s", *resume, path, url);
        int src = tr_dist_share(&r->dist, "start", rc, text, sizeof text, e);
        return rc ? rc : src;
    }
    if ((rc = tr_dist_share(&r->dist, "start", 0, text, sizeof text, e)))
        return rc;
    *resume = text[0] == '1';
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0';
    snprintf(path, cap, "%.*s", (int)cap - 1, text + 1);
    if (nl && nl[1] && access(path, R_OK) != 0) { /* rank 0's staging directory is not here */
        if ((rc = tr_s3out_fetch_ckpt(&r->s3conf, nl + 1, r->env.tmpdir, &r->start_fd, e)))
            return rc;
        snprintf(path, cap, "%.*s", (int)cap - 1, nl + 1);
    }
    return 0;
}

/* Micro-batches per step over all ranks: gradient_accumulation_steps, or total_batch_size /
 * (batch_size x block_size); each rank takes an equal part. */
static int split_batch(tr_run *r, int T, gk_err *e)
{
    tr_settings *s = &r->s;
    int64_t BT = s->batch_size * T, W = r->dist.dp_world, accum = s->gradient_accumulation_steps;
    char near[64];
    if (s->total_batch_size > 0) {
        if (s->total_batch_size % (BT * W) != 0)
            return gk_errf(e, GK_EUSAGE,
                           "%s: total_batch_size = %lld is not a multiple of batch_size x "
                           "block_size x ranks = %lld x %d x %lld = %lld: %s would be",
                           gk_config_origin(r->cfg, "total_batch_size"),
                           (long long)s->total_batch_size, (long long)s->batch_size, T,
                           (long long)W, (long long)(BT * W),
                           gk_config_multiples(s->total_batch_size, BT * W, near, sizeof near));
        accum = s->total_batch_size / BT;
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)accum);
        int rc = gk_config_set(r->cfg, "gradient_accumulation_steps", v, "total_batch_size", e);
        if (rc)
            return rc;
    } else if (accum % W != 0) {
        const char *o = gk_config_origin(r->cfg, "gradient_accumulation_steps");
        return gk_errf(e, GK_EUSAGE,
                       "%s: gradient_accumulation_steps = %lld does not split over %lld ranks: %s "
                       "would (or set total_batch_size)",
                       o ? o : "default", (long long)accum, (long long)W,
                       gk_config_multiples(accum, W, near, sizeof near));
    }
    return tr_dist_split(&r->dist, accum, e);
}

/* The hellaswag key's items, encoded with the vocabulary to embed, for windows of block_size. */
static int load_hellaswag(tr_run *r, const gk_gpt2_config *mc, gk_err *e)
{
    if (!r->s.hellaswag[0]) return 0;
    if (!r->vocab)
        return gk_errf(e, GK_EUSAGE, "hellaswag: the items need a vocabulary: set vocab (none came "
                       "with the data or the checkpoint)");
    int rc = gk_choice_load(&r->hellaswag, r->s.hellaswag, r->vocab, (uint32_t)mc->vocab_size,
                            mc->block_size, e);
    if (rc) { /* name the key; a file missing or bad is a setup error, as a missing vocabulary */
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        rc = gk_errf(e, rc == GK_ENOMEM || rc == GK_EINTR ? rc : GK_EUSAGE, "hellaswag: %s", msg);
    }
    if (!rc && !r->hellaswag.n)
        rc = gk_errf(e, GK_EUSAGE, "hellaswag: %s holds no items", r->s.hellaswag);
    if (!rc) gk_verbose("hellaswag: %zu items from %s", r->hellaswag.n, r->s.hellaswag);
    return rc;
}

/* The part of setup every rank does: the model, its weights, the data, the vocabulary. */
static int setup_rank(tr_run *r, const char *path, int resume, gk_err *e)
{
    gk_ckpt *c = NULL;
    int rc = r->start_fd >= 0 ? gk_ckpt_open_fd(&c, r->start_fd, path, e)
             : path[0]        ? gk_ckpt_open(&c, path, e)
                              : 0;
    gk_gpt2_config mc = tr_model_config(&r->s);
    if (!rc && c)
        rc = read_checkpoint_meta(r, c, resume, &mc, e);
    if (!rc)
        rc = open_data(r, mc.block_size, (uint32_t)mc.vocab_size, e);
    if (!rc && mc.vocab_size == 0 && (mc.vocab_size = (int)tr_data_vocab_size(r->train)) == 0)
        rc = gk_errf(e, GK_EUSAGE, "vocab_size: not set and %s does not say", r->s.train_data);
    if (!rc)
        rc = record_shape(r, &mc, c ? gk_ckpt_path(c) : r->s.train_data, e);
    if (!rc)
        rc = split_batch(r, mc.block_size, e);
    if (!rc)
        rc = pick_vocab(r, c, e);
    if (!rc)
        rc = load_hellaswag(r, &mc, e);
    if (!rc)
        rc = check_data(r, &mc, c, e);
    if (!rc)
        rc = create_model(r, &mc, e);
    if (!rc)
        rc = init_weights(r, c, resume, e);
    r->st.world_size = r->dist.world; /* as saved from now on */
    if (!rc && c)
        gk_info("%s from %s at step %lld", resume ? "resuming" : "initialized", gk_ckpt_path(c),
                (long long)r->st.step);
    if (c != r->moments_from)
        gk_ckpt_close(c);
    return rc;
}

/* optimizer_offload: a CPU backend (this rank's share of the cores) that keeps the master weights
 * and moments in host memory and updates them (gk_gpt2_set_offload). */
static int offload(tr_run *r, gk_err *e)
{
    const char *dev = r->be->ops->name;
    if (strcmp(dev, "cpu") == 0 || strcmp(dev, "ref") == 0) /* (cuda-emu: a GPU's behaviour) */
        return gk_errf(e, GK_EUSAGE, "optimizer_offload: device %s keeps the model in host memory "
                       "already: nothing to offload (it is for cuda)", dev);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int local = r->dist.where.local_world_size > 1 ? r->dist.where.local_world_size : 1;
    int threads = r->s.threads > 0 ? (int)r->s.threads : cores > local ? (int)(cores / local) : 1;
    gk_backend_opts bo = {0};
    int rc = gk_device_backend_opts(&bo, "cpu", "auto", "attention", 0, &r->env, e);
    bo.threads = threads;
    if (!rc) rc = gk_backend_open(&r->host_be, &bo, e);
    return rc ? rc : gk_gpt2_set_offload(r->model, r->host_be, e);
}

/* The AdamW moments, allocated by set_comm (this rank's shard alone with ZeRO-1) and loaded from
 * the resumed checkpoint; every rank learns whether all of them managed. */
static int moments(tr_run *r, gk_err *e)
{
    int rc = r->s.optimizer_offload ? offload(r, e) : 0;
    if (!rc) rc = gk_gpt2_set_comm(r->model, r->dist.comm, (int)r->s.zero_stage, e);
    if (!rc && r->moments_from)
        rc = tr_load(r->moments_from, r->model, TR_LOAD_MOMENTS, e);
    gk_ckpt_close(r->moments_from);
    r->moments_from = NULL;
    return tr_dist_agree(&r->dist, "optimizer state", rc, e);
}

/* tensor_parallel: the backend, then the groups' comms (tr_dist_tp), before the model is made
 * (its parts are the group's); every rank learns whether all of them managed. */
static int tensor_parallel(tr_run *r, gk_err *e)
{
    int tp = (int)r->s.tensor_parallel;
    if (tp <= 1)
        return 0;
    int rc = tr_open_backend(r, e);
    if ((rc = tr_dist_agree(&r->dist, "device", rc, e)))
        return rc;
    rc = tr_dist_tp(&r->dist, r->be, tp, e);
    if (!rc && r->s.sample_tokens > 0 && tr_dist_is_root(&r->dist))
        gk_warn("sample_tokens: no samples while training with tensor_parallel (gpt-sample the "
                "checkpoints: they are whole)");
    return tr_dist_agree(&r->dist, "tensor_parallel", rc, e);
}

int tr_run_setup(tr_run *r, gk_err *e)
{
    char path[4096] = "";
    int resume = 0;
    int rc = tensor_parallel(r, e);
    if (rc)
        return rc;
    rc = decide_start(r, path, sizeof path, &resume, e);
    if (!rc)
        rc = setup_rank(r, path, resume, e);
    r->resumed = resume;
    r->last_saved_step = resume ? r->st.step : -1;
    if ((rc = tr_dist_agree(&r->dist, "setup", rc, e)))
        return rc;
    gk_elt sums = strcmp(r->s.reduce_dtype, "bfloat16") == 0 ? GK_BF16 : GK_F32;
    if ((rc = tr_dist_comm(&r->dist, r->be, sums, e)))
        return rc;
    return moments(r, e);
}

int tr_run_start(tr_run *r, gk_err *e)
{
    if (!tr_dist_is_root(&r->dist))
        return 0; /* only rank 0 writes */
    int rc = make_dirs(r->s.out_dir, e);
    if (!rc)
        rc = tr_lock_take(&r->lock, r->s.out_dir, e);
    if (!rc)
        tr_checkpoint_clean_stale(r->s.out_dir); /* the lock held: no run of ours writes there */
    if (!rc)
        rc = tr_metrics_open(&r->metrics, r->s.out_dir, r->resumed ? r->st.step : -1, e);
    return rc;
}

void tr_run_free(tr_run *r)
{
    tr_checkpoint_close(r);
    tr_dist_close(&r->dist); /* before the backend: a comm may use its memory */
    tr_metrics_close(&r->metrics);
    tr_lock_release(&r->lock);
    tr_s3out_close(r->s3out, 1); /* after the writer and the metrics: the last uploads */
    r->s3out = NULL;
    tr_data_close(r->train);
    tr_data_close(r->val);
    gk_ckpt_close(r->moments_from); /* a setup that failed before moments() */
    if (r->start_fd >= 0)
        close(r->start_fd);
    r->start_fd = -1;
    gk_gpt2_free(r->model);
    gk_backend_free(r->host_be); /* (after the model, which borrows it) */
    gk_backend_free(r->be);
    gk_vocab_free(r->vocab);
    gk_choice_free(&r->hellaswag);
    free(r->x);
    free(r->y);
    free(r->window);
    free(r->settings_json);
    gk_config_free(r->cfg);
}
