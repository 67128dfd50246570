/* bpe.c: GPT-2 BPE encoding (see bpe.h): pieces from pretok.c, merges with the vocab's
 * pair table, tiktoken's rule (lowest merged id first, leftmost on ties). */
#include "common/text/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "common/text/pretok.h"
#include "common/text/vocab_int.h"

#define CACHE_SLOTS (1u << 14)  /* 64-byte slots: 1 MB */
#define CACHE_BYTES 26          /* longest piece cached */
#define CACHE_IDS 8             /* most ids a cached piece may have */
#define HEAP_MIN 64             /* default: pieces this long use the heap merge */

typedef struct cslot {
    uint32_t tag;               /* high hash bits; 0 with len 0: empty */
    uint8_t len, nids;
    char bytes[CACHE_BYTES];
    uint32_t ids[CACHE_IDS];
} cslot;

typedef struct hent {
    uint64_t key;               /* rank << 32 | left node: lowest rank first, then leftmost */
    uint32_t right;             /* merge left with right into token rank */
} hent;

struct gk_bpe {
    const gk_vocab *v;
    gk_pretok *pt;
    cslot *cache;               /* direct-mapped: a new piece replaces the slot's old one */
    size_t heap_min;
    size_t scap;                /* node capacity of the scratch below */
    uint32_t *tid, *next, *prev;
    hent *heap;
};

int gk_bpe_create(gk_bpe **out, const gk_vocab *v, gk_err *e)
{
    *out = NULL;
    if (gk_vocab_type(v) != GK_VOCAB_BPE) return gk_errf(e, GK_EUSAGE, "BPE encoder: not a BPE vocab");
    gk_bpe *b = calloc(1, sizeof *b);
    if (!b || !(b->cache = calloc(CACHE_SLOTS, sizeof *b->cache))) {
        gk_bpe_free(b);
        return gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
    }
    b->v = v;
    b->heap_min = HEAP_MIN;
    int rc = gk_pretok_create(&b->pt, e);
    if (rc) {
        gk_bpe_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

void gk_bpe_free(gk_bpe *b)
{
    if (!b) return;
    gk_pretok_free(b->pt);
    free(b->cache);
    free(b->tid);
    free(b->next);
    free(b->prev);
    free(b->heap);
    free(b);
}

void gk_bpe_set_heap_min(gk_bpe *b, size_t bytes)
{
    b->heap_min = bytes < 2 ? 2 : bytes > HEAP_MIN ? HEAP_MIN : bytes;
}

/* ---------------------------------------------------------------- merging one piece */

/* Quadratic scan for short pieces: ids in out, returns their count. */
static size_t merge_scan(const gk_vocab *v, const unsigned char *p, size_t n, uint32_t *ids)
{
    uint32_t rk[HEAP_MIN];
    size_t m = n;
    for (size_t k = 0; k < n; k++) ids[k] = v->byte_id[p[k]];
    for (size_t k = 0; k + 1 < n; k++) rk[k] = v->byte_pair[p[k] << 8 | p[k + 1]];
    for (;;) {
        uint32_t best = GK_NONE;
        size_t bi = 0;
        for (size_t k = 0; k + 1 < m; k++)
            if (rk[k] < best) best = rk[k], bi = k;
        if (best == GK_NONE) break;
        ids[bi] = best;
        memmove(ids + bi + 1, ids + bi + 2, (m - bi - 2) * sizeof *ids);
        if (m >= bi + 3) memmove(rk + bi + 1, rk + bi + 2, (m - bi - 3) * sizeof *rk);
        m--;
        rk[bi] = bi + 1 < m ? gk_vocab_pair(v, ids[bi], ids[bi + 1]) : GK_NONE;
        if (bi) rk[bi - 1] = gk_vocab_pair(v, ids[bi - 1], ids[bi]);
    }
    return m;
}

static inline int hless(const hent *a, const hent *b) { return a->key < b->key; }

static void hpush(hent *h, size_t *hn, hent x)
{
    size_t i = (*hn)++;
    while (i && hless(&x, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static void sift_down(hent *h, size_t n, size_t i)
{
    hent x = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && hless(&h[c + 1], &h[c])) c++;
        if (!hless(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static hent hpop(hent *h, size_t *hn)
{
    hent top = h[0];
    h[0] = h[--*hn];
    if (*hn) sift_down(h, *hn, 0);
    return top;
}

static int reserve_scratch(gk_bpe *b, size_t n)
{
    if (n <= b->scap) return 0;
    size_t c = b->scap ? b->scap : 256;
    while (c < n) c *= 2;
    uint32_t *t = realloc(b->tid, c * sizeof *t);
    if (t) b->tid = t;
    uint32_t *nx = realloc(b->next, c * sizeof *nx);
    if (nx) b->next = nx;
    uint32_t *pv = realloc(b->prev, c * sizeof *pv);
    if (pv) b->prev = pv;
    hent *h = realloc(b->heap, 3 * c * sizeof *h);
    if (h) b->heap = h;
    if (!t || !nx || !pv || !h) return GK_ENOMEM;
    b->scap = c;
    return 0;
}

static void push_pair(const gk_vocab *v, gk_bpe *b, size_t *hn, uint32_t l, uint32_t r)
{
    uint32_t rank = gk_vocab_pair(v, b->tid[l], b->tid[r]);
    if (rank != GK_NONE) hpush(b->heap, hn, (hent){(uint64_t)rank << 32 | l, r});
}

/* Heap + linked list for long pieces: O(n log n). Node k starts at byte k; a merge keeps the
 * left node. Stale heap entries are skipped: their pair is no longer adjacent or no longer
 * merges to the same token. Returns the id count, (size_t)-1 if out of memory. */
static size_t merge_heap(gk_bpe *b, const unsigned char *p, size_t n, uint32_t *ids)
{
    const gk_vocab *v = b->v;
    if (reserve_scratch(b, n)) return (size_t)-1;
    size_t hn = 0, m = 0;
    for (size_t k = 0; k < n; k++) {
        b->tid[k] = v->byte_id[p[k]];
        b->prev[k] = k ? (uint32_t)k - 1 : GK_NONE;
        b->next[k] = k + 1 < n ? (uint32_t)k + 1 : GK_NONE;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        uint32_t rank = v->byte_pair[p[k] << 8 | p[k + 1]];
        if (rank != GK_NONE) b->heap[hn++] = (hent){(uint64_t)rank << 32 | k, (uint32_t)k + 1};
    } /* sorted by left already: a valid heap when all ranks are equal; else heapify */
    for (size_t k = hn / 2; k-- > 0;) sift_down(b->heap, hn, k);
    while (hn) {
        hent t = hpop(b->heap, &hn);
        uint32_t l = (uint32_t)t.key, r = t.right, rank = (uint32_t)(t.key >> 32);
        if (b->tid[l] == GK_NONE || b->next[l] != r || gk_vocab_pair(v, b->tid[l], b->tid[r]) != rank)
            continue;
        uint32_t after = b->next[r];
        b->tid[l] = rank;
        b->tid[r] = GK_NONE;
        b->next[l] = after;
        if (after != GK_NONE) b->prev[after] = l;
        if (b->prev[l] != GK_NONE) push_pair(v, b, &hn, b->prev[l], l);
        if (after != GK_NONE) push_pair(v, b, &hn, l, after);
    }
    for (uint32_t k = 0; k != GK_NONE; k = b->next[k]) ids[m++] = b->tid[k];
    return m;
}

/* Encodes one piece into out (room for n ids); returns the count or (size_t)-1. */
static size_t encode_piece(gk_bpe *b, const unsigned char *p, size_t n, uint32_t *out)
{
    const gk_vocab *v = b->v;
    if (n == 1) {
        out[0] = v->byte_id[p[0]];
        return 1;
    }
    cslot *s = NULL;
    uint32_t tag = 0;
    uint64_t h = 0;
    if (n <= CACHE_BYTES) {
        h = gk_hash_bytes(p, n);
        s = &b->cache[h & (CACHE_SLOTS - 1)];
        tag = (uint32_t)(h >> 32);
        if (s->tag == tag && s->len == n && !memcmp(s->bytes, p, n)) {
            memcpy(out, s->ids, s->nids * sizeof *out);
            return s->nids;
        }
    }
    size_t m;
    uint32_t whole = s ? gk_vocab_lookup_h(v, p, n, h) : gk_vocab_lookup(v, p, n);
    /* tiktoken: a piece that is a token is one id */
    if (whole != GK_NONE) out[0] = whole, m = 1;
    else if (n < b->heap_min) m = merge_scan(v, p, n, out);
    else if ((m = merge_heap(b, p, n, out)) == (size_t)-1) return m;
    if (s && m <= CACHE_IDS) {
        s->tag = tag;
        s->len = (uint8_t)n;
        s->nids = (uint8_t)m;
        memcpy(s->bytes, p, n);
        memcpy(s->ids, out, m * sizeof *out);
    }
    return m;
}

/* ---------------------------------------------------------------- whole texts */

static int encode_ordinary(gk_bpe *b, const char *s, size_t len, uint32_t **ids, size_t *n,
                           size_t *cap, gk_err *e)
{
    for (size_t i = 0; i < len;) {
        size_t j = gk_pretok_next(b->pt, s, len, i, e);
        if (!j) return GK_EFORMAT;
        if (*n + (j - i) > *cap && gk_ids_reserve(ids, cap, *n + (j - i)))
            return gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
        size_t m = encode_piece(b, (const unsigned char *)s + i, j - i, *ids + *n);
        if (m == (size_t)-1) return gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
        *n += m;
        i = j;
    }
    return 0;
}

int gk_bpe_encode(gk_bpe *b, const char *text, size_t len, int allow_special, uint32_t **ids,
                  size_t *n, size_t *cap, gk_err *e)
{
    static const char eot[] = GK_EOT_TEXT;
    const size_t el = sizeof eot - 1;
    if (!allow_special || b->v->eot < 0) return encode_ordinary(b, text, len, ids, n, cap, e);
    for (;;) {
        const char *hit = memmem(text, len, eot, el);
        size_t seg = hit ? (size_t)(hit - text) : len;
        int rc = encode_ordinary(b, text, seg, ids, n, cap, e);
        if (rc || !hit) return rc;
        if (gk_ids_reserve(ids, cap, *n + 1)) return gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
        (*ids)[(*n)++] = (uint32_t)b->v->eot;
        text += seg + el;
        len -= seg + el;
    }
}

static int graph(unsigned char c) { return c >= 0x21 && c <= 0x7E; }

size_t gk_bpe_split_point(const char *text, size_t len, size_t from)
{
    const unsigned char *u = (const unsigned char *)text;
    size_t p = from < 2 ? 2 : from;
    while (p < len) {
        const unsigned char *nl = memchr(u + p - 1, '\n', len - p);
        if (!nl) break;
        p = (size_t)(nl - u) + 1;
        if (graph(u[p - 2]) && graph(u[p])) return p;
        p++;
    }
    return len;
}
