/* test_train_readahead.c: train/readahead.c against a fetch whose bytes are a function of the
 * window's key (so every answer can be checked) and which counts its calls: windows asked for in
 * plan order come back right and are each fetched once; once the ring is full the run waits for
 * none of them; a window out of plan order, a jump ahead, an evaluation plan's cycles and a
 * fetch that fails all give the right bytes or the fetch's error; a plan replaced mid-way; a
 * plan without end read no more than TR_RA_BATCHES batches ahead. */
#include <stdatomic.h>
#include <time.h>

#include "test.h"
#include "train/readahead.h"

enum { W = 16 }; /* bytes a window */

typedef struct fake {
    atomic_long calls;
    uint64_t fail_batch; /* fetches of this batch fail (0: none) */
} fake;

static void fill(uint64_t seed, int stream, uint64_t batch, uint64_t j, unsigned char *out)
{
    for (int i = 0; i < W; i++)
        out[i] =
            (unsigned char)(seed * 7 + (uint64_t)stream * 31 + batch * 13 + j * 3 + (uint64_t)i);
}

static int fetch(void *ud, uint64_t seed, int stream, uint64_t batch, uint64_t j,
                 unsigned char *out, gk_err *e)
{
    fake *f = ud;
    atomic_fetch_add(&f->calls, 1);
    if (f->fail_batch && batch == f->fail_batch)
        return gk_errf(e, GK_EIO, "batch %llu: injected", (unsigned long long)batch);
    fill(seed, stream, batch, j, out);
    return 0;
}

/* Whether get(key) gives the key's bytes. */
static int right(tr_readahead *ra, uint64_t seed, int stream, uint64_t batch, uint64_t j)
{
    unsigned char got[W], want[W];
    gk_err e = {0};
    fill(seed, stream, batch, j, want);
    return tr_ra_get(ra, seed, stream, batch, j, got, &e) == 0 && memcmp(got, want, W) == 0;
}

/* Polls until f has had n calls, all made by ra's threads and finished, so that their windows
 * are in the ring (a call counted is not yet a window stored); 0 after 10 s. */
static int await_calls(tr_readahead *ra, fake *f, long n)
{
    for (int i = 0; i < 10000 && (atomic_load(&f->calls) < n || tr_ra_fetched(ra) < n); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    return atomic_load(&f->calls) == n && tr_ra_fetched(ra) == n;
}

/* Training: batches 5, 6, ... windows 8..11; a ring of 6 windows. */
static void test_plan_order(void)
{
    fake f = {0};
    tr_readahead *ra;
    gk_err e = {0};
    CHECK_OK(tr_ra_open(&ra, W, 6 * W, 3, fetch, &f, &e), &e);
    tr_ra_plan p = {.seed = 9, .first = 5, .stride = 1, .count = 0, .j0 = 8, .n = 4};
    CHECK_OK(tr_ra_plan_set(ra, 1, &p, &e), &e);
    CHECK(await_calls(ra, &f, 6)); /* read ahead before anything is asked for, no further */
    long waited, asked;
    int ok = 1;
    for (uint64_t k = 0; k < 12; k++) { /* two ringfuls, the ring full again in between */
        ok &= right(ra, 9, 1, 5 + k / 4, 8 + k % 4);
        if (k == 5)
            ok &= await_calls(ra, &f, 12); /* each window fetched once */
    }
    CHECK(ok);
    tr_ra_counts(ra, &waited, &asked);
    CHECKF(waited == 0 && asked == 12, "waited %ld of %ld", waited, asked);
    for (uint64_t b = 8; b < 30; b++)
        for (uint64_t j = 8; j < 12; j++)
            ok &= right(ra, 9, 1, b, j);
    CHECK(ok);
    tr_ra_close(ra);
    CHECKF(atomic_load(&f.calls) <= 100 + 6, "%ld fetches for 100 windows", atomic_load(&f.calls));
}

/* A plan without end is read TR_RA_BATCHES batches ahead, however large the budget. */
static void test_bounded_ahead(void)
{
    fake f = {0};
    tr_readahead *ra;
    gk_err e = {0};
    CHECK_OK(tr_ra_open(&ra, W, 100000 * W, 4, fetch, &f, &e), &e);
    tr_ra_plan p = {.seed = 2, .first = 0, .stride = 1, .count = 0, .j0 = 0, .n = 3};
    CHECK_OK(tr_ra_plan_set(ra, 1, &p, &e), &e);
    CHECK(await_calls(ra, &f, 3 * TR_RA_BATCHES));
    nanosleep(&(struct timespec){0, 50000000}, NULL); /* room to fetch more, were it allowed */
    CHECKF(atomic_load(&f.calls) == 3 * TR_RA_BATCHES, "%ld fetches", atomic_load(&f.calls));
    CHECK(right(ra, 2, 1, 0, 0));
    CHECK(await_calls(ra, &f, 3 * TR_RA_BATCHES + 1)); /* one asked for: one more fetched */
    tr_ra_close(ra);
}

/* Out of plan order: another stream, a window the plan has not, a jump ahead (the plan goes on
 * from there), one behind. */
static void test_out_of_order(void)
{
    fake f = {0};
    tr_readahead *ra;
    gk_err e = {0};
    CHECK_OK(tr_ra_open(&ra, W, 4 * W, 2, fetch, &f, &e), &e);
    tr_ra_plan p = {.seed = 1, .first = 0, .stride = 1, .count = 0, .j0 = 0, .n = 2};
    CHECK_OK(tr_ra_plan_set(ra, 1, &p, &e), &e);
    CHECK(right(ra, 1, 1, 0, 0));
    CHECK(right(ra, 1, 2, 0, 0));  /* no plan for stream 2 */
    CHECK(right(ra, 1, 1, 0, 7));  /* j outside the plan */
    CHECK(right(ra, 2, 1, 0, 1));  /* another seed */
    CHECK(right(ra, 1, 1, 50, 1)); /* a jump ahead */
    int ok = 1;
    for (uint64_t b = 51; b < 60; b++)
        for (uint64_t j = 0; j < 2; j++)
            ok &= right(ra, 1, 1, b, j);
    CHECK(ok);
    CHECK(right(ra, 1, 1, 3, 0)); /* behind */
    CHECK(right(ra, 1, 1, 60, 0));
    long waited, asked;
    tr_ra_counts(ra, &waited, &asked);
    CHECK(asked == 25 && waited >= 5);
    tr_ra_close(ra);
}

/* Evaluations: batches 1, 4 (stride 3, count 2), windows 0..2, the same every time. */
static void test_eval_cycles(void)
{
    fake f = {0};
    tr_readahead *ra;
    gk_err e = {0};
    CHECK_OK(tr_ra_open(&ra, W, 1000 * W, 4, fetch, &f, &e), &e);
    tr_ra_plan p = {.seed = 3, .first = 1, .stride = 3, .count = 2, .j0 = 0, .n = 3};
    CHECK_OK(tr_ra_plan_set(ra, 2, &p, &e), &e);
    CHECK(await_calls(ra, &f, 6)); /* one pass: the ring is no larger than an evaluation */
    int ok = 1;
    for (int cycle = 0; cycle < 3; cycle++) {
        for (uint64_t b = 1; b < 5; b += 3)
            for (uint64_t j = 0; j < 3; j++)
                ok &= right(ra, 3, 2, b, j);
        ok &= await_calls(ra, &f, 6 * (cycle + 2)); /* the next evaluation's, read ahead */
    }
    CHECK(ok);
    long waited, asked;
    tr_ra_counts(ra, &waited, &asked);
    CHECKF(waited == 0 && asked == 18, "waited %ld of %ld", waited, asked);
    tr_ra_close(ra);
}

/* A fetch that fails in the background is tried again when asked for: its error comes back; the
 * windows after it are right. A plan replaced mid-way. */
static void test_failure_and_replan(void)
{
    fake f = {.fail_batch = 2};
    tr_readahead *ra;
    gk_err e = {0};
    unsigned char buf[W];
    CHECK_OK(tr_ra_open(&ra, W, 8 * W, 2, fetch, &f, &e), &e);
    tr_ra_plan p = {.seed = 5, .first = 0, .stride = 1, .count = 0, .j0 = 0, .n = 2};
    CHECK_OK(tr_ra_plan_set(ra, 1, &p, &e), &e);
    CHECK(right(ra, 5, 1, 0, 0) && right(ra, 5, 1, 0, 1) && right(ra, 5, 1, 1, 0) &&
          right(ra, 5, 1, 1, 1));
    CHECK(tr_ra_get(ra, 5, 1, 2, 0, buf, &e) == GK_EIO);
    CHECKF(strcmp(e.msg, "batch 2: injected") == 0, "%s", e.msg);
    CHECK(right(ra, 5, 1, 3, 0));
    tr_ra_plan q = {.seed = 6, .first = 10, .stride = 2, .count = 0, .j0 = 4, .n = 1};
    CHECK_OK(tr_ra_plan_set(ra, 1, &q, &e), &e);
    int ok = 1;
    for (uint64_t b = 10; b < 30; b += 2)
        ok &= right(ra, 6, 1, b, 4);
    CHECK(ok);
    tr_ra_close(ra);
}

int main(void)
{
    RUN(test_plan_order);
    RUN(test_bounded_ahead);
    RUN(test_out_of_order);
    RUN(test_eval_cycles);
    RUN(test_failure_and_replan);
    return TEST_END();
}
