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

int main(void)
{
    RUN(test_windows_equal_forward);
    RUN(test_inputs);
    return TEST_END();
}
