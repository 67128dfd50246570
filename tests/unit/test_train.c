/* test_train.c: gpt-train's modules on their own: the data-window hash (pinned: data order must
 * not change), the learning-rate schedule, metrics.jsonl (null for non-finite values, history
 * kept on resume), the spike windows (hand-checked statistics; kept exactly in the trainer
 * state, bad ones refused), and recompute = auto's choice on a device that reports a given free
 * memory. */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_gpu.h"
#include "test.h"
#include "train/data.h"
#include "train/metrics.h"
#include "train/model_io.h"
#include "train/run.h"
#include "train/spikes.h"

static char dir[64];

/* The values of the hash before it moved onto kernels/rng.h's mixer: the windows every existing
 * run and checkpoint was trained on. */
static void test_hash_pinned(void)
{
    CHECK(tr_hash(1337, 1, 0, 0) == 0x86778c4eb324d8d5ULL);
    CHECK(tr_hash(1337, 3, 7, 11) == 0x6ca2f190c0cde8a7ULL);
    CHECK(tr_hash(0, 0, 0, 0) == 0x2130748aaac80268ULL);
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* A field carried but NaN or infinite is null (JSON has no such numbers); absent fields are
 * left out. */
static void test_metrics_null(void)
{
    gk_err e = {0};
    tr_metrics m;
    char path[128];
    CHECK_OK(tr_metrics_open(&m, dir, -1, &e), &e);
    tr_step_record r = {.step = 3,
                        .loss = NAN,
                        .lr = 1e-3,
                        .grad_norm = INFINITY,
                        .ms = 2,
                        .tokens_per_s = 5,
                        .has = TR_HAS_STEP};
    CHECK_OK(tr_metrics_log(&m, &r, &e), &e);
    tr_step_record ev = {.step = 4, .train_loss = 2.5, .val_loss = -INFINITY, .skipped = 2,
                         .has = TR_HAS_TRAIN_LOSS | TR_HAS_VAL_LOSS};
    CHECK_OK(tr_metrics_log(&m, &ev, &e), &e);
    tr_metrics_close(&m);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    const char *want = "{\"step\":3,\"loss\":null,\"lr\":0.001,\"grad_norm\":null,\"ms\":2.0,"
                       "\"tokens_per_s\":5.0}\n"
                       "{\"step\":4,\"train_loss\":2.5,\"val_loss\":null,\"skipped\":2}\n";
    CHECKF(strcmp(slurp(path), want) == 0, "got %s", slurp(path));
}

/* Resume appends: earlier lines stay (those past the resumed step too), a cut last line goes,
 * the plot takes the points up to the resumed step. */
static void test_metrics_resume_appends(void)
{
    gk_err e = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":1}\n{\"step\":4,"
          "\"lo",
          f);
    fclose(f);
    tr_metrics m;
    CHECK_OK(tr_metrics_open(&m, dir, 2, &e), &e);
    CHECK(m.n == 2 && m.pts[1].step == 2 && m.pts[1].loss == 2);
    tr_step_record r = {.step = 3,
                        .loss = 0.5,
                        .lr = 1,
                        .grad_norm = 1,
                        .ms = 1,
                        .tokens_per_s = 1,
                        .has = TR_HAS_STEP};
    CHECK_OK(tr_metrics_log(&m, &r, &e), &e);
    tr_metrics_close(&m);
    const char *want =
        "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":1}\n"
        "{\"step\":3,\"loss\":0.5,\"lr\":1.0,\"grad_norm\":1.0,\"ms\":1.0,\"tokens_per_s\":1.0}\n";
    CHECKF(strcmp(slurp(path), want) == 0, "got %s", slurp(path));
}

/* 64 ones and 64 threes: mean 2, sd 1, so z = 2 puts the limit at 4; no limit while the window
 * fills or with z = 0; a NaN is not kept; a new value drops the oldest. */
static void test_spike_window(void)
{
    tr_window w = {{0}, 0};
    double mean = 0, sd = 0;
    for (int i = 0; i < TR_SPIKE_WINDOW - 1; i++)
        tr_window_push(&w, i % 2 ? 3.0 : 1.0);
    CHECK(!tr_window_stats(&w, &mean, &sd) && tr_window_limit(&w, 2.0) == 0);
    tr_window_push(&w, NAN);
    CHECK(w.n == TR_SPIKE_WINDOW - 1);
    tr_window_push(&w, 3.0);
    CHECK(tr_window_stats(&w, &mean, &sd) && mean == 2.0 && sd == 1.0);
    CHECK(tr_window_limit(&w, 2.0) == 4.0 && tr_window_limit(&w, 0) == 0);
    tr_window_push(&w, 5.0); /* drops a 1: 63 ones, 64 threes, a 5 */
    CHECK(w.n == TR_SPIKE_WINDOW && w.v[0] == 3.0 && w.v[TR_SPIKE_WINDOW - 1] == 5.0);
    CHECK(tr_window_stats(&w, &mean, &sd) && mean == 260.0 / 128);
}

/* The windows go through the trainer state's JSON bit for bit; a state without them has empty
 * ones; a window that is not an array of at most 128 finite numbers is refused by name. */
static void test_state_windows(void)
{
    gk_err e = {0};
    tr_state s = {.step = 3, .best_val_loss = INFINITY, .world_size = 1}, t;
    for (int i = 0; i < TR_SPIKE_WINDOW + 5; i++)
        tr_window_push(&s.recent_loss, 1.0 / (i + 3));
    tr_window_push(&s.recent_norm, 0.1 + 0.2);
    char *json = tr_state_json(&s, NULL);
    CHECK_OK(tr_state_parse(json, "x", &t, &e), &e);
    CHECK(t.recent_loss.n == TR_SPIKE_WINDOW && t.recent_norm.n == 1 &&
          memcmp(t.recent_loss.v, s.recent_loss.v, sizeof s.recent_loss.v) == 0 &&
          t.recent_norm.v[0] == 0.1 + 0.2);
    free(json);
    CHECK_OK(tr_state_parse("{\"step\":1,\"tokens\":2,\"seed\":3,\"rng_counter\":4}", "x", &t, &e),
             &e);
    CHECK(t.recent_loss.n == 0 && t.recent_norm.n == 0);
    const char *bad[] =
        {"{\"step\":1,\"tokens\":2,\"seed\":3,\"rng_counter\":4,\"recent_loss\":{}}",
         "{\"step\":1,\"tokens\":2,\"seed\":3,\"rng_counter\":4,\"recent_grad_norm\":[1,\"a\"]}"};
    for (int i = 0; i < 2; i++) {
        CHECK(tr_state_parse(bad[i], "x", &t, &e) == GK_EFORMAT);
        CHECKF(strstr(e.msg, i ? "recent_grad_norm[1]" : "recent_loss") != NULL, "%s", e.msg);
    }
}

/* recompute = auto on a device whose props.recompute is 1 (the fake GPU): gelu when it fits,
 * gelu+ln when only that fits (the memory between the two estimates), an error naming the smaller
 * need without the recompute hint when nothing fits; an explicit setting is kept, and its refusal
 * suggests gelu+ln; props.recompute 0 (a CPU's) starts from none. */
static void test_recompute_auto(void)
{
    gk_err e = {0};
    gk_backend *be = fake_gpu_open(&e);
    CHECKF(be != NULL, "%s", e.msg);
    if (!be) return;
    unsetenv("GPT_MEM_CHECK");
    gk_gpt2_config c = {3, 4, 64, 32, 301, 1, 0.0f};
    tr_run r;
    memset(&r, 0, sizeof r);
    r.be = be, r.s.batch_size = 8, r.s.recompute = "auto";
    const int gelu = GK_GPT2_RECOMPUTE, ln = GK_GPT2_RECOMPUTE | GK_GPT2_RECOMPUTE_LN;
    gk_gpt2_mem m1, m2;
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 8, 32, gelu, &m1, &e), &e);
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 8, 32, ln, &m2, &e), &e);
    CHECK(m2.total < m1.total);
    int flags = -1;
    fake_gpu_free = m1.total;
    CHECK(tr_model_flags(&r, &c, &flags, &e) == 0 && flags == gelu);
    fake_gpu_free = m1.total - 1;
    CHECK(tr_model_flags(&r, &c, &flags, &e) == 0 && flags == ln);
    fake_gpu_free = m2.total - 1;
    CHECK(tr_model_flags(&r, &c, &flags, &e) == GK_ENOMEM);
    CHECKF(strstr(e.msg, ": lower batch_size or block_size") && !strstr(e.msg, "recompute"), "%s",
           e.msg);
    r.s.recompute = "gelu";
    fake_gpu_free = m1.total - 1;
    CHECK(tr_model_flags(&r, &c, &flags, &e) == GK_ENOMEM && flags == gelu);
    CHECKF(strstr(e.msg, ", or set recompute = gelu+ln") != NULL, "%s", e.msg);
    be->props.recompute = 0, r.s.recompute = "auto", fake_gpu_free = m1.total * 4;
    CHECK(tr_model_flags(&r, &c, &flags, &e) == 0 && flags == 0); /* the CPU's default */
    gk_backend_free(be);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_train_%ld", (long)getpid());
    mkdir(dir, 0700);
    RUN(test_hash_pinned);
    RUN(test_metrics_null);
    RUN(test_metrics_resume_appends);
    RUN(test_spike_window);
    RUN(test_state_windows);
    RUN(test_recompute_auto);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
