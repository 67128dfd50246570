/* readahead.c: windows fetched ahead of the run by a pool of threads, one ring of slots per
 * stream's plan (see readahead.h). One mutex and one condition variable guard every ring: a
 * slot is EMPTY, FETCHING (owned by the thread fetching into its bytes, unlocked), READY or
 * FAILED; a slot dropped while it is being fetched (the run went elsewhere) is emptied by its
 * fetcher when it is done. */
#include "readahead.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { EMPTY, FETCHING, READY, FAILED };

typedef struct slot {
    uint64_t idx;   /* the plan index whose window this is (FETCHING, READY, FAILED) */
    int state, drop;
    unsigned char *buf;
} slot;

typedef struct ring {
    int active;
    tr_ra_plan p;
    slot *slots;
    unsigned char *bytes;
    uint64_t nslots;
    uint64_t head;  /* the index the run asks for next; every slot below it is dropped */
    uint64_t next;  /* the next index to fetch, in [head, head + nslots] */
} ring;

struct tr_readahead {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any slot changed state, a plan changed, or quit */
    pthread_t *th;
    int nth, quit, rr;
    size_t wbytes, budget;
    tr_ra_fetch fetch;
    void *ud;
    ring r[TR_RA_STREAMS];
    long waited, asked;
    long fetched; /* fetches the threads have finished (stored, failed or dropped) */
};

/* The batch and window of plan index idx. */
static void key_of(const tr_ra_plan *p, uint64_t idx, uint64_t *batch, uint64_t *j)
{
    uint64_t q = idx / p->n;
    *batch = p->first + p->stride * (p->count ? q % p->count : q);
    *j = p->j0 + idx % p->n;
}

/* The first plan index at or after head asking for (batch, j); 0 when the plan never does. */
static int index_of(const tr_ra_plan *p, uint64_t head, uint64_t batch, uint64_t j, uint64_t *idx)
{
    if (j < p->j0 || j - p->j0 >= p->n || batch < p->first || (batch - p->first) % p->stride)
        return 0;
    uint64_t q = (batch - p->first) / p->stride;
    if (p->count && q >= p->count)
        return 0;
    uint64_t at = q * p->n + (j - p->j0);
    if (!p->count) {
        *idx = at;
        return at >= head;
    }
    uint64_t cycle = p->n * p->count;
    *idx = head / cycle * cycle + at;
    if (*idx < head)
        *idx += cycle;
    return 1;
}

static void drop_slot(slot *s)
{
    if (s->state == FETCHING)
        s->drop = 1;
    else
        s->state = EMPTY;
}

/* A slot of some ring to fetch next (round robin over the rings), claimed; NULL: none. */
static slot *claim(tr_readahead *ra, ring **which)
{
    for (int t = 0; t < TR_RA_STREAMS; t++) {
        ring *g = &ra->r[(ra->rr + t) % TR_RA_STREAMS];
        if (!g->active || g->next >= g->head + g->nslots)
            continue;
        slot *s = &g->slots[g->next % g->nslots];
        if (s->state != EMPTY)
            continue;
        s->state = FETCHING;
        s->drop = 0;
        s->idx = g->next++;
        ra->rr = (ra->rr + t + 1) % TR_RA_STREAMS;
        *which = g;
        return s;
    }
    return NULL;
}

static void *worker(void *arg)
{
    tr_readahead *ra = arg;
    pthread_mutex_lock(&ra->mu);
    while (!ra->quit) {
        ring *g;
        slot *s = claim(ra, &g);
        if (!s) {
            pthread_cond_wait(&ra->cv, &ra->mu);
            continue;
        }
        uint64_t batch, j, seed = g->p.seed;
        int stream = (int)(g - ra->r);
        key_of(&g->p, s->idx, &batch, &j);
        pthread_mutex_unlock(&ra->mu);
        gk_err e = {0};
        int rc = ra->fetch(ra->ud, seed, stream, batch, j, s->buf, &e);
        pthread_mutex_lock(&ra->mu);
        s->state = s->drop ? EMPTY : rc ? FAILED : READY;
        s->drop = 0;
        ra->fetched++;
        pthread_cond_broadcast(&ra->cv);
    }
    pthread_mutex_unlock(&ra->mu);
    return NULL;
}

int tr_ra_open(tr_readahead **out, size_t window_bytes, size_t budget, int threads,
               tr_ra_fetch fetch, void *ud, gk_err *e)
{
    *out = NULL;
    tr_readahead *ra = calloc(1, sizeof *ra);
    if (!ra || !(ra->th = calloc((size_t)threads, sizeof *ra->th))) {
        free(ra);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&ra->mu, NULL);
    pthread_cond_init(&ra->cv, NULL);
    ra->wbytes = window_bytes;
    ra->budget = budget;
    ra->fetch = fetch;
    ra->ud = ud;
    for (; ra->nth < threads; ra->nth++)
        if (pthread_create(&ra->th[ra->nth], NULL, worker, ra) != 0) {
            tr_ra_close(ra);
            return gk_errf(e, GK_ENOMEM, "cannot start the data read-ahead threads");
        }
    *out = ra;
    return 0;
}

/* Empties ring g, waiting for the fetches under way (the mutex held). */
static void ring_clear(tr_readahead *ra, ring *g)
{
    g->active = 0;
    for (uint64_t i = 0; i < g->nslots; i++)
        drop_slot(&g->slots[i]);
    for (uint64_t i = 0; i < g->nslots; i++)
        while (g->slots[i].state == FETCHING)
            pthread_cond_wait(&ra->cv, &ra->mu);
    free(g->slots);
    free(g->bytes);
    g->slots = NULL, g->bytes = NULL, g->nslots = 0;
}

int tr_ra_plan_set(tr_readahead *ra, int stream, const tr_ra_plan *p, gk_err *e)
{
    if (stream < 0 || stream >= TR_RA_STREAMS || p->n == 0 || p->stride == 0)
        return gk_errf(e, GK_EUSAGE, "read-ahead: bad plan for stream %d", stream);
    uint64_t n = ra->budget / ra->wbytes;
    n = n < 1 ? 1 : n > (1u << 20) ? (1u << 20) : n;
    if (p->count && n > p->n * p->count) /* one pass over an evaluation's windows */
        n = p->n * p->count;
    if (!p->count && n > TR_RA_BATCHES * p->n) /* no more than the next steps need */
        n = TR_RA_BATCHES * p->n;
    pthread_mutex_lock(&ra->mu);
    ring *g = &ra->r[stream];
    ring_clear(ra, g);
    g->slots = calloc(n, sizeof *g->slots);
    g->bytes = malloc(n * ra->wbytes);
    int rc = 0;
    if (!g->slots || !g->bytes) {
        free(g->slots);
        free(g->bytes);
        g->slots = NULL, g->bytes = NULL;
        rc = gk_errf(e, GK_ENOMEM,
                     "out of memory for the data read-ahead (%llu windows of %zu bytes)",
                     (unsigned long long)n, ra->wbytes);
    } else {
        for (uint64_t i = 0; i < n; i++)
            g->slots[i].buf = g->bytes + i * ra->wbytes;
        g->nslots = n;
        g->p = *p;
        g->head = g->next = 0;
        g->active = 1;
    }
    pthread_cond_broadcast(&ra->cv);
    pthread_mutex_unlock(&ra->mu);
    return rc;
}

/* Moves g's head to idx (the mutex held): the slots before it dropped, all of them when idx is
 * outside the ring. */
static void ring_seek(ring *g, uint64_t idx)
{
    if (idx >= g->head + g->nslots) {
        for (uint64_t i = 0; i < g->nslots; i++)
            drop_slot(&g->slots[i]);
        g->next = idx;
    } else {
        for (uint64_t k = g->head; k < idx; k++) {
            slot *s = &g->slots[k % g->nslots];
            if (s->state != EMPTY && s->idx == k)
                drop_slot(s);
        }
        if (g->next < idx)
            g->next = idx;
    }
    g->head = idx;
}

int tr_ra_get(tr_readahead *ra, uint64_t seed, int stream, uint64_t batch, uint64_t j,
              unsigned char *out, gk_err *e)
{
    pthread_mutex_lock(&ra->mu);
    ra->asked++;
    ring *g = stream >= 0 && stream < TR_RA_STREAMS ? &ra->r[stream] : NULL;
    uint64_t idx;
    if (!g || !g->active || g->p.seed != seed || !index_of(&g->p, g->head, batch, j, &idx)) {
        ra->waited++;
        pthread_mutex_unlock(&ra->mu);
        return ra->fetch(ra->ud, seed, stream, batch, j, out, e);
    }
    if (idx != g->head)
        ring_seek(g, idx);
    slot *s = &g->slots[idx % g->nslots];
    if (!(s->idx == idx && s->state == READY))
        ra->waited++;
    pthread_cond_broadcast(&ra->cv);
    while (!(s->idx == idx && (s->state == READY || s->state == FAILED)))
        pthread_cond_wait(&ra->cv, &ra->mu);
    int ready = s->state == READY;
    if (ready)
        memcpy(out, s->buf, ra->wbytes);
    s->state = EMPTY;
    g->head = idx + 1;
    if (g->next < g->head)
        g->next = g->head;
    pthread_cond_broadcast(&ra->cv);
    pthread_mutex_unlock(&ra->mu);
    /* a fetch that failed in the background (after its retries) is tried once more here, for
     * its error or its bytes */
    return ready ? 0 : ra->fetch(ra->ud, seed, stream, batch, j, out, e);
}

void tr_ra_counts(tr_readahead *ra, long *waited, long *asked)
{
    pthread_mutex_lock(&ra->mu);
    *waited = ra->waited;
    *asked = ra->asked;
    pthread_mutex_unlock(&ra->mu);
}

long tr_ra_fetched(tr_readahead *ra)
{
    pthread_mutex_lock(&ra->mu);
    long n = ra->fetched;
    pthread_mutex_unlock(&ra->mu);
    return n;
}

void tr_ra_close(tr_readahead *ra)
{
    if (!ra)
        return;
    pthread_mutex_lock(&ra->mu);
    ra->quit = 1;
    pthread_cond_broadcast(&ra->cv);
    pthread_mutex_unlock(&ra->mu);
    for (int i = 0; i < ra->nth; i++)
        pthread_join(ra->th[i], NULL);
    for (int i = 0; i < TR_RA_STREAMS; i++) {
        free(ra->r[i].slots);
        free(ra->r[i].bytes);
    }
    pthread_cond_destroy(&ra->cv);
    pthread_mutex_destroy(&ra->mu);
    free(ra->th);
    free(ra);
}
