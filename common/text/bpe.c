/* bpe.c: byte-level BPE encoding (see bpe.h): pieces from pretok.c in the vocab's pattern,
 * merges with the vocab's pair table, tiktoken's rule (lowest merged id first, leftmost on
 * ties). */
#include "common/text/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/text/pretok.h"
#include "common/text/utf8.h"
#include "common/text/vocab_int.h"

#define CACHE_SLOTS (1u << 14)  /* 64-byte slots: 1 MB */
#define CACHE_BYTES 26          /* longest piece cached */
#define CACHE_IDS 8             /* most ids a cached piece may have */
#define HEAP_MIN 64             /* default: pieces this long use the heap merge */
#define LONG_WIN GK_BPE_LONG_WIN /* pieces longer than this are merged window by window */
#define LONG_KEEP (LONG_WIN / 4) /* no token within this of a window's end is committed */
#define LOOKAHEAD 16            /* bytes past a piece the regex may look at (one character) */

typedef struct cslot {
    uint32_t tag;               /* high hash bits; 0 with len 0: empty */
    uint8_t len, nids;
    char bytes[CACHE_BYTES];
    uint32_t ids[CACHE_IDS];
} cslot;

/* A heap entry: rank << 32 | left node (lowest rank first, then leftmost): the left node and
 * its right neighbour at the pop merge into token rank, if they still do. */
typedef uint64_t hent;

struct gk_bpe {
    const gk_vocab *v;
    gk_pretok *pt;
    cslot *cache;               /* direct-mapped: a new piece replaces the slot's old one */
    size_t heap_min;
    size_t scap;                /* node capacity of the scratch below */
    uint32_t *tid, *next, *prev;
    hent *heap;
    size_t win_max;             /* window of long pieces (LONG_WIN; smaller in tests) */
    uint32_t *wids;             /* long pieces: a window's ids (win_max) */
    unsigned char *mark;        /* long pieces: boundaries each run agrees on (win_max + 1) */
    int cont;                   /* gk_bpe_encode_part stopped inside a long piece */
};

int gk_bpe_create(gk_bpe **out, const gk_vocab *v, gk_err *e)
{
    *out = NULL;
    if (gk_vocab_type(v) != GK_VOCAB_BPE)
        return gk_errf(e, GK_EUSAGE, "BPE encoder: not a BPE vocab");
    gk_bpe *b = calloc(1, sizeof *b);
    if (!b || !(b->cache = calloc(CACHE_SLOTS, sizeof *b->cache))) {
        gk_bpe_free(b);
        return gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
    }
    b->v = v;
    b->heap_min = HEAP_MIN;
    b->win_max = LONG_WIN;
    int rc = gk_pretok_create(&b->pt, v->pattern, e);
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
    free(b->wids);
    free(b->mark);
    free(b);
}

void gk_bpe_set_heap_min(gk_bpe *b, size_t bytes)
{
    b->heap_min = bytes < 2 ? 2 : bytes > HEAP_MIN ? HEAP_MIN : bytes;
}

void gk_bpe_set_window(gk_bpe *b, size_t bytes)
{
    b->win_max = bytes < 1024 ? 1024 : bytes > LONG_WIN ? LONG_WIN : bytes;
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

/* The heap is 4-ary: half the depth of a binary one, and a node's children share a cache line. */
static void hpush(hent *h, size_t *hn, hent x)
{
    size_t i = (*hn)++;
    while (i && x < h[(i - 1) / 4]) {
        h[i] = h[(i - 1) / 4];
        i = (i - 1) / 4;
    }
    h[i] = x;
}

static void sift_down(hent *h, size_t n, size_t i)
{
    hent x = h[i];
    for (;;) {
        size_t c = 4 * i + 1, end = c + 4 < n ? c + 4 : n;
        if (c >= n) break;
        for (size_t k = c + 1; k < end; k++)
            if (h[k] < h[c]) c = k;
        if (h[c] >= x) break;
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
    size_t c;
    if (gk_grow_cap(b->scap, n, 3 * sizeof(hent), 256, &c)) return GK_ENOMEM;
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
    if (rank != GK_NONE) hpush(b->heap, hn, (hent)rank << 32 | l);
}

/* Heap + linked list for long pieces: O(n log n). Node k starts at byte k; a merge keeps the
 * left node. Stale heap entries are skipped: the left node is gone, or it and its right
 * neighbour no longer merge to the entry's token (an entry that still does is the same merge at
 * the same place in the order as the entry pushed for it, which is then stale). Returns the id
 * count, (size_t)-1 if out of memory. */
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
        if (rank != GK_NONE) b->heap[hn++] = (hent)rank << 32 | k;
    } /* sorted by left already: a valid heap when all ranks are equal; else heapify */
    for (size_t k = (hn + 2) / 4; k-- > 0;) sift_down(b->heap, hn, k);
    while (hn) {
        hent t = hpop(b->heap, &hn);
        uint32_t l = (uint32_t)t, r = b->next[l], rank = (uint32_t)(t >> 32);
        if (b->tid[l] == GK_NONE || r == GK_NONE || gk_vocab_pair(v, b->tid[l], b->tid[r]) != rank)
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

/* ---------------------------------------------------------------- long pieces */

/* A piece of hundreds of MB (one letter repeated, a run of digits or spaces) is merged in
 * windows of win_max bytes, so that its cost is bounded. Where the merge of the whole piece has
 * a token boundary at q, it is the merge of [0, q) followed by the merge of [q, n): no merge
 * crosses q, and the merges on either side happen in the same order without the other side.
 * A window commits the tokens before the last boundary q that three merges of its start agree
 * on, ending at its end, one byte and 131 bytes (longer than any token) before it, with q at
 * least win_max / 4 before the end: the end of the text then no longer moves q in practice
 * (checked against tiktoken on 1-5 MB pieces of every kind; tests/ref/long_pieces.py). */

static int long_scratch(gk_bpe *b)
{
    if (b->wids) return 0;
    b->wids = malloc(LONG_WIN * sizeof *b->wids);
    b->mark = malloc(LONG_WIN + 1);
    return b->wids && b->mark ? 0 : GK_ENOMEM;
}

/* Merges p[0..w) into ids and counts in mark[] each boundary that every run so far had (run r
 * of 0..2); returns the id count or (size_t)-1. */
static size_t mark_run(gk_bpe *b, const unsigned char *p, size_t w, int r, uint32_t *ids)
{
    size_t m = merge_heap(b, p, w, ids), at = 0;
    for (size_t k = 0; k < m && m != (size_t)-1; k++) {
        at += b->v->off[ids[k] + 1] - b->v->off[ids[k]];
        if (b->mark[at] == r) b->mark[at] = (unsigned char)(r + 1);
    }
    return m;
}

/* Commits the tokens of the window p[0..w) up to the boundary its runs agree on (not before an
 * apostrophe: a restart there could read a contraction); returns its offset, or (size_t)-1
 * when out of memory. The ids go to out (room for w), their count to *m. */
static size_t window_commit(gk_bpe *b, const unsigned char *p, size_t w, uint32_t *out, size_t *m)
{
    size_t q = 0, keep = b->win_max / 4, k, at = 0;
    if (long_scratch(b)) return (size_t)-1;
    memset(b->mark, 0, w + 1);
    if (mark_run(b, p, w, 0, b->wids) == (size_t)-1 ||
        mark_run(b, p, w - 1, 1, b->wids) == (size_t)-1 ||
        (k = mark_run(b, p, w - 131, 2, out)) == (size_t)-1)
        return (size_t)-1;
    for (size_t x = w - keep; x > 0 && !q; x--)
        if (b->mark[x] == 3 && p[x] != '\'') q = x;
    if (!q) /* no agreement (never seen): the last run's boundary nearest the middle */
        for (size_t x = w / 2; x > 0 && !q; x--)
            if (b->mark[x] >= 1 && x <= w - 131) q = x;
    *m = 0; /* the last run's tokens before q are the merge of p[0..q) */
    while (at < q) {
        at += b->v->off[out[*m] + 1] - b->v->off[out[*m]];
        ++*m;
    }
    return at;
}

/* Merges the piece p[0..n) window by window into out (room for n ids); whole: the piece ends
 * at n, else more of it follows and at most win_max bytes are left. *done: bytes encoded.
 * Returns the id count or (size_t)-1. */
static size_t merge_long(gk_bpe *b, const unsigned char *p, size_t n, int whole, uint32_t *out,
                         size_t *done)
{
    size_t c = 0, m = 0, k;
    while (n - c > b->win_max) {
        size_t q = window_commit(b, p + c, b->win_max, out + m, &k);
        if (q == (size_t)-1) return q;
        c += q;
        m += k;
    }
    if (whole && c < n) {
        if ((k = merge_heap(b, p + c, n - c, out + m)) == (size_t)-1) return k;
        m += k;
        c = n;
    }
    *done = c;
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
    if (n > b->win_max) {
        size_t done;
        return merge_long(b, p, n, 1, out, &done);
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

/* Start of the White_Space run that ends s[0..len) (valid UTF-8), or len. */
static size_t trailing_space(const char *s, size_t len)
{
    size_t w = len;
    while (w > 0) {
        size_t k = w - 1;
        while (k > 0 && w - k < 4 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        uint32_t cp;
        if (gk_utf8_next((const unsigned char *)s + k, w - k, &cp) != w - k ||
            !gk_pretok_space(cp))
            break;
        w = k;
    }
    return w;
}

/* Encodes the pieces of s[0..len); when !final more text follows, so only the pieces that it
 * cannot change are encoded (those ending LOOKAHEAD bytes before len, and with GPT-4's pattern
 * starting before the White_Space that ends s: "\s*[\r\n]" reads a whitespace run to its last
 * newline; of a longer one that may go on, all but its last window); *used: the bytes encoded. */
static int encode_run(gk_bpe *b, const char *s, size_t len, int final, uint32_t **ids, size_t *n,
                      size_t *cap, size_t *used, gk_err *e)
{
    size_t i = 0, w = final || b->v->pattern != GK_PATTERN_GPT4 ? len : trailing_space(s, len);
    int cont = b->cont; /* s starts inside a piece: its rest is merged, not looked up whole */
    b->cont = 0;
    while (i < len) {
        size_t j = gk_pretok_next(b->pt, s, len, i, e), done = j - i;
        if (!j) return GK_EFORMAT;
        int whole = final || (j + LOOKAHEAD <= len && i < w);
        if (!whole && j - i <= b->win_max) {
            b->cont = cont;
            break;
        }
        if (*n + (j - i) > *cap && gk_ids_reserve(ids, cap, *n + (j - i)))
            return gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
        const unsigned char *u = (const unsigned char *)s + i;
        size_t m = whole && !cont ? encode_piece(b, u, j - i, *ids + *n)
                                  : merge_long(b, u, j - i, whole, *ids + *n, &done);
        if (m == (size_t)-1) return gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
        *n += m;
        i += done;
        if (!whole) {
            b->cont = cont || done > 0;
            break;
        }
        cont = 0;
    }
    *used = i;
    return 0;
}

int gk_bpe_encode_part(gk_bpe *b, const char *text, size_t len, int final, int allow_special,
                       uint32_t **ids, size_t *n, size_t *cap, size_t *used, gk_err *e)
{
    static const char eot[] = GK_EOT_TEXT;
    const size_t el = sizeof eot - 1;
    size_t base = 0, u;
    if (allow_special && b->v->eot >= 0) {
        const char *hit;
        while ((hit = memmem(text + base, len - base, eot, el))) {
            size_t seg = (size_t)(hit - text) - base;
            int rc = encode_run(b, text + base, seg, 1, ids, n, cap, &u, e);
            if (!rc && gk_ids_reserve(ids, cap, *n + 1))
                rc = gk_errf(e, GK_ENOMEM, "BPE encoder: out of memory");
            if (rc) return rc;
            (*ids)[(*n)++] = (uint32_t)b->v->eot;
            base += seg + el;
        }
        if (!final) { /* an "<|endoftext|>" may begin in the last el - 1 bytes */
            size_t end = len - base < el ? base : len - (el - 1);
            while (end > base && ((unsigned char)text[end] & 0xC0) == 0x80) end--;
            len = end;
        }
    }
    int rc = encode_run(b, text + base, len - base, final, ids, n, cap, &u, e);
    *used = base + u;
    return rc;
}

int gk_bpe_encode(gk_bpe *b, const char *text, size_t len, int allow_special, uint32_t **ids,
                  size_t *n, size_t *cap, gk_err *e)
{
    size_t used;
    b->cont = 0;
    return gk_bpe_encode_part(b, text, len, 1, allow_special, ids, n, cap, &used, e);
}

static int graph(unsigned char c) { return c >= 0x21 && c <= 0x7E; }

/* ASCII classes for cutting: 1 letter, 2 digit, 3 White_Space, 4 other, 0 non-ASCII. */
static unsigned char cut_class(unsigned char c)
{
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return 1;
    if (c >= '0' && c <= '9') return 2;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 3;
    return c < 0x80 ? 4 : 0;
}

/* Whether p lies inside a literal "<|endoftext|>" (which --allow-special reads as one token). */
static int in_eot(const char *text, size_t len, size_t p)
{
    static const char eot[] = GK_EOT_TEXT;
    const size_t el = sizeof eot - 1;
    size_t a = p >= el ? p - el + 1 : 0, z = p + el - 1 < len ? p + el - 1 : len;
    return memmem(text + a, z - a, eot, el) != NULL;
}

static int cut_ok(const unsigned char *u, size_t len, size_t p, int pattern)
{
    unsigned char a = cut_class(u[p - 1]), c = cut_class(u[p]);
    if (a == 3) /* the newline rule */
        return u[p - 1] == '\n' && p >= 2 && graph(u[p - 2]) && graph(u[p]);
    if (!a || !c || a == c || u[p - 1] == '\'' || in_eot((const char *)u, len, p)) return 0;
    /* GPT-4's: an other character starts a letter run ("[^\r\n\p{L}\p{N}]?+\p{L}+") and
     * newlines join the others before them ("[^\s\p{L}\p{N}]++[\r\n]*") */
    return pattern != GK_PATTERN_GPT4 || a != 4 || (c != 1 && u[p] != '\n' && u[p] != '\r');
}

size_t gk_bpe_split_point(const char *text, size_t len, size_t from, int pattern)
{
    const unsigned char *u = (const unsigned char *)text;
    for (size_t p = from < 1 ? 1 : from; p < len; p++)
        if (cut_ok(u, len, p, pattern)) return p;
    return len;
}
