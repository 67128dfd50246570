/* bpe_learn.c: the pre-token counter and the merge loop of bpe_learn.h. The counter is an
 * open-addressing table over an arena of the pre-tokens' bytes. The learner turns each counted
 * pre-token into a word of token ids (kept in one array, shrunk in place as merges apply), keeps
 * every adjacent pair's count and the words it occurs in (a word may stay listed after the pair
 * left it: merging there finds nothing), and pops the next merge from a max-heap of (count,
 * pair) entries refreshed lazily: an entry whose count is no longer the pair's goes back with
 * the pair's count (counts only fall, but for pairs a merge makes, which get entries of their
 * own), so the entry popped with its pair's count is the most frequent pair. */
#include "common/text/bpe_learn.h"

#include <stdlib.h>
#include <string.h>

#include "common/text/vocab_int.h"

/* ---------------------------------------------------------------- the counter */

typedef struct centry {
    uint64_t h, count; /* count 0: empty */
    size_t off;
    size_t len;
} centry;

struct gk_bpe_counter {
    centry *tab;
    size_t mask, used;
    unsigned char *arena;
    size_t alen, acap, max_bytes;
    uint64_t pruned_distinct, pruned_occ;
};

static size_t counter_bytes(const gk_bpe_counter *c)
{
    return (c->mask + 1) * sizeof(centry) + c->acap;
}

void gk_bpe_counter_free(gk_bpe_counter *c)
{
    if (!c) return;
    free(c->tab);
    free(c->arena);
    free(c);
}

int gk_bpe_counter_new(gk_bpe_counter **out, size_t max_bytes, gk_err *e)
{
    gk_bpe_counter *c = calloc(1, sizeof *c);
    *out = NULL;
    if (c) {
        c->mask = 1023;
        c->tab = calloc(c->mask + 1, sizeof *c->tab);
        c->acap = 1 << 16;
        c->arena = malloc(c->acap);
        c->max_bytes = max_bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : max_bytes;
    }
    if (!c || !c->tab || !c->arena) {
        gk_bpe_counter_free(c);
        return gk_errf(e, GK_ENOMEM, "pre-token counts: out of memory");
    }
    *out = c;
    return 0;
}

void gk_bpe_counter_set_max(gk_bpe_counter *c, size_t max_bytes)
{
    c->max_bytes = max_bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : max_bytes;
}

/* The slot of piece (hash h): its entry, or the empty slot where it would go. */
static centry *slot(const gk_bpe_counter *c, uint64_t h, const void *p, size_t n)
{
    for (size_t i = (size_t)h & c->mask;; i = (i + 1) & c->mask) {
        centry *s = &c->tab[i];
        if (!s->count || (s->h == h && s->len == n && !memcmp(c->arena + s->off, p, n))) return s;
    }
}

/* Rebuilds the table at cap slots from the entries of old (n slots) whose count exceeds floor,
 * their bytes moved into a fresh arena. 0 or GK_ENOMEM (c unchanged). */
static int rebuild(gk_bpe_counter *c, size_t cap, uint64_t floor)
{
    centry *old = c->tab, *tab = calloc(cap, sizeof *tab);
    size_t n = c->mask + 1, need = 0;
    for (size_t i = 0; i < n; i++) need += old[i].count > floor ? old[i].len : 0;
    size_t acap = need < ((size_t)1 << 16) ? (size_t)1 << 16 : need * 2;
    unsigned char *arena = floor ? malloc(acap) : c->arena;
    if (!tab || !arena) {
        free(tab);
        if (floor) free(arena);
        return GK_ENOMEM;
    }
    size_t alen = 0, used = 0;
    unsigned char *from = c->arena;
    c->tab = tab, c->mask = cap - 1, c->arena = arena; /* (slot compares in the new arena) */
    for (size_t i = 0; i < n; i++) {
        centry s = old[i];
        if (!s.count) continue;
        if (s.count <= floor) {
            c->pruned_distinct++, c->pruned_occ += s.count;
            continue;
        }
        if (floor) memcpy(arena + alen, from + s.off, s.len), s.off = alen, alen += s.len;
        *slot(c, s.h, arena + s.off, s.len) = s;
        used++;
    }
    free(old);
    if (floor) free(from), c->alen = alen, c->acap = acap;
    c->used = used;
    return 0;
}

/* Drops the pre-tokens of the lowest counts until the counter holds half its bound. */
static int prune(gk_bpe_counter *c)
{
    for (uint64_t floor = 1; counter_bytes(c) > c->max_bytes / 2 && c->used; floor *= 2) {
        size_t cap = c->mask + 1;
        while (cap > 1024 && c->used * 8 < cap) cap /= 2;
        if (rebuild(c, cap, floor)) return GK_ENOMEM;
    }
    return 0;
}

int gk_bpe_counter_add(gk_bpe_counter *c, const void *piece, size_t n, uint64_t count, gk_err *e)
{
    uint64_t h = gk_hash_bytes(piece, n);
    centry *s = slot(c, h, piece, n);
    if (s->count) {
        s->count += count;
        return 0;
    }
    if (c->alen + n > c->acap) {
        size_t cap = c->acap * 2 > c->alen + n ? c->acap * 2 : (c->alen + n) * 2;
        unsigned char *a = realloc(c->arena, cap);
        if (!a) return gk_errf(e, GK_ENOMEM, "pre-token counts: out of memory");
        c->arena = a, c->acap = cap;
    }
    memcpy(c->arena + c->alen, piece, n);
    *s = (centry){h, count, c->alen, n};
    c->alen += n;
    int rc = ++c->used * 2 > c->mask + 1 ? rebuild(c, (c->mask + 1) * 2, 0) : 0;
    if (!rc && counter_bytes(c) > c->max_bytes) rc = prune(c);
    return rc ? gk_errf(e, GK_ENOMEM, "pre-token counts: out of memory") : 0;
}

int gk_bpe_counter_absorb(gk_bpe_counter *dst, const gk_bpe_counter *src, gk_err *e)
{
    int rc = 0;
    for (size_t i = 0; i <= src->mask && !rc; i++)
        if (src->tab[i].count)
            rc = gk_bpe_counter_add(dst, src->arena + src->tab[i].off, src->tab[i].len,
                                    src->tab[i].count, e);
    dst->pruned_distinct += src->pruned_distinct, dst->pruned_occ += src->pruned_occ;
    return rc;
}

size_t gk_bpe_counter_distinct(const gk_bpe_counter *c) { return c->used; }

int gk_bpe_counter_each(const gk_bpe_counter *c,
                        int (*fn)(void *ctx, const unsigned char *piece, size_t n, uint64_t count),
                        void *ctx)
{
    int rc = 0;
    for (size_t i = 0; i <= c->mask && !rc; i++)
        if (c->tab[i].count) rc = fn(ctx, c->arena + c->tab[i].off, c->tab[i].len, c->tab[i].count);
    return rc;
}

void gk_bpe_counter_pruned(const gk_bpe_counter *c, uint64_t *distinct, uint64_t *occurrences)
{
    *distinct = c->pruned_distinct, *occurrences = c->pruned_occ;
}
