/* test_sampler.c: the sampler chain (kernels/infer/sampler.h) and streamed text
 * (common/text/textout.h):
 * each sampling step on hand-checked
 * distributions, greedy, determinism of the counter-based draws, the frequencies of many draws,
 * and the UTF-8 hold-back of streamed token bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/textout.h"
#include "kernels/infer/sampler.h"
#include "test.h"

#define NEAR(a, b, tol) (fabs((double)(a) - (double)(b)) <= (tol))

static gk_cand buf[64];

static void test_softmax(void)
{
    gk_list l = {buf, 0, 0};
    float x[3] = {1, 2, 3};
    gk_fill(&l, x, 3);
    gk_softmax(&l);
    double z = exp(1) + exp(2) + exp(3);
    for (int i = 0; i < 3; i++)
        CHECKF(NEAR(l.c[i].p, exp(i + 1) / z, 1e-6), "p[%d] = %g", i, l.c[i].p);
    // large logits: exp(1000) overflows unless the max is subtracted first
    float big[2] = {1000, 1001};
    gk_fill(&l, big, 2);
    gk_softmax(&l);
    CHECKF(NEAR(l.c[1].p, 1 / (1 + exp(-1)), 1e-6) && isfinite(l.c[0].p), "p = %g %g", l.c[0].p,
           l.c[1].p);
}

static void test_temperature(void)
{
    gk_list l = {buf, 0, 0};
    float x[2] = {2, 4};
    gk_fill(&l, x, 2);
    gk_temperature(&l, 2.0f);
    CHECK(l.c[0].logit == 1.0f && l.c[1].logit == 2.0f);
    gk_softmax(&l);
    CHECK(NEAR(l.c[1].p, 1 / (1 + exp(-1)), 1e-6));
}

static void test_top_k(void)
{
    gk_list l = {buf, 0, 0};
    float x[6] = {0.1f, 3, 2, 3, -1, 2.5f};
    gk_fill(&l, x, 6);
    gk_top_k(&l, 3);
    CHECK(l.n == 3 && l.sorted);
    CHECKF(l.c[0].id == 1 && l.c[1].id == 3 && l.c[2].id == 5, "%d %d %d", l.c[0].id, l.c[1].id,
           l.c[2].id);
    gk_fill(&l, x, 6);
    gk_top_k(&l, 1);
    CHECK(l.n == 1 && l.c[0].id == 1); /* tie: lower id */
    gk_fill(&l, x, 6);
    gk_top_k(&l, 0);
    CHECK(l.n == 6);
    gk_top_k(&l, 6);
    CHECK(l.n == 6);
}

static void test_top_p(void)
{
    gk_list l = {buf, 0, 0};
    float x[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    gk_fill(&l, x, 4);
    gk_softmax(&l);
    gk_top_p(&l, 0.7f); /* 0.5 < 0.7 <= 0.5 + 0.3 */
    CHECKF(l.n == 2 && l.c[0].id == 1 && l.c[1].id == 3, "n=%d", l.n);
    CHECKF(NEAR(l.c[0].p, 0.625, 1e-6) && NEAR(l.c[1].p, 0.375, 1e-6), "%g %g", l.c[0].p, l.c[1].p);
    gk_fill(&l, x, 4);
    gk_softmax(&l);
    gk_top_p(&l, 0.9f); /* 0.5 + 0.3 + 0.15 */
    CHECK(l.n == 3 && l.c[2].id == 0);
    gk_fill(&l, x, 4);
    gk_softmax(&l);
    gk_top_p(&l, 0.1f); /* never empty */
    CHECK(l.n == 1 && l.c[0].id == 1);
    gk_fill(&l, x, 4);
    gk_softmax(&l);
    gk_top_p(&l, 1.0f);
    CHECK(l.n == 4);
}

static void test_pick_and_greedy(void)
{
    gk_cand c[2] = {{7, 0, 0.625f}, {9, 0, 0.375f}};
    gk_list l = {c, 2, 1};
    CHECK(gk_pick(&l, 0.0f) == 7);
    CHECK(gk_pick(&l, 0.6f) == 7);
    CHECK(gk_pick(&l, 0.63f) == 9);
    CHECK(gk_pick(&l, 0.9999999f) == 9);
    float x[5] = {1, 5, 2, 5, 0};
    CHECK(gk_greedy(x, 5) == 1);
    /* as a scan keeping the first strict maximum: NaNs skipped (a first NaN kept), -0 ties +0 */
    float y[70];
    for (int i = 0; i < 70; i++) y[i] = (float)((i * 29) % 67) - 80.0f;
    y[40] = NAN;
    y[50] = -0.0f;
    y[61] = 0.0f;
    CHECK(gk_greedy(y, 70) == 50);
    y[50] = -1.0f;
    CHECK(gk_greedy(y, 70) == 61);
    y[0] = NAN;
    CHECK(gk_greedy(y, 70) == 0);
    y[0] = -INFINITY;
    y[69] = INFINITY;
    CHECK(gk_greedy(y, 70) == 69);
}

static void test_chain(void)
{
    gk_err e;
    enum { V = 50 };
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = sinf((float)i) * 3;
    gk_sampler *a = NULL, *b = NULL, *g = NULL;
    gk_params p = {0.8f, 10, 0.95f, 42}, q = p, greedy = {0, 0, 1, 1};
    q.seed = 43;
    CHECK_OK(gk_sampler_create(&a, &p, V, &e), &e);
    CHECK_OK(gk_sampler_create(&b, &q, V, &e), &e);
    CHECK_OK(gk_sampler_create(&g, &greedy, V, &e), &e);
    int same = 1, differ = 0;
    for (int step = 0; step < 200; step++) {
        int x = gk_sample(a, logits, 0, step), y = gk_sample(a, logits, 0, step);
        same &= x == y;
        differ |= x != gk_sample(b, logits, 0, step);
    }
    CHECK(same);
    CHECK(differ);
    CHECK(gk_sample(g, logits, 3, 17) == gk_greedy(logits, V));
    // frequencies: temperature 1, top-k 2 over {log 0.6, log 0.2, log 0.2 (ranked below id 1)}
    gk_params f = {1.0f, 2, 1.0f, 7};
    gk_sampler *s = NULL;
    float three[3] = {logf(0.6f), logf(0.2f), logf(0.2f)};
    CHECK_OK(gk_sampler_create(&s, &f, 3, &e), &e);
    int count[3] = {0};
    for (int i = 0; i < 20000; i++) count[gk_sample(s, three, 1, i)]++;
    CHECKF(count[2] == 0 && NEAR(count[0] / 20000.0, 0.75, 0.015), "%d %d %d", count[0], count[1],
           count[2]);
    CHECK(gk_sampler_create(&s, &(gk_params){-1, 0, 1, 0}, 3, &e) == GK_EUSAGE);
    gk_sampler_free(s);
    gk_sampler_free(a);
    gk_sampler_free(b);
    gk_sampler_free(g);
}

/* push a token's bytes; returns what came out */
static const char *push(gk_textout *t, const char *bytes, size_t n)
{
    static char got[64];
    CHECK(gk_textout_push(t, bytes, n) == 0);
    memcpy(got, t->out ? t->out : "", t->out_len);
    got[t->out_len] = 0;
    return got;
}

static void test_utf8_holdback(void)
{
    CHECK(gk_utf8_tail((const unsigned char *)"ab", 2) == 0);
    CHECK(gk_utf8_tail((const unsigned char *)"a\xC3", 2) == 1);
    CHECK(gk_utf8_tail((const unsigned char *)"\xF0\x9F\x98", 3) == 3);
    CHECK(gk_utf8_tail((const unsigned char *)"\xF0\x9F\x98\x80", 4) == 0);
    CHECK(gk_utf8_tail((const unsigned char *)"\xE0\x80", 2) == 0); /* invalid: no hold */
    CHECK(gk_utf8_tail((const unsigned char *)"\x80\x80", 2) == 0);
    gk_textout t;
    gk_textout_init(&t, NULL);
    CHECK(strcmp(push(&t, "\xC3", 1), "") == 0);
    CHECK(strcmp(push(&t, "\xA9!", 2), "\xC3\xA9!") == 0); /* é! */
    CHECK(strcmp(push(&t, "a\xF0\x9F", 3), "a") == 0);
    CHECK(strcmp(push(&t, "\x98", 1), "") == 0);
    CHECK(strcmp(push(&t, "\x80 b", 3), "\xF0\x9F\x98\x80 b") == 0); /* 😀 */
    CHECK(strcmp(push(&t, "\x80", 1), "\xEF\xBF\xBD") == 0);        /* stray continuation */
    CHECK(strcmp(push(&t, "\xC3", 1), "") == 0);
    CHECK(strcmp(push(&t, "x", 1), "\xEF\xBF\xBDx") == 0);          /* never completed */
    CHECK(strcmp(push(&t, "\xE2\x82", 2), "") == 0);
    CHECK(gk_textout_finish(&t) == 0 && t.out_len == 3 && memcmp(t.out, "\xEF\xBF\xBD", 3) == 0);
    gk_textout_free(&t);
}

int main(void)
{
    RUN(test_softmax);
    RUN(test_temperature);
    RUN(test_top_k);
    RUN(test_top_p);
    RUN(test_pick_and_greedy);
    RUN(test_chain);
    RUN(test_utf8_holdback);
    return TEST_END();
}
