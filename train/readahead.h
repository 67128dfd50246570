/* readahead.h: data windows read ahead by background threads, for shards whose bytes are far
 * (s3data.h's objects in a bucket). The windows a run asks for are known in advance (data.h:
 * window j of batch b is a hash of (seed, stream, b, j)), so each stream gets a plan, the order
 * in which it will ask: batches first, first + stride, ... (count of them then the same again,
 * for evaluations, which read the same batches every time; count 0: on for ever, for training
 * steps), and in each batch the windows j0 .. j0 + n - 1. A pool of threads fetches the next
 * windows of every plan into a ring of slots (at most `budget` bytes of slots per plan), while
 * the run consumes them in order: once the ring is ahead of the run, no window waits on the
 * network. A window asked for out of plan order (another rank's, a batch the plan passed) is
 * fetched on the spot; the plan then goes on from it when it is in the plan.
 * Owns: the threads, the slots and their bytes. Lifetime: open .. close. Thread safety:
 * tr_ra_get and tr_ra_plan from one thread (the run's); the fetch callback runs on the pool's
 * threads, several at once. */
#ifndef TR_READAHEAD_H
#define TR_READAHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct tr_readahead tr_readahead;

/* Fetches window (seed, stream, batch, j) into out (window_bytes); 0 or an error in e. */
typedef int (*tr_ra_fetch)(void *ud, uint64_t seed, int stream, uint64_t batch, uint64_t j,
                           unsigned char *out, gk_err *e);

typedef struct tr_ra_plan {
    uint64_t seed;
    uint64_t first, stride, count; /* batches first + stride * q, q = 0
                                    * .. count - 1 (0: q unbounded) */
    uint64_t j0, n;                /* windows j0 .. j0 + n - 1 of each batch, in this order */
} tr_ra_plan;

enum { TR_RA_STREAMS = 4 }; /* streams 0 .. 3 (data.h's TR_STREAM_*) */
enum { TR_RA_BATCHES = 8 }; /* an unbounded plan is read at most this many batches ahead */

/* A pool of `threads` fetchers of windows of window_bytes; each plan's ring holds at most
 * budget bytes (at least one window), and no more than one pass over a bounded plan (count > 0)
 * or TR_RA_BATCHES batches of an unbounded one: windows fetched far ahead would only take the
 * network, and the server's and this machine's CPUs, from the steps that run now. */
int tr_ra_open(tr_readahead **out, size_t window_bytes, size_t budget, int threads,
               tr_ra_fetch fetch, void *ud, gk_err *e);
/* Sets (or replaces) the plan of stream; its read-ahead starts at once. */
int tr_ra_plan_set(tr_readahead *ra, int stream, const tr_ra_plan *p, gk_err *e);
/* Window (seed, stream, batch, j) into out: from the ring (waiting for it when it is being
 * fetched) or fetched now. A fetch that failed is returned as its error. */
int tr_ra_get(tr_readahead *ra, uint64_t seed, int stream, uint64_t batch, uint64_t j,
              unsigned char *out, gk_err *e);
/* Windows the run had to wait for (not yet read ahead when asked for), and all it asked for. */
void tr_ra_counts(tr_readahead *ra, long *waited, long *asked);
/* Fetches the background threads have finished, their windows in the ring (or failed). */
long tr_ra_fetched(tr_readahead *ra);
/* Stops the threads (a fetch under way finishes first) and frees everything. Accepts NULL. */
void tr_ra_close(tr_readahead *ra);

#endif
