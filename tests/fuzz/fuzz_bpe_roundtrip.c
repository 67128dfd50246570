/* fuzz_bpe_roundtrip.c: GPT-2's BPE (the real vocabulary, $GPT_TEST_DATA/gpt2, loaded once) on
 * arbitrary bytes, through the tools' path (gk_text_encode: invalid UTF-8 becomes U+FFFD).
 * Properties: the ids decode to the sanitized text byte for byte, with <|endoftext|> a token only
 * when special tokens are allowed; the fast pre-tokenizer cuts where the PCRE2 regex does; the
 * heap merge gives the scan's ids; cutting at gk_bpe_split_point changes no id (with GPT-4's
 * pattern too, and nor does streaming the text in parts); a char vocabulary
 * of the text's own characters round trips it; the streaming decoder (textout.h) writes, for the
 * input read as token ids, what sanitizing all their bytes at once gives. */
#include <stdlib.h>
#include <string.h>

#include "common/text/bpe.h"
#include "common/text/encode_text.h"
#include "common/text/pretok.h"
#include "common/text/textout.h"
#include "common/text/utf8.h"
#include "common/text/vocab.h"
#include "tests/fuzz/fuzz.h"

#define EOT "<|endoftext|>"

typedef struct ids {
    uint32_t *p;
    size_t n, cap;
} ids;

static const gk_vocab *gpt2(void)
{
    static gk_vocab *v;
    static int tried;
    if (!tried) {
        tried = 1;
        char path[4096];
        const char *d = getenv("GPT_TEST_DATA");
        gk_err e = {0};
        snprintf(path, sizeof path, "%s/gpt2", d && *d ? d : "../shared/data");
        if (gk_vocab_load(&v, path, &e))
            fprintf(stderr, "fuzz_bpe_roundtrip: %s: nothing checked\n", e.msg);
    }
    return v;
}

static char *decode(const gk_vocab *v, const ids *t, size_t *len)
{
    size_t cap = 64, o = 0, tl;
    char *s = malloc(cap);
    for (size_t i = 0; i < t->n; i++) {
        const unsigned char *b = gk_vocab_token(v, t->p[i], &tl);
        FZ_ASSERT(b, "id %u of %u", t->p[i], gk_vocab_size(v));
        while (o + tl > cap) s = realloc(s, cap *= 2);
        memcpy(s + o, b, tl);
        o += tl;
    }
    *len = o;
    return s;
}

static size_t count(const char *s, size_t n, const char *what)
{
    size_t k = 0, wl = strlen(what);
    for (const char *p; n >= wl && (p = memmem(s, n, what, wl)); k++)
        n -= (size_t)(p - s) + wl, s = p + wl;
    return k;
}

/* Encodes the raw input with flags: the ids decode to clean; returns them in *out. */
static void tools_path(const gk_vocab *v, const uint8_t *data, size_t size, int flags,
                       const char *clean, size_t clean_len, ids *out)
{
    gk_err e = {0};
    size_t replaced, dl, eots = 0;
    int rc = gk_text_encode(v, (const char *)data, size, flags, &out->p, &out->n, &out->cap,
                            &replaced, &e);
    FZ_ASSERT(rc == 0, "encode: %s", e.msg);
    for (size_t i = 0; i < out->n; i++) eots += out->p[i] == (uint32_t)gk_vocab_eot(v);
    FZ_ASSERT(eots == (flags & GK_ENCODE_SPECIAL ? count(clean, clean_len, EOT) : 0),
              "%zu eot ids", eots);
    char *got = decode(v, out, &dl);
    FZ_ASSERT(dl == clean_len && (!dl || !memcmp(got, clean, dl)), "decoded %zu bytes, want %zu",
              dl, clean_len);
    free(got);
}

/* gk_pretok_next against the regex, piece by piece. */
static void pieces(const char *s, size_t len)
{
    static gk_pretok *p;
    gk_err e = {0};
    if (!p && gk_pretok_create(&p, GK_PATTERN_GPT2, &e)) FZ_ASSERT(0, "pretok: %s", e.msg);
    for (size_t i = 0; i < len;) {
        size_t fast = gk_pretok_next(p, s, len, i, &e), ref = gk_pretok_regex(p, s, len, i, &e);
        FZ_ASSERT(fast == ref && ref > i && ref <= len, "piece at %zu ends at %zu, regex %zu", i,
                  fast, ref);
        i = ref;
    }
}

/* The ids of s[0..len) cut at v's split points (each part encoded alone) into got. */
static void cut_encode(gk_bpe *b, const gk_vocab *v, const char *s, size_t len, ids *got)
{
    gk_err e = {0};
    got->n = 0;
    for (size_t at = 0, p; at < len; at = p) {
        p = gk_bpe_split_point(s, len, at + 1, gk_vocab_pattern(v));
        FZ_ASSERT(p > at && p <= len, "split point %zu after %zu", p, at);
        FZ_ASSERT(gk_bpe_encode(b, s + at, p - at, 0, &got->p, &got->n, &got->cap, &e) == 0, "%s",
                  e.msg);
    }
}

/* The heap merge and cuts at split points give the same ids as one plain encode. */
static void same_ids(const gk_vocab *v, const char *s, size_t len, const ids *want)
{
    static gk_bpe *heap, *plain;
    gk_err e = {0};
    if (!heap && (gk_bpe_create(&heap, v, &e) || gk_bpe_create(&plain, v, &e)))
        FZ_ASSERT(0, "%s", e.msg);
    gk_bpe_set_heap_min(heap, 2);
    ids got = {0};
    FZ_ASSERT(gk_bpe_encode(heap, s, len, 0, &got.p, &got.n, &got.cap, &e) == 0, "%s", e.msg);
    FZ_ASSERT(got.n == want->n && (!got.n || !memcmp(got.p, want->p, got.n * sizeof *got.p)),
              "heap merge differs");
    cut_encode(plain, v, s, len, &got);
    FZ_ASSERT(got.n == want->n && (!got.n || !memcmp(got.p, want->p, got.n * sizeof *got.p)),
              "split encoding differs");
    free(got.p);
}

/* GPT-2's tokens with GPT-4's pattern (merges' first line naming it), made once. */
static gk_vocab *as_gpt4(const gk_vocab *v)
{
    static gk_vocab *v4;
    if (v4) return v4;
    char *json = NULL, *m = NULL, *m4 = NULL;
    size_t jl = 0, ml = 0;
    gk_err e = {0};
    FZ_ASSERT(!gk_vocab_to_json(v, &json, &jl, &e) && !gk_vocab_merges(v, &m, &ml, &e), "%s",
              e.msg);
    const char *body = strchr(m, '\n') + 1;
    size_t bl = ml - (size_t)(body - m);
    m4 = malloc(bl + 32);
    int k = sprintf(m4, "#version: 0.2 pattern: gpt4\n");
    memcpy(m4 + k, body, bl);
    FZ_ASSERT(!gk_vocab_load_mem(&v4, json, jl, m4, (size_t)k + bl, "gpt4", &e), "%s", e.msg);
    free(json), free(m), free(m4);
    return v4;
}

/* With GPT-4's pattern: cuts at its split points and the text streamed in parts of 61 bytes
 * give the ids of one encode. */
static void gpt4_ids(const gk_vocab *v4, const char *s, size_t len)
{
    static gk_bpe *b;
    gk_err e = {0};
    if (!b && gk_bpe_create(&b, v4, &e)) FZ_ASSERT(0, "%s", e.msg);
    ids want = {0}, got = {0};
    FZ_ASSERT(gk_bpe_encode(b, s, len, 0, &want.p, &want.n, &want.cap, &e) == 0, "%s", e.msg);
    cut_encode(b, v4, s, len, &got);
    FZ_ASSERT(got.n == want.n && (!got.n || !memcmp(got.p, want.p, got.n * sizeof *got.p)),
              "GPT-4 pattern: split encoding differs");
    got.n = 0;
    for (size_t at = 0, fed = 0, used; at < len; at += used) {
        fed = fed + 61 < len ? fed + 61 : len;
        while (fed < len && ((unsigned char)s[fed] & 0xC0) == 0x80) fed++;
        FZ_ASSERT(gk_bpe_encode_part(b, s + at, fed - at, fed == len, 0, &got.p, &got.n, &got.cap,
                                     &used, &e) == 0, "%s", e.msg);
    }
    FZ_ASSERT(got.n == want.n && (!got.n || !memcmp(got.p, want.p, got.n * sizeof *got.p)),
              "GPT-4 pattern: streamed encoding differs");
    free(want.p), free(got.p);
}

static int by_value(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A char vocabulary of the text's characters encodes it and decodes it back. */
static void char_level(const char *s, size_t len)
{
    uint32_t *cps = malloc((len + 1) * sizeof *cps), cp;
    size_t n = 0, dl;
    for (size_t i = 0; i < len;) {
        i += gk_utf8_next((const unsigned char *)s + i, len - i, &cp);
        cps[n++] = cp;
    }
    qsort(cps, n, sizeof *cps, by_value);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || cps[u - 1] != cps[i]) cps[u++] = cps[i];
    gk_vocab *v = NULL;
    gk_err e = {0};
    FZ_ASSERT(gk_vocab_from_chars(&v, cps, u, &e) == 0, "%s", e.msg);
    ids t = {0};
    FZ_ASSERT(gk_text_encode(v, s, len, 0, &t.p, &t.n, &t.cap, NULL, &e) == 0, "char encode: %s",
              e.msg);
    char *got = decode(v, &t, &dl);
    FZ_ASSERT(dl == len && (!len || !memcmp(got, s, len)), "char round trip");
    free(got);
    free(t.p);
    free(cps);
    gk_vocab_free(v);
}

/* The input as little-endian u16 ids: streamed out token by token == sanitized at once. */
static void stream(const gk_vocab *v, const uint8_t *data, size_t size)
{
    ids t = {0};
    t.p = malloc((size / 2 + 1) * sizeof *t.p);
    for (size_t i = 0; i + 1 < size; i += 2)
        t.p[t.n++] = (data[i] | data[i + 1] << 8) % gk_vocab_size(v);
    char *buf = NULL, *all = decode(v, &t, &(size_t){0}), *want = NULL;
    size_t blen = 0, alen = 0, wcap = 0, wlen = 0, tl;
    for (size_t i = 0; i < t.n; i++) gk_vocab_token(v, t.p[i], &tl), alen += tl;
    FILE *f = open_memstream(&buf, &blen);
    gk_textout o;
    gk_textout_init(&o, f);
    for (size_t i = 0; i < t.n; i++) {
        const unsigned char *b = gk_vocab_token(v, t.p[i], &tl);
        FZ_ASSERT(gk_textout_push(&o, b, tl) == 0, "push");
    }
    FZ_ASSERT(gk_textout_finish(&o) == 0, "finish");
    gk_textout_free(&o);
    fclose(f);
    gk_utf8_sanitize(all, alen, &want, &wcap, &wlen);
    FZ_ASSERT(blen == wlen && !memcmp(buf, want ? want : "", wlen), "streamed %zu bytes, want %zu",
              blen, wlen);
    free(buf);
    free(all);
    free(want);
    free(t.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192) return 0; /* longer texts find nothing new, at a few runs a second */
    const gk_vocab *v = gpt2();
    char *clean = NULL;
    size_t ccap = 0, clen = 0;
    FZ_ASSERT(gk_utf8_sanitize((const char *)data, size, &clean, &ccap, &clen) != (size_t)-1,
              "oom");
    FZ_ASSERT(gk_utf8_valid_prefix(clean ? clean : "", clen) == clen,
              "sanitized text is not UTF-8");
    if (v) {
        ids plain = {0}, special = {0};
        tools_path(v, data, size, 0, clean, clen, &plain);
        tools_path(v, data, size, GK_ENCODE_SPECIAL, clean, clen, &special);
        pieces(clean, clen);
        same_ids(v, clean, clen, &plain);
        gpt4_ids(as_gpt4(v), clean, clen);
        stream(v, data, size);
        free(plain.p);
        free(special.p);
    }
    char_level(clean, clen);
    free(clean);
    return 0;
}
