/* test_train.c: gpt-train's modules on their own: the data-window hash (pinned: data order must
 * not change), the learning-rate schedule, and metrics.jsonl (null for non-finite values, history
 * kept on resume). */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "train/data.h"
#include "train/metrics.h"

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
    tr_step_record r = {.step = 3, .loss = NAN, .lr = 1e-3, .grad_norm = INFINITY, .ms = 2, .tokens_per_s = 5,
                        .has = TR_HAS_STEP};
    CHECK_OK(tr_metrics_log(&m, &r, &e), &e);
    tr_step_record ev = {.step = 4, .train_loss = 2.5, .val_loss = -INFINITY, .skipped = 2,
                         .has = TR_HAS_TRAIN_LOSS | TR_HAS_VAL_LOSS};
    CHECK_OK(tr_metrics_log(&m, &ev, &e), &e);
    tr_metrics_close(&m);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    const char *want = "{\"step\":3,\"loss\":null,\"lr\":0.001,\"grad_norm\":null,\"ms\":2.0,\"tokens_per_s\":5.0}\n"
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
    fputs("{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":1}\n{\"step\":4,\"lo", f);
    fclose(f);
    tr_metrics m;
    CHECK_OK(tr_metrics_open(&m, dir, 2, &e), &e);
    CHECK(m.n == 2 && m.pts[1].step == 2 && m.pts[1].loss == 2);
    tr_step_record r = {.step = 3, .loss = 0.5, .lr = 1, .grad_norm = 1, .ms = 1, .tokens_per_s = 1, .has = TR_HAS_STEP};
    CHECK_OK(tr_metrics_log(&m, &r, &e), &e);
    tr_metrics_close(&m);
    const char *want = "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":1}\n"
                       "{\"step\":3,\"loss\":0.5,\"lr\":1.0,\"grad_norm\":1.0,\"ms\":1.0,\"tokens_per_s\":1.0}\n";
    CHECKF(strcmp(slurp(path), want) == 0, "got %s", slurp(path));
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_train_%ld", (long)getpid());
    mkdir(dir, 0700);
    RUN(test_hash_pinned);
    RUN(test_metrics_null);
    RUN(test_metrics_resume_appends);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
