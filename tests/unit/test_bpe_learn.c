/* test_bpe_learn.c: the BPE learner's parts (common/text/bpe_learn*.c) on hand-checked cases;
 * its merges against HuggingFace tokenizers' on real text are cli/tokenize_learn's.
 * - the counter: counts add up (also through absorb), and a bound it passes drops the rarest
 *   pre-tokens first, counted;
 * - the merges: overlapping pairs merge left to right ("aaa": aa, then aa + a), a tie goes to the
 *   lowest (left, right) ids in GPT-2's byte order ("ab" before "cd"; '!' before 'a'), counts
 *   weigh (a pair of a pre-token seen 3 times beats one seen twice), the learning stops where
 *   the text allows no more, and a stop flag ends it with GK_EINTR. */
#include <string.h>

#include "common/text/bpe_learn.h"
#include "test.h"

typedef struct found {
    const char *piece;
    uint64_t count;
    int seen;
} found;

static int find_piece(void *ctx, const unsigned char *piece, size_t n, uint64_t count)
{
    found *f = ctx;
    if (n == strlen(f->piece) && !memcmp(piece, f->piece, n)) f->count = count, f->seen++;
    return 0;
}

static uint64_t count_of(const gk_bpe_counter *c, const char *piece)
{
    found f = {piece, 0, 0};
    gk_bpe_counter_each(c, find_piece, &f);
    return f.seen == 1 ? f.count : 0;
}

static void test_counter(void)
{
    gk_bpe_counter *a = NULL, *b = NULL;
    gk_err e = {0};
    CHECK_OK(gk_bpe_counter_new(&a, 64 << 20, &e), &e);
    CHECK_OK(gk_bpe_counter_new(&b, 64 << 20, &e), &e);
    if (!a || !b) return;
    CHECK_OK(gk_bpe_counter_add(a, " the", 4, 2, &e), &e);
    CHECK_OK(gk_bpe_counter_add(a, " the", 4, 1, &e), &e);
    CHECK_OK(gk_bpe_counter_add(b, " the", 4, 5, &e), &e);
    CHECK_OK(gk_bpe_counter_add(b, "cat", 3, 1, &e), &e);
    CHECK_OK(gk_bpe_counter_absorb(a, b, &e), &e);
    CHECK(count_of(a, " the") == 8 && count_of(a, "cat") == 1 && gk_bpe_counter_distinct(a) == 2);
    gk_bpe_counter_free(a);
    gk_bpe_counter_free(b);
    /* past a bound of 1 MB: 200000 pieces seen once, 10 seen 50 times */
    CHECK_OK(gk_bpe_counter_new(&a, 1 << 20, &e), &e);
    char piece[32];
    for (int i = 0; a && i < 10; i++) {
        snprintf(piece, sizeof piece, "common%d", i);
        CHECK_OK(gk_bpe_counter_add(a, piece, strlen(piece), 50, &e), &e);
    }
    for (int i = 0; a && i < 200000; i++) {
        snprintf(piece, sizeof piece, "rare%d", i);
        CHECK_OK(gk_bpe_counter_add(a, piece, strlen(piece), 1, &e), &e);
    }
    uint64_t pd = 0, po = 0;
    if (a) gk_bpe_counter_pruned(a, &pd, &po);
    CHECKF(a && pd > 0 && pd == po && count_of(a, "common3") == 50 &&
           gk_bpe_counter_distinct(a) + pd == 200010,
           "dropped %llu (%llu occurrences), %zu kept", (unsigned long long)pd,
           (unsigned long long)po, a ? gk_bpe_counter_distinct(a) : 0);
    gk_bpe_counter_free(a);
}

/* The merges learned from pieces[i] seen counts[i] times, "A+B" each, into out. */
static size_t learn(const char *const *pieces, const uint64_t *counts, int n, size_t tokens,
                    char out[][32], gk_bpe_learned *l)
{
    gk_bpe_counter *c = NULL;
    gk_err e = {0};
    CHECK_OK(gk_bpe_counter_new(&c, 1 << 20, &e), &e);
    for (int i = 0; c && i < n; i++)
        CHECK_OK(gk_bpe_counter_add(c, pieces[i], strlen(pieces[i]), counts[i], &e), &e);
    if (c) CHECK_OK(gk_bpe_learn(c, tokens, NULL, NULL, NULL, l, &e), &e);
    gk_bpe_counter_free(c);
    for (size_t m = 0; m < l->n_merges && m < 8; m++) {
        size_t la, lb;
        const unsigned char *a = gk_bpe_learned_token(l, l->left[m], &la),
                            *b = gk_bpe_learned_token(l, l->right[m], &lb);
        snprintf(out[m], 32, "%.*s+%.*s", (int)la, (const char *)a, (int)lb, (const char *)b);
    }
    return l->n_merges;
}

static void test_merges(void)
{
    char got[8][32];
    gk_bpe_learned l = {0};
    const char *aaa[] = {"aaa"};
    uint64_t one[] = {1, 1, 1}, w[] = {2, 3};
    size_t n = learn(aaa, one, 1, 300, got, &l);
    CHECKF(n == 2 && !strcmp(got[0], "a+a") && !strcmp(got[1], "aa+a") && l.n_tokens == 258,
           "aaa: %zu merges: %s, %s", n, got[0], n > 1 ? got[1] : "");
    gk_bpe_learned_free(&l);
    const char *ties[] = {"cd", "ab", "a!"};
    n = learn(ties, one, 3, 300, got, &l);
    CHECKF(n == 3 && !strcmp(got[0], "a+!") && !strcmp(got[1], "a+b") && !strcmp(got[2], "c+d"),
           "ties: %s %s %s", got[0], got[1], got[2]);
    CHECK(l.byte_of[0] == '!' && l.byte_of[64] == 'a' && l.byte_of[188] == 0);
    gk_bpe_learned_free(&l);
    const char *weigh[] = {"ab", "cd"};
    n = learn(weigh, w, 2, 257, got, &l); /* one merge asked */
    CHECKF(n == 1 && !strcmp(got[0], "c+d"), "counts: %s", got[0]);
    gk_bpe_learned_free(&l);
    /* a stop flag set: GK_EINTR, nothing kept */
    gk_bpe_counter *c = NULL;
    gk_err e = {0};
    volatile int stop = 1;
    CHECK_OK(gk_bpe_counter_new(&c, 1 << 20, &e), &e);
    if (c) CHECK_OK(gk_bpe_counter_add(c, "abab", 4, 1, &e), &e);
    CHECK(c && gk_bpe_learn(c, 300, NULL, NULL, &stop, &l, &e) == GK_EINTR && !l.n_merges &&
          strstr(e.msg, "stopped"));
    gk_bpe_counter_free(c);
}

int main(void)
{
    RUN(test_counter);
    RUN(test_merges);
    return TEST_END();
}
