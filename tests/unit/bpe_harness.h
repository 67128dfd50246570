/* bpe_harness.h: what test_bpe.c, test_bpe_gpt4.c and test_vocab.c share (header-only, like
 * test.h: each is its binary's main).
 * Owns: reading the test data (files, id lists, GPT-2's vocabulary), encoding whole and in
 * streamed parts, comparing ids, and the seeded random text of the fragments the
 * pre-tokenizers care about. Not thread-safe: one test binary, one thread. */
#ifndef GK_BPE_HARNESS_H
#define GK_BPE_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/bpe.h"
#include "common/text/vocab.h"
#include "test.h"

/* The file's bytes, NUL-terminated (*len without the NUL); NULL if it cannot be opened. */
static inline char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while ((got = fread(b + n, 1, cap - 1 - n, f)) > 0)
        if ((n += got) == cap - 1) b = realloc(b, cap *= 2);
    fclose(f);
    b[n] = '\0';
    *len = n;
    return b;
}

/* Reads a file of space-separated ids; returns NULL if absent. */
static inline uint32_t *read_ids(const char *path, size_t *n)
{
    size_t len;
    char *t = slurp(path, &len);
    if (!t) return NULL;
    uint32_t *ids = malloc((len + 1) * sizeof *ids);
    char *p = t, *end = t + len;
    *n = 0;
    while (p < end) {
        if (*p < '0' || *p > '9') {
            p++;
            continue;
        }
        uint32_t v = 0;
        while (p < end && *p >= '0' && *p <= '9') v = v * 10 + (uint32_t)(*p++ - '0');
        ids[(*n)++] = v;
    }
    free(t);
    return ids;
}

static inline gk_vocab *load_gpt2(void)
{
    char path[4096];
    gk_err e;
    gk_vocab *v = NULL;
    snprintf(path, sizeof path, "%s/gpt2", test_data_dir());
    if (gk_vocab_load(&v, path, &e)) return NULL;
    return v;
}

static inline int decodes_to(const gk_vocab *v, const uint32_t *ids, size_t n, const char *t,
                             size_t len)
{
    size_t o = 0, k;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *b = gk_vocab_token(v, ids[i], &k);
        if (!b || o + k > len || memcmp(t + o, b, k)) return 0;
        o += k;
    }
    return o == len;
}

static inline int same(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

/* Encodes text with a fresh array; returns the ids (caller frees), count in *n. */
static inline uint32_t *enc(gk_bpe *b, const char *t, size_t len, int special, size_t *n)
{
    uint32_t *ids = NULL;
    size_t cap = 0;
    gk_err e;
    *n = 0;
    CHECK_OK(gk_bpe_encode(b, t, len, special, &ids, n, &cap, &e), &e);
    return ids;
}

static inline uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Random text made of the fragments the regex cares about: words, digits, contractions,
 * apostrophe runs, punctuation, whitespace runs of every kind, controls and some non-ASCII. */
static inline size_t random_text(char *t, size_t cap, uint64_t *s, int ascii_only)
{
    static const char *frag[] = {
        "a", "word", "Hello", "x", "9", "123", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S",
        "'", "''", "'r", "'l", "'v", "'e", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r",
        "\v", "\f", " \n", "\n ", " \t ", ".", ",", "!?", "...", "--", "(", ")", "\"", "#", "$",
        "%", "&", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^", "_", "`",
        "{", "|", "}", "~", "\x1c", "\x1f", "\x7f", "\x01", "<|endoftext|>", "           ",
        /* non-ASCII: letter, NBSP, NEL, ideographic space, em dash, superscript 2, U+180E,
         * BOM, combining acute, CJK, emoji */
        "\xc3\xa9", "\xc2\xa0", "\xc2\x85", "\xe3\x80\x80", "\xe2\x80\x94", "\xc2\xb2",
        "\xe1\xa0\x8e", "\xef\xbb\xbf", "\xcc\x81", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
    };
    const size_t nascii = 70, nall = sizeof frag / sizeof frag[0];
    size_t o = 0;
    while (o + 16 < cap) {
        const char *f = frag[rng_next(s) % (ascii_only ? nascii : nall)];
        size_t l = strlen(f);
        memcpy(t + o, f, l);
        o += l;
    }
    return o;
}

/* Encodes t in parts of `part` bytes through gk_bpe_encode_part, as gpt-tokenize streams a
 * document; checks that it never holds more than keep bytes back and, with stops != NULL, that
 * each call ends where stops[] (len + 1 bytes) has a mark. */
static inline uint32_t *enc_parts(gk_bpe *b, const char *t, size_t len, size_t part, size_t keep,
                                  const unsigned char *stops, size_t *n)
{
    uint32_t *ids = NULL;
    size_t cap = 0, at = 0, fed = 0, used;
    gk_err e;
    *n = 0;
    while (at < len) {
        fed = fed + part < len ? fed + part : len;
        while (fed < len && ((unsigned char)t[fed] & 0xC0) == 0x80) fed++;
        CHECK_OK(gk_bpe_encode_part(b, t + at, fed - at, fed == len, 0, &ids, n, &cap, &used, &e),
                 &e);
        at += used;
        CHECKF(fed - at <= keep, "%zu bytes held back", fed - at);
        CHECKF(!stops || stops[at], "parts of %zu: stopped at byte %zu", part, at);
    }
    return ids;
}

#endif
