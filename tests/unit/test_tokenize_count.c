/* test_tokenize_count.c: gpt-tokenize --learn's threaded counting (tokenize/learn_count.c) counts
 * the same pre-tokens on 1 and 4 threads: many small documents (blocks of several), a document
 * of 10 MB fed in pieces (cut where encoding may cut, its parts counted by different threads),
 * an empty one, and invalid UTF-8 (replaced, counted); with GPT-2's pattern and GPT-4's. Under
 * ThreadSanitizer too (make tsan). */
#include <string.h>

#include "common/text/pretok.h"
#include "test.h"
#include "tokenize/learn_count.h"

/* Document d's text: words, numbers and punctuation drawn from a small generator. */
static size_t doc_text(int d, char *out, size_t cap)
{
    static const char *words[] = {" the", " cat", " sat", ",", " 42", "\n", " on", " mat.", "  ",
                                  " caf\xc3\xa9", " \xff", "'s"};
    size_t n = 0;
    uint32_t x = 2463534242u ^ (uint32_t)d * 2654435761u;
    while (n + 16 < cap) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        const char *w = words[x % 12];
        memcpy(out + n, w, strlen(w));
        n += strlen(w);
    }
    return n;
}

static const gk_bpe_counter *count(tk_counting *k, char *buf, tk_count_stats *st)
{
    tk_consumer c = tk_counting_consumer(k);
    gk_err e = {0};
    for (int d = 0; d < 300; d++) { /* 300 small documents, one empty */
        size_t n = d == 7 ? 0 : doc_text(d, buf, 3000 + (size_t)d * 10);
        CHECK(c.begin(c.ctx, &e) == 0 && c.feed(c.ctx, buf, n, &e) == 0 && c.end(c.ctx, &e) == 0);
    }
    size_t big = doc_text(1000, buf, (size_t)10 << 20); /* one of 10 MB, fed 64 kB at a time */
    CHECK(c.begin(c.ctx, &e) == 0);
    for (size_t at = 0; at < big; at += 65536)
        CHECK(c.feed(c.ctx, buf + at, big - at < 65536 ? big - at : 65536, &e) == 0);
    CHECK(c.end(c.ctx, &e) == 0);
    const gk_bpe_counter *all = NULL;
    CHECK_OK(tk_counting_finish(k, &all, st, &e), &e);
    return all;
}

typedef struct other {
    const gk_bpe_counter *c;
    int bad;
    uint64_t total;
} other;

typedef struct look {
    const unsigned char *piece;
    size_t n;
    uint64_t count;
} look;

static int find(void *ctx, const unsigned char *piece, size_t n, uint64_t cnt)
{
    look *l = ctx;
    if (n == l->n && !memcmp(piece, l->piece, n)) l->count = cnt;
    return 0;
}

static int same_in(void *ctx, const unsigned char *piece, size_t n, uint64_t cnt)
{
    other *o = ctx;
    look l = {piece, n, 0};
    gk_bpe_counter_each(o->c, find, &l);
    o->bad += l.count != cnt;
    o->total += cnt;
    return 0;
}

static void threads_agree(int pattern)
{
    static char buf[(10 << 20) + 64];
    tk_counting *one = NULL, *four = NULL;
    tk_count_stats s1, s4;
    gk_err e = {0};
    CHECK_OK(tk_counting_new(&one, 1, pattern, (size_t)256 << 20, 0, &e), &e);
    CHECK_OK(tk_counting_new(&four, 4, pattern, (size_t)256 << 20, 0, &e), &e);
    if (!one || !four) return;
    const gk_bpe_counter *a = count(one, buf, &s1), *b = count(four, buf, &s4);
    other o = {b, 0, 0};
    if (a && b) gk_bpe_counter_each(a, same_in, &o);
    CHECKF(a && b && !o.bad && gk_bpe_counter_distinct(a) == gk_bpe_counter_distinct(b) &&
           o.total > 1000000, "%d pieces differ, %zu and %zu distinct", o.bad,
           a ? gk_bpe_counter_distinct(a) : 0, b ? gk_bpe_counter_distinct(b) : 0);
    CHECK(s1.docs == 301 && s4.docs == 301 && s1.bytes == s4.bytes && s1.replaced > 0 &&
          s1.replaced == s4.replaced);
    tk_counting_free(one);
    tk_counting_free(four);
}

static void test_threads_agree(void) { threads_agree(GK_PATTERN_GPT2); }
static void test_threads_agree_gpt4(void) { threads_agree(GK_PATTERN_GPT4); }

int main(void)
{
    RUN(test_threads_agree);
    RUN(test_threads_agree_gpt4);
    return TEST_END();
}
