/* encode.c: parallel, deterministic encoding of document text (see encode.h). */
#include "encode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/text/bpe.h"
#include "common/text/utf8.h"
#include "encode_int.h"

#define NBLOCKS 3               /* block buffers: one filling, up to NBLOCKS-1 being encoded */

/* Pipeline: the calling thread fills block seq `submitted` while threads-1 workers (and the
 * caller when it has to wait) encode chunks of submitted blocks; the caller writes them in order.
 * Sequence numbers count blocks; block seq s lives in blocks[s % NBLOCKS]. */
struct tk_encoder {
    const gk_vocab *vocab;
    int allow_special, threads, bpe_mode;
    gk_bpe **bpe;        /* one per thread: [0] the caller, [1..] the workers */
    tk_sink *sink;
    block blocks[NBLOCKS];
    block *fill;         /* blocks[submitted % NBLOCKS]: the pending text of the current document */
    size_t max_chunks;
    size_t submitted;    /* blocks handed to the workers */
    size_t written;      /* blocks whose chunks are all written (caller only) */
    size_t wr_chunk;     /* next chunk to write in block `written` (caller only) */
    /* under lock: */
    size_t claim_block, claim_chunk; /* next chunk to encode */
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t work, done;       /* work: a chunk was queued or stop; done: a chunk finished */
    pthread_t *workers;
    int nworkers, sync_ok;
    /* serial mode: a stretch with no safe cut (one piece of hundreds of MB), encoded by the caller
     * in order as it arrives, holding at most GK_BPE_PART_KEEP bytes of it plus one read */
    int serial;
    char *tail;          /* sanitized text not yet encoded */
    size_t tail_len, tail_cap;
    char hold[4];        /* an incomplete UTF-8 sequence at the end of what was fed */
    size_t nhold;
    char *raw, *clean;   /* scratch: hold + new bytes; their sanitized form */
    size_t raw_cap, clean_cap;
    uint32_t *sids;
    size_t scap;
    tk_stats stats;
};

/* Encodes text[from, to) of chunk c (a piece of one document), appending to c->ids. */
static int encode_piece(tk_encoder *enc, chunk *c, gk_bpe *bpe, size_t from, size_t to)
{
    size_t clean_len = 0;
    size_t rep = gk_utf8_sanitize(c->text + from, to - from, &c->clean, &c->clean_cap, &clean_len);
    if (rep == (size_t)-1)
        return gk_errf(&c->err, GK_ENOMEM, "out of memory");
    c->replaced += rep;
    if (bpe)
        return gk_bpe_encode(bpe, c->clean, clean_len, enc->allow_special, &c->ids, &c->n, &c->cap,
                             &c->err);
    return gk_char_encode(enc->vocab, c->clean, clean_len, &c->ids, &c->n, &c->cap, &c->err);
}

static void encode_chunk(tk_encoder *enc, chunk *c, gk_bpe *bpe)
{
    c->n = c->replaced = 0;
    c->rc = 0;
    if (c->nstarts > c->dcap) {
        size_t *nd = realloc(c->dtok, c->nstarts * sizeof *nd);
        if (!nd) {
            c->rc = gk_errf(&c->err, GK_ENOMEM, "out of memory");
            return;
        }
        c->dtok = nd;
        c->dcap = c->nstarts;
    }
    size_t at = c->begin;
    uint32_t eot = enc->bpe_mode ? (uint32_t)gk_vocab_eot(enc->vocab) : 0;
    for (size_t k = 0; c->rc == 0 && k <= c->nstarts; k++) {
        size_t to = k < c->nstarts ? c->starts[k] : c->end;
        if (to > at)
            c->rc = encode_piece(enc, c, bpe, at, to);
        at = to;
        if (c->rc || k == c->nstarts)
            break;
        c->dtok[k] = c->n;
        /* its <|endoftext|> */
        if (bpe && gk_grow(&c->ids, &c->cap, c->n + 1, sizeof *c->ids, 256)) {
            c->rc = gk_errf(&c->err, GK_ENOMEM, "out of memory");
            break;
        }
        if (bpe)
            c->ids[c->n++] = eot;
    }
}

/* ---------------------------------------------------------------- work queue (under lock) */

static chunk *claim_locked(tk_encoder *enc)
{
    if (enc->claim_block == enc->submitted)
        return NULL;
    block *b = &enc->blocks[enc->claim_block % NBLOCKS];
    chunk *c = &b->chunks[enc->claim_chunk++];
    if (enc->claim_chunk == b->nchunks) {
        enc->claim_block++;
        enc->claim_chunk = 0;
    }
    return c;
}

/* Encodes c with thread t's state and marks it done. Called with the lock held; drops it. */
static void run_locked(tk_encoder *enc, chunk *c, int t)
{
    pthread_mutex_unlock(&enc->lock);
    encode_chunk(enc, c, enc->bpe_mode ? enc->bpe[t] : NULL);
    pthread_mutex_lock(&enc->lock);
    c->done = 1;
    pthread_cond_signal(&enc->done);
}

typedef struct worker_arg {
    tk_encoder *enc;
    int t;
} worker_arg;

static void *worker_main(void *p)
{
    tk_encoder *enc = ((worker_arg *)p)->enc;
    int t = ((worker_arg *)p)->t;
    free(p);
    pthread_mutex_lock(&enc->lock);
    while (!enc->stop) {
        chunk *c = claim_locked(enc);
        if (c)
            run_locked(enc, c, t);
        else
            pthread_cond_wait(&enc->work, &enc->lock);
    }
    pthread_mutex_unlock(&enc->lock);
    return NULL;
}

/* ---------------------------------------------------------------- caller side */

int tk_encoder_create(tk_encoder **out, const gk_vocab *v, int allow_special, int threads,
                      tk_sink *sink, gk_err *e)
{
    tk_encoder *enc = calloc(1, sizeof *enc);
    if (!enc)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    enc->vocab = v;
    enc->allow_special = allow_special;
    enc->threads = threads < 1 ? 1 : threads;
    enc->bpe_mode = gk_vocab_type(v) == GK_VOCAB_BPE;
    enc->sink = sink;
    enc->max_chunks = (size_t)enc->threads * 2;
    enc->bpe = calloc((size_t)enc->threads, sizeof *enc->bpe);
    enc->workers = calloc((size_t)enc->threads, sizeof *enc->workers);
    int rc = enc->bpe && enc->workers ? 0 : gk_errf(e, GK_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < NBLOCKS; i++)
        if (!(enc->blocks[i].chunks = calloc(enc->max_chunks, sizeof(chunk))))
            rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (int t = 0; rc == 0 && enc->bpe_mode && t < enc->threads; t++)
        rc = gk_bpe_create(&enc->bpe[t], v, e);
    if (rc == 0) {
        if (pthread_mutex_init(&enc->lock, NULL) || pthread_cond_init(&enc->work, NULL) ||
            pthread_cond_init(&enc->done, NULL))
            rc = gk_errf(e, GK_ENOMEM, "cannot create the encoding threads");
        else
            enc->sync_ok = 1;
    }
    for (int t = 1; rc == 0 && t < enc->threads; t++) {
        worker_arg *a = malloc(sizeof *a);
        if (a)
            *a = (worker_arg){enc, t};
        if (!a || pthread_create(&enc->workers[enc->nworkers], NULL, worker_main, a)) {
            free(a);
            rc = gk_errf(e, GK_ENOMEM, "cannot create the encoding threads");
        } else {
            enc->nworkers++;
        }
    }
    if (rc) {
        tk_encoder_free(enc);
        return rc;
    }
    enc->fill = &enc->blocks[0];
    *out = enc;
    return 0;
}

/* A document starts here in the output: counted unless --max-tokens dropped it. */
static int doc_start(tk_encoder *enc, gk_err *e)
{
    enc->stats.docs += !tk_sink_full(enc->sink);
    return tk_sink_doc(enc->sink, e);
}

/* The bytes of text that ids[0, n) stand for (<|endoftext|> none). */
static int64_t token_bytes(const tk_encoder *enc, const uint32_t *ids, size_t n)
{
    int64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        if (!enc->bpe_mode || ids[i] != (uint32_t)gk_vocab_eot(enc->vocab))
            gk_vocab_token(enc->vocab, ids[i], &len);
        bytes += (int64_t)len;
    }
    return bytes;
}

/* Writes ids[0, n), the tokens of `bytes` bytes of text, and counts the bytes of those the sink
 * took: all, or where --max-tokens cuts them, the bytes of the tokens kept. So the summary's
 * bytes are those encoded into the output, not those read ahead past the stop. */
static int write_piece(tk_encoder *enc, const uint32_t *ids, size_t n, size_t bytes, gk_err *e)
{
    int64_t before = tk_sink_tokens(enc->sink);
    int rc = tk_sink_write(enc->sink, ids, n, e);
    size_t kept = (size_t)(tk_sink_tokens(enc->sink) - before);
    enc->stats.bytes += kept == n ? (int64_t)bytes : token_bytes(enc, ids, kept);
    return rc;
}

/* Writes an encoded chunk: its tokens, with each document's start marked in the sink. Documents
 * are counted as written (not as read), so that the count does not depend on how far reading
 * ran ahead of a --max-tokens stop; so are bytes. */
static int write_chunk(tk_encoder *enc, const chunk *c, gk_err *e)
{
    enc->stats.replaced += (int64_t)c->replaced;
    enc->stats.tokens += (int64_t)c->n;
    size_t at = 0, from = c->begin;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < c->nstarts; k++) {
        rc = write_piece(enc, c->ids + at, c->dtok[k] - at, c->starts[k] - from, e);
        if (rc == 0)
            rc = doc_start(enc, e);
        at = c->dtok[k];
        from = c->starts[k];
    }
    return rc ? rc : write_piece(enc, c->ids + at, c->n - at, c->end - from, e);
}

/* Writes finished chunks in order until block seq `upto` is written (or, if !wait, until the
 * next one is not finished). Encodes queued chunks itself rather than idle. */
static int drain(tk_encoder *enc, size_t upto, int wait, gk_err *e)
{
    while (enc->written < upto) {
        chunk *c = &enc->blocks[enc->written % NBLOCKS].chunks[enc->wr_chunk];
        pthread_mutex_lock(&enc->lock);
        while (!c->done) {
            chunk *mine = wait ? claim_locked(enc) : NULL;
            if (mine)
                run_locked(enc, mine, 0);
            else if (wait)
                pthread_cond_wait(&enc->done, &enc->lock);
            else
                break;
        }
        int ready = c->done;
        pthread_mutex_unlock(&enc->lock);
        if (!ready)
            return 0;
        if (c->rc) {
            *e = c->err;
            return c->rc;
        }
        int rc = write_chunk(enc, c, e);
        if (rc)
            return rc;
        if (++enc->wr_chunk == enc->blocks[enc->written % NBLOCKS].nchunks) {
            enc->written++;
            enc->wr_chunk = 0;
        }
    }
    return 0;
}

static int reserve(block *b, size_t need, size_t initial)
{
    return gk_grow(&b->text, &b->cap, need, 1, initial) ? -1 : 0;
}

static int add_start(block *b, size_t at)
{
    if (gk_grow(&b->starts, &b->scap, b->nstarts + 1, sizeof *b->starts, 1024))
        return -1;
    b->starts[b->nstarts++] = at;
    return 0;
}

/* Submits the pending text (all of it when final, else up to the last safe cut) and starts the
 * next block with the rest. Returns 1 in *none when there is no safe cut yet. */
static int submit(tk_encoder *enc, int final, int *none, gk_err *e)
{
    block *b = enc->fill;
    size_t consumed;
    int cuts = enc->bpe_mode ? gk_vocab_pattern(enc->vocab) : -1;
    b->nchunks = tk_plan_chunks(b, cuts, enc->max_chunks, final, &consumed);
    *none = b->nchunks == 0;
    if (*none)
        return 0;
    pthread_mutex_lock(&enc->lock);
    enc->submitted++;
    pthread_cond_broadcast(&enc->work);
    pthread_mutex_unlock(&enc->lock);
    /* the next block's buffer is free once the block that used it before is written */
    int rc = enc->submitted >= NBLOCKS ? drain(enc, enc->submitted - NBLOCKS + 1, 1, e) : 0;
    if (rc)
        return rc;
    block *nb = &enc->blocks[enc->submitted % NBLOCKS];
    size_t rest = b->len - consumed, first = 0;
    while (first < b->nstarts && b->starts[first] < consumed)
        first++;
    while (first < b->nstarts && b->starts[first] == consumed && final)
        first++; /* taken by the last chunk */
    nb->nstarts = 0;
    if (reserve(nb, rest, (size_t)CHUNK_BYTES * enc->max_chunks))
        return gk_errf(e, GK_ENOMEM, "out of memory (a document of %zu bytes)", rest);
    for (size_t k = first; k < b->nstarts; k++)
        if (add_start(nb, b->starts[k] - consumed))
            return gk_errf(e, GK_ENOMEM, "out of memory");
    if (rest)
        memcpy(nb->text, b->text + consumed, rest);
    nb->len = rest;
    enc->fill = nb;
    return drain(enc, enc->submitted, 0, e); /* write what is already finished */
}

/* ---------------------------------------------------------------- serial mode */

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 1 << 16;
    while (c < need)
        c *= 2;
    char *nb = realloc(*buf, c);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

/* Encodes tail[0, len) (the whole when final, else what later text cannot change), writes its
 * ids and drops the encoded bytes from the tail. */
static int serial_encode(tk_encoder *enc, size_t len, int final, gk_err *e)
{
    size_t n = 0, used;
    int rc = gk_bpe_encode_part(enc->bpe[0], enc->tail, len, final, enc->allow_special, &enc->sids,
                                &n, &enc->scap, &used, e);
    if (!rc) {
        enc->stats.tokens += (int64_t)n;
        rc = write_piece(enc, enc->sids, n, used, e);
    }
    memmove(enc->tail, enc->tail + used, enc->tail_len - used);
    enc->tail_len -= used;
    return rc;
}

/* Serial mode: sanitizes the new bytes onto the tail and encodes what can be; once the tail has
 * a safe cut, encodes up to it and hands the rest back to the parallel blocks. */
static int serial_feed(tk_encoder *enc, const char *text, size_t n, int final, gk_err *e)
{
    size_t rn = enc->nhold + n, clen = 0;
    if (grow(&enc->raw, &enc->raw_cap, rn))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    memcpy(enc->raw, enc->hold, enc->nhold);
    if (n)
        memcpy(enc->raw + enc->nhold, text, n);
    size_t cut = final ? rn : gk_utf8_complete_len(enc->raw, rn);
    enc->nhold = rn - cut;
    memcpy(enc->hold, enc->raw + cut, enc->nhold);
    size_t rep = gk_utf8_sanitize(enc->raw, cut, &enc->clean, &enc->clean_cap, &clen);
    if (rep == (size_t)-1 || grow(&enc->tail, &enc->tail_cap, enc->tail_len + clen))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    enc->stats.replaced += (int64_t)rep;
    memcpy(enc->tail + enc->tail_len, enc->clean, clen);
    enc->tail_len += clen;
    size_t p = gk_bpe_split_point(enc->tail, enc->tail_len, 1, gk_vocab_pattern(enc->vocab));
    if (p == enc->tail_len && !final)
        return serial_encode(enc, enc->tail_len, 0, e);
    int rc = serial_encode(enc, p, 1, e);
    block *b = enc->fill; /* empty: serial mode began with its text */
    if (!rc && reserve(b, enc->tail_len + enc->nhold, (size_t)CHUNK_BYTES * enc->max_chunks))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    if (rc)
        return rc;
    memcpy(b->text, enc->tail, enc->tail_len);
    memcpy(b->text + enc->tail_len, enc->hold, enc->nhold);
    b->len = enc->tail_len + enc->nhold;
    enc->tail_len = enc->nhold = 0;
    enc->serial = 0;
    return 0;
}

int tk_encoder_begin(tk_encoder *enc, gk_err *e)
{
    if (add_start(enc->fill, enc->fill->len))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    return 0;
}

/* Serial mode begins with the text of enc->fill (one document or its end, no cut in it): what
 * was submitted before is written, then this document's start if it is in the block. */
static int enter_serial(tk_encoder *enc, gk_err *e)
{
    int rc = drain(enc, enc->submitted, 1, e);
    block *b = enc->fill;
    /* all at 0 (a start past 0 would be a cut): empty documents, then this one */
    for (size_t k = 0; rc == 0 && k < b->nstarts; k++) {
        uint32_t eot = (uint32_t)gk_vocab_eot(enc->vocab);
        enc->stats.tokens++;
        rc = doc_start(enc, e);
        if (rc == 0)
            rc = tk_sink_write(enc->sink, &eot, 1, e);
    }
    b->nstarts = 0;
    if (rc)
        return rc;
    size_t len = b->len;
    b->len = 0;
    enc->serial = 1;
    return serial_feed(enc, b->text, len, 0, e);
}

int tk_encoder_feed(tk_encoder *enc, const char *text, size_t n, gk_err *e)
{
    if (enc->serial)
        return serial_feed(enc, text, n, 0, e);
    block *b = enc->fill;
    if (n == 0)
        return 0;
    if (reserve(b, b->len + n, (size_t)CHUNK_BYTES * enc->max_chunks))
        return gk_errf(e, GK_ENOMEM, "out of memory (a document of %zu bytes)", b->len + n);
    memcpy(b->text + b->len, text, n);
    b->len += n;
    if (b->len < (size_t)CHUNK_BYTES * enc->max_chunks)
        return 0;
    int none = 0, rc = submit(enc, 0, &none, e);
    if (rc || !none)
        return rc;
    /* No cut in the whole block: encode it in order as it comes, in bounded parts. */
    return enter_serial(enc, e);
}

int tk_encoder_end(tk_encoder *enc, gk_err *e)
{
    return enc->serial ? serial_feed(enc, NULL, 0, 1, e) : 0;
}

int tk_encoder_finish(tk_encoder *enc, gk_err *e)
{
    int none = 0, rc = enc->serial ? serial_feed(enc, NULL, 0, 1, e) : 0;
    if (!rc && (enc->fill->len || enc->fill->nstarts))
        rc = submit(enc, 1, &none, e);
    return rc ? rc : drain(enc, enc->submitted, 1, e);
}

const tk_stats *tk_encoder_stats(const tk_encoder *enc) { return &enc->stats; }

void tk_encoder_free(tk_encoder *enc)
{
    if (!enc)
        return;
    if (enc->sync_ok) {
        pthread_mutex_lock(&enc->lock);
        enc->stop = 1;
        pthread_cond_broadcast(&enc->work);
        pthread_mutex_unlock(&enc->lock);
    }
    for (int t = 0; t < enc->nworkers; t++)
        pthread_join(enc->workers[t], NULL);
    if (enc->sync_ok) {
        pthread_mutex_destroy(&enc->lock);
        pthread_cond_destroy(&enc->work);
        pthread_cond_destroy(&enc->done);
    }
    for (int t = 0; enc->bpe && t < enc->threads; t++)
        gk_bpe_free(enc->bpe[t]);
    for (int i = 0; i < NBLOCKS; i++) {
        block *b = &enc->blocks[i];
        for (size_t k = 0; b->chunks && k < enc->max_chunks; k++) {
            free(b->chunks[k].ids);
            free(b->chunks[k].clean);
            free(b->chunks[k].dtok);
        }
        free(b->chunks);
        free(b->starts);
        free(b->text);
    }
    free(enc->tail);
    free(enc->raw);
    free(enc->clean);
    free(enc->sids);
    free(enc->workers);
    free(enc->bpe);
    free(enc);
}
