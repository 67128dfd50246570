/* vocab.c: gk_vocab core: the tables every vocabulary has, the BPE lookup tables and the char
 * tables, the id-order builder, fingerprints, accessors and char encoding. Depends on nothing
 * above it: the file formats (vocab_bpe.c, vocab_char.c) build on it, and vocab_load.c, which
 * finds and loads a vocabulary from a path or from memory, on those. */
#include "common/text/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/grow.h"
#include "common/text/utf8.h"
#include "common/text/vocab_int.h"

/* ---------------------------------------------------------------- small helpers */

uint64_t gk_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    while (n >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    return h ^ h >> 31;
}

int gk_ids_reserve(uint32_t **ids, size_t *cap, size_t need)
{
    return gk_grow(ids, cap, need, sizeof **ids, 256);
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n) c *= 2;
    return c;
}

gk_vocab *gk_vocab_alloc(int type)
{
    gk_vocab *v = calloc(1, sizeof *v);
    if (v) {
        v->type = type;
        v->eot = -1;
    }
    return v;
}

void gk_vocab_free(gk_vocab *v)
{
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->merges);
    free(v->tok_tab);
    free(v->pair_tab);
    free(v->byte_pair);
    free(v->cps);
    free(v);
}

/* ---------------------------------------------------------------- builder */

int gk_vbuild_init(gk_vbuild *b, uint32_t n)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->soff = malloc((n ? n : 1) * sizeof *b->soff);
    b->slen = malloc((n ? n : 1) * sizeof *b->slen);
    if (!b->soff || !b->slen) return GK_ENOMEM;
    for (uint32_t i = 0; i < n; i++) b->slen[i] = GK_NONE;
    return 0;
}

int gk_vbuild_put(gk_vbuild *b, uint32_t id, const void *bytes, size_t len)
{
    if (id >= b->n || b->slen[id] != GK_NONE) return GK_EFORMAT;
    if (len > SIZE_MAX - b->alen || gk_grow(&b->arena, &b->acap, b->alen + len, 1, 4096))
        return GK_ENOMEM;
    memcpy(b->arena + b->alen, bytes, len);
    b->soff[id] = b->alen;
    b->slen[id] = (uint32_t)len;
    b->alen += len;
    return 0;
}

int gk_vbuild_finish(gk_vbuild *b, gk_vocab *v, uint32_t *gap)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (b->slen[i] == GK_NONE) {
            *gap = i;
            return GK_EFORMAT;
        }
    v->bytes = malloc(b->alen ? b->alen : 1);
    v->off = malloc((b->n + 1) * sizeof *v->off);
    if (!v->bytes || !v->off) return GK_ENOMEM;
    uint32_t o = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        v->off[i] = o;
        memcpy(v->bytes + o, b->arena + b->soff[i], b->slen[i]);
        o += b->slen[i];
    }
    v->off[b->n] = o;
    v->n = b->n;
    return 0;
}

void gk_vbuild_free(gk_vbuild *b)
{
    free(b->arena);
    free(b->soff);
    free(b->slen);
    memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- BPE tables */

uint32_t gk_vocab_lookup(const gk_vocab *v, const void *bytes, size_t len)
{
    return gk_vocab_lookup_h(v, bytes, len, gk_hash_bytes(bytes, len));
}

uint32_t gk_vocab_lookup_h(const gk_vocab *v, const void *bytes, size_t len, uint64_t h)
{
    uint32_t i = (uint32_t)h & v->tok_mask;
    for (;;) {
        uint32_t id = v->tok_tab[i];
        if (id == GK_NONE) return GK_NONE;
        if (v->off[id + 1] - v->off[id] == len && !memcmp(v->bytes + v->off[id], bytes, len))
            return id;
        i = (i + 1) & v->tok_mask;
    }
}

static int build_tok_tab(gk_vocab *v, const char *path, gk_err *e)
{
    v->tok_mask = pow2_at_least((uint64_t)v->n * 2) - 1;
    v->tok_tab = malloc(((size_t)v->tok_mask + 1) * sizeof *v->tok_tab);
    if (!v->tok_tab) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    memset(v->tok_tab, 0xFF, ((size_t)v->tok_mask + 1) * sizeof *v->tok_tab);
    for (uint32_t id = 0; id < v->n; id++) {
        if ((int32_t)id == v->eot) continue;
        const unsigned char *b = v->bytes + v->off[id];
        size_t len = v->off[id + 1] - v->off[id];
        if (len == 0) return gk_errf(e, GK_EFORMAT, "%s: token %u is empty", path, id);
        /* it would be the special token in the vocab's JSON text (a checkpoint's copy) */
        if (len == strlen(GK_EOT_TEXT) && !memcmp(b, GK_EOT_TEXT, len))
            return gk_errf(e, GK_EFORMAT, "%s: token %u is the text of the special token %s", path,
                           id, GK_EOT_TEXT);
        uint32_t i = (uint32_t)gk_hash_bytes(b, len) & v->tok_mask, other;
        for (; (other = v->tok_tab[i]) != GK_NONE; i = (i + 1) & v->tok_mask)
            if (v->off[other + 1] - v->off[other] == len &&
                !memcmp(v->bytes + v->off[other], b, len))
                return gk_errf(e, GK_EFORMAT, "%s: tokens %u and %u have the same bytes", path,
                               other, id);
        v->tok_tab[i] = id;
    }
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        v->byte_id[c] = gk_vocab_lookup(v, &byte, 1);
        if (v->byte_id[c] == GK_NONE)
            return gk_errf(e, GK_EFORMAT, "%s: no token for the single byte 0x%02X", path, c);
    }
    return 0;
}

/* Every split of every token into two tokens, as (left, right, token) in *out (*n of them).
 * has_len[k]: some token is k bytes long. Only splits into two such lengths are looked up, so
 * that a long token costs its length times the number of lengths, not its length squared. */
static int token_splits(const gk_vocab *v, const unsigned char *has_len, gk_pair **out, size_t *n)
{
    size_t cap = (size_t)v->n * 4, count = 0;
    gk_pair *p = malloc(cap * sizeof *p);
    for (uint32_t id = 0; p && id < v->n; id++) {
        if ((int32_t)id == v->eot) continue;
        const unsigned char *b = v->bytes + v->off[id];
        size_t len = v->off[id + 1] - v->off[id];
        for (size_t k = 1; p && k < len; k++) {
            if (!has_len[k] || !has_len[len - k]) continue;
            uint32_t l = gk_vocab_lookup(v, b, k), r;
            if (l == GK_NONE || (r = gk_vocab_lookup(v, b + k, len - k)) == GK_NONE) continue;
            if (count == cap) {
                gk_pair *more = realloc(p, 2 * cap * sizeof *p);
                if (!more) free(p);
                p = more, cap *= 2;
                if (!p) break;
            }
            p[count++] = (gk_pair){l, r, id};
        }
    }
    *out = p, *n = count;
    return p ? 0 : GK_ENOMEM;
}

/* The pair table of splits[0..n), at most half full (short probes). */
static int build_pair_tab(gk_vocab *v, const gk_pair *splits, size_t n)
{
    v->pair_mask = pow2_at_least(2 * (uint64_t)n + 1) - 1;
    v->pair_tab = malloc(((size_t)v->pair_mask + 1) * sizeof *v->pair_tab);
    if (!v->pair_tab) return GK_ENOMEM;
    memset(v->pair_tab, 0xFF, ((size_t)v->pair_mask + 1) * sizeof *v->pair_tab);
    for (size_t k = 0; k < n; k++) {
        uint32_t i = gk_pair_hash(splits[k].left, splits[k].right) & v->pair_mask;
        while (v->pair_tab[i].left != GK_NONE) i = (i + 1) & v->pair_mask;
        v->pair_tab[i] = splits[k];
    }
    return 0;
}

static uint32_t fingerprint_bpe(const gk_vocab *v)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint32_t id = 0; id < v->n; id++) {
        uint32_t len = v->off[id + 1] - v->off[id];
        unsigned char hdr[8];
        for (int k = 0; k < 4; k++) {
            hdr[k] = (unsigned char)(id >> 8 * k);
            hdr[4 + k] = (unsigned char)(len >> 8 * k);
        }
        crc = crc32(crc, hdr, 8);
        crc = crc32(crc, v->bytes + v->off[id], len);
    }
    return (uint32_t)crc;
}

int gk_vocab_finish_bpe(gk_vocab *v, const char *path, gk_err *e)
{
    int rc = build_tok_tab(v, path, e);
    if (rc) return rc;
    size_t maxlen = 0;
    for (uint32_t id = 0; id < v->n; id++)
        if (v->off[id + 1] - v->off[id] > maxlen) maxlen = v->off[id + 1] - v->off[id];
    unsigned char *has_len = calloc(maxlen + 1, 1);
    if (!has_len) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    for (uint32_t id = 0; id < v->n; id++)
        if ((int32_t)id != v->eot) has_len[v->off[id + 1] - v->off[id]] = 1;
    gk_pair *splits = NULL;
    size_t nsplits = 0;
    rc = token_splits(v, has_len, &splits, &nsplits) || build_pair_tab(v, splits, nsplits);
    free(has_len);
    free(splits);
    if (rc) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    if (!(v->byte_pair = malloc(65536 * sizeof *v->byte_pair)))
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    for (uint32_t k = 0; k < 65536; k++)
        v->byte_pair[k] = gk_vocab_pair(v, v->byte_id[k >> 8], v->byte_id[k & 255]);
    v->fingerprint = fingerprint_bpe(v);
    return 0;
}

void gk_vocab_set_pattern(gk_vocab *v, int pattern)
{
    const char *name = gk_pattern_name(pattern);
    v->fingerprint = fingerprint_bpe(v);
    if (pattern != GK_PATTERN_GPT2)
        v->fingerprint = (uint32_t)crc32(v->fingerprint, (const Bytef *)name, (uInt)strlen(name));
    v->pattern = pattern;
}

/* ---------------------------------------------------------------- char vocabs */

int gk_vocab_finish_chars(gk_vocab *v, const char *path, gk_err *e)
{
    v->bytes = malloc((size_t)v->n * 4 + 1);
    v->off = malloc(((size_t)v->n + 1) * sizeof *v->off);
    if (!v->bytes || !v->off) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int c = 0; c < 128; c++) v->ascii_id[c] = -1;
    uint32_t o = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        uint32_t cp = v->cps[i];
        size_t k = gk_utf8_put(cp, v->bytes + o);
        if (!k) return gk_errf(e, GK_EUSAGE, "%s: U+%04X is not a valid character", path, cp);
        if (i && cp <= v->cps[i - 1])
            return gk_errf(e, GK_EUSAGE, "%s: characters not in strictly ascending order at id %u "
                           "(U+%04X after U+%04X)", path, i, cp, v->cps[i - 1]);
        if (cp < 128) v->ascii_id[cp] = (int32_t)i;
        v->off[i] = o;
        o += (uint32_t)k;
        unsigned char le[4] = {cp & 0xFF, cp >> 8 & 0xFF, cp >> 16 & 0xFF, cp >> 24};
        crc = crc32(crc, le, 4);
    }
    v->off[v->n] = o;
    v->fingerprint = (uint32_t)crc;
    return 0;
}

int gk_vocab_from_chars(gk_vocab **out, const uint32_t *codepoints, size_t n, gk_err *e)
{
    *out = NULL;
    if (n > 0x110000) return gk_errf(e, GK_EUSAGE, "char vocab: %zu characters is too many", n);
    gk_vocab *v = gk_vocab_alloc(GK_VOCAB_CHAR);
    if (!v || !(v->cps = malloc((n ? n : 1) * sizeof *v->cps))) {
        gk_vocab_free(v);
        return gk_errf(e, GK_ENOMEM, "char vocab: out of memory");
    }
    if (n) memcpy(v->cps, codepoints, n * sizeof *v->cps);
    v->n = (uint32_t)n;
    int rc = gk_vocab_finish_chars(v, "char vocab", e);
    if (rc) {
        gk_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

/* The char vocab as a compact JSON array of one-character strings plus a newline. */
int gk_char_encode(const gk_vocab *v, const char *text, size_t len, uint32_t **ids, size_t *n,
                   size_t *cap, gk_err *e)
{
    if (v->type != GK_VOCAB_CHAR) return gk_errf(e, GK_EUSAGE, "char encode: not a char vocab");
    if (gk_ids_reserve(ids, cap, *n + len))
        return gk_errf(e, GK_ENOMEM, "char encode: out of memory");
    const unsigned char *u = (const unsigned char *)text;
    uint32_t *o = *ids + *n;
    for (size_t i = 0; i < len;) {
        int32_t id = -1;
        uint32_t cp = u[i];
        size_t k = 1;
        if (cp < 128) id = v->ascii_id[cp];
        else if ((k = gk_utf8_next(u + i, len - i, &cp)) && cp != GK_UTF8_INVALID) {
            size_t lo = 0, hi = v->n;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (v->cps[mid] < cp) lo = mid + 1;
                else hi = mid;
            }
            if (lo < v->n && v->cps[lo] == cp) id = (int32_t)lo;
        }
        if (id < 0) {
            *n = (size_t)(o - *ids);
            if (cp == GK_UTF8_INVALID)
                return gk_errf(e, GK_EFORMAT, "invalid UTF-8 at byte %zu", i);
            return gk_errf(e, GK_EFORMAT, "character U+%04X at byte %zu is not in the vocabulary",
                           cp, i);
        }
        *o++ = (uint32_t)id;
        i += k;
    }
    *n = (size_t)(o - *ids);
    return 0;
}

/* ---------------------------------------------------------------- accessors */

int gk_vocab_type(const gk_vocab *v) { return v->type; }
uint32_t gk_vocab_size(const gk_vocab *v) { return v->n; }
int32_t gk_vocab_eot(const gk_vocab *v) { return v->eot; }
int gk_vocab_pattern(const gk_vocab *v) { return v->pattern; }
uint32_t gk_vocab_fingerprint(const gk_vocab *v) { return v->fingerprint; }

const unsigned char *gk_vocab_token(const gk_vocab *v, uint32_t id, size_t *len)
{
    if (id >= v->n) {
        *len = 0;
        return NULL;
    }
    *len = v->off[id + 1] - v->off[id];
    return v->bytes + v->off[id];
}

const char *gk_vocab_merges_text(const gk_vocab *v, size_t *len)
{
    if (len) *len = v->merges ? v->merges_len : 0;
    return v->merges;
}

