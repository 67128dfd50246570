/* spikes.h: what skips the update of a step whose loss or gradient norm spikes (gpt-train's
 * skip_loss_z and skip_grad_z, as llm.c's outlier detector): a window of the last
 * TR_SPIKE_WINDOW finite values of each, kept in the trainer state (model_io.c writes it into
 * every checkpoint), so that a resumed run skips the steps the uninterrupted one would.
 * Owns: tr_window (plain values, no allocation). Thread safety: none needed. */
#ifndef GK_TRAIN_SPIKES_H
#define GK_TRAIN_SPIKES_H

#define TR_SPIKE_WINDOW 128

typedef struct tr_window {
    double v[TR_SPIKE_WINDOW]; /* v[0..n-1], oldest first */
    int n;
} tr_window;

/* Appends x when finite, dropping the oldest value of a full window. */
void tr_window_push(tr_window *w, double x);
/* 1 with the mean and the (population) standard deviation of a full window; 0 while it fills. */
int tr_window_stats(const tr_window *w, double *mean, double *sd);
/* The value above which x is a spike: mean + z sd of a full window; 0 (none) while it fills or
 * when z is 0. */
double tr_window_limit(const tr_window *w, double z);

#endif
