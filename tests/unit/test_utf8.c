/* test_utf8.c: UTF-8 decoding and errors="replace" sanitizing, against values checked with
 * Python's bytes.decode('utf-8', errors='replace'). */
#include "common/text/utf8.h"
#include "test.h"

#define FFFD "\xEF\xBF\xBD"

static const struct {
    const char *in;
    size_t n;
    size_t reps;
    const char *out;
} cases[] = {
    {"", 0, 0, ""},
    {"plain ascii", 11, 0, "plain ascii"},
    {"\xe2\x82", 2, 1, FFFD},                     /* truncated at end */
    {"\xf0\x80\x80\x80", 4, 4, FFFD FFFD FFFD FFFD}, /* overlong 4-byte */
    {"\xed\xa0\x80", 3, 3, FFFD FFFD FFFD},       /* surrogate D800 */
    {"\xc0\xaf", 2, 2, FFFD FFFD},                /* overlong '/' */
    {"a\x80" "b", 3, 1, "a" FFFD "b"},            /* lone continuation */
    {"\xe0\x80", 2, 2, FFFD FFFD},
    {"\xe0\xa0", 2, 1, FFFD},
    {"\xf4\x90\x80\x80", 4, 4, FFFD FFFD FFFD FFFD}, /* > U+10FFFF */
    {"\xf4\x8f\xbf\xbf", 4, 0, "\xf4\x8f\xbf\xbf"},  /* U+10FFFF is valid */
    {"\xf5", 1, 1, FFFD},
    {"\xff\xfe", 2, 2, FFFD FFFD},
    {"\xe2\x82\xac", 3, 0, "\xe2\x82\xac"},
    {"\xf0\x9f\x98", 3, 1, FFFD},
    {"\xf0\x9f\x98\x80\x80", 5, 1, "\xf0\x9f\x98\x80" FFFD},
    {"\xc2", 1, 1, FFFD},
    {"\xc2" "A", 2, 1, FFFD "A"},
    {"\xed\x9f\xbf", 3, 0, "\xed\x9f\xbf"},
    {"\xee\x80\x80", 3, 0, "\xee\x80\x80"},
    {"\xe1\x80\xe1\x80\x80", 5, 1, FFFD "\xe1\x80\x80"},
    {"\xf1\x80\x80\xc0", 4, 2, FFFD FFFD},
    {"nul\0inside", 10, 0, "nul\0inside"},
};

static void test_sanitize_cases(void)
{
    char *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t out_len = 12345;
        size_t reps = gk_utf8_sanitize(cases[i].in, cases[i].n, &buf, &cap, &out_len);
        size_t want = cases[i].reps ? strlen(cases[i].out) : cases[i].n;
        CHECKF(reps == cases[i].reps, "case %zu: %zu replacements, want %zu", i, reps,
               cases[i].reps);
        CHECKF(out_len == want && !memcmp(buf, cases[i].out, want), "case %zu: wrong bytes", i);
        CHECKF((gk_utf8_valid_prefix(cases[i].in, cases[i].n) == cases[i].n) ==
                   (cases[i].reps == 0),
               "case %zu: validity", i);
    }
    free(buf);
}

static void test_decode_put_roundtrip(void)
{
    unsigned char b[4];
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        size_t k = gk_utf8_put(cp, b);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            CHECK(k == 0);
            continue;
        }
        uint32_t got;
        size_t used = gk_utf8_next(b, k, &got);
        if (used != k || got != cp) {
            CHECKF(0, "U+%04X round trip", cp);
            return;
        }
    }
    CHECK(gk_utf8_put(0x110000, b) == 0);
}

/* Every 1- and 2-byte string and every 3-byte string with a lead E0..F4: sanitized output is
 * valid, and the fast path (valid input) copies it unchanged. */
static void test_sanitize_exhaustive_small(void)
{
    char *buf = NULL;
    size_t cap = 0, out_len;
    unsigned char in[3];
    for (int a = 0; a < 256; a++)
        for (int c = 0; c < 256; c++) {
            in[0] = (unsigned char)a, in[1] = (unsigned char)c, in[2] = 0x80;
            for (size_t n = 1; n <= 3; n++) {
                size_t reps = gk_utf8_sanitize((char *)in, n, &buf, &cap, &out_len);
                CHECK(gk_utf8_valid_prefix(buf, out_len) == out_len);
                if (gk_utf8_valid_prefix((char *)in, n) == n)
                    CHECK(reps == 0 && out_len == n && !memcmp(buf, in, n));
                else
                    CHECK(reps > 0 && reps <= n);
            }
        }
    free(buf);
}

/* Where a stream may be cut: before an incomplete sequence at the end, never inside a complete one
 * (hand-checked: "\xC3\xA9" is é, "\xE2\x82\xAC" €, "\xF0\x9F\x98\x80" an emoji). */
static void test_complete_len(void)
{
    CHECK(gk_utf8_complete_len("", 0) == 0);
    CHECK(gk_utf8_complete_len("ab", 2) == 2);
    CHECK(gk_utf8_complete_len("a\xC3\xA9", 3) == 3);
    CHECK(gk_utf8_complete_len("a\xC3", 2) == 1);
    CHECK(gk_utf8_complete_len("a\xE2\x82", 3) == 1);
    CHECK(gk_utf8_complete_len("a\xE2\x82\xAC", 4) == 4);
    CHECK(gk_utf8_complete_len("a\xF0\x9F\x98", 4) == 1);
    CHECK(gk_utf8_complete_len("\xF0\x9F\x98\x80", 4) == 4);
    /* a stray continuation byte: nothing to wait for */
    CHECK(gk_utf8_complete_len("a\x80", 2) == 2);
}

int main(void)
{
    RUN(test_sanitize_cases);
    RUN(test_decode_put_roundtrip);
    RUN(test_sanitize_exhaustive_small);
    RUN(test_complete_len);
    return TEST_END();
}
