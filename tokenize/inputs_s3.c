/* inputs_s3.c: s3:// operands to inputs, and each object's transfer when it is read (see
 * inputs.h). A listing is S3's (ListObjectsV2, sorted by the keys' bytes); keys ending in '/'
 * (the "folders" consoles make) are skipped. An object is streamed through a pipe by a thread
 * (gk_s3_get, which resumes a cut transfer), unless its first bytes say it must be read from a
 * file (Parquet, zip, 7z): then the same GET fills an unlinked temporary file first. */
#include "inputs.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

typedef struct match {
    tk_inputs *in;
    const char *bucket, *pattern; /* pattern NULL: every key */
    int n;
    gk_err *e;
} match;

static int on_entry(const gk_s3_entry *ent, void *ud)
{
    match *m = ud;
    size_t len = strlen(ent->key);
    if (len == 0 || ent->key[len - 1] == '/')
        return 0;
    if (m->pattern && fnmatch(m->pattern, ent->key, FNM_PATHNAME) != 0)
        return 0;
    char url[2048];
    int w = snprintf(url, sizeof url, "s3://%s/%s", m->bucket, ent->key);
    if (w < 0 || (size_t)w >= sizeof url)
        return gk_errf(m->e, GK_EUSAGE, "s3://%s/%s: name too long", m->bucket, ent->key);
    m->n++;
    return tk_inputs_add_entry(m->in, url, ent->size, (tk_remote){NULL, 0, 1}, m->e);
}

/* The objects under prefix that match pattern (NULL: all); how many into *n. */
static int add_listed(tk_inputs *in, const char *bucket, const char *prefix, const char *pattern,
                      int *n, gk_err *e)
{
    match m = {in, bucket, pattern, 0, e};
    int rc = gk_s3_list(in->s3, bucket, prefix, 0, on_entry, &m, e);
    *n = m.n;
    return rc;
}

int tk_inputs_add_s3(tk_inputs *in, const char *url, gk_err *e)
{
    char bucket[256], key[1100], prefix[1100];
    if (!in->s3)
        return gk_errf(e, GK_EUSAGE, "%s: buckets are not read here", url);
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e), n = 0;
    if (rc)
        return rc;
    size_t len = strlen(key), glob = strcspn(key, "*?[");
    if (glob < len) { /* a pattern: list from its fixed part */
        snprintf(prefix, sizeof prefix, "%.*s", (int)glob, key);
        rc = add_listed(in, bucket, prefix, key, &n, e);
        if (!rc && !n)
            rc = gk_errf(e, GK_ENOTFOUND, "%s: no object matches this pattern", url);
        return rc;
    }
    if (len == 0 || key[len - 1] == '/') { /* a "folder" */
        rc = add_listed(in, bucket, key, NULL, &n, e);
        if (!rc && !n)
            rc = gk_errf(e, GK_ENOTFOUND, "%s: no object under this prefix", url);
        return rc;
    }
    gk_s3_stat st;
    rc = gk_s3_head(in->s3, bucket, key, &st, e);
    if (rc == 0)
        return tk_inputs_add_entry(in, url, st.size, (tk_remote){NULL, 0, 1}, e);
    if (rc != GK_ENOTFOUND || snprintf(prefix, sizeof prefix, "%s/", key) >= (int)sizeof prefix)
        return rc;
    gk_err keep = *e; /* no such key: a folder then, else that error */
    if (add_listed(in, bucket, prefix, NULL, &n, e) != 0 || !n) {
        *e = keep;
        return keep.code;
    }
    return 0;
}

/* ---------------------------------------------------------------- streaming */

/* One GET of an object: its first bytes decide where the rest goes: into a pipe that the reader
 * reads as the transfer runs, or, for an object that must be read from a file, into an unlinked
 * temporary file that the reader gets once it is whole. */
enum { UNDECIDED, TO_PIPE, TO_FILE };

struct tk_s3_stream {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gk_s3 *s3;
    const char *tmpdir;
    char bucket[256], key[1100];
    unsigned char head[8];
    size_t nhead;
    int mode, finished;          /* finished: the transfer is over (rc holds its result) */
    int wfd, tmpfd, rc, reader_gone;
    gk_err err;
};

static int put(tk_s3_stream *t, const void *data, size_t n)
{
    int fd = t->mode == TO_PIPE ? t->wfd : t->tmpfd;
    for (const char *p = data; n;) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 && t->mode == TO_PIPE) { /* EPIPE: the reader stopped (an error, or done) */
            t->reader_gone = 1;
            return GK_EIO;
        }
        if (k <= 0) {
            gk_errno(&t->err, t->tmpdir);
            return gk_errf(&t->err, GK_EIO,
                           "%s (downloading s3://%s/%s there; set TMPDIR to another directory)",
                           t->err.msg, t->bucket, t->key);
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* Whether an object starting with head must be read from a file: Parquet (read from its end),
 * zip and 7z (their directories are at the end). */
static int needs_file(const unsigned char *head, size_t n)
{
    static const unsigned char par[] = "PAR1", zip[] = "PK\x03\x04", sz[] = "7z\xbc\xaf\x27\x1c";
    return (n >= 4 && !memcmp(head, par, 4)) || (n >= 4 && !memcmp(head, zip, 4)) ||
           (n >= 6 && !memcmp(head, sz, 6));
}

static int decide(tk_s3_stream *t)
{
    char tmp[4200];
    int mode = TO_PIPE;
    if (needs_file(t->head, t->nhead)) {
        snprintf(tmp, sizeof tmp, "%s/gpt-tokenize.XXXXXX", t->tmpdir);
        if ((t->tmpfd = mkstemp(tmp)) < 0) {
            gk_errno(&t->err, tmp);
            return gk_errf(&t->err, t->err.code,
                           "%s (a temporary file for s3://%s/%s; set TMPDIR to another directory)",
                           t->err.msg, t->bucket, t->key);
        }
        unlink(tmp);
        mode = TO_FILE;
    }
    pthread_mutex_lock(&t->mu);
    t->mode = mode;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return put(t, t->head, t->nhead);
}

static int sink(const void *data, size_t n, void *ud)
{
    tk_s3_stream *t = ud;
    if (t->mode == UNDECIDED) {
        size_t k = n < sizeof t->head - t->nhead ? n : sizeof t->head - t->nhead;
        memcpy(t->head + t->nhead, data, k);
        t->nhead += k;
        data = (const char *)data + k;
        n -= k;
        if (t->nhead < sizeof t->head)
            return 0;
        int rc = decide(t);
        if (rc)
            return rc;
    }
    return n ? put(t, data, n) : 0;
}

static void *stream_main(void *arg)
{
    tk_s3_stream *t = arg;
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL); /* a reader gone is EPIPE here, not a signal */
    int rc = gk_s3_get(t->s3, t->bucket, t->key, sink, t, &t->err);
    if (rc == 0 && t->mode == UNDECIDED) /* under 8 bytes */
        rc = decide(t);
    close(t->wfd);
    pthread_mutex_lock(&t->mu);
    t->rc = rc;
    t->finished = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void stream_free(tk_s3_stream *t)
{
    pthread_join(t->thread, NULL);
    if (t->tmpfd >= 0 && t->mode == TO_FILE)
        close(t->tmpfd);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* Starts the transfer and waits until the reader can begin: *fd is the pipe's read end, or the
 * temporary file once whole. */
static int stream_start(tk_inputs *in, const char *bucket, const char *key, int *fd, gk_err *e)
{
    int p[2];
    tk_s3_stream *t = calloc(1, sizeof *t);
    if (!t)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    if (pipe2(p, O_CLOEXEC) != 0) {
        free(t);
        return gk_errno(e, "pipe");
    }
    *t = (tk_s3_stream){.s3 = in->s3, .tmpdir = in->tmpdir, .wfd = p[1], .tmpfd = -1};
    snprintf(t->bucket, sizeof t->bucket, "%s", bucket);
    snprintf(t->key, sizeof t->key, "%s", key);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, stream_main, t) != 0) {
        close(p[0]);
        close(p[1]);
        free(t);
        return gk_errf(e, GK_ENOMEM, "cannot start a thread");
    }
    pthread_mutex_lock(&t->mu);
    while (t->mode != TO_PIPE && !t->finished)
        pthread_cond_wait(&t->cv, &t->mu);
    int mode = t->mode;
    pthread_mutex_unlock(&t->mu);
    if (mode == TO_PIPE) {
        gk_verbose("streaming %s", in->paths[in->cur]);
        in->stream = t;
        *fd = p[0];
        return 0;
    }
    close(p[0]);
    int rc = t->rc;
    if (rc)
        *e = t->err;
    else
        gk_verbose("downloaded %s", in->paths[in->cur]);
    *fd = rc ? -1 : t->tmpfd;
    t->mode = rc ? t->mode : UNDECIDED; /* the file is the caller's now */
    stream_free(t);
    return rc;
}

int tk_inputs_done_s3(tk_inputs *in, int rc, gk_err *e)
{
    if (in->s3fd > 0) { /* one temporary or pipe at a time */
        close(in->s3fd);
        in->s3fd = 0;
    }
    tk_s3_stream *t = in->stream;
    if (!t)
        return rc;
    in->stream = NULL;
    pthread_join(t->thread, NULL); /* the reader's end is closed: a blocked write fails */
    if (rc == 0 && t->rc && !t->reader_gone) { /* the reader saw an end that was a failure */
        *e = t->err;
        rc = t->rc;
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
    return rc;
}

int tk_inputs_fetch_s3(tk_inputs *in, int i, char *path, size_t cap, gk_err *e)
{
    char bucket[256], key[1100];
    tk_inputs_done_s3(in, 1, e);
    in->cur = i;
    int fd = -1, rc = gk_s3_parse_url(in->paths[i], bucket, sizeof bucket, key, sizeof key, e);
    if (!rc)
        rc = stream_start(in, bucket, key, &fd, e);
    if (rc)
        return rc;
    in->s3fd = fd;
    snprintf(path, cap, "/dev/fd/%d", fd);
    return 0;
}
