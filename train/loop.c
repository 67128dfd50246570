/* loop.c: the training loop, top to bottom as nanoGPT's train.py: learning rate, micro-steps
 * with gradient accumulation, clip + AdamW, logging, evaluation, checkpoints (see run.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/proc.h"
#include "common/progress.h"
#include "common/text/encode_text.h"
#include "common/text/sampleout.h"
#include "kernels/infer/multichoice.h"
#include "kernels/infer/generate.h"
#include "checkpoint.h"
#include "run.h"

double tr_learning_rate(const tr_settings *s, int64_t step)
{
    double top = s->learning_rate, low = s->min_lr;
    if (!s->decay_lr || strcmp(s->lr_schedule, "constant") == 0)
        return top;
    if (step < s->warmup_iters)
        return top * (double)(step + 1) / (double)(s->warmup_iters + 1);
    if (step > s->lr_decay_iters)
        return low;
    if (strcmp(s->lr_schedule, "wsd") == 0) { /* llm.c's: constant, then 1 - sqrt */
        int64_t start = tr_wsd_decay_start(s);
        if (step < start)
            return top;
        return low + (1.0 - sqrt((double)(step - start) / (double)(s->lr_decay_iters - start))) *
                         (top - low);
    }
    double ratio = (double)(step - s->warmup_iters) / (double)(s->lr_decay_iters - s->warmup_iters);
    ratio = ratio > 1 ? 1 : ratio < 0 ? 0 : ratio;
    double coeff =
        strcmp(s->lr_schedule, "linear") == 0 ? 1.0 - ratio : 0.5 * (1.0 + cos(M_PI * ratio));
    return low + coeff * (top - low);
}

/* Fills r->x, r->y with batch `batch` (windows first_window .. + B) of stream. */
static int load_batch(tr_run *r, const tr_data *d, int stream, uint64_t batch,
                      uint64_t first_window, gk_err *e)
{
    int B = (int)r->s.batch_size, T = gk_gpt2_cfg(r->model)->block_size;
    uint32_t *wx = r->window, *wy = r->window + T;
    for (int b = 0; b < B; b++) {
        int rc =
            tr_data_window(d, r->st.seed, stream, batch, first_window + (uint64_t)b, wx, wy, e);
        if (rc)
            return rc;
        for (int t = 0; t < T; t++) {
            r->x[b * T + t] = (int)wx[t];
            r->y[b * T + t] = (int)wy[t];
        }
    }
    return 0;
}

/* Every rank evaluates the batches i = rank, rank + world, ...; the mean is over all of them.
 * With the parameters sharded (zero_stage 3) each forward is a collective, so every rank makes
 * as many: those past eval_iters are made and not counted. */
int tr_estimate_loss(tr_run *r, const tr_data *d, int stream, double *loss, gk_err *e)
{
    int B = (int)r->s.batch_size, T = gk_gpt2_cfg(r->model)->block_size;
    int64_t n = r->s.eval_iters, world = r->dist.dp_world; /* (a tensor-parallel group: one) */
    int64_t end = gk_gpt2_params_sharded(r->model) ? (n + world - 1) / world * world : n;
    double sum = 0;
    gk_gpt2_set_training(r->model, 0);
    for (int64_t i = r->dist.dp_rank; i < end; i += world) {
        float l;
        /* a signal: checkpoint now rather than after the eval */
        if (*r->stop && r->dist.world == 1)
            return gk_errf(e, GK_EINTR, "evaluation interrupted by a signal");
        int rc = load_batch(r, d, stream, (uint64_t)i, 0, e);
        if (!rc)
            rc = gk_gpt2_forward(r->model, r->x, r->y, B, T, &l, e);
        if (rc)
            return rc;
        sum += i < n ? l : 0;
    }
    int rc = tr_dist_sum(&r->dist, &sum, 1, e);
    *loss = sum / (double)r->s.eval_iters;
    return rc;
}

/* Every rank scores its share of the items (with the parameters sharded, zero_stage 3, every
 * item: each forward is a collective, and the batches an item takes depend on its lengths). */
int tr_hellaswag(tr_run *r, double *acc, double *acc_norm, gk_err *e)
{
    enum { CHUNK = 64 }; /* items between two looks at the stop flag */
    gk_choice_result res[CHUNK];
    int all = gk_gpt2_params_sharded(r->model);
    size_t n = r->hellaswag.n, world = all ? 1 : (size_t)r->dist.dp_world,
           rank = all ? 0 : (size_t)r->dist.dp_rank;
    size_t end = n * (rank + 1) / world;
    double right[2] = {0, 0};
    gk_gpt2_set_training(r->model, 0);
    for (size_t i0 = n * rank / world; i0 < end; i0 += CHUNK) {
        /* a signal: checkpoint now rather than after the eval */
        if (*r->stop && r->dist.world == 1)
            return gk_errf(e, GK_EINTR, "evaluation interrupted by a signal");
        size_t k = end - i0 < CHUNK ? end - i0 : CHUNK;
        const gk_choice_item *items = r->hellaswag.items + i0;
        int rc = gk_choice_score_many(r->model, items, k, gk_gpt2_cfg(r->model)->block_size,
                                      (int)r->s.batch_size, res, e);
        if (rc) return rc;
        for (size_t i = 0; i < k; i++) {
            right[0] += res[i].pred == items[i].label;
            right[1] += res[i].pred_norm == items[i].label;
        }
    }
    int rc = all ? 0 : tr_dist_sum(&r->dist, right, 2, e);
    *acc = right[0] / (double)n;
    *acc_norm = right[1] / (double)n;
    return rc;
}

/* This rank's micro-batches of the step: forward and backward of each, with the data windows and
 * dropout masks of its global micro-batch index (so that they do not depend on the world size).
 * *loss_sum: the sum of their losses. */
static int micro_steps(tr_run *r, double *loss_sum, gk_err *e)
{
    int B = (int)r->s.batch_size, T = gk_gpt2_cfg(r->model)->block_size;
    const tr_dist *d = &r->dist;
    uint64_t first = (uint64_t)r->st.step * (uint64_t)d->accum_total;
    *loss_sum = 0;
    for (int64_t k = 0; k < d->accum; k++) {
        float l;
        uint64_t g = (uint64_t)tr_dist_micro(d, k);
        gk_gpt2_set_rng(r->model, r->st.seed, first + g);
        int rc = load_batch(r, r->train, TR_STREAM_TRAIN, (uint64_t)r->st.step, g * (uint64_t)B, e);
        if (!rc)
            rc = gk_gpt2_forward(r->model, r->x, r->y, B, T, &l, e);
        if (!rc && k == d->accum - 1 && d->overlap) /* sums overlapped with the backward */
            gk_gpt2_reduce_in_next_backward(r->model);
        if (!rc)
            rc = gk_gpt2_backward(r->model, 1.0f / (float)d->accum_total, e);
        if (rc)
            return rc;
        *loss_sum += l;
    }
    r->st.rng_counter = first + (uint64_t)d->accum_total;
    return 0;
}

/* What became of a step's update; for a spike, the value and the window's statistics. */
enum { STEP_UPDATED, STEP_NONFINITE, STEP_SPIKE };
typedef struct step_outcome {
    int kind;
    const char *what; /* "loss", "gradient norm" */
    double x, mean, sd;
} step_outcome;

/* Whether x is above the limit window w sets for z (then its statistics go to o); x then joins
 * the window. */
static int spikes(tr_window *w, double z, const char *what, double x, step_outcome *o)
{
    double limit = tr_window_limit(w, z);
    int spike = limit > 0 && x > limit;
    if (spike) {
        *o = (step_outcome){STEP_SPIKE, what, x, 0, 0};
        (void)tr_window_stats(w, &o->mean, &o->sd);
    }
    tr_window_push(w, x);
    return spike;
}

/* One optimizer step: gradient accumulation over micro-batches (of every rank: the gradient hook
 * sums them), then clip + AdamW, unless the loss or the gradient norm is not finite or spikes
 * (skip_loss_z, skip_grad_z: above the limit the last steps' values set): then the weights are
 * left alone and the caller stops or skips (skipped_step). The ranks agree here on the loss and
 * on whether to stop after this step (a signal on any rank, a failed log write on rank 0); the
 * loss and the norm are the global ones, so every rank skips the same steps. The step counter
 * advances only on an update. */
static int train_step(tr_run *r, tr_step_record *rec, step_outcome *out, gk_err *e)
{
    gk_adamw h = {(float)r->s.beta1,
                  (float)r->s.beta2,
                  1e-8f,
                  (float)r->s.weight_decay,
                  (float)r->s.grad_clip,
                  tr_window_limit(&r->st.recent_norm, r->s.skip_grad_z)};
    double v[2];
    out->kind = STEP_NONFINITE;
    gk_gpt2_zero_grad(r->model);
    gk_gpt2_set_training(r->model, 1);
    int rc = micro_steps(r, &v[0], e);
    v[1] = *r->stop || r->log_errno || ferror(stderr);
    if (!rc)
        rc = tr_dist_sum(&r->dist, v, 2, e);
    if (rc)
        return rc;
    rec->loss = v[0] / (double)r->dist.accum_total;
    r->stop_all = v[1] > 0;
    rec->grad_norm = NAN;
    if (!isfinite(rec->loss) ||
        spikes(&r->st.recent_loss, r->s.skip_loss_z, "loss", rec->loss, out))
        return 0;
    tr_checkpoint_settle(r); /* a checkpoint reading the state in place has read it */
    rc = gk_gpt2_update(r->model, &h, (float)rec->lr, &rec->grad_norm, e);
    if (rc || !isfinite(rec->grad_norm) ||
        spikes(&r->st.recent_norm, r->s.skip_grad_z, "gradient norm", rec->grad_norm, out))
        return rc; /* a spiking norm updated nothing: it is above h.skip_norm, the same limit */
    r->st.step++;
    r->st.tokens += r->dist.accum_total * r->s.batch_size * gk_gpt2_cfg(r->model)->block_size;
    out->kind = STEP_UPDATED;
    return 0;
}

/* v for printing: a NaN of either sign prints as "nan" (printf writes "-nan" for some). */
static double shown(double v)
{
    return isnan(v) ? NAN : v;
}

/* A step whose update was left out: a spike (skip_loss_z, skip_grad_z) is passed over, as is a
 * non-finite step with skip_nonfinite (step and AdamW's count advance, the weights and moments
 * do not); a non-finite step otherwise ends the run here, with no checkpoint of this state. */
static int skipped_step(tr_run *r, const tr_step_record *rec, const step_outcome *o, gk_err *e)
{
    char why[200];
    if (o->kind == STEP_NONFINITE && !r->s.skip_nonfinite) {
        char last[64] = "none written by this run";
        if (r->last_saved_step >= 0)
            snprintf(last, sizeof last, "ckpt_%08lld.safetensors", (long long)r->last_saved_step);
        return gk_errf(e, GK_EFORMAT,
                       "step %lld: loss %g, gradient norm %g: stopping with the last good "
                       "checkpoint kept (%s); skip_nonfinite = true skips such steps",
                       (long long)rec->step, shown(rec->loss), shown(rec->grad_norm), last);
    }
    if (o->kind == STEP_SPIKE)
        snprintf(why, sizeof why,
                 "%s %g is %.3g standard deviations above "
                 "the mean of the last %d steps' (%g, sd %g)",
                 o->what, o->x, o->sd > 0 ? (o->x - o->mean) / o->sd : INFINITY, TR_SPIKE_WINDOW,
                 o->mean, o->sd);
    else
        snprintf(why, sizeof why, "loss %g, gradient norm %g", shown(rec->loss),
                 shown(rec->grad_norm));
    r->st.step++;
    r->st.skipped++;
    gk_gpt2_set_step(r->model, r->st.step); /* AdamW's t stays equal to step, as on resume */
    gk_warn("step %lld: %s: update skipped (%lld so far)", (long long)rec->step, why,
            (long long)r->st.skipped);
    return 0;
}

/* ---------------------------------------------------------------- the loop */

/* A short sample from the model as it is now (sample_tokens > 0): the same sampler as
 * gpt-sample, from the start token, seeded by the run's seed and the step. Touches no
 * training state: the data windows and dropout draws are counter-based. Rank 0's; with the
 * parameters sharded (zero_stage 3) every rank's forwards are collectives, so the others sample
 * alike, silently. */
static int print_sample(tr_run *r, int64_t step, gk_err *e)
{
    int root = tr_dist_is_root(&r->dist);
    if (r->s.sample_tokens <= 0 || !r->vocab || (!root && !gk_gpt2_params_sharded(r->model)) ||
        r->dist.tp > 1) /* (forward_at splits nothing: setup said so) */
        return 0;
    uint32_t id;
    int rc = gk_text_start_token(r->vocab, &id, e);
    if (rc)
        return rc == GK_EFORMAT ? 0 : rc; /* a char vocabulary without newline: no sample */
    int start = (int)id;
    gk_gen_opts o = {r->s.sample_tokens, 1, gk_vocab_eot(r->vocab), (int)gk_vocab_size(r->vocab),
                     {0.8f, 200, 1.0f, (uint64_t)r->s.seed ^ (uint64_t)step}};
    gk_sampleout so;
    gk_gen_hooks hooks = {&so, NULL, gk_sampleout_token};
    gk_gpt2_set_training(r->model, 0);
    if (!root)
        return gk_generate(r->model, &start, 1, &o, NULL, NULL, e);
    printf("sample at step %lld:\n", (long long)step);
    rc = gk_sampleout_init(&so, r->vocab, 0, 1, stdout, "standard output", e);
    if (!rc) rc = gk_sampleout_prompt(&so, &start, 1, 1, e);
    if (!rc) rc = gk_generate(r->model, &start, 1, &o, &hooks, NULL, e);
    if (!rc) rc = gk_sampleout_finish(&so, e);
    gk_sampleout_free(&so);
    printf("\n");
    fflush(stdout);
    gk_warn_note(r->be->note); /* e.g. CUDA graphs turned off */
    return rc;
}

/* Flushes the log; a failed write to stdout or stderr (a full disk, a closed pipe) ends the run
 * after the current step's checkpoint, with exit status 1. */
static int log_failed(tr_run *r)
{
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && !r->log_errno)
        r->log_errno = errno ? errno : EIO;
    return r->log_errno || ferror(stderr);
}

/* Evaluates into rec; GK_EINTR when a signal stopped it (rec then carries no eval fields). */
static int evaluate(tr_run *r, tr_step_record *rec, gk_err *e)
{
    int rc = tr_estimate_loss(r, r->train, TR_STREAM_EVAL_TRAIN, &rec->train_loss, e);
    if (!rc && r->val)
        rc = tr_estimate_loss(r, r->val, TR_STREAM_EVAL_VAL, &rec->val_loss, e);
    if (!rc && r->hellaswag.n)
        rc = tr_hellaswag(r, &rec->hellaswag_acc, &rec->hellaswag_acc_norm, e);
    if (rc)
        return rc;
    rec->has |= TR_HAS_TRAIN_LOSS | (r->val ? TR_HAS_VAL_LOSS : 0) |
                (r->hellaswag.n ? TR_HAS_HELLASWAG : 0);
    if (!tr_dist_is_root(&r->dist)) /* (at zero_stage 3 the others sample too: print_sample) */
        return print_sample(r, rec->step, e);
    printf("step %lld: train loss %.4f", (long long)rec->step, shown(rec->train_loss));
    if (r->val)
        printf(", val loss %.4f", shown(rec->val_loss));
    if (r->hellaswag.n)
        printf(", hellaswag acc_norm %.4f", rec->hellaswag_acc_norm);
    printf("\n");
    log_failed(r);
    return print_sample(r, rec->step, e);
}

static double mfu(const tr_run *r, double secs)
{
    const gk_gpt2_config *c = gk_gpt2_cfg(r->model);
    double N = (double)gk_gpt2_num_scalars(r->model) - (double)c->block_size * c->n_embd;
    double per_token = 6 * N + 12.0 * c->n_layer * c->n_embd * c->block_size;
    double per_iter = per_token * c->block_size * (double)(r->s.batch_size * r->dist.accum);
    return per_iter / secs / (r->peak_tflops * 1e12); /* one rank's share on its device */
}

static void log_step(tr_run *r, const tr_step_record *rec)
{
    printf("step %lld/%lld | loss %.4f | lr %.2e | norm %.4f | %.1f ms | %.0f tok/s",
           (long long)rec->step, (long long)r->s.max_iters, shown(rec->loss), rec->lr,
           shown(rec->grad_norm), rec->ms, rec->tokens_per_s);
    if (rec->has & TR_HAS_MFU)
        printf(" | mfu %.1f%%", 100 * rec->mfu);
    if (rec->has & TR_HAS_COMM)
        printf(" | comm %.1f ms", rec->comm_ms);
    if (rec->skipped)
        printf(" | skipped %lld", (long long)rec->skipped);
    printf("\n");
    log_failed(r);
}

/* Every rank copies its slice of the state to the host before this returns, and its writer
 * thread sends it on to rank 0's, which writes the checkpoint (checkpoint.c). */
static int checkpoint(tr_run *r, gk_err *e)
{
    int rc = tr_checkpoint(r, e);
    r->last_saved_step = r->st.step;
    return rc;
}

static int after_eval(tr_run *r, const tr_step_record *rec, gk_err *e)
{
    int improved = r->val && rec->val_loss < r->st.best_val_loss;
    if (improved)
        r->st.best_val_loss = rec->val_loss;
    int rc = tr_dist_is_root(&r->dist) ? tr_metrics_plot(&r->metrics, e) : 0;
    int final = rec->step >= r->s.max_iters;
    if (!rc && rec->step > 0 && rec->step != r->last_saved_step &&
        (final || r->s.always_save_checkpoint || improved || !r->val))
        rc = checkpoint(r, e);
    return rc;
}

/* A device fault (the backend's sticky error) during step `step`: its message gets "step N: " in
 * front, so that it says when it struck: "step 7: CUDA error: ... in kernel K (FILE:LINE)". Other
 * errors (data, collectives, writes) say what they are about already. */
static int at_step(tr_run *r, gk_err *e, int rc, int64_t step, const char *what)
{
    if (rc == GK_EINTR || !gk_backend_status(r->be, NULL))
        return rc;
    char msg[sizeof e->msg];
    snprintf(msg, sizeof msg, "%s", e->msg);
    return gk_errf(e, rc, "step %lld%s: %.1000s", (long long)step, what, msg);
}

/* Evaluates (unless a signal cut the evaluation short), logs rec, and checkpoints if due. */
static int log_and_eval(tr_run *r, tr_step_record *rec, int eval_now, gk_err *e)
{
    int rc = eval_now ? evaluate(r, rec, e) : 0;
    int interrupted = rc == GK_EINTR;
    if (rc && !interrupted)
        rc = at_step(r, e, rc, rec->step, " (evaluation)");
    if (interrupted)
        rc = 0; /* the loop ends at the stop flag and checkpoints */
    if (!rc && rec->has && tr_dist_is_root(&r->dist)) /* (an interrupted evaluation at
                                                       * step 0 leaves nothing to log) */
        rc = tr_metrics_log(&r->metrics, rec, e);
    if (!rc && eval_now && !interrupted)
        rc = after_eval(r, rec, e);
    return rc;
}

/* One step of the loop: train, log, evaluate and checkpoint when due. */
static int loop_step(tr_run *r, gk_progress *bar, gk_err *e)
{
    /* a checkpoint write that failed in the background stops the run now, not at the next one */
    int rc = tr_checkpoint_poll(r, e);
    if (rc)
        return rc;
    double tokens_per_step = (double)(r->s.batch_size * r->dist.accum_total) *
                             gk_gpt2_cfg(r->model)->block_size;
    tr_step_record rec = {.step = r->st.step + 1,
                          .has = TR_HAS_STEP | (r->peak_tflops > 0 ? TR_HAS_MFU : 0)};
    rec.lr = tr_learning_rate(&r->s, r->st.step);
    tr_dist_comm_secs(&r->dist); /* from here: this step's collectives */
    double t0 = gk_now();
    step_outcome outcome;
    rc = train_step(r, &rec, &outcome, e);
    if (rc)
        return at_step(r, e, rc, rec.step, "");
    double secs = gk_now() - t0;
    rec.ms = secs * 1e3;
    rec.tokens_per_s = tokens_per_step / secs;
    rec.mfu = rec.has & TR_HAS_MFU ? mfu(r, secs) : NAN;
    rec.comm_ms = 1e3 * tr_dist_comm_secs(&r->dist);
    rec.has |= r->dist.world > 1 ? TR_HAS_COMM : 0;
    int failed = outcome.kind != STEP_UPDATED && (rc = skipped_step(r, &rec, &outcome, e)) != 0;
    rec.skipped = r->st.skipped;
    int eval_now = !failed && (rec.step % r->s.eval_interval == 0 || rec.step == r->s.max_iters);
    int root = tr_dist_is_root(&r->dist);
    if (root &&
        (failed || rec.step % r->s.log_interval == 0 || rec.step == r->s.max_iters || eval_now)) {
        gk_progress_clear(bar); /* a log line replaces the progress line */
        log_step(r, &rec);
    }
    if (failed) { /* the bad step is logged, then the run ends */
        gk_err ignored;
        if (root)
            tr_metrics_log(&r->metrics, &rec, &ignored);
        return rc;
    }
    if ((rc = log_and_eval(r, &rec, eval_now, e)))
        return rc;
    int64_t every = r->s.checkpoint_interval;
    if (every > 0 && rec.step % every == 0 && rec.step != r->last_saved_step &&
        (rc = checkpoint(r, e)))
        return rc;
    char note[64];
    snprintf(note, sizeof note, "step %lld/%lld, loss %.4f", (long long)rec.step,
             (long long)r->s.max_iters, rec.loss);
    gk_progress_line(bar, (double)rec.step / (double)r->s.max_iters, note);
    return 0;
}

/* The end of a run that did not fail: the last state checkpointed (after a stop signal even at
 * step 0), then a failed write to stdout or stderr is reported (exit 1). */
static int finish(tr_run *r, gk_err *e)
{
    int rc = 0, stopped = *r->stop || r->stop_all || r->log_errno || ferror(stderr);
    if (r->st.step != r->last_saved_step && (r->st.step > 0 || stopped)) {
        if (stopped)
            gk_info("stopping at step %lld: saving a checkpoint", (long long)r->st.step);
        rc = checkpoint(r, e);
    }
    /* The last write ends before the run does; its error does not replace an earlier one. */
    gk_err werr = {0};
    int wrc = tr_checkpoint_wait(r, rc ? &werr : e);
    rc = rc ? rc : wrc;
    if (!rc && r->log_errno) {
        errno = r->log_errno;
        rc = gk_errno(e, "standard output");
    }
    return rc ? rc : gk_std_finish(e);
}

/* Whether the run stops before the next step: a signal or a failed log write. With several
 * ranks only what they agreed on at the last step counts (train_step), so that all stop at the
 * same step. */
static int stopping(tr_run *r)
{
    int failed = log_failed(r);
    return r->dist.world == 1 ? *r->stop || failed : r->stop_all;
}

/* The order in which this rank will ask for windows (data.h's plans, which shards in a bucket
 * are read ahead by): training steps from this one on, the windows of its micro-batches (as
 * micro_steps reads them); each evaluation's batches, the same every time (tr_estimate_loss). */
static int plan_data(tr_run *r, int train, gk_err *e)
{
    uint64_t B = (uint64_t)r->s.batch_size, rank = (uint64_t)r->dist.dp_rank,
             world = (uint64_t)r->dist.dp_world;
    uint64_t accum = (uint64_t)r->dist.accum, iters = (uint64_t)r->s.eval_iters, seed = r->st.seed;
    uint64_t evals = rank < iters ? (iters - rank + world - 1) / world : 0;
    int rc = 0;
    if (train)
        rc = tr_data_plan(r->train, seed, TR_STREAM_TRAIN, (uint64_t)r->st.step, 1, 0,
                          (uint64_t)tr_dist_micro(&r->dist, 0) * B, accum * B, e);
    if (!rc && evals)
        rc = tr_data_plan(r->train, seed, TR_STREAM_EVAL_TRAIN, rank, world, evals, 0, B, e);
    if (!rc && evals && r->val)
        rc = tr_data_plan(r->val, seed, TR_STREAM_EVAL_VAL, rank, world, evals, 0, B, e);
    return rc;
}

int tr_run_train(tr_run *r, gk_err *e)
{
    if (r->st.step >= r->s.max_iters && r->resumed) { /* init_from=auto on a finished run */
        gk_info("already at step %lld = max_iters: nothing to train", (long long)r->st.step);
        return gk_std_finish(e);
    }
    /* after a stop signal, a collective stalled for 5 s (a rank hung or gone unseen) fails the run
     * instead of holding it until dist_timeout: launchers kill a rank 30 s after SIGTERM */
    int rc = gk_comm_stop_on(r->dist.dp_t.inner, r->stop, 5.0, e);
    if (!rc && r->dist.tp_t.inner)
        rc = gk_comm_stop_on(r->dist.tp_t.inner, r->stop, 5.0, e);
    if (!rc)
        rc = tr_run_start(r, e);
    if (!rc)
        rc = plan_data(r, 1, e);
    if (!rc) /* the checkpoints' host copy, before the first step */
        rc = tr_checkpoint_prepare(r, e);
    if (!rc && r->st.step == 0) {
        tr_step_record rec = {.step = 0};
        rc = log_and_eval(r, &rec, 1, e);
    }
    gk_progress bar;
    gk_progress_start(&bar, "training", 0);
    while (!rc && r->st.step < r->s.max_iters && !stopping(r))
        rc = loop_step(r, &bar, e);
    gk_progress_end(&bar);
    return rc ? rc : finish(r, e);
}

int tr_run_eval_only(tr_run *r, gk_err *e)
{
    tr_step_record rec = {.step = r->st.step};
    int rc = plan_data(r, 0, e);
    if (!rc)
        rc = evaluate(r, &rec, e);
    if (rc == GK_EINTR)
        return gk_errf(e, GK_EINTR, "interrupted by a signal during the evaluation: no estimate");
    return rc ? rc : gk_std_finish(e);
}
