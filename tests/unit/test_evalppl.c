/* test_evalppl.c: gpt-evalppl's modules (evalppl/score.c and input.c, linked in by the Makefile's
 * test_TOOL rule). On a stream of exactly k*block_size+1 tokens with
 * context = stride = block_size, the mean NLL equals the mean of gk_gpt2_forward's losses over
 * the k consecutive windows (gpt-train's val windows laid end to end); with a smaller stride
 * every token but the first is still scored once, in order; inputs are told apart and checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/io/choice.h"
#include "common/text/encode_text.h"
#include "evalppl/input.h"
#include "evalppl/score.h"
#include "kernels/cpu/cpu.h"
#include "kernels/rng.h"
#include "test.h"

typedef struct seen {
    size_t n, last;
    int in_order;
} seen;

static void on_token(void *ctx, size_t pos, double nll)
{
    seen *s = ctx;
    s->in_order &= pos == s->last + 1 && nll > 0;
    s->last = pos;
    s->n++;
}

static void test_windows_equal_forward(void)
{
    gk_err e = {0};
    gk_backend *be = NULL;
    gk_gpt2 *m = NULL;
    ep_scorer *sc = NULL;
    enum { BS = 16, K = 3, N = K * BS + 1 };
    gk_gpt2_config cfg = {2, 2, 32, BS, 40, 1, 0.0f};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    CHECK_OK(gk_gpt2_create(&m, &cfg, be, 1, BS, &e), &e);
    CHECK_OK(gk_gpt2_init(m, 5, &e), &e);
    uint32_t ids[N];
    uint64_t key = gk_rng_key(11, 0, 0, 2);
    for (int i = 0; i < N; i++) ids[i] = (uint32_t)(gk_rng_uniform(key, i) * cfg.vocab_size);
    // direct: the K windows as gpt-train evaluates them
    double want = 0;
    for (int w = 0; w < K; w++) {
        int x[BS], y[BS];
        for (int i = 0; i < BS; i++) x[i] = (int)ids[w * BS + i], y[i] = (int)ids[w * BS + i + 1];
        float loss;
        CHECK_OK(gk_gpt2_forward(m, x, y, 1, BS, &loss, &e), &e);
        want += loss / K;
    }
    CHECK_OK(ep_scorer_create(&sc, m, BS, BS, &e), &e);
    double sum = 0;
    seen s = {0, 0, 1};
    CHECK_OK(ep_score(sc, ids, N, on_token, &s, &sum, &e), &e);
    CHECKF(s.n == N - 1 && s.in_order, "scored %zu", s.n);
    CHECKF(fabs(sum / (N - 1) - want) <= 1e-6 * want, "%.9f vs %.9f", sum / (N - 1), want);
    ep_scorer_free(sc);
    sc = NULL;
    // stride 5 in windows of 16, and a stream that ends mid-window
    CHECK_OK(ep_scorer_create(&sc, m, BS, 5, &e), &e);
    s = (seen){0, 0, 1};
    sum = 0;
    CHECK_OK(ep_score(sc, ids, N - 7, on_token, &s, &sum, &e), &e);
    CHECKF(s.n == N - 8 && s.in_order, "scored %zu", s.n);
    // a one-token stream scores nothing
    s = (seen){0, 0, 1};
    CHECK_OK(ep_score(sc, ids, 1, on_token, &s, &sum, &e), &e);
    CHECK(s.n == 0);
    ep_scorer_free(sc);
    CHECK(ep_scorer_create(&sc, m, BS, BS + 1, &e) == GK_EUSAGE);
    gk_gpt2_free(m);
    gk_backend_free(be);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_inputs(void)
{
    gk_err e = {0};
    char dir[] = "/tmp/test_evalppl_XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    gk_vocab *v = NULL;
    uint32_t cps[4] = {'\n', 'a', 'b', 0xE9};
    CHECK_OK(gk_vocab_from_chars(&v, cps, 4, &e), &e);
    ep_stream s;
    // text
    snprintf(path, sizeof path, "%s/t.txt", dir);
    write_file(path, "ab\xC3\xA9\n", 5);
    CHECK_OK(ep_load(&s, path, v, 0, 4, &e), &e);
    CHECK(s.n == 4 && s.ids[2] == 3 && s.bytes == 5);
    ep_stream_free(&s);
    CHECK(ep_load(&s, path, NULL, 0, 4, &e) == GK_ENOTFOUND);
    ep_stream_free(&s);
    // a shard: header + 3 uint16 tokens; then a wrong count, a token out of range
    unsigned char sh[1024 + 6] = {0};
    int32_t h[5] = {20240520, 1, 3, 4, 0};
    memcpy(sh, h, sizeof h);
    sh[1024] = 1, sh[1026] = 2, sh[1028] = 3;
    snprintf(path, sizeof path, "%s/s.bin", dir);
    write_file(path, sh, sizeof sh);
    CHECK_OK(ep_load(&s, path, v, 0, 4, &e), &e);
    CHECK(s.n == 3 && s.ids[0] == 1 && s.ids[2] == 3 && s.bytes == -1);
    ep_stream_free(&s);
    h[2] = 4;
    memcpy(sh, h, sizeof h);
    write_file(path, sh, sizeof sh);
    CHECK(ep_load(&s, path, v, 0, 4, &e) == GK_EFORMAT && strstr(e.msg, "header says 4"));
    ep_stream_free(&s);
    h[2] = -1;
    memcpy(sh, h, sizeof h);
    sh[1028] = 9;
    write_file(path, sh, sizeof sh);
    CHECK(ep_load(&s, path, v, 0, 4, &e) == GK_EFORMAT && strstr(e.msg, "token 9 at position 2"));
    ep_stream_free(&s);
    // raw uint16
    CHECK_OK(ep_load(&s, path, v, 1, 1 << 16, &e), &e);
    CHECK(s.n == 515);
    ep_stream_free(&s);
    write_file(path, sh, 7);
    CHECK(ep_load(&s, path, v, 1, 4, &e) == GK_EFORMAT);
    ep_stream_free(&s);
    snprintf(path, sizeof path, "%s/none", dir);
    CHECK(ep_load(&s, path, v, 0, 4, &e) == GK_ENOTFOUND);
    ep_stream_free(&s);
    gk_vocab_free(v);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* A long ctx is encoded only from a whitespace that no pre-token spans (common/io/choice.c):
 * its kept tokens are the last `context` of the whole text's, for contexts from 1 to 64 and
 * Tiny Shakespeare cut at many lengths (the cut falls after words, punctuation, digits and
 * before spaces, newlines and runs of them). */
static void test_choice_ctx_tail(void)
{
    char path[4096], dir[] = "/tmp/test_evalppl_XXXXXX", items[128];
    snprintf(path, sizeof path, "%s/tinyshakespeare/input.txt", test_data_dir());
    FILE *f = fopen(path, "rb");
    snprintf(path, sizeof path, "%s/gpt2", test_data_dir());
    gk_vocab *v = NULL;
    gk_err e = {0};
    if (!f || gk_vocab_load(&v, path, &e)) {
        if (f) fclose(f);
        SKIP("no tinyshakespeare or gpt2 vocab in the test data dir");
    }
    enum { LEN = 60000 };
    char *text = calloc(LEN + 1, 1);
    CHECK(fread(text, 1, LEN, f) == LEN);
    fclose(f);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(items, sizeof items, "%s/items.jsonl", dir);
    int contexts[] = {1, 3, 16, 64}, checked = 0;
    for (int c = 0; c < 4; c++) {
        FILE *out = fopen(items, "w");
        for (size_t len = 20000; len <= LEN; len += 997) {
            char save = text[len];
            text[len] = '\0';
            json_t *o =
                json_pack("{s:s, s:[s, s], s:i}", "ctx", text, "endings", "a", "b", "label", 0);
            text[len] = save;
            char *line = json_dumps(o, JSON_COMPACT);
            fprintf(out, "%s\n", line);
            free(line);
            json_decref(o);
        }
        fclose(out);
        gk_choice_set set;
        CHECK_OK(gk_choice_load(&set, items, v, 50257, contexts[c], &e), &e);
        for (size_t i = 0; i < set.n; i++) {
            size_t len = 20000 + 997 * i, n = 0, cap = 0;
            uint32_t *ids = NULL;
            CHECK_OK(gk_text_encode(v, text, len, 0, &ids, &n, &cap, NULL, &e), &e);
            const gk_choice_item *it = &set.items[i];
            CHECKF(it->n_ctx == contexts[c] &&
                   memcmp(it->ids, ids + n - (size_t)contexts[c], (size_t)contexts[c] * 4) == 0,
                   "context %d, %zu bytes: the last tokens differ", contexts[c], len);
            checked++;
            free(ids);
        }
        gk_choice_free(&set);
    }
    CHECK(checked == 4 * 41);
    remove(items);
    rmdir(dir);
    free(text);
    gk_vocab_free(v);
}

/* Every cut gk_choice_ctx_start picks encodes in two parts as the whole does: 2000 bytes of Tiny
 * Shakespeare and a text of whitespace runs, contractions, digits and non-ASCII letters, with
 * every keep from 0 to the length. */
static void test_choice_ctx_start(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tinyshakespeare/input.txt", test_data_dir());
    FILE *f = fopen(path, "rb");
    snprintf(path, sizeof path, "%s/gpt2", test_data_dir());
    gk_vocab *v = NULL;
    gk_err e = {0};
    if (!f || gk_vocab_load(&v, path, &e)) {
        if (f) fclose(f);
        SKIP("no tinyshakespeare or gpt2 vocab in the test data dir");
    }
    char shakespeare[2001] = {0};
    CHECK(fread(shakespeare, 1, 2000, f) == 2000);
    fclose(f);
    const char *texts[] = {shakespeare,
                           "it's  a \n\n  test's 12  345\t\tdon't\r\n 'll x  \u00e9t\u00e9  "
                           "caf\u00e9 \u00a0 z .  ,, \"q\" \n"};
    int cuts = 0;
    for (int t = 0; t < 2; t++) {
        size_t len = strlen(texts[t]), nw = 0, cw = 0;
        uint32_t *whole = NULL;
        CHECK_OK(gk_text_encode(v, texts[t], len, 0, &whole, &nw, &cw, NULL, &e), &e);
        for (size_t keep = 0, last = 0; keep <= len; keep++) {
            size_t p = gk_choice_ctx_start(texts[t], len, keep), n = 0, cap = 0;
            if (p == 0 || p == last) continue;
            last = p;
            uint32_t *ids = NULL;
            CHECK_OK(gk_text_encode(v, texts[t], p, 0, &ids, &n, &cap, NULL, &e), &e);
            CHECK_OK(gk_text_encode(v, texts[t] + p, len - p, 0, &ids, &n, &cap, NULL, &e), &e);
            CHECKF(n == nw && memcmp(ids, whole, n * sizeof *ids) == 0, "text %d cut at %zu", t, p);
            free(ids);
            cuts++;
        }
        free(whole);
    }
    CHECKF(cuts > 300, "%d cuts", cuts);
    gk_vocab_free(v);
}

int main(void)
{
    RUN(test_choice_ctx_start);
    RUN(test_choice_ctx_tail);
    RUN(test_windows_equal_forward);
    RUN(test_inputs);
    return TEST_END();
}
