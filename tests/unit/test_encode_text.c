/* test_encode_text.c: gk_text_encode and gk_text_start_token (common/text/encode_text.h), the
 * one text -> ids path of gpt-sample, gpt-evalppl and gpt-train: invalid UTF-8 is replaced and
 * counted, <|endoftext|> first on request, a literal <|endoftext|> a token only on request, char
 * vocabularies encode per character and start from "\n"; one gk_text_encoder run over many texts
 * (appending to one array) gives each text's gk_text_encode ids. BPE on the tiny transformers
 * fixture. */
#include <stdint.h>

#include "common/text/encode_text.h"
#include "test.h"

/* ids of text with v and flags into out[0..cap); returns the count, or -1 on error */
static long enc(const gk_vocab *v, const char *text, int flags, uint32_t *out, size_t cap,
                size_t *bad)
{
    uint32_t *ids = NULL;
    size_t n = 0, c = 0;
    gk_err e = {0};
    int rc = gk_text_encode(v, text, strlen(text), flags, &ids, &n, &c, bad, &e);
    for (size_t i = 0; rc == 0 && i < n && i < cap; i++) out[i] = ids[i];
    free(ids);
    return rc ? -1 : (long)n;
}

static void test_bpe(void)
{
    gk_vocab *v = NULL;
    gk_err e = {0};
    CHECK_OK(gk_vocab_load(&v, "tests/fixtures/hf_tiny", &e), &e);
    if (!v) return;
    int32_t eot = gk_vocab_eot(v);
    CHECK(eot == 300);
    uint32_t a[64], b[64], c[64];
    size_t bad = 99;
    long na = enc(v, "ab cd", 0, a, 64, &bad);
    CHECK(na > 0 && bad == 0);
    long nb = enc(v, "ab cd", GK_ENCODE_EOT_FIRST, b, 64, NULL);
    CHECK(nb == na + 1 && b[0] == (uint32_t)eot && memcmp(a, b + 1, sizeof *a * (size_t)na) == 0);
    /* two invalid sequences (a stray continuation byte, a truncated 2-byte sequence): each is
     * one U+FFFD, the same ids as the text with U+FFFD written out */
    na = enc(v, "ab\x80 cd\xc3", 0, a, 64, &bad);
    nb = enc(v, "ab\xef\xbf\xbd cd\xef\xbf\xbd", 0, b, 64, NULL);
    CHECK(bad == 2 && na > 0 && na == nb && memcmp(a, b, sizeof *a * (size_t)na) == 0);
    /* a literal <|endoftext|>: one token with GK_ENCODE_SPECIAL, plain text without */
    na = enc(v, "a<|endoftext|>b", GK_ENCODE_SPECIAL, a, 64, NULL);
    nb = enc(v, "a<|endoftext|>b", 0, b, 64, NULL);
    long nc = enc(v, "a", 0, c, 64, NULL);
    CHECK(nc == 1 && na == 3 && a[0] == c[0] && a[1] == (uint32_t)eot && nb > 3);
    for (long i = 0; i < nb; i++) CHECK(b[i] != (uint32_t)eot);
    uint32_t id = 0;
    CHECK_OK(gk_text_start_token(v, &id, &e), &e);
    CHECK(id == (uint32_t)eot);
    gk_vocab_free(v);
}

static void test_char(void)
{
    uint32_t cps[4] = {'\n', 'a', 'b', 0xe9};
    gk_vocab *v = NULL;
    gk_err e = {0};
    CHECK_OK(gk_vocab_from_chars(&v, cps, 4, &e), &e);
    if (!v) return;
    uint32_t ids[16], id = 99;
    size_t bad = 99;
    CHECK(enc(v, "ab\n\xc3\xa9", GK_ENCODE_EOT_FIRST, ids, 16, &bad) == 4 && bad == 0);
    CHECK(ids[0] == 1 && ids[1] == 2 && ids[2] == 0 && ids[3] == 3); /* no <|endoftext|> to add */
    CHECK_OK(gk_text_start_token(v, &id, &e), &e);
    CHECK(id == 0);
    /* an invalid byte becomes U+FFFD, which this vocabulary lacks: an error naming it */
    uint32_t *out = NULL;
    size_t n = 0, cap = 0;
    CHECK(gk_text_encode(v, "a\xff", 2, 0, &out, &n, &cap, &bad, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "U+FFFD") != NULL && bad == 1, "%s", e.msg);
    free(out);
    gk_vocab_free(v);
    /* a char vocabulary without a newline has no start token */
    CHECK_OK(gk_vocab_from_chars(&v, cps + 1, 3, &e), &e);
    CHECK(v && gk_text_start_token(v, &id, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "newline") != NULL, "%s", e.msg);
    gk_vocab_free(v);
}

/* One encoder over texts of every kind, flags varying: the ids gk_text_encode gives each. */
static void check_encoder(const gk_vocab *v)
{
    static const char *texts[] = {"ab cd", "", "ab\x80 cd\xc3", " a<|endoftext|>b ab", "ba\n\nab",
                                  "\xc3\xa9" "a b", "ab cd"};
    enum { N = sizeof texts / sizeof *texts };
    gk_text_encoder *t = NULL;
    gk_err e = {0};
    CHECK_OK(gk_text_encoder_create(&t, v, &e), &e);
    uint32_t *all = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; t && i < 2 * N; i++) {
        const char *text = texts[i % N];
        int flags = i & 3; /* EOT_FIRST and SPECIAL, all four ways */
        size_t bad = 99, want_bad = 98, before = n;
        uint32_t want[64];
        long nw = enc(v, text, flags, want, 64, &want_bad);
        int rc = gk_text_encoder_run(t, text, strlen(text), flags, &all, &n, &cap, &bad, &e);
        CHECKF((rc == 0) == (nw >= 0), "text %d: rc %d, gk_text_encode %ld", i, rc, nw);
        if (rc) continue;
        CHECKF(n - before == (size_t)nw && bad == want_bad &&
                   memcmp(all + before, want, sizeof *want * (size_t)nw) == 0,
               "text %d: %zu ids, %ld by gk_text_encode", i, n - before, nw);
    }
    free(all);
    gk_text_encoder_free(t);
}

static void test_encoder(void)
{
    gk_vocab *v = NULL;
    gk_err e = {0};
    CHECK_OK(gk_vocab_load(&v, "tests/fixtures/hf_tiny", &e), &e);
    if (v) check_encoder(v);
    gk_vocab_free(v);
    uint32_t cps[6] = {'\n', ' ', 'a', 'b', 'c', 'd'};
    CHECK_OK(gk_vocab_from_chars(&v, cps, 6, &e), &e);
    if (v) check_encoder(v); /* some texts fail (characters it lacks): so must the encoder */
    gk_vocab_free(v);
    gk_text_encoder_free(NULL);
}

int main(void)
{
    RUN(test_bpe);
    RUN(test_char);
    RUN(test_encoder);
    return TEST_END();
}
