/* s3out.c: out_dir in a bucket (see s3out.h): the staging directory, the lock object, what a
 * killed run left, resuming from PREFIX/latest, and the writer thread's uploads and pruning.
 * Owns the client, the staging directory and the lock object from tr_s3out_open to
 * tr_s3out_close. */
#include "s3out.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/io/stagedir.h"
#include "common/log.h"
#include "run.h"
#include "s3out_int.h"

/* name's object into stage/name: 0, GK_ENOTFOUND, or an error. */
static int download(tr_s3out *o, const char *name, gk_err *e)
{
    char key[1200], path[4400];
    key_of(o, name, key, sizeof key);
    snprintf(path, sizeof path, "%s/%s", o->stage.path, name);
    return gk_s3_fetch_file(o->s3, o->bucket, key, path, e);
}

/* ---------------------------------------------------------------- the lock object */

static int lock_body(char *buf, size_t cap)
{
    char host[256] = "unknown";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    return snprintf(buf, cap, "%ld %s %lld\n", (long)getpid(), host, (long long)time(NULL));
}

/* Whether the holder pid on host, which renewed the lock at since, is a run that is gone: not
 * renewed for TR_S3_LOCK_STALE_S (a pod lost with its node), or the same host and that process is
 * not running (or is this one: a container restarted in its pod has the same pid). */
static int holder_gone(long pid, const char *host, long long since)
{
    char me[256] = "";
    if (since > 0 && (long long)time(NULL) - since > TR_S3_LOCK_STALE_S)
        return 1;
    if (gethostname(me, sizeof me) != 0 || strcmp(me, host) != 0 || pid <= 0)
        return 0;
    return pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* Whether the lock object still names this process (another run may have taken it over, thinking
 * this one gone): 1, 0, or -1 when it cannot be read. */
static int lock_is_ours(tr_s3out *o, const char *key)
{
    gk_s3_text m = {.n = 0};
    gk_err e = {0};
    long pid = 0;
    char host[256] = "", me[256] = "";
    int rc = gk_s3_get(o->s3, o->bucket, key, gk_s3_text_sink, &m, &e);
    if (rc)
        return rc == GK_ENOTFOUND ? 0 : -1;
    if (sscanf(m.buf, "%ld %255s", &pid, host) != 2 || gethostname(me, sizeof me) != 0)
        return 0;
    return pid == (long)getpid() && strcmp(host, me) == 0;
}

static void *renew_main(void *arg)
{
    tr_s3out *o = arg;
    char key[1200], body[320];
    key_of(o, "gpt-train.lock", key, sizeof key);
    pthread_mutex_lock(&o->mu);
    while (!o->quit) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += TR_S3_LOCK_RENEW_S;
        if (pthread_cond_timedwait(&o->cv, &o->mu, &t) == 0 || o->quit)
            continue;
        pthread_mutex_unlock(&o->mu);
        gk_err e = {0};
        int n = lock_body(body, sizeof body), ours = lock_is_ours(o, key);
        if (ours == 0) {
            gk_warn("out_dir %s: another run has taken over the "
                    "lock s3://%s/%s: this run no longer holds it",
                    o->url, o->bucket, key);
            pthread_mutex_lock(&o->mu);
            o->locked = 0;
            break;
        }
        if (gk_s3_put(o->s3, o->bucket, key, body, (size_t)n, &e))
            gk_warn("%s (renewing the lock)", e.msg);
        pthread_mutex_lock(&o->mu);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

/* Starts the renewing thread with the stop signals blocked (they are the run thread's). */
static void renew_start(tr_s3out *o)
{
    sigset_t block, old;
    sigfillset(&block);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int err = pthread_create(&o->renewer, NULL, renew_main, o);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        gk_warn("cannot start the thread renewing the lock of %s: %s", o->url, strerror(err));
    o->renewing = !err;
}

static void renew_stop(tr_s3out *o)
{
    if (!o->renewing)
        return;
    pthread_mutex_lock(&o->mu);
    o->quit = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->renewer, NULL);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    o->renewing = 0;
}

static int lock_take(tr_s3out *o, gk_err *e)
{
    char key[1200], body[320];
    key_of(o, "gpt-train.lock", key, sizeof key);
    int n = lock_body(body, sizeof body);
    int rc = gk_s3_put_new(o->s3, o->bucket, key, body, (size_t)n, e);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        o->locked = 1;
        return 0;
    }
    gk_s3_text m = {.n = 0};
    rc = gk_s3_get(o->s3, o->bucket, key, gk_s3_text_sink, &m, e);
    if (rc == GK_ENOTFOUND) /* released meanwhile: try once more */
        return gk_s3_put_new(o->s3, o->bucket, key, body, (size_t)n, e) == 0
                   ? (o->locked = 1, 0)
                   : gk_errf(e, GK_EIO, "out_dir %s: the lock s3://%s/%s was taken again meanwhile",
                             o->url, o->bucket, key);
    if (rc)
        return rc;
    long pid = 0;
    long long since = 0;
    char host[256] = "?", when[64] = "?";
    sscanf(m.buf, "%ld %255s %lld", &pid, host, &since);
    time_t t = (time_t)since;
    struct tm tm;
    if (since > 0 && gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    if (holder_gone(pid, host, since)) {
        int old = since > 0 && (long long)time(NULL) - since > TR_S3_LOCK_STALE_S;
        gk_info("out_dir %s: taking over the lock of gpt-train pid %ld on host %s (renewed %s), %s",
                o->url, pid, host, when,
                old ? "not renewed since (its run is gone)" : "which is no longer running");
        if ((rc = gk_s3_put(o->s3, o->bucket, key, body, (size_t)n, e)))
            return rc;
        o->locked = 1;
        return 0;
    }
    return gk_errf(e, GK_EIO,
                   "out_dir %s is in use by gpt-train (pid %ld on host %s, lock renewed %s; "
                   "s3://%s/%s): if that run is gone, delete the lock (aws s3 rm s3://%s/%s) or "
                   "wait until it is %d s old",
                   o->url, pid, host, when, o->bucket, key, o->bucket, key, TR_S3_LOCK_STALE_S);
}

/* ---------------------------------------------------------------- opening */

static int abort_one(const char *key, const char *upload_id, void *ud)
{
    tr_s3out *o = ud;
    gk_err e = {0};
    if (gk_s3_abort_upload(o->s3, o->bucket, key, upload_id, &e))
        gk_warn("%s", e.msg);
    else
        gk_info("aborted the upload of s3://%s/%s left by a run that was killed", o->bucket, key);
    return 0;
}

int tr_s3out_read_latest(tr_s3out *o, char *name, size_t cap, gk_err *e)
{
    char key[1200];
    key_of(o, "latest", key, sizeof key);
    gk_s3_text m = {.n = 0};
    name[0] = '\0';
    int rc = gk_s3_get(o->s3, o->bucket, key, gk_s3_text_sink, &m, e);
    if (rc == GK_ENOTFOUND)
        return 0;
    if (rc)
        return rc;
    m.buf[strcspn(m.buf, "\r\n")] = '\0';
    if (tr_ckpt_step(m.buf) < 0)
        return gk_errf(e, GK_EFORMAT,
                       "s3://%s/%s: not the name of a step checkpoint (ckpt_STEP.safetensors)",
                       o->bucket, key);
    snprintf(name, cap, "%s", m.buf);
    return 0;
}

/* Downloads what init_from asks for into the staging directory, or refuses as setup.c does. */
static int fetch_start(tr_s3out *o, const char *init_from, gk_err *e)
{
    char name[600], link[4400];
    int rc = tr_s3out_read_latest(o, name, sizeof name, e);
    int resume = strcmp(init_from, "resume") == 0, autom = strcmp(init_from, "auto") == 0;
    if (rc)
        return rc;
    if (!name[0])
        return resume ? gk_errf(e, GK_ENOTFOUND, "init_from=resume: %s/latest not found", o->url)
                      : 0;
    if (!resume && !autom)
        return gk_errf(e, GK_EUSAGE,
                       "out_dir %s already holds the checkpoints of a run (latest: %s): continue "
                       "it with --init_from=auto, or train into another out_dir, or remove them",
                       o->url, name);
    gk_info("downloading %s/%s", o->url, name);
    if ((rc = download(o, name, e)))
        return rc;
    gk_err ignore = {0};
    if ((rc = download(o, "metrics.jsonl", &ignore)) && rc != GK_ENOTFOUND)
        gk_warn("%s", ignore.msg);
    snprintf(link, sizeof link, "%s/latest.safetensors", o->stage.path);
    if (symlink(name, link) != 0)
        return gk_errno(e, link);
    return 0;
}

int tr_s3out_open(tr_s3out **out, const char *url, const gk_s3_conf *conf, const char *tmpdir,
                  const char *init_from, gk_err *e)
{
    tr_s3out *o = calloc(1, sizeof *o);
    char key[1100];
    *out = NULL;
    if (!o)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    snprintf(o->given, sizeof o->given, "%s", url);
    int rc = gk_s3_parse_url(url, o->bucket, sizeof o->bucket, key, sizeof key, e);
    size_t k = strlen(key);
    while (k && key[k - 1] == '/')
        key[--k] = '\0';
    if (snprintf(o->url, sizeof o->url, "s3://%s%s%s", o->bucket, k ? "/" : "", key) >=
            (int)sizeof o->url ||
        snprintf(o->prefix, sizeof o->prefix, "%s%s", key, k ? "/" : "") >= (int)sizeof o->prefix)
        rc = rc ? rc : gk_errf(e, GK_EUSAGE, "%s: the key is too long", url);
    if (!rc)
        rc = gk_s3_open(&o->s3, conf, e);
    tr_unsent_dir(o, tmpdir);
    if (!rc && (rc = gk_stagedir_make(&o->stage, tmpdir, "gpt-train", e)))
        rc = gk_errf(e, rc, "%s (the staging directory for %s)", e->msg, url);
    if (!rc)
        rc = lock_take(o, e);
    if (!rc)
        renew_start(o);
    if (!rc)
        rc = gk_s3_list_uploads(o->s3, o->bucket, o->prefix, abort_one, o, e);
    if (!rc)
        rc = tr_unsent_pick_up(o, init_from, e);
    if (!rc)
        rc = fetch_start(o, init_from, e);
    if (rc) {
        tr_s3out_close(o, 0);
        return rc;
    }
    gk_info("out_dir %s: staging checkpoints in %s", o->url, o->stage.path);
    *out = o;
    return 0;
}

const char *tr_s3out_stage(const tr_s3out *o) { return o->stage.path; }
const char *tr_s3out_url(const tr_s3out *o) { return o->given; }

int tr_s3out_object_url(const tr_s3out *o, const char *path, char *url, size_t cap)
{
    size_t n = strlen(o->stage.path);
    char target[4096];
    if (strncmp(path, o->stage.path, n) != 0 || path[n] != '/')
        return -1;
    const char *name = path + n + 1;
    /* latest.safetensors: the checkpoint's name */
    ssize_t k = readlink(path, target, sizeof target - 1);
    if (k > 0) {
        target[k] = '\0';
        name = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
    }
    int m = snprintf(url, cap, "s3://%s/%s%s", o->bucket, o->prefix, name);
    return m < 0 || (size_t)m >= cap ? -1 : 0;
}

int tr_s3out_fetch_ckpt(const gk_s3_conf *conf, const char *url, const char *tmpdir, int *fd,
                        gk_err *e)
{
    char bucket[256], key[1100];
    long long bytes;
    gk_s3 *s = NULL;
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e);
    if (!rc)
        rc = gk_s3_open(&s, conf, e);
    if (!rc)
        rc = gk_s3_fetch_temp(s, bucket, key, tmpdir && *tmpdir ? tmpdir : "/tmp", 0, NULL, fd,
                              &bytes, e);
    gk_s3_close(s);
    return rc;
}

/* ---------------------------------------------------------------- uploads and pruning */

static int upload(tr_s3out *o, const char *name, int optional, gk_err *e)
{
    char key[1200], path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", o->stage.path, name);
    if (optional && stat(path, &st) != 0)
        return 0;
    key_of(o, name, key, sizeof key);
    return gk_s3_put_file(o->s3, o->bucket, key, path, e);
}

typedef struct steps {
    int64_t v[4096];
    size_t n;
    size_t plen;
} steps;

static int collect(const gk_s3_entry *ent, void *ud)
{
    steps *s = ud;
    int64_t step = tr_ckpt_step(ent->key + s->plen);
    if (step >= 0 && s->n < sizeof s->v / sizeof *s->v)
        s->v[s->n++] = step;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* keep_last's newest step checkpoints, keep_every's milestones and `keep` stay; the rest go. */
static int prune(tr_s3out *o, int64_t keep_last, int64_t keep_every, int64_t keep, gk_err *e)
{
    char pfx[1200], key[1200], name[64];
    static steps s; /* the writer thread's alone */
    s.n = 0;
    s.plen = strlen(o->prefix);
    key_of(o, "ckpt_", pfx, sizeof pfx);
    int rc = gk_s3_list(o->s3, o->bucket, pfx, 0, collect, &s, e);
    if (rc)
        return rc;
    size_t m = 0;
    for (size_t i = 0; i < s.n; i++)
        if (!(keep_every > 0 && s.v[i] > 0 && s.v[i] % keep_every == 0))
            s.v[m++] = s.v[i];
    if (m > 1) /* qsort takes no NULL, even for nothing */
        qsort(s.v, m, sizeof *s.v, cmp_i64);
    for (size_t i = 0; m > (size_t)keep_last && i < m - (size_t)keep_last; i++) {
        if (s.v[i] == keep)
            continue;
        snprintf(name, sizeof name, "ckpt_%08lld.safetensors", (long long)s.v[i]);
        key_of(o, name, key, sizeof key);
        if ((rc = gk_s3_delete(o->s3, o->bucket, key, e)))
            return rc;
    }
    return 0;
}

int tr_s3out_publish(tr_s3out *o, const char *name, int64_t step, int64_t keep_last,
                     int64_t keep_every, gk_err *e)
{
    char key[1200], text[128];
    long before = gk_s3_retries(o->s3);
    key_of(o, "gpt-train.lock", key, sizeof key);
    if (lock_is_ours(o, key) == 0) /* two runs must not move one latest */
        return gk_errf(e, GK_EIO,
                       "out_dir %s: another run has taken over the "
                       "lock s3://%s/%s: stopping (%s not uploaded)",
                       o->url, o->bucket, key, name);
    int rc = upload(o, name, 0, e);
    int n = snprintf(text, sizeof text, "%s\n", name);
    key_of(o, "latest", key, sizeof key);
    if (!rc)
        /* only now: the upload is whole */
        rc = gk_s3_put(o->s3, o->bucket, key, text, (size_t)n, e);
    if (rc) { /* latest not moved: the checkpoint must not go with the staging directory */
        char msg[sizeof e->msg], kept[4400];
        snprintf(msg, sizeof msg, "%s", e->msg);
        tr_unsent_keep(o, name, kept, sizeof kept);
        if (!kept[0])
            return gk_errf(e, rc,
                           "uploading %s to %s: %s (the checkpoint could not be kept in %s either: "
                           "it is in %s until this run ends)",
                           name, o->url, msg, o->unsent, o->stage.path);
        return gk_errf(e, rc,
                       "uploading %s to %s: %s; the checkpoint is kept at "
                       "%s: the next run of this out_dir with init_from=auto "
                       "(TMPDIR the same) uploads it and resumes from it",
                       name, o->url, msg, kept);
    }
    if (!rc)
        rc = upload(o, "metrics.jsonl", 1, e);
    if (!rc)
        rc = upload(o, "loss.svg", 1, e);
    if (!rc)
        rc = prune(o, keep_last, keep_every, step, e);
    if (gk_s3_retries(o->s3) > before)
        gk_warn("%s: %ld requests retried", o->url, gk_s3_retries(o->s3) - before);
    if (rc) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        return gk_errf(e, rc, "uploading %s to %s: %s", name, o->url, msg);
    }
    gk_info("uploaded %s/%s", o->url, name);
    return 0;
}

/* ---------------------------------------------------------------- closing */

void tr_s3out_close(tr_s3out *o, int upload_logs)
{
    if (!o)
        return;
    gk_err e = {0};
    renew_stop(o);
    if (upload_logs && o->stage.path[0] &&
        (upload(o, "metrics.jsonl", 1, &e) || upload(o, "loss.svg", 1, &e)))
        gk_warn("%s", e.msg);
    char key[1200];
    key_of(o, "gpt-train.lock", key, sizeof key);
    if (o->locked && lock_is_ours(o, key) == 0)
        gk_warn("out_dir %s: another run has taken over the lock s3://%s/%s: left to it", o->url,
                o->bucket, key);
    else if (o->locked) {
        if (gk_s3_delete(o->s3, o->bucket, key, &e))
            gk_warn("%s (the lock stays: delete it before the next run)", e.msg);
    }
    gk_stagedir_remove(&o->stage);
    gk_s3_close(o->s3);
    free(o);
}
