/* spikes.c: the windows of recent losses and gradient norms (see spikes.h). */
#include "spikes.h"

#include <math.h>
#include <string.h>

void tr_window_push(tr_window *w, double x)
{
    if (!isfinite(x))
        return;
    if (w->n == TR_SPIKE_WINDOW) {
        memmove(w->v, w->v + 1, sizeof w->v[0] * (TR_SPIKE_WINDOW - 1));
        w->n--;
    }
    w->v[w->n++] = x;
}

int tr_window_stats(const tr_window *w, double *mean, double *sd)
{
    if (w->n < TR_SPIKE_WINDOW)
        return 0;
    double sum = 0, sq = 0;
    for (int i = 0; i < w->n; i++)
        sum += w->v[i];
    *mean = sum / w->n;
    for (int i = 0; i < w->n; i++)
        sq += (w->v[i] - *mean) * (w->v[i] - *mean);
    *sd = sqrt(sq / w->n);
    return 1;
}

double tr_window_limit(const tr_window *w, double z)
{
    double mean, sd;
    if (z <= 0 || !tr_window_stats(w, &mean, &sd))
        return 0;
    return mean + z * sd;
}
