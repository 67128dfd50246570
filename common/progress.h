/* progress.h: a one-line progress bar on stderr, drawn only when stderr is a terminal and the
 * tool is not quiet; redrawn at most 5 times a second.
 * Owns: timing state of one bar. Not thread-safe: update it from one thread. */
#ifndef GK_PROGRESS_H
#define GK_PROGRESS_H

#include <stdint.h>

typedef struct gk_progress {
    int active;
    const char *label;
    int64_t total; /* 0 = unknown */
    double start, last;
} gk_progress;

/* Seconds on a monotonic clock. */
double gk_now(void);
void gk_progress_start(gk_progress *p, const char *label, int64_t total);
/* done: units so far (bytes); note: a short text after the numbers (e.g. "1234 tokens"). */
void gk_progress_update(gk_progress *p, int64_t done, const char *note);
/* Generic form: fraction in [0,1] (negative: unknown) and a short text, e.g. "step 10/2000". */
void gk_progress_line(gk_progress *p, double fraction, const char *text);
/* Clears the line (before other output); the bar stays active. */
void gk_progress_clear(gk_progress *p);
/* Clears the line and deactivates the bar. */
void gk_progress_end(gk_progress *p);

#endif
