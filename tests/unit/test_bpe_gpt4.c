/* test_bpe_gpt4.c: GPT-4's pre-tokenizer pattern (tiktoken's cl100k_base) with GPT-2's tokens:
 * the vocabulary naming it (merges' first line, fingerprint, an unknown name refused), its
 * pieces against those Python's regex module finds (tests/ref/bpe_learn_gpt4_check.py printed
 * them), cutting at its split points and streaming in parts change no id. (The encoding of a
 * learned GPT-4-pattern vocabulary against HuggingFace tokenizers: cli/tokenize_learn.) */
#include "bpe_harness.h"
#include "common/text/pretok.h"

/* GPT-2's tokens and merges with the first line naming pattern `name`, or NULL. */
static gk_vocab *gpt2_as(const char *name, gk_err *e)
{
    gk_vocab *v = load_gpt2(), *out = NULL;
    char *json = NULL, *m = NULL, *m2 = NULL;
    size_t jl = 0, ml = 0;
    if (v && !gk_vocab_to_json(v, &json, &jl, e) && !gk_vocab_merges(v, &m, &ml, e)) {
        const char *body = memchr(m, '\n', ml) + 1;
        size_t bl = ml - (size_t)(body - m);
        m2 = malloc(bl + 64);
        int k = snprintf(m2, 64, "#version: 0.2 pattern: %s\n", name);
        memcpy(m2 + k, body, bl);
        gk_vocab_load_mem(&out, json, jl, m2, (size_t)k + bl, "gpt2-as", e);
    }
    free(json), free(m), free(m2);
    gk_vocab_free(v);
    return out;
}

static void test_vocab_names_pattern(void)
{
    gk_err e = {0};
    gk_vocab *two = load_gpt2(), *four = gpt2_as("gpt4", &e);
    if (!two) SKIP("no gpt2 vocab in the test data dir");
    CHECKF(four != NULL, "%s", e.msg);
    if (!four) {
        gk_vocab_free(two);
        return;
    }
    CHECK(gk_vocab_pattern(two) == GK_PATTERN_GPT2 && gk_vocab_pattern(four) == GK_PATTERN_GPT4);
    CHECK(gk_vocab_fingerprint(two) != gk_vocab_fingerprint(four));
    char *m = NULL;
    size_t ml = 0;
    CHECK_OK(gk_vocab_merges(four, &m, &ml, &e), &e);
    CHECK(m && !strncmp(m, "#version: 0.2 pattern: gpt4\n", 28));
    free(m);
    gk_vocab *bad = gpt2_as("gpt5", &e);
    CHECKF(!bad && e.code == GK_EFORMAT && strstr(e.msg, "gpt2-as (merges):1: ") &&
           strstr(e.msg, "\"gpt5\" unknown"), "%s", e.msg);
    gk_vocab_free(two);
    gk_vocab_free(four);
}

/* The pieces of a text exercising the pattern, as Python's regex module cuts it. */
static void test_pieces(void)
{
    static const char text[] = "a\xc2\x85" "b \xc2\xa0" "c\xe1\x9a\x80" "d\xe2\x80\x80"
                               "e\xe2\x80\x8b" "f\xe1\xa0\x8e" "g\xe3\x80\x80\xe3\x80\x80"
                               "h\n\n  \n x\r\n\r\ny 123456789 'S 'LL \xc5\xbf";
    static const char *const want[] = {
        "a", "\xc2\x85" "b", " ", "\xc2\xa0" "c", "\xe1\x9a\x80" "d", "\xe2\x80\x80" "e",
        "\xe2\x80\x8b" "f", "\xe1\xa0\x8e" "g", "\xe3\x80\x80", "\xe3\x80\x80" "h", "\n\n  \n",
        " x", "\r\n\r\n", "y", " ", "123", "456", "789", " '", "S", " '", "LL", " \xc5\xbf"};
    gk_pretok *p;
    gk_err e = {0};
    CHECK_OK(gk_pretok_create(&p, GK_PATTERN_GPT4, &e), &e);
    size_t len = sizeof text - 1, k = 0, n = sizeof want / sizeof *want;
    for (size_t i = 0; i < len && k < n; k++) {
        size_t j = gk_pretok_next(p, text, len, i, &e);
        CHECKF(j - i == strlen(want[k]) && !memcmp(text + i, want[k], j - i),
               "piece %zu: \"%.*s\", want \"%s\"", k, (int)(j - i), text + i, want[k]);
        i = j > i ? j : len;
    }
    CHECK(k == n);
    gk_pretok_free(p);
}

/* Marks in end[] (len + 1 bytes, zeroed) the end of each GPT-4 piece of s[0..len) at base. */
static void mark_pieces(gk_pretok *p, const char *s, size_t len, unsigned char *end, size_t base)
{
    gk_err e = {0};
    for (size_t i = 0; i < len;) {
        size_t j = gk_pretok_next(p, s, len, i, &e);
        CHECKF(j > i, "no piece at %zu: %s", i, e.msg);
        i = j > i ? j : len;
        end[base + i] = 1;
    }
}

static size_t cut4(const char *s, size_t from)
{
    return gk_bpe_split_point(s, strlen(s), from, GK_PATTERN_GPT4);
}

/* Cutting Tiny Shakespeare and random text at every GPT-4 split point gives the same pieces
 * and ids. */
static void test_split_points(void)
{
    char path[4096];
    size_t len = 0, nw, n = 0, cap = 0, cuts = 0;
    snprintf(path, sizeof path, "%s/tinyshakespeare/input.txt", test_data_dir());
    char *t = slurp(path, &len);
    gk_err e = {0};
    gk_vocab *v = gpt2_as("gpt4", &e);
    if (!t || !v) {
        free(t);
        gk_vocab_free(v);
        SKIP("no tinyshakespeare or gpt2 vocab in the test data dir");
    }
    t = realloc(t, len + 300000);
    uint64_t seed = 44;
    len += random_text(t + len, 300000, &seed, 0);
    gk_bpe *b;
    gk_pretok *p;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    CHECK_OK(gk_pretok_create(&p, GK_PATTERN_GPT4, &e), &e);
    unsigned char *ends = calloc(len + 1, 1), *cut_ends = calloc(len + 1, 1);
    mark_pieces(p, t, len, ends, 0);
    uint32_t *whole = enc(b, t, len, 0, &nw), *parts = NULL;
    for (size_t p0 = 0; p0 < len; cuts++) {
        size_t p1 = gk_bpe_split_point(t, len, p0 + 1, GK_PATTERN_GPT4);
        CHECK(p1 > p0 && p1 <= len);
        CHECK_OK(gk_bpe_encode(b, t + p0, p1 - p0, 0, &parts, &n, &cap, &e), &e);
        mark_pieces(p, t + p0, p1 - p0, cut_ends, p0);
        p0 = p1;
    }
    size_t bad = 0;
    while (bad <= len && ends[bad] == cut_ends[bad]) bad++;
    CHECKF(bad > len, "the parts' pieces differ at byte %zu: \"%.20s\"", bad,
           t + (bad > 10 ? bad - 10 : 0));
    CHECKF(same(whole, nw, parts, n), "split encode differs (%zu vs %zu ids)", n, nw);
    CHECKF(cuts > 10000, "only %zu cuts", cuts);
    CHECK(cut4("ab.cd", 0) == 2 && cut4("ab.cd", 3) == 5); /* not before the letters' prefix */
    CHECK(cut4("ab.\ncd", 3) == 4);                        /* after ".\n", not before its '\n' */
    CHECK(cut4("a. b", 2) == 2 && cut4("12ab3", 0) == 2 && cut4("12ab3", 3) == 4);
    free(whole), free(parts), free(t), free(ends), free(cut_ends);
    gk_bpe_free(b);
    gk_pretok_free(p);
    gk_vocab_free(v);
}

/* Streamed in parts, random text and whitespace runs with newlines (which "\s*[\r\n]" reads to
 * their last newline) of every length give the ids of one encode, each part ending where a
 * piece does. */
static void test_streamed(void)
{
    gk_err e = {0};
    gk_vocab *v = gpt2_as("gpt4", &e);
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    gk_bpe *b;
    gk_pretok *p;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    CHECK_OK(gk_pretok_create(&p, GK_PATTERN_GPT4, &e), &e);
    size_t cap = 1 << 20, len, nw, np;
    char *t = malloc(cap);
    uint64_t seed = 7;
    len = random_text(t, 100000, &seed, 0);
    static const size_t sizes[] = {20, 100, 3000, 12000};
    for (int k = 0; k < 4; k++)
        for (int form = 0; form < 4; form++) { /* spaces, '\n', spaces or tabs, '\n' or not */
            memset(t + len, ' ', sizes[k]), len += sizes[k];
            t[len++] = '\n';
            memset(t + len, form & 1 ? '\t' : ' ', sizes[k]), len += sizes[k];
            if (form & 2) t[len++] = '\n';
            len += (size_t)snprintf(t + len, 16, "x%d.", form);
        }
    unsigned char *stops = calloc(len + 1, 1); /* piece ends, and inside long pieces */
    mark_pieces(p, t, len, stops, 0);
    for (size_t i = 0, j; i < len; i = j) {
        for (j = i + 1; !stops[j]; j++) {}
        for (size_t k = i + 1; j - i > GK_BPE_LONG_WIN && k < j; k++) stops[k] = 1;
    }
    uint32_t *whole = enc(b, t, len, 0, &nw);
    for (size_t part = 17; part < 40000; part *= 5) {
        uint32_t *ids = enc_parts(b, t, len, part, len, stops, &np);
        CHECKF(same(whole, nw, ids, np), "parts of %zu: %zu ids, want %zu", part, np, nw);
        free(ids);
    }
    /* without such runs the hold is GK_BPE_PART_KEEP */
    len = random_text(t, 200000, &seed, 0);
    free(whole);
    whole = enc(b, t, len, 0, &nw);
    uint32_t *ids = enc_parts(b, t, len, 1500, GK_BPE_PART_KEEP, NULL, &np);
    CHECK(same(whole, nw, ids, np));
    free(ids), free(whole), free(t), free(stops);
    gk_bpe_free(b);
    gk_pretok_free(p);
    gk_vocab_free(v);
}

int main(void)
{
    RUN(test_vocab_names_pattern);
    RUN(test_pieces);
    RUN(test_split_points);
    RUN(test_streamed);
    return TEST_END();
}
