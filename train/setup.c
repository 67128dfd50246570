/* setup.c: getting a run ready: init_from (scratch, resume, auto, a checkpoint), the model and
 * its backend, the vocabulary to embed, the data, the metrics log (see run.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "kernels/cpu/cpu.h"
#include "kernels/gpt2_load.h"
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

static gk_gpt2_config config_from_settings(const tr_settings *s)
{
    return (gk_gpt2_config){(int)s->n_layer, (int)s->n_head, (int)s->n_embd, (int)s->block_size,
                            (int)s->vocab_size, s->bias, (float)s->dropout};
}

/* Which checkpoint to start from: NULL for scratch. *resume: it is this run's own latest. */
static int pick_start(const tr_settings *s, char *path, size_t cap, int *resume, gk_err *e)
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
        *resume = exists;
        if (!exists)
            path[0] = '\0';
        return 0;
    }
    snprintf(path, cap, "%s", s->init_from);
    if (access(path, R_OK) != 0)
        return gk_errno(e, path);
    return 0;
}

/* Model shape from the checkpoint; the state too when resuming. */
static int read_checkpoint_meta(tr_run *r, const gk_ckpt *c, int resume, gk_gpt2_config *mc, gk_err *e)
{
    int rc = gk_gpt2_ckpt_config(c, mc, e);
    if (rc)
        return rc;
    mc->dropout = (float)r->s.dropout; /* dropout may change (fine-tuning); shapes may not */
    if (resume) {
        const char *st = gk_ckpt_train_json(c);
        if (!st)
            return gk_errf(e, GK_EFORMAT, "%s: not a training checkpoint (no gptkit.train)", gk_ckpt_path(c));
        if ((rc = tr_state_parse(st, gk_ckpt_path(c), &r->st, e)))
            return rc;
    }
    if (r->s.block_size != mc->block_size || r->s.n_layer != mc->n_layer || r->s.n_embd != mc->n_embd)
        gk_verbose("model shape taken from %s (%d layers, %d wide, block %d)", gk_ckpt_path(c),
                   mc->n_layer, mc->n_embd, mc->block_size);
    return 0;
}

/* The vocabulary to embed: the checkpoint's, else `vocab`, else the default lookup when it
 * matches the data's fingerprint. A mismatch with the data is an error. */
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
        char path[4096];
        gk_err quiet;
        if (gk_vocab_find(path, sizeof path, NULL, &quiet) == 0 && gk_vocab_load(&r->vocab, path, &quiet) == 0 &&
            gk_vocab_fingerprint(r->vocab) != data_fp) {
            gk_vocab_free(r->vocab); /* some other vocabulary: not the data's */
            r->vocab = NULL;
        }
        rc = 0;
    }
    if (rc)
        return rc;
    if (r->vocab && data_fp && gk_vocab_fingerprint(r->vocab) != data_fp)
        return gk_errf(e, GK_EUSAGE, "train_data was tokenized with another vocabulary (fingerprint "
                       "%08x) than %s (%08x)", data_fp, c ? gk_ckpt_path(c) : r->s.vocab,
                       gk_vocab_fingerprint(r->vocab));
    if (!r->vocab)
        gk_warn("vocabulary unknown: checkpoints will not carry one (set vocab = DIR|FILE)");
    return 0;
}

static int open_data(tr_run *r, uint32_t vocab_limit, gk_err *e)
{
    int rc = tr_data_open(&r->train, r->s.train_data, (int)r->s.block_size, vocab_limit, "train_data", e);
    if (!rc && r->s.val_data[0])
        rc = tr_data_open(&r->val, r->s.val_data, (int)r->s.block_size, vocab_limit, "val_data", e);
    return rc;
}

static int create_model(tr_run *r, const gk_gpt2_config *mc, gk_err *e)
{
    int rc = gk_gpt2_config_check(mc, e);
    if (!rc)
        rc = gk_cpu_create(&r->be, (int)r->s.threads, e);
    if (!rc)
        rc = gk_gpt2_create(&r->model, mc, r->be, (int)r->s.batch_size, mc->block_size, e);
    size_t n = (size_t)r->s.batch_size * (size_t)mc->block_size;
    r->x = malloc(n * sizeof *r->x);
    r->y = malloc(n * sizeof *r->y);
    r->window = malloc(2 * (size_t)mc->block_size * sizeof *r->window);
    if (!rc && (!r->x || !r->y || !r->window))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    return rc;
}

static int init_weights(tr_run *r, const gk_ckpt *c, int resume, gk_err *e)
{
    if (!c) {
        r->st = (tr_state){0, 0, (uint64_t)r->s.seed, 0, INFINITY, 1};
        return gk_gpt2_init(r->model, (uint64_t)r->s.seed, e);
    }
    int with_opt = resume && gk_ckpt_has_optimizer(c);
    if (resume && !with_opt)
        gk_warn("%s holds no optimizer state: AdamW moments start at zero", gk_ckpt_path(c));
    int rc = tr_load(c, r->model, r->be, with_opt, e);
    if (!resume)
        r->st = (tr_state){0, 0, (uint64_t)r->s.seed, 0, INFINITY, 1};
    gk_gpt2_set_step(r->model, r->st.step);
    return rc;
}

int tr_run_setup(tr_run *r, gk_err *e)
{
    char path[4096];
    int resume = 0, rc = make_dirs(r->s.out_dir, e);
    if (!rc)
        rc = pick_start(&r->s, path, sizeof path, &resume, e);
    gk_ckpt *c = NULL;
    if (!rc && path[0])
        rc = gk_ckpt_open(&c, path, e);
    gk_gpt2_config mc = config_from_settings(&r->s);
    if (!rc && c)
        rc = read_checkpoint_meta(r, c, resume, &mc, e);
    r->s.block_size = mc.block_size;
    if (!rc)
        rc = open_data(r, (uint32_t)mc.vocab_size, e);
    if (!rc && mc.vocab_size == 0 && (mc.vocab_size = (int)tr_data_vocab_size(r->train)) == 0)
        rc = gk_errf(e, GK_EUSAGE, "vocab_size: not set and %s does not say", r->s.train_data);
    if (!rc)
        rc = pick_vocab(r, c, e);
    if (!rc)
        rc = create_model(r, &mc, e);
    if (!rc)
        rc = init_weights(r, c, resume, e);
    if (!rc)
        gk_gpt2_set_rng(r->model, r->st.seed, r->st.rng_counter);
    r->resumed = resume;
    r->last_saved_step = resume ? r->st.step : -1;
    if (!rc)
        rc = tr_metrics_open(&r->metrics, r->s.out_dir, resume ? r->st.step : -1, e);
    if (!rc && c)
        gk_info("%s from %s at step %lld", resume ? "resuming" : "initialized", gk_ckpt_path(c),
                (long long)r->st.step);
    gk_ckpt_close(c);
    return rc;
}

void tr_run_free(tr_run *r)
{
    tr_metrics_close(&r->metrics);
    tr_data_close(r->train);
    tr_data_close(r->val);
    gk_gpt2_free(r->model);
    gk_backend_free(r->be);
    gk_vocab_free(r->vocab);
    free(r->x);
    free(r->y);
    free(r->window);
    free(r->settings_json);
    gk_config_free(r->cfg);
}
