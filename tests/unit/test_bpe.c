/* test_bpe.c: GPT-2 BPE encoding against tiktoken's ids (shared tokenizer cases), the heap
 * merge against the scan, the ASCII pre-tokenizer against the PCRE2 regex, long pieces and
 * split points. */
#include <dirent.h>
#include <time.h>

#include "bpe_harness.h"
#include "common/text/pretok.h"

static void check_case(gk_bpe *b, gk_bpe *heap, const gk_vocab *v, const char *dir,
                       const char *name)
{
    char path[4608];
    size_t len, nw, n, nh;
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    char *t = slurp(path, &len);
    snprintf(path, sizeof path, "%s/%s.ids", dir, name);
    uint32_t *want = read_ids(path, &nw);
    CHECKF(t && want, "%s: unreadable", name);
    if (!t || !want) return;
    uint32_t *got = enc(b, t, len, 0, &n), *got2 = enc(b, t, len, 0, &nh); /* 2nd: cached */
    CHECKF(same(got, n, want, nw), "%s: %zu ids, want %zu (or different ids)", name, n, nw);
    CHECKF(same(got2, nh, want, nw), "%s: second (cached) encode differs", name);
    CHECKF(decodes_to(v, got, n, t, len), "%s: decode differs from the text", name);
    free(got2);
    got2 = enc(heap, t, len, 0, &nh);
    CHECKF(same(got2, nh, want, nw), "%s: heap merge differs", name);
    free(got2);
    free(got);
    free(want);
    snprintf(path, sizeof path, "%s/%s.special_ids", dir, name);
    if ((want = read_ids(path, &nw)) != NULL) {
        got = enc(b, t, len, 1, &n);
        CHECKF(same(got, n, want, nw), "%s: special: %zu ids, want %zu", name, n, nw);
        CHECKF(decodes_to(v, got, n, t, len), "%s: special: decode differs", name);
        free(got);
        free(want);
    }
    free(t);
}

static void test_cases(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tokenizer-cases", test_data_dir());
    DIR *d = opendir(dir);
    gk_vocab *v = load_gpt2();
    if (!d || !v) {
        if (d) closedir(d);
        gk_vocab_free(v);
        SKIP("no tokenizer-cases or gpt2 vocab in the test data dir");
    }
    gk_bpe *b, *h;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    CHECK_OK(gk_bpe_create(&h, v, &e), &e);
    gk_bpe_set_heap_min(h, 2);
    struct dirent *de;
    int count = 0;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".txt")) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(l - 4), de->d_name);
        check_case(b, h, v, dir, name);
        count++;
    }
    closedir(d);
    CHECKF(count >= 34, "only %d cases found", count);
    gk_bpe_free(b);
    gk_bpe_free(h);
    gk_vocab_free(v);
}

/* Small cases checked with Python tiktoken: U+180E is not White_Space for tiktoken (PCRE2's
 * own \s would say it is), NUL is byte token 188, special token handling at the edges. */
static void test_extra_cases(void)
{
    static const struct {
        const char *t;
        size_t len;
        int special;
        uint32_t ids[8];
        size_t n;
    } c[] = {
        {"a\xe1\xa0\x8e b", 6, 0, {64, 157, 254, 236, 275}, 5},
        {"a \xe1\xa0\x8e" "b", 6, 0, {64, 28053, 254, 236, 65}, 5},
        {"\0", 1, 0, {188}, 1},
        {"<|endoftext|>", 13, 1, {50256}, 1},
        {"", 0, 1, {0}, 0},
    };
    gk_vocab *v = load_gpt2();
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    gk_bpe *b;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        size_t n;
        uint32_t *ids = enc(b, c[i].t, c[i].len, c[i].special, &n);
        CHECKF(same(ids, n, c[i].ids, c[i].n), "extra case %zu", i);
        free(ids);
    }
    gk_bpe_free(b);
    gk_vocab_free(v);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Long pieces take O(n log n): counts checked with Python tiktoken. */
static void test_long_pieces(void)
{
    gk_vocab *v = load_gpt2();
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    gk_bpe *b;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    size_t n = 200001, got;
    char *t = malloc(2 * n);
    memset(t, 'a', n);
    double t0 = now();
    uint32_t *ids = enc(b, t, n - 1, 0, &got);
    CHECKF(got == 50000, "200000 a: %zu ids", got);
    free(ids);
    ids = enc(b, t, n, 0, &got);
    CHECKF(got == 50001, "200001 a: %zu ids", got);
    free(ids);
    memset(t, ' ', 100000);
    ids = enc(b, t, 100000, 0, &got);
    CHECKF(got == 100000, "100000 spaces: %zu ids", got);
    free(ids);
    for (size_t i = 0; i < 100000; i++) memcpy(t + 2 * i, "\xc3\xa9", 2);
    ids = enc(b, t, 200000, 0, &got);
    CHECKF(got == 100000, "100000 e-acute: %zu ids", got);
    free(ids);
    double dt = now() - t0;
    CHECKF(dt < 5.0, "long pieces took %.2f s", dt);
    free(t);
    gk_bpe_free(b);
    gk_vocab_free(v);
}

/* ---------------------------------------------------------------- very long pieces */

/* The text of a tests/fixtures/long_pieces.txt case, as tests/ref/long_pieces.py makes it. */
static char *long_text(const char *name, uint64_t seed, size_t chars, size_t *len)
{
    static const struct {
        const char *name, *alpha[30];
    } al[] = {
        {"a", {"a"}},
        {"letters", {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
                     "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z"}},
        {"ab", {"a", "b"}},
        {"digits", {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
        {"zeros", {"0"}},
        {"spaces", {" "}},
        {"newlines", {"\n"}},
        {"blanks", {" ", "\t", "\n"}},
        {"punct", {"!", "#", "$", "%", "&", "'", "(", ")", "*", "+", ",", "-", ".", "/", ":",
                   ";", "<", "=", ">", "?", "@", "[", "]", "^", "_", "`", "{", "|", "}", "~"}},
        {"eacute", {"\xc3\xa9"}},
        {"unicode",
         {"\xc3\xa9", "\xc3\xa0", "\xc3\xbc", "\xc3\x9f", "\xe4\xb8\xad", "\xe6\x96\x87", "a"}},
    };
    for (size_t k = 0; k < sizeof al / sizeof al[0]; k++) {
        if (strcmp(al[k].name, name)) continue;
        size_t na = 0, o = 0;
        while (na < 30 && al[k].alpha[na]) na++;
        char *t = malloc(chars * 3 + 1);
        for (size_t i = 0; i < chars; i++) {
            const char *c = al[k].alpha[na == 1 ? 0 : rng_next(&seed) % na];
            size_t l = strlen(c);
            memcpy(t + o, c, l);
            o += l;
        }
        *len = o;
        return t;
    }
    return NULL;
}

static uint64_t fnv_ids(const uint32_t *ids, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) h = (h ^ ((ids[i] >> (8 * k)) & 0xFF)) * 0x100000001B3ull;
    return h;
}

/* Pieces of up to 5 MB equal tiktoken's ids: whole, in windows of 1 KB, and streamed. */
static void test_long_fixture(void)
{
    char name[32];
    FILE *f = fopen("tests/fixtures/long_pieces.txt", "r");
    gk_vocab *v = load_gpt2();
    if (!f || !v) {
        if (f) fclose(f);
        gk_vocab_free(v);
        SKIP("no tests/fixtures/long_pieces.txt (run from the source tree) or gpt2 vocab");
    }
    gk_bpe *b, *w;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    CHECK_OK(gk_bpe_create(&w, v, &e), &e);
    gk_bpe_set_window(w, 1024);
    unsigned long long seed, chars, count, hash;
    int cases = 0;
    while (fscanf(f, "%31s %llu %llu %llu %llx", name, &seed, &chars, &count, &hash) == 5) {
        size_t len, n;
        char *t = long_text(name, seed, chars, &len);
        CHECKF(t != NULL, "%s: unknown case", name);
        if (!t) continue;
        uint32_t *ids = enc(b, t, len, 0, &n);
        CHECKF(n == count && fnv_ids(ids, n) == hash, "%s %llu: %zu ids, want %llu", name, chars, n,
               count);
        free(ids);
        ids = enc_parts(b, t, len, 10007, GK_BPE_PART_KEEP, NULL, &n);
        CHECKF(n == count && fnv_ids(ids, n) == hash, "%s %llu streamed: %zu ids", name, chars, n);
        free(ids);
        if (len <= 1100000) {
            ids = enc(w, t, len, 0, &n);
            CHECKF(n == count && fnv_ids(ids, n) == hash, "%s %llu, 1 KB windows: %zu ids", name,
                   chars, n);
            free(ids);
        }
        free(t);
        cases++;
    }
    CHECKF(cases >= 18, "only %d cases read", cases);
    fclose(f);
    gk_bpe_free(b);
    gk_bpe_free(w);
    gk_vocab_free(v);
}

static size_t cut(const char *s, size_t from)
{
    return gk_bpe_split_point(s, strlen(s), from, GK_PATTERN_GPT2);
}

/* Cutting tinyshakespeare at every split point and encoding the parts gives the same ids. */
static void test_split_points(void)
{
    char path[4096];
    size_t len, nw, n, cuts = 0;
    snprintf(path, sizeof path, "%s/tinyshakespeare/input.txt", test_data_dir());
    char *t = slurp(path, &len);
    gk_vocab *v = load_gpt2();
    if (!t || !v) {
        free(t);
        gk_vocab_free(v);
        SKIP("no tinyshakespeare or gpt2 vocab in the test data dir");
    }
    gk_bpe *b;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    uint32_t *whole = enc(b, t, len, 0, &nw), *parts = NULL;
    size_t cap = 0;
    n = 0;
    for (size_t p0 = 0; p0 < len;) {
        size_t p1 = gk_bpe_split_point(t, len, p0 + 1, GK_PATTERN_GPT2);
        CHECK(p1 > p0 && p1 <= len);
        CHECK_OK(gk_bpe_encode(b, t + p0, p1 - p0, 0, &parts, &n, &cap, &e), &e);
        p0 = p1;
        cuts++;
    }
    CHECKF(same(whole, nw, parts, n), "split encode differs (%zu vs %zu ids)", n, nw);
    CHECKF(cuts > 10000, "only %zu cuts", cuts);
    /* the rule on small strings */
    CHECK(cut("ab\ncd", 0) == 2);              /* letter, then White_Space */
    CHECK(cut("ab\ncd", 3) == 3);              /* the newline between graphic chars */
    CHECK(cut("ab\ncd", 4) == 5);
    CHECK(cut("  \n  x", 0) == 6);             /* never after White_Space but that */
    CHECK(cut(" \nb", 0) == 3);
    CHECK(cut("12ab!? x", 0) == 2);            /* digit, letter, other, space */
    CHECK(cut("12ab!? x", 3) == 4);
    CHECK(cut("12ab!? x", 5) == 6);
    CHECK(cut("''s", 0) == 3);                 /* not after an apostrophe */
    CHECK(cut("a\xc3\xa9" "b", 0) == 4);       /* ASCII on both sides only */
    CHECK(cut("a<|endoftext|>b", 0) == 1);
    CHECK(cut("a<|endoftext|>b", 2) == 14);    /* not inside the literal */
    free(whole);
    free(parts);
    free(t);
    gk_bpe_free(b);
    gk_vocab_free(v);
}

/* The ASCII scanner and the PCRE2 regex cut random texts into the same pieces. */
static void test_pretok_fast_vs_regex(void)
{
    gk_pretok *p;
    gk_err e;
    CHECK_OK(gk_pretok_create(&p, GK_PATTERN_GPT2, &e), &e);
    size_t cap = 1 << 20;
    char *t = malloc(cap);
    uint64_t seed = 0x1234567u;
    size_t pieces = 0, bad = 0;
    for (int round = 0; round < 400 && !bad; round++) {
        size_t len =
            random_text(t, round < 8 ? cap : 64 + rng_next(&seed) % 3000, &seed, round % 4 != 3);
        for (size_t i = 0; i < len;) {
            size_t a = gk_pretok_next(p, t, len, i, &e), r = gk_pretok_regex(p, t, len, i, &e);
            if (a != r || a <= i) {
                CHECKF(0, "round %d at byte %zu: fast path %zu, regex %zu", round, i, a, r);
                bad++;
                break;
            }
            i = r;
            pieces++;
        }
    }
    CHECK(pieces > 1000000);
    free(t);
    gk_pretok_free(p);
}

/* A piece at the end of the text and every split of small strings: whitespace backs off. */
static void test_pretok_edges(void)
{
    static const char *s[] = {"a  ", "a  b", "  ", " ", "\n\n\nx", "x \n", " 's", "'''s",
                              "a\t b", "a \xc2\xa0" "b", "\xc2\xa0 x", "x'", "x're'", "?? ",
                              "1 2  3   ", " \x7f", "\x1c ", "e\xcc\x81" "b"};
    gk_pretok *p;
    gk_err e;
    CHECK_OK(gk_pretok_create(&p, GK_PATTERN_GPT2, &e), &e);
    for (size_t k = 0; k < sizeof s / sizeof s[0]; k++) {
        size_t len = strlen(s[k]);
        for (size_t i = 0; i < len;) {
            size_t a = gk_pretok_next(p, s[k], len, i, &e),
                   r = gk_pretok_regex(p, s[k], len, i, &e);
            CHECKF(a == r, "\"%s\" at %zu: fast %zu, regex %zu", s[k], i, a, r);
            i = r > i ? r : len;
        }
    }
    gk_pretok_free(p);
}

/* Mixed random text: encode with the heap merge for every piece equals the default. */
static void test_heap_vs_scan_random(void)
{
    gk_vocab *v = load_gpt2();
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    gk_bpe *b, *h;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    CHECK_OK(gk_bpe_create(&h, v, &e), &e);
    gk_bpe_set_heap_min(h, 2);
    char *t = malloc(200000);
    uint64_t seed = 99;
    size_t len = random_text(t, 200000, &seed, 0), n1, n2;
    uint32_t *a = enc(b, t, len, 1, &n1), *c = enc(h, t, len, 1, &n2);
    CHECK(same(a, n1, c, n2));
    CHECK(decodes_to(v, a, n1, t, len));
    free(a);
    free(c);
    free(t);
    gk_bpe_free(b);
    gk_bpe_free(h);
    gk_vocab_free(v);
}

int main(void)
{
    RUN(test_cases);
    RUN(test_extra_cases);
    RUN(test_long_pieces);
    RUN(test_long_fixture);
    RUN(test_split_points);
    RUN(test_pretok_fast_vs_regex);
    RUN(test_pretok_edges);
    RUN(test_heap_vs_scan_random);
    return TEST_END();
}
