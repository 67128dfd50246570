/* encode.c: parallel, deterministic encoding of document text (see encode.h). */
#include "encode.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/bpe.h"
#include "common/utf8.h"

#define CHUNK_BYTES (256 << 10) /* target size of one parallel work item */

typedef struct chunk {
    size_t begin, end;   /* byte range in the pending text */
    uint32_t *ids;
    size_t n, cap;
    char *clean;         /* the range with invalid UTF-8 replaced */
    size_t clean_cap;
    size_t replaced;
    int rc;
    gk_err err;
} chunk;

struct tk_encoder {
    const gk_vocab *vocab;
    int allow_special, threads, bpe_mode;
    gk_bpe **bpe;        /* one per thread */
    tk_sink *sink;
    char *text;          /* pending text of the current document */
    size_t len, cap;
    size_t next_try;     /* pending size at which to try cutting again (no safe cut found yet) */
    chunk *chunks;
    size_t max_chunks;
    tk_stats stats;
};

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
    enc->max_chunks = (size_t)enc->threads * 4;
    enc->chunks = calloc(enc->max_chunks, sizeof *enc->chunks);
    enc->bpe = calloc((size_t)enc->threads, sizeof *enc->bpe);
    int rc = enc->chunks && enc->bpe ? 0 : gk_errf(e, GK_ENOMEM, "out of memory");
    for (int t = 0; rc == 0 && enc->bpe_mode && t < enc->threads; t++)
        rc = gk_bpe_create(&enc->bpe[t], v, e);
    if (rc) {
        tk_encoder_free(enc);
        return rc;
    }
    *out = enc;
    return 0;
}

static void encode_chunk(tk_encoder *enc, chunk *c, gk_bpe *bpe)
{
    size_t clean_len = 0;
    c->n = 0;
    c->replaced = gk_utf8_sanitize(enc->text + c->begin, c->end - c->begin, &c->clean,
                                   &c->clean_cap, &clean_len);
    if (c->replaced == (size_t)-1) {
        c->rc = gk_errf(&c->err, GK_ENOMEM, "out of memory");
        return;
    }
    if (bpe)
        c->rc = gk_bpe_encode(bpe, c->clean, clean_len, enc->allow_special, &c->ids, &c->n,
                              &c->cap, &c->err);
    else
        c->rc = gk_char_encode(enc->vocab, c->clean, clean_len, &c->ids, &c->n, &c->cap, &c->err);
}

/* Cuts text[0, limit) into chunks at safe points; returns how many, and where the last ends. */
static size_t plan_chunks(tk_encoder *enc, size_t limit, int final, size_t *consumed)
{
    size_t k = 0, begin = 0;
    size_t target = limit / enc->max_chunks;
    if (target < CHUNK_BYTES)
        target = CHUNK_BYTES;
    while (k < enc->max_chunks && begin < limit) {
        size_t cut = limit;
        if (k + 1 < enc->max_chunks || !final)
            cut = begin + target < limit ? gk_bpe_split_point(enc->text, limit, begin + target) : limit;
        if (cut >= limit && !final)
            break; /* the tail may continue in text not yet read */
        enc->chunks[k].begin = begin;
        enc->chunks[k].end = cut < limit ? cut : limit;
        begin = enc->chunks[k++].end;
    }
    *consumed = begin;
    return k;
}

/* Encodes and writes the pending text: all of it when final, else up to the last safe cut. */
static int encode_pending(tk_encoder *enc, int final, gk_err *e)
{
    while (enc->len > 0) {
        size_t consumed, k = plan_chunks(enc, enc->len, final, &consumed);
        if (k == 0)
            return 0;
        #pragma omp parallel for schedule(dynamic, 1) num_threads(enc->threads)
        for (size_t i = 0; i < k; i++)
            encode_chunk(enc, &enc->chunks[i], enc->bpe_mode ? enc->bpe[omp_get_thread_num()] : NULL);
        for (size_t i = 0; i < k; i++) {
            chunk *c = &enc->chunks[i];
            if (c->rc) {
                *e = c->err;
                return c->rc;
            }
            enc->stats.replaced += (int64_t)c->replaced;
            enc->stats.tokens += (int64_t)c->n;
            int rc = tk_sink_write(enc->sink, c->ids, c->n, e);
            if (rc)
                return rc;
        }
        memmove(enc->text, enc->text + consumed, enc->len - consumed);
        enc->len -= consumed;
        if (!final)
            return 0;
    }
    return 0;
}

int tk_encoder_begin(tk_encoder *enc, gk_err *e)
{
    enc->stats.docs++;
    int rc = tk_sink_doc(enc->sink, e);
    if (rc || !enc->bpe_mode)
        return rc;
    uint32_t eot = (uint32_t)gk_vocab_eot(enc->vocab);
    enc->stats.tokens++;
    return tk_sink_write(enc->sink, &eot, 1, e);
}

int tk_encoder_feed(tk_encoder *enc, const char *text, size_t n, gk_err *e)
{
    if (enc->len + n > enc->cap) {
        size_t cap = enc->cap ? enc->cap : (size_t)CHUNK_BYTES * enc->max_chunks;
        while (cap < enc->len + n)
            cap *= 2;
        char *nt = realloc(enc->text, cap);
        if (!nt)
            return gk_errf(e, GK_ENOMEM, "out of memory (a document of %zu bytes)", enc->len + n);
        enc->text = nt;
        enc->cap = cap;
    }
    memcpy(enc->text + enc->len, text, n);
    enc->len += n;
    enc->stats.bytes += (int64_t)n;
    size_t block = (size_t)CHUNK_BYTES * enc->max_chunks;
    if (enc->len < block || enc->len < enc->next_try)
        return 0;
    size_t before = enc->len;
    int rc = encode_pending(enc, 0, e);
    /* No safe cut in a long stretch (one huge line): wait for twice as much before rescanning. */
    enc->next_try = enc->len == before ? 2 * before : 0;
    return rc;
}

int tk_encoder_end(tk_encoder *enc, gk_err *e)
{
    enc->next_try = 0;
    return encode_pending(enc, 1, e);
}

const tk_stats *tk_encoder_stats(const tk_encoder *enc) { return &enc->stats; }

void tk_encoder_free(tk_encoder *enc)
{
    if (!enc)
        return;
    for (int t = 0; enc->bpe && t < enc->threads; t++)
        gk_bpe_free(enc->bpe[t]);
    for (size_t i = 0; enc->chunks && i < enc->max_chunks; i++) {
        free(enc->chunks[i].ids);
        free(enc->chunks[i].clean);
    }
    free(enc->chunks);
    free(enc->bpe);
    free(enc->text);
    free(enc);
}
