/* checkpoint.c: step checkpoints in out_dir, written in the background as DLRover's flash
 * checkpoint does: tr_checkpoint copies the state into host memory (a tr_snapshot, model_io.h)
 * on the run's thread and hands it to one writer thread, which writes ckpt_STEP.safetensors
 * atomically, re-points latest.safetensors to it and prunes older ones to keep_last, while the
 * next steps train. A failed write is kept until the next tr_checkpoint or tr_checkpoint_wait
 * returns it; latest then still names the last complete checkpoint (see run.h, checkpoint.h).
 *
 * Memory: one snapshot, allocated at the first checkpoint and reused: parameters and both AdamW
 * moments, 3 x parameters x 4 bytes (GPT-2 124M: 1.5 GB of host memory). */
#include "checkpoint.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

struct tr_ckpt_writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* broadcast when busy or quit changes */
    pthread_t thread;
    int busy;                /* a snapshot is handed to the thread and not yet written */
    int quit;                /* the thread ends once not busy */
    int rc;                  /* the last write's error, until a wait returns it */
    gk_err err;
    tr_snapshot *snap;       /* the thread's while busy, else the run thread's */
    char *out_dir;
    int64_t keep_last;
};

int64_t tr_ckpt_step(const char *name)
{
    long long step;
    char tail[32];
    if (sscanf(name, "ckpt_%lld.safetensor%31s", &step, tail) == 2 && strcmp(tail, "s") == 0)
        return step;
    return -1;
}

/* ---------------------------------------------------------------- the writer thread */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Removes all but the newest keep_last step checkpoints. */
static void prune(const char *out_dir, int64_t keep_last)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return;
    int64_t steps[4096];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096)
        if (tr_ckpt_step(de->d_name) >= 0)
            steps[n++] = tr_ckpt_step(de->d_name);
    closedir(d);
    qsort(steps, n, sizeof *steps, cmp_i64);
    for (size_t i = 0; i + (size_t)keep_last < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ckpt_%08lld.safetensors", out_dir, (long long)steps[i]);
        unlink(path);
    }
}

/* The snapshot to out_dir/ckpt_STEP.safetensors, then latest re-pointed and the old pruned. */
static int write_checkpoint(const struct tr_ckpt_writer *w, gk_err *e)
{
    char name[64], path[4096], link[4096], tmp[4200];
    snprintf(name, sizeof name, "ckpt_%08lld.safetensors", (long long)tr_snapshot_step(w->snap));
    snprintf(path, sizeof path, "%s/%s", w->out_dir, name);
    int rc = tr_snapshot_save(w->snap, path, e);
    if (rc)
        return rc;
    snprintf(link, sizeof link, "%s/latest.safetensors", w->out_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", link, (long)getpid());
    unlink(tmp);
    if (symlink(name, tmp) != 0 || rename(tmp, link) != 0) {
        rc = gk_errno(e, link);
        unlink(tmp);
        return rc;
    }
    prune(w->out_dir, w->keep_last);
    gk_info("saved %s", path);
    return 0;
}

static void *writer_main(void *arg)
{
    struct tr_ckpt_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->busy && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->busy)
            break;
        pthread_mutex_unlock(&w->mu);
        gk_err e = {0};
        int rc = write_checkpoint(w, &e);
        pthread_mutex_lock(&w->mu);
        w->rc = rc;
        if (rc)
            w->err = e;
        w->busy = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ---------------------------------------------------------------- the run's side */

/* Creates r->writer and starts its thread with the stop signals blocked: SIGINT and SIGTERM
 * reach the run's thread only (main.c's handler, then the loop's checkpoint). */
static int writer_create(tr_run *r, gk_err *e)
{
    struct tr_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->out_dir = strdup(r->s.out_dir))) {
        free(w);
        return gk_errf(e, GK_ENOMEM, "out of memory starting the checkpoint writer");
    }
    w->keep_last = r->s.keep_last;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaddset(&block, sigs[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int err = pthread_create(&w->thread, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w->out_dir);
        free(w);
        return gk_errf(e, GK_EIO, "cannot start the checkpoint writer thread: %s", strerror(err));
    }
    r->writer = w;
    return 0;
}

int tr_checkpoint(tr_run *r, gk_err *e)
{
    int rc = tr_checkpoint_wait(r, e); /* the snapshot is free again, the last write's error out */
    if (!rc && !r->writer)
        rc = writer_create(r, e);
    if (rc)
        return rc;
    struct tr_ckpt_writer *w = r->writer;
    if (!w->snap && (rc = tr_snapshot_create(&w->snap, r->model, 1, e)))
        return rc;
    rc = tr_snapshot_take(w->snap, r->model, r->vocab, &r->st, r->settings_json, e);
    if (rc)
        return rc;
    r->last_saved_step = r->st.step;
    pthread_mutex_lock(&w->mu);
    w->busy = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

int tr_checkpoint_wait(tr_run *r, gk_err *e)
{
    struct tr_ckpt_writer *w = r->writer;
    if (!w)
        return 0;
    pthread_mutex_lock(&w->mu);
    while (w->busy)
        pthread_cond_wait(&w->cv, &w->mu);
    int rc = w->rc;
    if (rc && e)
        *e = w->err;
    w->rc = 0; /* reported once */
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int tr_checkpoint_poll(tr_run *r, gk_err *e)
{
    struct tr_ckpt_writer *w = r->writer;
    if (!w)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    if (!w->busy) {
        rc = w->rc;
        if (rc && e)
            *e = w->err;
        w->rc = 0;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void tr_checkpoint_close(tr_run *r)
{
    struct tr_ckpt_writer *w = r->writer;
    if (!w)
        return;
    gk_err e = {0};
    if (tr_checkpoint_wait(r, &e)) /* a run that failed otherwise: its message comes last */
        gk_warn("%s", e.msg);
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    tr_snapshot_free(w->snap);
    free(w->out_dir);
    free(w);
    r->writer = NULL;
}
