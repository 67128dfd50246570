/* loop.c: the training loop, top to bottom as nanoGPT's train.py: learning rate, micro-steps
 * with gradient accumulation, clip + AdamW, logging, evaluation, checkpoints (see run.h). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/progress.h"
#include "kernels/generate.h"
#include "run.h"

double tr_learning_rate(const tr_settings *s, int64_t step)
{
    if (!s->decay_lr)
        return s->learning_rate;
    if (step < s->warmup_iters)
        return s->learning_rate * (double)(step + 1) / (double)(s->warmup_iters + 1);
    if (step > s->lr_decay_iters)
        return s->min_lr;
    double ratio = (double)(step - s->warmup_iters) / (double)(s->lr_decay_iters - s->warmup_iters);
    double coeff = 0.5 * (1.0 + cos(M_PI * (ratio > 1 ? 1 : ratio < 0 ? 0 : ratio)));
    return s->min_lr + coeff * (s->learning_rate - s->min_lr);
}

/* Fills r->x, r->y with batch `batch` (windows first_window .. + B) of stream. */
static int load_batch(tr_run *r, const tr_data *d, int stream, uint64_t batch, uint64_t first_window,
                      gk_err *e)
{
    int B = (int)r->s.batch_size, T = gk_gpt2_cfg(r->model)->block_size;
    uint32_t *wx = r->window, *wy = r->window + T;
    for (int b = 0; b < B; b++) {
        int rc = tr_data_window(d, r->st.seed, stream, batch, first_window + (uint64_t)b, wx, wy, e);
        if (rc)
            return rc;
        for (int t = 0; t < T; t++) {
            r->x[b * T + t] = (int)wx[t];
            r->y[b * T + t] = (int)wy[t];
        }
    }
    return 0;
}

int tr_estimate_loss(tr_run *r, const tr_data *d, int stream, double *loss, gk_err *e)
{
    int B = (int)r->s.batch_size, T = gk_gpt2_cfg(r->model)->block_size;
    double sum = 0;
    gk_gpt2_set_training(r->model, 0);
    for (int64_t i = 0; i < r->s.eval_iters; i++) {
        float l;
        int rc = load_batch(r, d, stream, (uint64_t)i, 0, e);
        if (!rc)
            rc = gk_gpt2_forward(r->model, r->x, r->y, B, T, &l, e);
        if (rc)
            return rc;
        sum += l;
    }
    *loss = sum / (double)r->s.eval_iters;
    return 0;
}

/* One optimizer step: accumulation over micro-batches, clip, AdamW. */
static int train_step(tr_run *r, double lr, double *loss, double *norm, gk_err *e)
{
    int B = (int)r->s.batch_size, T = gk_gpt2_cfg(r->model)->block_size;
    int64_t accum = r->s.gradient_accumulation_steps;
    gk_adamw h = {(float)r->s.beta1, (float)r->s.beta2, 1e-8f, (float)r->s.weight_decay, (float)r->s.grad_clip};
    double sum = 0;
    gk_gpt2_zero_grad(r->model);
    gk_gpt2_set_training(r->model, 1);
    for (int64_t k = 0; k < accum; k++) {
        float l;
        int rc = load_batch(r, r->train, TR_STREAM_TRAIN, (uint64_t)r->st.step, (uint64_t)(k * B), e);
        if (!rc)
            rc = gk_gpt2_forward(r->model, r->x, r->y, B, T, &l, e);
        if (!rc)
            rc = gk_gpt2_backward(r->model, 1.0f / (float)accum, e);
        if (rc)
            return rc;
        sum += l;
    }
    int rc = gk_gpt2_update(r->model, &h, (float)lr, norm, e);
    *loss = sum / (double)accum;
    r->st.step++;
    r->st.tokens += accum * B * T;
    gk_gpt2_get_rng(r->model, &r->st.seed, &r->st.rng_counter);
    return rc;
}

/* ---------------------------------------------------------------- checkpoints */

static int64_t ckpt_step(const char *name)
{
    long long step;
    char tail[32];
    if (sscanf(name, "ckpt_%lld.safetensor%31s", &step, tail) == 2 && strcmp(tail, "s") == 0)
        return step;
    return -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Removes all but the newest keep_last step checkpoints. */
static void prune(const tr_run *r)
{
    DIR *d = opendir(r->s.out_dir);
    if (!d)
        return;
    int64_t steps[4096];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096)
        if (ckpt_step(de->d_name) >= 0)
            steps[n++] = ckpt_step(de->d_name);
    closedir(d);
    qsort(steps, n, sizeof *steps, cmp_i64);
    for (size_t i = 0; i + (size_t)r->s.keep_last < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ckpt_%08lld.safetensors", r->s.out_dir, (long long)steps[i]);
        unlink(path);
    }
}

int tr_checkpoint(tr_run *r, gk_err *e)
{
    char name[64], path[4096], link[4096], tmp[4200];
    snprintf(name, sizeof name, "ckpt_%08lld.safetensors", (long long)r->st.step);
    snprintf(path, sizeof path, "%s/%s", r->s.out_dir, name);
    int rc = tr_save(path, r->model, r->be, r->vocab, &r->st, r->settings_json, 1, e);
    if (rc)
        return rc;
    snprintf(link, sizeof link, "%s/latest.safetensors", r->s.out_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", link, (long)getpid());
    unlink(tmp);
    if (symlink(name, tmp) != 0 || rename(tmp, link) != 0) {
        unlink(tmp);
        return gk_errno(e, link);
    }
    r->last_saved_step = r->st.step;
    prune(r);
    gk_info("saved %s", path);
    return 0;
}

/* ---------------------------------------------------------------- the loop */

/* A short sample from the model as it is now (sample_tokens > 0): the same sampler as
 * gpt-sample, from the start token, seeded by the run's seed and the step. Touches no
 * training state: the data windows and dropout draws are counter-based. */
static int print_sample(tr_run *r, int64_t step, gk_err *e)
{
    if (r->s.sample_tokens <= 0 || !r->vocab)
        return 0;
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int32_t eot = gk_vocab_eot(r->vocab);
    int rc = 0;
    if (eot < 0 && (rc = gk_char_encode(r->vocab, "\n", 1, &ids, &n, &cap, e)) != 0) {
        free(ids);
        return rc == GK_EFORMAT ? 0 : rc; /* a char vocabulary without newline: no sample */
    }
    int start = eot >= 0 ? eot : (int)ids[0];
    free(ids);
    gs_gen_opts o = {r->s.sample_tokens, 1, 1, 0, {0.8f, 200, 1.0f, (uint64_t)r->s.seed ^ (uint64_t)step}};
    gs_gen_stats st;
    gk_gpt2_set_training(r->model, 0);
    printf("sample at step %lld:\n", (long long)step);
    rc = gs_generate(r->model, r->be, r->vocab, &start, 1, 1, &o, stdout, &st, e);
    printf("\n");
    fflush(stdout);
    return rc;
}

static int evaluate(tr_run *r, tr_step_record *rec, gk_err *e)
{
    int rc = tr_estimate_loss(r, r->train, TR_STREAM_EVAL_TRAIN, &rec->train_loss, e);
    if (!rc && r->val)
        rc = tr_estimate_loss(r, r->val, TR_STREAM_EVAL_VAL, &rec->val_loss, e);
    if (rc)
        return rc;
    printf("step %lld: train loss %.4f", (long long)rec->step, rec->train_loss);
    if (r->val)
        printf(", val loss %.4f", rec->val_loss);
    printf("\n");
    fflush(stdout);
    return print_sample(r, rec->step, e);
}

static double mfu(const tr_run *r, double secs)
{
    if (r->s.peak_tflops <= 0)
        return NAN;
    const gk_gpt2_config *c = gk_gpt2_cfg(r->model);
    double N = (double)gk_gpt2_num_scalars(r->model) - (double)c->block_size * c->n_embd;
    double per_token = 6 * N + 12.0 * c->n_layer * c->n_embd * c->block_size;
    double per_iter = per_token * c->block_size * (double)(r->s.batch_size * r->s.gradient_accumulation_steps);
    return per_iter / secs / (r->s.peak_tflops * 1e12);
}

static void log_step(const tr_run *r, const tr_step_record *rec)
{
    printf("step %lld/%lld | loss %.4f | lr %.2e | norm %.4f | %.1f ms | %.0f tok/s", (long long)rec->step,
           (long long)r->s.max_iters, rec->loss, rec->lr, rec->grad_norm, rec->ms, rec->tokens_per_s);
    if (!isnan(rec->mfu))
        printf(" | mfu %.1f%%", 100 * rec->mfu);
    printf("\n");
    fflush(stdout);
}

static int after_eval(tr_run *r, const tr_step_record *rec, gk_err *e)
{
    int improved = r->val && rec->val_loss < r->st.best_val_loss;
    if (improved)
        r->st.best_val_loss = rec->val_loss;
    int rc = tr_metrics_plot(&r->metrics, e);
    int final = rec->step >= r->s.max_iters;
    if (!rc && rec->step > 0 && rec->step != r->last_saved_step &&
        (final || r->s.always_save_checkpoint || improved || !r->val))
        rc = tr_checkpoint(r, e);
    return rc;
}

int tr_run_train(tr_run *r, gk_err *e)
{
    int rc = 0;
    double tokens_per_step = (double)(r->s.batch_size * r->s.gradient_accumulation_steps) *
                             gk_gpt2_cfg(r->model)->block_size;
    if (r->st.step == 0) {
        tr_step_record rec = {0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
        if (!(rc = evaluate(r, &rec, e)) && !(rc = tr_metrics_log(&r->metrics, &rec, e)))
            rc = after_eval(r, &rec, e);
    }
    gk_progress bar;
    gk_progress_start(&bar, "training", 0);
    while (!rc && r->st.step < r->s.max_iters && !*r->stop) {
        tr_step_record rec = {0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
        rec.lr = tr_learning_rate(&r->s, r->st.step);
        double t0 = gk_now();
        if ((rc = train_step(r, rec.lr, &rec.loss, &rec.grad_norm, e)))
            break;
        double secs = gk_now() - t0;
        rec.step = r->st.step;
        rec.ms = secs * 1e3;
        rec.tokens_per_s = tokens_per_step / secs;
        rec.mfu = mfu(r, secs);
        int eval_now = rec.step % r->s.eval_interval == 0 || rec.step == r->s.max_iters;
        if (rec.step % r->s.log_interval == 0 || rec.step == r->s.max_iters || eval_now) {
            gk_progress_clear(&bar); /* a log line replaces the progress line */
            log_step(r, &rec);
        }
        if (eval_now)
            rc = evaluate(r, &rec, e);
        if (!rc)
            rc = tr_metrics_log(&r->metrics, &rec, e);
        if (!rc && eval_now)
            rc = after_eval(r, &rec, e);
        if (!isfinite(rec.loss))
            gk_warn("step %lld: loss is %f", (long long)rec.step, rec.loss);
        char note[64];
        snprintf(note, sizeof note, "step %lld/%lld, loss %.4f", (long long)rec.step,
                 (long long)r->s.max_iters, rec.loss);
        gk_progress_line(&bar, (double)rec.step / (double)r->s.max_iters, note);
    }
    gk_progress_end(&bar);
    if (!rc && r->st.step != r->last_saved_step && r->st.step > 0) {
        if (*r->stop)
            gk_info("stopping at step %lld: saving a checkpoint", (long long)r->st.step);
        rc = tr_checkpoint(r, e);
    }
    return rc;
}

int tr_run_eval_only(tr_run *r, gk_err *e)
{
    tr_step_record rec = {r->st.step, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    return evaluate(r, &rec, e);
}
