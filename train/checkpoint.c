/* checkpoint.c: step checkpoints in out_dir, written in the background as DLRover's flash
 * checkpoint does: tr_checkpoint copies the state into host memory (a tr_snapshot, model_io.h)
 * on the run's thread and hands it to one writer thread, which writes ckpt_STEP.safetensors
 * atomically, re-points latest.safetensors to it and prunes older ones to keep_last, while the
 * next steps train. A failed write is kept until the next tr_checkpoint or tr_checkpoint_wait
 * returns it; latest then still names the last complete checkpoint (see run.h, checkpoint.h).
 * While the run trains, the writer takes only the CPU time training leaves (SCHED_IDLE); once the
 * run waits for it (the next checkpoint, the end of the run, a stop signal) it runs as any thread.
 * Where the process may not take a thread back from SCHED_IDLE (no CAP_SYS_NICE, RLIMIT_NICE
 * under 20: most containers), the writer stays a normal thread, so a stop's checkpoint is never
 * left to idle time.
 *
 * With several ranks every rank has a writer: each snapshot holds the rank's slice of the state,
 * and rank 0's writer streams the others' from their writers as it writes (snapshot.c).
 *
 * Memory: one snapshot, allocated before training (tr_checkpoint_prepare) and reused:
 * parameters and both AdamW moments, 3 x parameters x 4 bytes over the ranks (GPT-2 124M: 1.5 GB
 * of host memory with one rank), or, without checkpoint_copy, none of what lies in host memory
 * already (the CPU's state, an offloaded optimizer's): the writer reads that where it is, and the
 * next update waits until it has (tr_checkpoint_settle), not for the rest of the write. */
#include "checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/outfile.h"
#include "common/log.h"

struct tr_ckpt_writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* broadcast when busy or quit changes */
    pthread_t thread;
    int busy;                /* a snapshot is handed to the thread and not yet written */
    int reading;             /* and the model's state is still read in place for it */
    int quit;                /* the thread ends once not busy */
    int idle_ok;             /* SCHED_IDLE can be taken back here (idle_reversible) */
    int waited;              /* the run waits for the write in hand: it runs at normal priority */
    int rc;                  /* the last write's error, until a wait returns it */
    gk_err err;
    tr_snapshot *snap;       /* the thread's while busy, else the run thread's */
    char *out_dir;
    int64_t keep_last, keep_every;
    tr_s3out *s3;            /* out_dir in a bucket: out_dir is its staging directory, and each
                              * checkpoint is uploaded before latest moves (s3out.h) */
    int root;                /* rank 0: writes; the others' writers send their slices */
};

/* The length of "ckpt_DIGITS.safetensors" at the start of name (digits only, no sign or space),
 * else 0; *step its number. Temporaries (NAME.tmp.XXXXXX) have the same start and more after. */
static size_t ckpt_prefix(const char *name, int64_t *step)
{
    static const char ext[] = ".safetensors";
    if (strncmp(name, "ckpt_", 5) != 0)
        return 0;
    size_t i = 5;
    int64_t v = 0;
    for (; name[i] >= '0' && name[i] <= '9'; i++) {
        if (v > (INT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (name[i] - '0');
    }
    if (i == 5 || strncmp(name + i, ext, sizeof ext - 1) != 0)
        return 0;
    *step = v;
    return i + sizeof ext - 1;
}

int64_t tr_ckpt_step(const char *name)
{
    int64_t step;
    size_t n = ckpt_prefix(name, &step);
    return n && name[n] == '\0' ? step : -1;
}

/* ---------------------------------------------------------------- the writer thread */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether a step checkpoint is one keep_every keeps for good. */
static int milestone(int64_t step, int64_t keep_every)
{
    return keep_every > 0 && step > 0 && step % keep_every == 0;
}

/* Removes all but the newest keep_last step checkpoints, never the one just written (`keep`, the
 * one latest names: a run killed between a checkpoint's rename and latest's leaves a newer one),
 * nor a milestone of keep_every's (not counted among the keep_last either). */
static void prune(const char *out_dir, int64_t keep_last, int64_t keep_every, int64_t keep)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return;
    int64_t steps[4096];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096) {
        int64_t step = tr_ckpt_step(de->d_name);
        if (step >= 0 && !milestone(step, keep_every))
            steps[n++] = step;
    }
    qsort(steps, n, sizeof *steps, cmp_i64);
    rewinddir(d);
    while (n > (size_t)keep_last && (de = readdir(d))) {
        int64_t step = tr_ckpt_step(de->d_name);
        if (step >= 0 && step != keep && !milestone(step, keep_every) &&
            step < steps[n - (size_t)keep_last])
            unlinkat(dirfd(d), de->d_name, 0); /* by its own name: ckpt_5 or ckpt_00000005 */
    }
    closedir(d);
}

/* The model's state is no longer read for the write in hand. */
static void read_done(struct tr_ckpt_writer *w)
{
    pthread_mutex_lock(&w->mu);
    w->reading = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The snapshot to out_dir/ckpt_STEP.safetensors, then latest re-pointed and the old pruned; on
 * the other ranks, their slices sent to rank 0's. */
static int write_checkpoint(struct tr_ckpt_writer *w, gk_err *e)
{
    char name[64], path[4096], link[4096], tmp[4200];
    if (!w->root) {
        int rc = tr_snapshot_serve(w->snap, e);
        read_done(w);
        return rc;
    }
    snprintf(name, sizeof name, "ckpt_%08lld.safetensors", (long long)tr_snapshot_step(w->snap));
    snprintf(path, sizeof path, "%s/%s", w->out_dir, name);
    int rc = tr_snapshot_save(w->snap, path, e);
    read_done(w);
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
    gk_sync_dir_of(link); /* latest's new target survives a power cut too */
    if (w->s3) { /* the staging directory keeps this one; the bucket keeps keep_last */
        prune(w->out_dir, 1, 0, tr_snapshot_step(w->snap));
        return tr_s3out_publish(w->s3, name, tr_snapshot_step(w->snap), w->keep_last, w->keep_every,
                                e);
    }
    prune(w->out_dir, w->keep_last, w->keep_every, tr_snapshot_step(w->snap));
    gk_info("saved %s", path);
    return 0;
}

/* Sets t's scheduling policy, under w->mu: SCHED_IDLE (only CPU time nothing else wants) or
 * SCHED_OTHER. Best effort: where the system refuses, the policy stays as it was. */
static void writer_policy(pthread_t t, int policy)
{
    struct sched_param none = {0};
    pthread_setschedparam(t, policy, &none);
}

static void *idle_probe(void *arg)
{
    struct sched_param none = {0};
    *(int *)arg = pthread_setschedparam(pthread_self(), SCHED_IDLE, &none) == 0 &&
                  pthread_setschedparam(pthread_self(), SCHED_OTHER, &none) == 0;
    return NULL;
}

/* Whether this process may put a thread at SCHED_IDLE and take it back to SCHED_OTHER: tried on
 * a short-lived thread of its own, since a thread that cannot come back would stay idle. */
static int idle_reversible(void)
{
    int ok = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, idle_probe, &ok) != 0)
        return 0;
    pthread_join(t, NULL);
    return ok;
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
        if (w->idle_ok)
            writer_policy(pthread_self(), w->waited ? SCHED_OTHER : SCHED_IDLE);
        pthread_mutex_unlock(&w->mu);
        gk_err e = {0};
        int rc = write_checkpoint(w, &e);
        pthread_mutex_lock(&w->mu);
        w->rc = rc;
        if (rc)
            w->err = e;
        w->busy = w->reading = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ---------------------------------------------------------------- what a killed run left */

/* Whether tail is ".tmp." and 6 letters or digits: gk_outfile's temporary of the name before. */
static int is_outfile_tail(const char *tail)
{
    if (strncmp(tail, ".tmp.", 5) != 0)
        return 0;
    tail += 5;
    for (int i = 0; i < 6; i++)
        if (!((tail[i] >= '0' && tail[i] <= '9') || (tail[i] >= 'a' && tail[i] <= 'z') ||
              (tail[i] >= 'A' && tail[i] <= 'Z')))
            return 0;
    return tail[6] == '\0';
}

/* Whether name is a temporary this tool makes in out_dir: a checkpoint's or loss.svg's
 * (NAME.tmp.XXXXXX, a regular file) or latest's (latest.safetensors.tmp.PID, a symlink). */
static int is_own_temp(const char *name, int *is_link)
{
    static const char latest[] = "latest.safetensors.tmp.", svg[] = "loss.svg";
    int64_t step;
    size_t n = ckpt_prefix(name, &step);
    *is_link = 0;
    if (n)
        return is_outfile_tail(name + n);
    if (strncmp(name, svg, sizeof svg - 1) == 0)
        return is_outfile_tail(name + sizeof svg - 1);
    if (strncmp(name, latest, sizeof latest - 1) != 0)
        return 0;
    const char *p = name + sizeof latest - 1;
    *is_link = 1;
    return *p && strspn(p, "0123456789") == strlen(p);
}

/* Removes name when it is what is_own_temp says and no process holds it (a live gk_outfile
 * keeps an exclusive flock on its temporary until the rename). */
static int remove_if_stale(int dir, const char *name, int is_link)
{
    struct stat named;
    if (fstatat(dir, name, &named, AT_SYMLINK_NOFOLLOW) != 0)
        return 0;
    if (is_link)
        return S_ISLNK(named.st_mode) && unlinkat(dir, name, 0) == 0;
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat held;
    int gone = fd >= 0 && S_ISREG(named.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
               fstat(fd, &held) == 0 && held.st_dev == named.st_dev &&
               held.st_ino == named.st_ino && unlinkat(dir, name, 0) == 0;
    if (fd >= 0)
        close(fd);
    return gone;
}

int tr_checkpoint_clean_stale(const char *out_dir)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return 0;
    int removed = 0, is_link;
    for (struct dirent *de; (de = readdir(d));)
        if (is_own_temp(de->d_name, &is_link) && remove_if_stale(dirfd(d), de->d_name, is_link)) {
            gk_info("removed %s/%s (a temporary file left by a run that was killed)", out_dir,
                    de->d_name);
            removed++;
        }
    closedir(d);
    return removed;
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
    w->root = tr_dist_is_root(&r->dist);
    w->keep_last = r->s.keep_last;
    w->keep_every = r->s.keep_every;
    w->s3 = r->s3out;
    w->idle_ok = idle_reversible();
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

int tr_checkpoint_prepare(tr_run *r, gk_err *e)
{
    int rc = r->writer ? 0 : writer_create(r, e);
    if (!rc && !r->writer->snap)
        rc = tr_snapshot_create(&r->writer->snap, r->model, 1, r->dist.ckpt,
                                !r->s.checkpoint_copy, e);
    return rc;
}

int tr_checkpoint(tr_run *r, gk_err *e)
{
    int rc = tr_checkpoint_wait(r, e); /* the snapshot is free again, the last write's error out */
    if (!rc)
        rc = tr_checkpoint_prepare(r, e);
    if (rc)
        return rc;
    struct tr_ckpt_writer *w = r->writer;
    rc = tr_snapshot_take(w->snap, r->model, r->vocab, &r->st, r->settings_json, e);
    if (rc)
        return rc;
    r->last_saved_step = r->st.step;
    pthread_mutex_lock(&w->mu);
    w->busy = 1;
    w->reading = tr_snapshot_in_place(w->snap);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* Under w->mu: waits until *flag (busy or reading) is 0, the writer at normal priority meanwhile
 * (the run stands still until then). */
static void wait_for(struct tr_ckpt_writer *w, const int *flag)
{
    if (*flag && w->idle_ok) {
        w->waited = 1;
        writer_policy(w->thread, SCHED_OTHER);
    }
    while (*flag)
        pthread_cond_wait(&w->cv, &w->mu);
    w->waited = 0;
}

void tr_checkpoint_settle(tr_run *r)
{
    struct tr_ckpt_writer *w = r->writer;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    wait_for(w, &w->reading);
    if (w->idle_ok && w->busy)
        writer_policy(w->thread, SCHED_IDLE); /* the rest of the write: back to idle time */
    pthread_mutex_unlock(&w->mu);
}

int tr_checkpoint_wait(tr_run *r, gk_err *e)
{
    struct tr_ckpt_writer *w = r->writer;
    if (!w)
        return 0;
    pthread_mutex_lock(&w->mu);
    wait_for(w, &w->busy);
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
