/* learn_count.c: the threaded pre-token counting of learn_count.h. Blocks go from the reader to
 * the workers through a ring of 2 x threads slots (the reader waits when it is full); a block is
 * the texts of whole documents, or of one's parts, back to back, with their lengths. */
#include "learn_count.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/bpe.h"
#include "common/text/pretok.h"
#include "common/text/utf8.h"

#define BLOCK ((size_t)4 << 20) /* a block's text, about */

typedef struct block {
    char *text;
    size_t n, cap;
    size_t *seg;         /* each document (part)'s length */
    size_t nseg, segcap;
} block;

typedef struct worker {
    tk_counting *k;
    pthread_t th;
    int started;
    gk_bpe_counter *c;
    gk_pretok *p;
    char *clean;
    size_t ccap;
    int64_t replaced;
    int rc;
    gk_err err;
} worker;

struct tk_counting {
    int threads;
    worker *w;
    block *ring;         /* nslots blocks, taken in order: [take, tail) queued */
    int *busy;           /* per slot: queued or being counted */
    size_t nslots, take, tail;
    int done;            /* no block comes any more */
    pthread_mutex_t lock;
    pthread_cond_t more, room;
    block cur;           /* the reader's: being filled */
    int64_t max_docs, docs, bytes;
    size_t memory;
    int pattern;         /* GK_PATTERN_* */
};

/* Counts one document (part) of text. */
static int count_text(worker *w, const char *t, size_t n, gk_err *e)
{
    if (!n) return 0; /* (an empty document: no text buffer either) */
    size_t len = 0, rep = gk_utf8_sanitize(t, n, &w->clean, &w->ccap, &len);
    if (rep == (size_t)-1) return gk_errf(e, GK_ENOMEM, "out of memory");
    w->replaced += (int64_t)rep;
    for (size_t i = 0; i < len;) {
        size_t j = gk_pretok_next(w->p, w->clean, len, i, e);
        if (!j) return GK_EFORMAT;
        int rc = gk_bpe_counter_add(w->c, w->clean + i, j - i, 1, e);
        if (rc) return rc;
        i = j;
    }
    return 0;
}

static void *work(void *arg)
{
    worker *w = arg;
    tk_counting *k = w->k;
    for (;;) {
        pthread_mutex_lock(&k->lock);
        while (k->take == k->tail && !k->done) pthread_cond_wait(&k->more, &k->lock);
        if (k->take == k->tail) {
            pthread_mutex_unlock(&k->lock);
            return NULL;
        }
        size_t slot = k->take++ % k->nslots;
        pthread_mutex_unlock(&k->lock);
        const block *b = &k->ring[slot];
        size_t at = 0;
        for (size_t i = 0; i < b->nseg && !w->rc; at += b->seg[i++])
            w->rc = count_text(w, b->text + at, b->seg[i], &w->err);
        pthread_mutex_lock(&k->lock);
        k->busy[slot] = 0;
        pthread_cond_broadcast(&k->room);
        pthread_mutex_unlock(&k->lock);
    }
}

/* Queues the reader's block (its buffers swapped with the slot's, which it reuses). */
static void queue_block(tk_counting *k)
{
    if (!k->cur.nseg) return;
    pthread_mutex_lock(&k->lock);
    size_t slot = k->tail % k->nslots;
    while (k->busy[slot]) pthread_cond_wait(&k->room, &k->lock);
    block spare = k->ring[slot];
    k->ring[slot] = k->cur;
    k->cur = spare;
    k->cur.n = k->cur.nseg = 0;
    k->busy[slot] = 1;
    k->tail++;
    pthread_cond_signal(&k->more);
    pthread_mutex_unlock(&k->lock);
}

/* Appends t[0..n) to the open document's text in the reader's block. */
static int put_text(block *b, const char *t, size_t n, gk_err *e)
{
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2;
        char *x = realloc(b->text, cap);
        if (!x) return gk_errf(e, GK_ENOMEM, "out of memory for the text to count");
        b->text = x, b->cap = cap;
    }
    memcpy(b->text + b->n, t, n);
    b->n += n;
    return 0;
}

/* Ends a segment of the reader's block: [start of the open document, n). */
static int put_seg(block *b, size_t len, gk_err *e)
{
    if (b->nseg == b->segcap) {
        size_t cap = b->segcap ? b->segcap * 2 : 64, *x = realloc(b->seg, cap * sizeof *x);
        if (!x) return gk_errf(e, GK_ENOMEM, "out of memory for the text to count");
        b->seg = x, b->segcap = cap;
    }
    b->seg[b->nseg++] = len;
    return 0;
}

/* The open document's text starts after the block's segments. */
static size_t doc_start(const block *b)
{
    size_t at = 0;
    for (size_t i = 0; i < b->nseg; i++) at += b->seg[i];
    return at;
}

static int on_begin(void *ctx, gk_err *e)
{
    tk_counting *k = ctx;
    (void)e;
    if (k->max_docs && k->docs >= k->max_docs) return TK_STOP;
    k->docs++;
    return 0;
}

static int on_feed(void *ctx, const char *t, size_t n, gk_err *e)
{
    tk_counting *k = ctx;
    int rc = put_text(&k->cur, t, n, e);
    k->bytes += (int64_t)n;
    size_t at = doc_start(&k->cur), len = k->cur.n - at;
    if (rc || k->cur.n < BLOCK || len < BLOCK / 2) return rc;
    /* a long document: its part up to a safe cut queued, the rest moved to the next block */
    size_t cut = gk_bpe_split_point(k->cur.text + at, len, len / 2, k->pattern);
    if (cut == len) return 0;
    if ((rc = put_seg(&k->cur, cut, e))) return rc;
    char *rest = malloc(len - cut);
    if (!rest) return gk_errf(e, GK_ENOMEM, "out of memory for the text to count");
    memcpy(rest, k->cur.text + at + cut, len - cut);
    k->cur.n = at + cut;
    queue_block(k);
    rc = put_text(&k->cur, rest, len - cut, e);
    free(rest);
    return rc;
}

static int on_end(void *ctx, gk_err *e)
{
    tk_counting *k = ctx;
    int rc = put_seg(&k->cur, k->cur.n - doc_start(&k->cur), e);
    if (!rc && k->cur.n >= BLOCK) queue_block(k);
    return rc;
}

tk_consumer tk_counting_consumer(tk_counting *k)
{
    return (tk_consumer){on_begin, on_feed, on_end, k};
}

int tk_counting_new(tk_counting **out, int threads, int pattern, size_t memory, int64_t max_docs,
                    gk_err *e)
{
    tk_counting *k = calloc(1, sizeof *k);
    *out = NULL;
    if (!k) return gk_errf(e, GK_ENOMEM, "out of memory");
    k->threads = threads < 1 ? 1 : threads;
    k->nslots = 2 * (size_t)k->threads;
    k->max_docs = max_docs, k->memory = memory, k->pattern = pattern;
    k->w = calloc((size_t)k->threads, sizeof *k->w);
    k->ring = calloc(k->nslots, sizeof *k->ring);
    k->busy = calloc(k->nslots, sizeof *k->busy);
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->more, NULL);
    pthread_cond_init(&k->room, NULL);
    int rc = !k->w || !k->ring || !k->busy ? gk_errf(e, GK_ENOMEM, "out of memory") : 0;
    for (int i = 0; !rc && i < k->threads; i++) {
        worker *w = &k->w[i];
        w->k = k;
        rc = gk_bpe_counter_new(&w->c, memory / (size_t)k->threads, e);
        if (!rc) rc = gk_pretok_create(&w->p, pattern, e);
        if (!rc && pthread_create(&w->th, NULL, work, w) != 0)
            rc = gk_errf(e, GK_ENOMEM, "cannot start a counting thread");
        w->started = !rc;
    }
    if (rc) tk_counting_free(k);
    else *out = k;
    return rc;
}

/* Ends the queue and joins the workers. */
static void join(tk_counting *k)
{
    pthread_mutex_lock(&k->lock);
    k->done = 1;
    pthread_cond_broadcast(&k->more);
    pthread_mutex_unlock(&k->lock);
    for (int i = 0; i < k->threads; i++)
        if (k->w[i].started) pthread_join(k->w[i].th, NULL), k->w[i].started = 0;
}

int tk_counting_finish(tk_counting *k, const gk_bpe_counter **all, tk_count_stats *st,
                       gk_err *e)
{
    queue_block(k);
    join(k);
    *st = (tk_count_stats){k->docs, k->bytes, 0};
    int rc = 0;
    for (int i = 0; i < k->threads; i++) {
        st->replaced += k->w[i].replaced;
        if (k->w[i].rc && !rc) rc = k->w[i].rc, *e = k->w[i].err;
    }
    gk_bpe_counter_set_max(k->w[0].c, k->memory); /* (the whole bound, for all the counts) */
    for (int i = 1; i < k->threads && !rc; i++) {
        rc = gk_bpe_counter_absorb(k->w[0].c, k->w[i].c, e);
        gk_bpe_counter_free(k->w[i].c);
        k->w[i].c = NULL;
    }
    *all = k->w[0].c;
    return rc;
}

void tk_counting_free(tk_counting *k)
{
    if (!k) return;
    if (k->w) join(k);
    for (int i = 0; k->w && i < k->threads; i++) {
        gk_bpe_counter_free(k->w[i].c);
        gk_pretok_free(k->w[i].p);
        free(k->w[i].clean);
    }
    for (size_t i = 0; k->ring && i < k->nslots; i++) free(k->ring[i].text), free(k->ring[i].seg);
    free(k->cur.text), free(k->cur.seg);
    pthread_mutex_destroy(&k->lock);
    pthread_cond_destroy(&k->more);
    pthread_cond_destroy(&k->room);
    free(k->w), free(k->ring), free(k->busy);
    free(k);
}
