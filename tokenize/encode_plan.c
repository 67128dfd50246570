/* encode_plan.c: where the encoder cuts a block of text into chunks (see encode_int.h). */
#include "encode_int.h"

#include "common/text/bpe.h"

/* Char-level: any character boundary; a cut before a byte that no sequence can continue (not
 * 10xxxxxx, or after three such bytes) replaces invalid UTF-8 the same on both sides. */
static size_t char_split_point(const char *text, size_t len, size_t from)
{
    const unsigned char *u = (const unsigned char *)text;
    for (size_t p = from < 1 ? 1 : from; p < len; p++)
        if ((u[p] & 0xC0) != 0x80 || (p >= 3 && (u[p - 1] & 0xC0) == 0x80 &&
                                      (u[p - 2] & 0xC0) == 0x80 && (u[p - 3] & 0xC0) == 0x80))
            return p;
    return len;
}

static size_t split_at(int bpe, const char *text, size_t len, size_t from)
{
    return bpe >= 0 ? gk_bpe_split_point(text, len, from, bpe) : char_split_point(text, len, from);
}

/* The last cut in text[0, len), or len if there is none. */
static size_t last_cut(int bpe, const char *text, size_t len)
{
    size_t last = len;
    for (size_t p = split_at(bpe, text, len, 1); p < len; p = split_at(bpe, text, len, p + 1))
        last = p;
    return last;
}

/* The document of block b that holds byte p: [*ds, *de) (the text before the first start is
 * one, and the last one runs to the block's end). */
static void doc_around(const block *b, size_t p, size_t *ds, size_t *de)
{
    size_t lo = 0, hi = b->nstarts; /* first start > p */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->starts[mid] <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    *ds = lo ? b->starts[lo - 1] : 0;
    *de = lo < b->nstarts ? b->starts[lo] : b->len;
}

/* The first cut at or after p (p < len): the end of p's document, or a safe point inside it
 * before that; b->len when there is none (the last document, still open unless final). */
static size_t cut_after(int bpe, const block *b, size_t p, int final)
{
    size_t ds, de;
    doc_around(b, p, &ds, &de);
    size_t cut = ds + split_at(bpe, b->text + ds, de - ds, p - ds);
    return cut < de ? cut : de == b->len && !final ? b->len : de;
}

/* The last cut in block b (not final): a safe point of its last document, else where that
 * document starts; b->len if neither is past 0. */
static size_t last_cut_block(int bpe, const block *b)
{
    size_t ds = b->nstarts ? b->starts[b->nstarts - 1] : 0;
    size_t cut = ds + last_cut(bpe, b->text + ds, b->len - ds);
    return cut < b->len ? cut : ds > 0 ? ds : b->len;
}

size_t tk_plan_chunks(block *b, int bpe, size_t max_chunks, int final, size_t *consumed)
{
    size_t k = 0, begin = 0, limit = b->len, si = 0;
    size_t target = limit / max_chunks;
    if (target < CHUNK_BYTES)
        target = CHUNK_BYTES;
    while (k < max_chunks && (begin < limit || (final && si < b->nstarts))) {
        size_t cut = limit;
        if (k + 1 < max_chunks || !final)
            cut = begin + target < limit ? cut_after(bpe, b, begin + target, final) : limit;
        if (cut >= limit && !final && k == 0)
            cut = last_cut_block(bpe, b); /* a stretch without a cut follows */
        if (cut >= limit && !final)
            break; /* the tail may continue in text not yet read */
        chunk *c = &b->chunks[k++];
        c->text = b->text;
        c->begin = begin;
        c->end = cut < limit ? cut : limit;
        c->starts = b->starts + si;
        while (si < b->nstarts && (b->starts[si] < c->end || (final && c->end == limit)))
            si++;
        c->nstarts = (size_t)(b->starts + si - c->starts);
        c->done = 0;
        begin = c->end;
    }
    *consumed = begin;
    return k;
}
