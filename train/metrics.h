/* metrics.h: what a training run leaves for people and scripts: out_dir/metrics.jsonl (one JSON
 * object per step: step, loss, lr, grad_norm (before clipping), ms, tokens_per_s, mfu when
 * there is a peak (peak_tflops, or the backend's props.bf16_peak_flops), train_loss/val_loss on
 * eval steps, skipped (steps skipped so far) once a step was skipped; a NaN or infinite value is
 * written as null) and out_dir/loss.svg, a self-contained plot of the train and val loss against
 * step, rewritten at every eval.
 * On resume metrics.jsonl is appended to, never rewritten: lines past the resumed step (logged by
 * a run killed after its last checkpoint) stay, and the resumed run logs those steps again, so a
 * step may appear twice (the later line is the resumed run's); only an incomplete last line (cut
 * by the kill) is removed. The plot takes the old lines up to the resumed step.
 * Owns: the open log and the loss history. Lifetime: open .. close. Not thread-safe. */
#ifndef TR_METRICS_H
#define TR_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

typedef struct tr_point {
    int64_t step;
    double loss, train_loss, val_loss; /* NAN where absent; only finite values are plotted */
} tr_point;

typedef struct tr_metrics {
    char *jsonl_path, *svg_path;
    FILE *jsonl;
    tr_point *pts;
    size_t n, cap;
} tr_metrics;

/* Which fields of a tr_step_record a line carries (a field carried but not finite is null). */
enum {
    TR_HAS_STEP = 1,       /* a training step: loss, lr, grad_norm, ms, tokens_per_s */
    TR_HAS_MFU = 2,        /* mfu */
    TR_HAS_TRAIN_LOSS = 4, /* an evaluation: train_loss */
    TR_HAS_VAL_LOSS = 8,   /* an evaluation with val data: val_loss */
    TR_HAS_COMM = 16,      /* several ranks: comm_ms, the step's time in collectives */
    TR_HAS_HELLASWAG = 32, /* an evaluation with hellaswag items: hellaswag_acc, _acc_norm */
};

typedef struct tr_step_record {
    int64_t step;
    double loss, lr, grad_norm, ms, tokens_per_s, mfu, comm_ms;
    double train_loss, val_loss, hellaswag_acc, hellaswag_acc_norm;
    int64_t skipped;             /* written when > 0 */
    unsigned has;                /* TR_HAS_* */
} tr_step_record;

/* keep_until: resume after step keep_until: append to an existing log, its points up to
 * keep_until in the plot (-1: start a new log). */
int tr_metrics_open(tr_metrics *m, const char *out_dir, int64_t keep_until, gk_err *e);
int tr_metrics_log(tr_metrics *m, const tr_step_record *r, gk_err *e);
/* Rewrites loss.svg from the history (atomically). */
int tr_metrics_plot(const tr_metrics *m, gk_err *e);
void tr_metrics_close(tr_metrics *m);

/* Writes the SVG of pts to f (exposed for tests). */
void tr_plot_svg(FILE *f, const tr_point *pts, size_t n);


#endif
