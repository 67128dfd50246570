/* progress.c: terminal progress bar (see progress.h). */
#include "common/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

double gk_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gk_progress_start(gk_progress *p, const char *label, int64_t total)
{
    p->active = isatty(STDERR_FILENO) && gk_verbosity() >= GK_LOG_NORMAL;
    p->label = label;
    p->total = total;
    p->start = p->last = gk_now();
}

void gk_progress_update(gk_progress *p, int64_t done, const char *note)
{
    if (!p->active)
        return;
    double mb = (double)done / 1e6, rate = mb / (gk_now() - p->start + 1e-9);
    char text[128];
    snprintf(text, sizeof text, "%.1f MB %.1f MB/s %s", mb, rate, note ? note : "");
    gk_progress_line(p, p->total > 0 ? (double)done / (double)p->total : -1, text);
}

void gk_progress_line(gk_progress *p, double fraction, const char *text)
{
    if (!p->active)
        return;
    double now = gk_now();
    if (now - p->last < 0.2)
        return;
    p->last = now;
    char bar[24] = "";
    if (fraction >= 0) {
        int fill = (int)(20.0 * (fraction > 1 ? 1 : fraction));
        for (int i = 0; i < 20; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[20] = '\0';
        double eta = fraction > 0 ? (now - p->start) * (1 - fraction) / fraction : 0;
        fprintf(stderr, "\r%s: %s [%s] %3.0f%% %s, eta %.0f s\033[K", gk_prog(), p->label, bar,
                100 * fraction, text, eta);
    } else {
        fprintf(stderr, "\r%s: %s %s\033[K", gk_prog(), p->label, text);
    }
    fflush(stderr);
}

void gk_progress_clear(gk_progress *p)
{
    if (p->active)
        fprintf(stderr, "\r\033[K");
}

void gk_progress_end(gk_progress *p)
{
    gk_progress_clear(p);
    p->active = 0;
}
