/* bpe_learn_merge.c: gk_bpe_learn (bpe_learn.h): the merge loop over the counted pre-tokens.
 * Words: each pre-token as token ids in sym[] (its bytes at first), with its count. Pairs: an
 * open-addressing map from (left, right) to the pair's count and the words it was seen in. Heap:
 * (count, pair) entries, refreshed lazily (bpe_learn.c's comment). Made tokens: their bytes, and
 * a map from bytes to id to find a merge whose bytes are a token already. */
#include "common/text/bpe_learn.h"

#include <stdlib.h>
#include <string.h>

#include "common/text/vocab_int.h"

typedef struct word {
    size_t at;      /* its first id in sym */
    uint32_t len;
    uint64_t count;
} word;

typedef struct pinfo {
    uint64_t key;   /* left << 32 | right */
    int64_t count;
    uint32_t *words, nw, cap;
    size_t pushed;  /* the merge after which it last went on the heap (+1; 0: not yet) */
} pinfo;

typedef struct hentry {
    int64_t count;
    uint64_t key;
} hentry;

typedef struct learner {
    word *words;
    size_t nwords;
    uint32_t *sym;
    pinfo *pairs;           /* every pair seen; index 0 unused */
    size_t npairs, pcap;
    uint32_t *pmap;         /* key -> index into pairs (0: empty) */
    size_t pmask;
    hentry *heap;
    size_t nheap, hcap;
    uint32_t *rose;         /* pairs whose count rose in this merge (indices) */
    size_t nrose, rcap;
    uint32_t *tmap;         /* made tokens: bytes -> id (GK_NONE: empty) */
    size_t tmask;
    int oom, track;         /* track: note the pairs that rise (not while counting the first) */
} learner;

/* ---- pairs ---- */

static size_t key_hash(uint64_t k) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 17); }

static int pmap_grow(learner *L)
{
    size_t cap = (L->pmask + 1) * 2;
    uint32_t *m = calloc(cap, sizeof *m);
    if (!m) return L->oom = 1;
    for (size_t i = 1; i < L->npairs; i++) {
        size_t j = key_hash(L->pairs[i].key) & (cap - 1);
        while (m[j]) j = (j + 1) & (cap - 1);
        m[j] = (uint32_t)i;
    }
    free(L->pmap);
    L->pmap = m, L->pmask = cap - 1;
    return 0;
}

/* The pair (l, r)'s entry, made (count 0) when new; NULL when out of memory. */
static pinfo *pair_get(learner *L, uint32_t l, uint32_t r)
{
    uint64_t key = (uint64_t)l << 32 | r;
    size_t j = key_hash(key) & L->pmask;
    for (; L->pmap[j]; j = (j + 1) & L->pmask)
        if (L->pairs[L->pmap[j]].key == key) return &L->pairs[L->pmap[j]];
    if (L->npairs == L->pcap) {
        pinfo *p = realloc(L->pairs, sizeof *p * L->pcap * 2);
        if (!p) return L->oom = 1, NULL;
        L->pairs = p, L->pcap *= 2;
    }
    L->pairs[L->npairs] = (pinfo){key, 0, NULL, 0, 0, 0};
    L->pmap[j] = (uint32_t)L->npairs++;
    if (L->npairs * 2 > L->pmask + 1 && pmap_grow(L)) return NULL;
    return &L->pairs[L->npairs - 1];
}

/* count more of (l, r) in word w (listed there when it rises); a rise is noted for the heap. */
static void pair_add(learner *L, uint32_t l, uint32_t r, int64_t count, uint32_t w)
{
    pinfo *p = pair_get(L, l, r);
    if (!p) return;
    p->count += count;
    if (count <= 0) return;
    if (!p->nw || p->words[p->nw - 1] != w) {
        if (p->nw == p->cap) {
            uint32_t cap = p->cap ? p->cap * 2 : 4, *ws = realloc(p->words, sizeof *ws * cap);
            if (!ws) return (void)(L->oom = 1);
            p->words = ws, p->cap = cap;
        }
        p->words[p->nw++] = w;
    }
    if (!L->track) return;
    if (L->nrose == L->rcap) {
        size_t cap = L->rcap ? L->rcap * 2 : 64;
        uint32_t *r2 = realloc(L->rose, sizeof *r2 * cap);
        if (!r2) return (void)(L->oom = 1);
        L->rose = r2, L->rcap = cap;
    }
    L->rose[L->nrose++] = (uint32_t)(p - L->pairs);
}

/* ---- the heap: the most frequent first, a tie to the lowest (left, right) ---- */

static int above(const hentry *a, const hentry *b)
{
    return a->count > b->count || (a->count == b->count && a->key < b->key);
}

static void heap_push(learner *L, int64_t count, uint64_t key)
{
    if (L->nheap == L->hcap) {
        size_t cap = L->hcap ? L->hcap * 2 : 1024;
        hentry *h = realloc(L->heap, sizeof *h * cap);
        if (!h) return (void)(L->oom = 1);
        L->heap = h, L->hcap = cap;
    }
    size_t i = L->nheap++;
    hentry x = {count, key};
    for (size_t up; i && above(&x, &L->heap[up = (i - 1) / 2]); i = up) L->heap[i] = L->heap[up];
    L->heap[i] = x;
}

static hentry heap_pop(learner *L)
{
    hentry top = L->heap[0], x = L->heap[--L->nheap];
    size_t i = 0, n = L->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && above(&L->heap[c + 1], &L->heap[c])) c++;
        if (!above(&L->heap[c], &x)) break;
        L->heap[i] = L->heap[c], i = c;
    }
    if (n) L->heap[i] = x;
    return top;
}

/* ---- made tokens ---- */

static const unsigned char *tok_bytes(const gk_bpe_learned *o, uint32_t id, size_t *len)
{
    if (id < 256) return *len = 1, &o->byte_of[id];
    *len = o->off[id - 255] - o->off[id - 256];
    return o->bytes + o->off[id - 256];
}

/* The id of the token of these bytes among the made ones, or GK_NONE; *at its slot in tmap. */
static uint32_t tok_find(const learner *L, const gk_bpe_learned *o, const unsigned char *b,
                         size_t n, size_t *at)
{
    size_t j = (size_t)gk_hash_bytes(b, n) & L->tmask, len;
    for (; L->tmap[j] != GK_NONE; j = (j + 1) & L->tmask) {
        const unsigned char *t = tok_bytes(o, L->tmap[j], &len);
        if (len == n && !memcmp(t, b, n)) break;
    }
    *at = j;
    return L->tmap[j];
}

/* The token of a's bytes then b's: a made one's id when those bytes are one already, else a new
 * one (GK_NONE: out of memory). */
static uint32_t make_token(learner *L, gk_bpe_learned *o, uint32_t a, uint32_t b, size_t *scap)
{
    size_t la, lb, at;
    const unsigned char *pa = tok_bytes(o, a, &la), *pb = tok_bytes(o, b, &lb);
    size_t k = o->n_tokens - 256, used = o->off[k];
    if (used + la + lb > *scap) { /* (o->bytes is the scratch: the new token's place) */
        size_t cap = (used + la + lb) * 2;
        unsigned char *nb = realloc(o->bytes, cap);
        if (!nb) return GK_NONE;
        o->bytes = nb, *scap = cap;
        pa = tok_bytes(o, a, &la), pb = tok_bytes(o, b, &lb);
    }
    memmove(o->bytes + used, pa, la);
    memmove(o->bytes + used + la, pb, lb);
    uint32_t id = tok_find(L, o, o->bytes + used, la + lb, &at);
    if (id != GK_NONE) return id;
    o->off[k + 1] = used + la + lb;
    L->tmap[at] = (uint32_t)o->n_tokens;
    return (uint32_t)o->n_tokens++;
}

/* Merges every (a, b) of word w into t, left to right, the pairs around each counted anew. */
static void merge_word(learner *L, uint32_t w, uint32_t a, uint32_t b, uint32_t t)
{
    word *wd = &L->words[w];
    uint32_t *s = L->sym + wd->at, n = wd->len, i = 0, o = 0;
    int64_t c = (int64_t)wd->count;
    while (i < n) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            if (o) pair_add(L, s[o - 1], a, -c, w), pair_add(L, s[o - 1], t, c, w);
            pair_add(L, a, b, -c, w);
            if (i + 2 < n) pair_add(L, b, s[i + 2], -c, w), pair_add(L, t, s[i + 2], c, w);
            s[o++] = t, i += 2;
        } else {
            s[o++] = s[i++];
        }
    }
    wd->len = o;
}

/* The pairs whose counts rose in merge m back on the heap, once each. */
static void push_rose(learner *L, size_t m)
{
    for (size_t i = 0; i < L->nrose; i++) {
        pinfo *p = &L->pairs[L->rose[i]];
        if (p->pushed != m + 1 && p->count > 0) heap_push(L, p->count, p->key), p->pushed = m + 1;
    }
    L->nrose = 0;
}

/* ---- setup: the words, their pairs, the heap ---- */

typedef struct setup {
    learner *L;
    const uint32_t *id_of; /* byte -> id */
    size_t nsym;
} setup;

static int count_word(void *ctx, const unsigned char *piece, size_t n, uint64_t count)
{
    setup *s = ctx;
    (void)piece, (void)count;
    if (n > 1) s->L->nwords++, s->nsym += n;
    return 0;
}

static int add_word(void *ctx, const unsigned char *piece, size_t n, uint64_t count)
{
    setup *s = ctx;
    learner *L = s->L;
    if (n < 2) return 0; /* (no pair) */
    uint32_t w = (uint32_t)L->nwords++, *sym = L->sym + s->nsym;
    L->words[w] = (word){s->nsym, (uint32_t)n, count};
    for (size_t i = 0; i < n; i++) sym[i] = s->id_of[piece[i]];
    for (size_t i = 0; i + 1 < n && !L->oom; i++)
        pair_add(L, sym[i], sym[i + 1], (int64_t)count, w);
    s->nsym += n;
    return L->oom;
}

/* GPT-2's byte alphabet order: the printable bytes, then the others, each ascending. */
static void byte_order(uint32_t id_of[256], unsigned char byte_of[256])
{
    uint32_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++) {
            int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
            if (printable != !pass) continue;
            id_of[b] = k, byte_of[k++] = (unsigned char)b;
        }
}

static int learner_init(learner *L, const gk_bpe_counter *c, gk_bpe_learned *o, size_t n_tokens)
{
    uint32_t id_of[256];
    setup s = {L, id_of, 0};
    byte_order(id_of, o->byte_of);
    gk_bpe_counter_each(c, count_word, &s);
    size_t nw = L->nwords, made = n_tokens > 256 ? n_tokens - 256 : 0, tcap = 1024;
    while (tcap < 2 * made) tcap *= 2;
    L->words = malloc(sizeof *L->words * (nw ? nw : 1));
    L->sym = malloc(sizeof *L->sym * (s.nsym ? s.nsym : 1));
    L->pcap = 1024, L->pairs = malloc(sizeof *L->pairs * L->pcap), L->npairs = 1;
    L->pmask = 2047, L->pmap = calloc(L->pmask + 1, sizeof *L->pmap);
    L->tmask = tcap - 1, L->tmap = malloc(sizeof *L->tmap * tcap);
    o->off = calloc(made + 1, sizeof *o->off);
    o->n_tokens = 256;
    if (!L->words || !L->sym || !L->pairs || !L->pmap || !L->tmap || !o->off) return GK_ENOMEM;
    memset(L->tmap, 0xff, sizeof *L->tmap * tcap);
    L->nwords = 0, s.nsym = 0;
    if (gk_bpe_counter_each(c, add_word, &s)) return GK_ENOMEM;
    for (size_t i = 1; i < L->npairs; i++) heap_push(L, L->pairs[i].count, L->pairs[i].key);
    L->track = 1;
    return L->oom ? GK_ENOMEM : 0;
}

static void learner_free(learner *L)
{
    for (size_t i = 1; L->pairs && i < L->npairs; i++) free(L->pairs[i].words);
    free(L->words), free(L->sym), free(L->pairs), free(L->pmap), free(L->heap), free(L->rose);
    free(L->tmap);
}

/* Appends merge (a, b) -> t to o. */
static int record(gk_bpe_learned *o, size_t *cap, uint32_t a, uint32_t b, uint32_t t)
{
    if (o->n_merges == *cap) {
        size_t n = *cap ? *cap * 2 : 1024;
        uint32_t *l = realloc(o->left, sizeof *l * n);
        if (l) o->left = l;
        uint32_t *r = l ? realloc(o->right, sizeof *r * n) : NULL;
        if (r) o->right = r;
        uint32_t *m = r ? realloc(o->made, sizeof *m * n) : NULL;
        if (!m) return GK_ENOMEM;
        o->made = m, *cap = n;
    }
    o->left[o->n_merges] = a, o->right[o->n_merges] = b, o->made[o->n_merges++] = t;
    return 0;
}

/* One merge: the most frequent pair's (popped with its count: 1 done, 0 a stale entry put
 * back, -1 nothing left), or GK_ENOMEM as -2. */
static int merge_next(learner *L, gk_bpe_learned *o, size_t *mcap, size_t *bcap)
{
    if (!L->nheap) return -1;
    hentry top = heap_pop(L);
    uint32_t a = (uint32_t)(top.key >> 32), b = (uint32_t)top.key;
    size_t pi = (size_t)(pair_get(L, a, b) - L->pairs);
    int64_t now = L->pairs[pi].count;
    if (top.count != now) {
        if (now > 0) heap_push(L, now, top.key);
        return L->oom ? -2 : 0;
    }
    uint32_t t = make_token(L, o, a, b, bcap);
    if (t == GK_NONE || record(o, mcap, a, b, t)) return -2;
    for (uint32_t k = 0; k < L->pairs[pi].nw && !L->oom; k++)
        merge_word(L, L->pairs[pi].words[k], a, b, t);
    free(L->pairs[pi].words); /* (every occurrence is merged) */
    L->pairs[pi].words = NULL, L->pairs[pi].nw = L->pairs[pi].cap = 0;
    push_rose(L, o->n_merges);
    return L->oom ? -2 : 1;
}

int gk_bpe_learn(const gk_bpe_counter *c, size_t n_tokens, gk_bpe_progress fn, void *ctx,
                 volatile int *stop, gk_bpe_learned *out, gk_err *e)
{
    learner L = {0};
    memset(out, 0, sizeof *out);
    size_t mcap = 0, bcap = 0;
    int rc = learner_init(&L, c, out, n_tokens), r = 1;
    while (!rc && out->n_tokens < n_tokens && r >= 0) {
        if (stop && *stop) rc = GK_EINTR;
        else if ((r = merge_next(&L, out, &mcap, &bcap)) == -2) rc = GK_ENOMEM;
        else if (r == 1 && fn && (out->n_merges % 256 == 0 || out->n_tokens == n_tokens)) {
            size_t len;
            const unsigned char *t = tok_bytes(out, out->made[out->n_merges - 1], &len);
            fn(ctx, out->n_tokens - 256, n_tokens - 256, t, len);
        }
    }
    learner_free(&L);
    if (rc) gk_bpe_learned_free(out);
    if (rc == GK_EINTR) return gk_errf(e, rc, "learning the vocabulary: stopped by a signal");
    return rc ? gk_errf(e, rc, "learning the vocabulary: out of memory") : 0;
}

void gk_bpe_learned_free(gk_bpe_learned *l)
{
    if (!l) return;
    free(l->left), free(l->right), free(l->made), free(l->bytes), free(l->off);
    memset(l, 0, sizeof *l);
}

const unsigned char *gk_bpe_learned_token(const gk_bpe_learned *l, uint32_t id, size_t *len)
{
    return tok_bytes(l, id, len);
}
