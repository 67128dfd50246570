/* metrics.h: what a training run leaves for people and scripts: out_dir/metrics.jsonl (one JSON
 * object per step: step, loss, lr, grad_norm (before clipping), ms, tokens_per_s, and
 * train_loss/val_loss on eval steps) and out_dir/loss.svg, a self-contained plot of the train
 * and val loss against step, rewritten at every eval.
 * On resume the existing metrics.jsonl is read back (lines past the resumed step are dropped,
 * as a killed run may have logged steps its last checkpoint does not hold).
 * Owns: the open log and the loss history. Lifetime: open .. close. Not thread-safe. */
#ifndef TR_METRICS_H
#define TR_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

typedef struct tr_point {
    int64_t step;
    double loss, train_loss, val_loss; /* NAN where absent */
} tr_point;

typedef struct tr_metrics {
    char *jsonl_path, *svg_path;
    FILE *jsonl;
    tr_point *pts;
    size_t n, cap;
} tr_metrics;

typedef struct tr_step_record {
    int64_t step;
    double loss, lr, grad_norm, ms, tokens_per_s, mfu;
    double train_loss, val_loss; /* NAN unless this step evaluated */
} tr_step_record;

/* keep_until: steps <= keep_until are kept from an existing log (-1: start a new log). */
int tr_metrics_open(tr_metrics *m, const char *out_dir, int64_t keep_until, gk_err *e);
int tr_metrics_log(tr_metrics *m, const tr_step_record *r, gk_err *e);
/* Rewrites loss.svg from the history (atomically). */
int tr_metrics_plot(const tr_metrics *m, gk_err *e);
void tr_metrics_close(tr_metrics *m);

/* Writes the SVG of pts to f (exposed for tests). */
void tr_plot_svg(FILE *f, const tr_point *pts, size_t n);

#endif
