/* test_train_ckpt.c: gpt-train's background checkpoint writer (train/checkpoint.c) and the
 * snapshots under it (train/model_io.c): the file written in the background is byte for byte the
 * synchronous tr_save's of the same state even when the model moves on at once; a write that
 * fails (missing out_dir, file too large midway) is returned by the next wait, poll or checkpoint,
 * leaves no temporary and latest on the last complete checkpoint; a second checkpoint waits for
 * the first; close waits for the write under way; the writer thread blocks the stop signals. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "kernels/ref/ref.h"
#include "test.h"
#include "train/checkpoint.h"

static char dir[64];

/* ---------------------------------------------------------------- a run to checkpoint */

/* A run with a model of 4 layers x 64 (about 200k parameters: a 2.4 MB file, fsync'd), moments
 * set to a pattern of seed, state at step, a char vocabulary, out_dir made. */
static int make_run(tr_run *r, const char *out_dir, gk_err *e)
{
    memset(r, 0, sizeof *r);
    r->last_saved_step = -1;
    gk_gpt2_config c = {4, 4, 64, 32, 65, 1, 0.0f};
    uint32_t cps[3] = {'\n', 'a', 'b'};
    int rc = gk_ref_create(&r->be, e);
    if (!rc) rc = gk_gpt2_create(&r->model, &c, r->be, 1, 8, e);
    if (!rc) rc = gk_gpt2_init(r->model, 7, e);
    if (!rc) rc = gk_vocab_from_chars(&r->vocab, cps, 3, e);
    r->settings_json = strdup("{\"batch_size\":4,\"out_dir\":\"o\"}");
    r->s.out_dir = out_dir;
    r->s.keep_last = 2;
    r->st = (tr_state){.step = 1, .tokens = 100, .seed = 1337, .rng_counter = 9,
                       .best_val_loss = INFINITY, .world_size = 1};
    mkdir(out_dir, 0700);
    return rc;
}

static void free_run(tr_run *r)
{
    tr_checkpoint_close(r);
    gk_gpt2_free(r->model);
    gk_backend_free(r->be);
    gk_vocab_free(r->vocab);
    free(r->settings_json);
}

/* Sets every tensor of kind of the model to a pattern of seed. */
static void set_pattern(tr_run *r, enum gk_tensor_kind kind, float seed)
{
    gk_err e;
    for (int i = 0; i < gk_gpt2_n_params(r->model); i++) {
        size_t n = gk_gpt2_param(r->model, i)->numel;
        float *h = malloc(n * sizeof *h);
        for (size_t j = 0; j < n; j++)
            h[j] = seed + 1e-4f * (float)((j * 7 + (size_t)i) % 1000);
        CHECK_OK(gk_gpt2_tensor_set(r->model, i, kind, h, &e), &e);
        free(h);
    }
}

/* The model changes as training goes on: new parameters and moments, next step. */
/* The model's next state, after tr_checkpoint_settle as the loop calls it before an update (a
 * checkpoint reading the state in place has read it); with checkpoint_copy, without: the copy
 * must not need it. */
static void move_on(tr_run *r, float seed)
{
    if (!r->s.checkpoint_copy)
        tr_checkpoint_settle(r);
    set_pattern(r, GK_TENSOR_PARAM, seed);
    set_pattern(r, GK_TENSOR_ADAM_M, seed + 1);
    set_pattern(r, GK_TENSOR_ADAM_V, seed + 2);
    r->st.step++;
    r->st.tokens += 100;
}

/* ---------------------------------------------------------------- files */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    *len = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        rewind(f);
        buf = malloc(n > 0 ? (size_t)n : 1);
        *len = buf ? fread(buf, 1, (size_t)n, f) : 0;
    }
    if (f)
        fclose(f);
    return buf;
}

static int same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && la > 0 && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* Entries of d whose name holds ".tmp." (temporaries of a write). */
static int count_temps(const char *d)
{
    DIR *dd = opendir(d);
    int n = 0;
    for (struct dirent *de; dd && (de = readdir(dd));)
        n += strstr(de->d_name, ".tmp.") != NULL;
    if (dd)
        closedir(dd);
    return n;
}

/* Opens out_dir/latest.safetensors; its trainer state's step, or -1. */
static int64_t latest_step(const char *out_dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/latest.safetensors", out_dir);
    gk_ckpt *c = NULL;
    gk_err e;
    tr_state st = {0};
    int rc = gk_ckpt_open(&c, path, &e);
    if (!rc)
        rc = tr_state_parse(gk_ckpt_train_json(c), path, &st, &e);
    gk_ckpt_close(c);
    return rc ? -1 : st.step;
}

static int exists(const char *out_dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    return access(path, F_OK) == 0;
}

/* ---------------------------------------------------------------- tests */

/* The checkpoint written in the background equals tr_save's bytes for the same state, although
 * the model moved on right after tr_checkpoint returned (copy), or right after
 * tr_checkpoint_settle (the state read in place); latest names it. */
static void async_equals_sync(int copy)
{
    char out[128], sync[160], ck[160];
    snprintf(out, sizeof out, "%s/eq%d", dir, copy);
    tr_run r;
    gk_err e = {0};
    CHECK_OK(make_run(&r, out, &e), &e);
    r.s.checkpoint_copy = copy;
    set_pattern(&r, GK_TENSOR_ADAM_M, 0.5f);
    set_pattern(&r, GK_TENSOR_ADAM_V, 0.25f);
    r.st.step = 3;
    snprintf(sync, sizeof sync, "%s/sync.safetensors", dir);
    CHECK_OK(tr_save(sync, r.model, r.vocab, &r.st, r.settings_json, 1, &e), &e);
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    CHECK(r.last_saved_step == 3);
    move_on(&r, 9.0f);
    CHECK_OK(tr_checkpoint_wait(&r, &e), &e);
    snprintf(ck, sizeof ck, "%s/ckpt_00000003.safetensors", out);
    CHECKF(same_bytes(sync, ck), "%s differs from %s", ck, sync);
    char target[256] = "";
    snprintf(sync, sizeof sync, "%s/latest.safetensors", out);
    CHECK(readlink(sync, target, sizeof target - 1) > 0 &&
          strcmp(target, "ckpt_00000003.safetensors") == 0);
    CHECK(count_temps(out) == 0);
    free_run(&r);
}

static void test_async_equals_sync(void)
{
    async_equals_sync(0);
    async_equals_sync(1);
}

/* out_dir gone while a write is under way: the wait (or a poll) returns the error naming the
 * file, once; nothing is left behind, latest still loads the previous one, and the next
 * checkpoint works. */
static void test_missing_dir(void)
{
    char out[128], gone[128];
    snprintf(out, sizeof out, "%s/md", dir);
    snprintf(gone, sizeof gone, "%s/md-gone", dir);
    tr_run r;
    gk_err e = {0};
    CHECK_OK(make_run(&r, out, &e), &e);
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    CHECK_OK(tr_checkpoint_wait(&r, &e), &e);
    CHECK(rename(out, gone) == 0);
    move_on(&r, 2.0f);
    CHECK_OK(tr_checkpoint(&r, &e), &e); /* the snapshot is taken; the write fails behind */
    int rc = tr_checkpoint_wait(&r, &e);
    CHECK(rc == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "md/ckpt_00000002.safetensors") && strstr(e.msg, "does not exist"), "%s",
           e.msg);
    CHECK(tr_checkpoint_wait(&r, &e) == 0); /* reported once */
    move_on(&r, 2.5f); /* again, seen by polling */
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    for (int i = 0; i < 10000 && (rc = tr_checkpoint_poll(&r, &e)) == 0; i++)
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    CHECK(rc == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "md/ckpt_00000003.safetensors"), "%s", e.msg);
    CHECK(tr_checkpoint_poll(&r, &e) == 0 && tr_checkpoint_wait(&r, &e) == 0);
    CHECK(rename(gone, out) == 0);
    CHECK(count_temps(out) == 0);
    CHECK(latest_step(out) == 1);
    CHECK(!exists(out, "ckpt_00000002.safetensors") && !exists(out, "ckpt_00000003.safetensors"));
    move_on(&r, 3.0f);
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    CHECK_OK(tr_checkpoint_wait(&r, &e), &e);
    CHECK(latest_step(out) == 4);
    free_run(&r);
}

/* A write that fails midway (the file size limit: as a full disk) is returned by the next
 * tr_checkpoint, which then writes nothing; the temporary is gone, latest on the last one. */
static void test_fails_midway(void)
{
    char out[128];
    snprintf(out, sizeof out, "%s/fz", dir);
    tr_run r;
    gk_err e = {0};
    CHECK_OK(make_run(&r, out, &e), &e);
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    CHECK_OK(tr_checkpoint_wait(&r, &e), &e);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1 << 20; /* the file is 2.4 MB */
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    move_on(&r, 4.0f);
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    move_on(&r, 5.0f);
    int rc = tr_checkpoint(&r, &e);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(rc == GK_EIO);
    CHECKF(strstr(e.msg, "fz/ckpt_00000002.safetensors: File too large"), "%s", e.msg);
    CHECK(r.last_saved_step == 2); /* the failed checkpoint's snapshot; step 3 was not taken */
    CHECK_OK(tr_checkpoint_wait(&r, &e), &e); /* nothing under way */
    CHECK(count_temps(out) == 0);
    CHECK(!exists(out, "ckpt_00000002.safetensors") && !exists(out, "ckpt_00000003.safetensors"));
    CHECK(latest_step(out) == 1);
    free_run(&r);
}

/* ---- a second checkpoint waits for the first */

/* Every tensor of kind of the model, one after the other in table order (malloc'd). */
static float *model_tensors(tr_run *r, enum gk_tensor_kind kind)
{
    gk_err e = {0};
    float *all = malloc(gk_gpt2_num_scalars(r->model) * sizeof *all), *at = all;
    for (int i = 0; i < gk_gpt2_n_params(r->model); i++) {
        CHECK_OK(gk_gpt2_tensor_get(r->model, i, kind, at, &e), &e);
        at += gk_gpt2_param(r->model, i)->numel;
    }
    return all;
}

/* Whether out_dir/ckpt_STEP.safetensors opens complete (every tensor of kind 0, 'm' and 'v'
 * reads, all values finite) and holds want[0], want[1], want[2] (as model_tensors) and step. */
static int ckpt_holds(tr_run *r, const char *out_dir, int64_t step, float *const want[3])
{
    char path[192];
    snprintf(path, sizeof path, "%s/ckpt_%08lld.safetensors", out_dir, (long long)step);
    static const int kinds[3] = {0, 'm', 'v'};
    gk_ckpt *c = NULL;
    gk_err e = {0};
    tr_state st = {0};
    int ok = gk_ckpt_open(&c, path, &e) == 0 &&
             tr_state_parse(gk_ckpt_train_json(c), path, &st, &e) == 0 && st.step == step;
    size_t off = 0;
    for (int i = 0; ok && i < gk_gpt2_n_params(r->model); i++) {
        const gk_param *t = gk_gpt2_param(r->model, i);
        int64_t shape[2] = {t->shape[0], t->ndim > 1 ? t->shape[1] : 0};
        float *got = malloc(t->numel * sizeof *got);
        for (int k = 0; ok && k < 3; k++)
            ok = gk_ckpt_read(c, kinds[k], t->name, t->ndim, shape, got, &e) == 0 &&
                 memcmp(got, want[k] + off, t->numel * sizeof *got) == 0;
        free(got);
        off += t->numel;
    }
    if (!ok && e.msg[0])
        fprintf(stderr, "%s\n", e.msg);
    else if (!ok)
        fprintf(stderr, "%s: holds another state\n", path);
    gk_ckpt_close(c);
    return ok;
}

static void free3(float *a[3])
{
    for (int k = 0; k < 3; k++)
        free(a[k]);
}

/* tr_checkpoint right after another returns only once the first is written: its file is then
 * complete with the first state, latest names it (or already the second), and the second file,
 * once waited for, holds the second state although the model moved on again at once. */
static void test_second_waits(void)
{
    char out[128];
    snprintf(out, sizeof out, "%s/sw", dir);
    tr_run r;
    gk_err e = {0};
    CHECK_OK(make_run(&r, out, &e), &e);
    set_pattern(&r, GK_TENSOR_ADAM_M, 0.5f);
    set_pattern(&r, GK_TENSOR_ADAM_V, 0.25f);
    float *first[3] = {model_tensors(&r, GK_TENSOR_PARAM), model_tensors(&r, GK_TENSOR_ADAM_M),
                       model_tensors(&r, GK_TENSOR_ADAM_V)};
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    move_on(&r, 6.0f);
    float *second[3] = {model_tensors(&r, GK_TENSOR_PARAM), model_tensors(&r, GK_TENSOR_ADAM_M),
                        model_tensors(&r, GK_TENSOR_ADAM_V)};
    CHECK_OK(tr_checkpoint(&r, &e), &e); /* takes its snapshot only once step 1 is written */
    CHECK(ckpt_holds(&r, out, 1, first));
    int64_t latest = latest_step(out);
    CHECKF(latest == 1 || latest == 2, "latest is at step %lld", (long long)latest);
    CHECK(r.last_saved_step == 2);
    move_on(&r, 7.0f);
    CHECK_OK(tr_checkpoint_wait(&r, &e), &e);
    CHECK(latest_step(out) == 2);
    CHECK(ckpt_holds(&r, out, 2, second));
    CHECK(ckpt_holds(&r, out, 1, first)); /* keep_last = 2: both kept */
    CHECK(count_temps(out) == 0);
    free3(first);
    free3(second);
    free_run(&r);
}

/* ---- signals */

/* The thread ids of this process (up to cap), from /proc/self/task. */
static int list_tasks(long *tids, int cap)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d)) && n < cap;)
        if (de->d_name[0] != '.')
            tids[n++] = atol(de->d_name);
    if (d)
        closedir(d);
    return n;
}

/* The signal mask of thread tid (its SigBlk line), or 0. */
static unsigned long long blocked_of(long tid)
{
    char path[64], line[256];
    unsigned long long mask = 0;
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigBlk: %llx", &mask) == 1)
            break;
    if (f)
        fclose(f);
    return mask;
}

/* The writer thread blocks SIGINT and SIGTERM (they must reach the run's thread, where main.c's
 * handler sets the stop flag, never interrupt a write), the run's thread does not. */
static void test_signals_blocked_in_writer(void)
{
    char out[128];
    snprintf(out, sizeof out, "%s/sig", dir);
    tr_run r;
    gk_err e = {0};
    CHECK_OK(make_run(&r, out, &e), &e);
    long before[256], after[256], writer = 0;
    int nb = list_tasks(before, 256);
    CHECK_OK(tr_checkpoint(&r, &e), &e); /* starts the writer, which stays for the next ones */
    CHECK_OK(tr_checkpoint_wait(&r, &e), &e);
    int na = list_tasks(after, 256), fresh = 0;
    for (int i = 0; i < na; i++) {
        int old = 0;
        for (int j = 0; j < nb; j++)
            old |= after[i] == before[j];
        if (!old) {
            writer = after[i];
            fresh++;
        }
    }
    CHECK(fresh == 1);
    unsigned long long want = 1ULL << (SIGINT - 1) | 1ULL << (SIGTERM - 1);
    CHECKF((blocked_of(writer) & want) == want, "writer %ld blocks %llx", writer,
           blocked_of(writer));
    CHECK((blocked_of((long)syscall(SYS_gettid)) & want) == 0);
    free_run(&r);
}

/* Close and wait without any checkpoint (no writer), twice; close right after a checkpoint
 * waits for its write to complete (file and latest) and frees the writer. */
static void test_close_unused(void)
{
    tr_run r;
    memset(&r, 0, sizeof r);
    gk_err e = {0};
    CHECK(tr_checkpoint_wait(&r, &e) == 0);
    tr_checkpoint_close(&r);
    tr_checkpoint_close(&r);
    CHECK(r.writer == NULL);
    char out[128];
    snprintf(out, sizeof out, "%s/cl", dir);
    CHECK_OK(make_run(&r, out, &e), &e);
    float *want[3] = {model_tensors(&r, GK_TENSOR_PARAM), model_tensors(&r, GK_TENSOR_ADAM_M),
                      model_tensors(&r, GK_TENSOR_ADAM_V)};
    CHECK_OK(tr_checkpoint(&r, &e), &e);
    CHECK(r.writer != NULL);
    tr_checkpoint_close(&r);
    CHECK(r.writer == NULL);
    CHECK(ckpt_holds(&r, out, 1, want));
    CHECK(latest_step(out) == 1 && count_temps(out) == 0);
    free3(want);
    free_run(&r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_train_ckpt_%ld", (long)getpid());
    mkdir(dir, 0700);
    gk_log_setup("test_train_ckpt", GK_LOG_QUIET);
    RUN(test_async_equals_sync);
    RUN(test_missing_dir);
    RUN(test_fails_midway);
    RUN(test_second_waits);
    RUN(test_signals_blocked_in_writer);
    RUN(test_close_unused);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
