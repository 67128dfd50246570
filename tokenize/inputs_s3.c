/* inputs_s3.c: s3:// operands to inputs, and each object's transfer when it is read (see
 * inputs.h). A listing is S3's (ListObjectsV2, sorted by the keys' bytes); keys ending in '/'
 * (the "folders" consoles make) are skipped. An object is streamed through a pipe by a thread
 * (gk_s3_get, which resumes a cut transfer), unless its first bytes say it must be read from a
 * file (Parquet, zip, 7z): then it is downloaded into an unlinked temporary file first. */
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
    if (rc != GK_ENOTFOUND || len + 2 > sizeof prefix)
        return rc;
    gk_err keep = *e; /* no such key: a folder then, else that error */
    snprintf(prefix, sizeof prefix, "%s/", key);
    if (add_listed(in, bucket, prefix, NULL, &n, e) != 0 || !n) {
        *e = keep;
        return keep.code;
    }
    return 0;
}

/* ---------------------------------------------------------------- streaming */

/* The transfer of one object into a pipe that the reader reads (/dev/fd/N of its read end). */
struct tk_s3_stream {
    pthread_t thread;
    gk_s3 *s3;
    char bucket[256], key[1100];
    int wfd, rc, reader_gone;
    gk_err err;
};

static int to_pipe(const void *data, size_t n, void *ud)
{
    tk_s3_stream *t = ud;
    for (const char *p = data; n;) {
        ssize_t k = write(t->wfd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) { /* EPIPE: the reader stopped (an error, or it had what it wanted) */
            t->reader_gone = 1;
            return GK_EIO;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

static void *stream_main(void *arg)
{
    tk_s3_stream *t = arg;
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL); /* a reader gone is EPIPE here, not a signal */
    t->rc = gk_s3_get(t->s3, t->bucket, t->key, to_pipe, t, &t->err);
    close(t->wfd);
    return NULL;
}

/* Whether an object starting with head must be read from a file: Parquet (read from its end),
 * zip and 7z (their directories are at the end). */
static int needs_file(const unsigned char *head, size_t n)
{
    static const unsigned char par[] = "PAR1", zip[] = "PK\x03\x04", sz[] = "7z\xbc\xaf\x27\x1c";
    return (n >= 4 && !memcmp(head, par, 4)) || (n >= 4 && !memcmp(head, zip, 4)) ||
           (n >= 6 && !memcmp(head, sz, 6));
}

static int stream_start(tk_inputs *in, const char *bucket, const char *key, gk_err *e)
{
    int p[2];
    tk_s3_stream *t = calloc(1, sizeof *t);
    if (!t)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    if (pipe2(p, O_CLOEXEC) != 0) {
        free(t);
        return gk_errno(e, "pipe");
    }
    t->s3 = in->s3;
    snprintf(t->bucket, sizeof t->bucket, "%s", bucket);
    snprintf(t->key, sizeof t->key, "%s", key);
    t->wfd = p[1];
    if (pthread_create(&t->thread, NULL, stream_main, t) != 0) {
        close(p[0]);
        close(p[1]);
        free(t);
        return gk_errf(e, GK_ENOMEM, "cannot start a thread");
    }
    in->stream = t;
    in->s3fd = p[0];
    return 0;
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
    pthread_join(t->thread, NULL); /* the reader's end is closed: a blocked write fails */
    if (rc == 0 && t->rc && !t->reader_gone) { /* the reader saw an end that was a failure */
        *e = t->err;
        rc = t->rc;
    }
    free(t);
    in->stream = NULL;
    return rc;
}

int tk_inputs_fetch_s3(tk_inputs *in, int i, char *path, size_t cap, gk_err *e)
{
    char bucket[256], key[1100];
    unsigned char head[8];
    size_t got = 0;
    tk_inputs_done_s3(in, 0, e);
    int rc = gk_s3_parse_url(in->paths[i], bucket, sizeof bucket, key, sizeof key, e), fd = -1;
    long long bytes = 0;
    if (!rc)
        rc = gk_s3_get_range(in->s3, bucket, key, 0, sizeof head, head, &got, e);
    if (!rc && !needs_file(head, got)) {
        gk_verbose("streaming %s", in->paths[i]);
        rc = stream_start(in, bucket, key, e);
    } else if (!rc && !(rc = gk_s3_fetch_temp(in->s3, bucket, key, in->tmpdir, 1, NULL, &fd, &bytes, e))) {
        in->s3fd = fd;
    }
    if (!rc)
        snprintf(path, cap, "/dev/fd/%d", in->s3fd);
    return rc;
}
