/* s3_file.c: whole objects to and from local files, for the tools that read a checkpoint or a
 * Parquet file (which are mapped or read from their end, so need the bytes on disk) and write
 * their outputs locally first: a download into an unlinked temporary file in a directory the
 * caller names (a tool passes $TMPDIR, else /tmp), an upload of a file (gk_s3_put_file). Owns
 * the temporary file until its descriptor is handed over. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/progress.h"
#include "s3.h"

typedef struct to_fd {
    int fd;
    long long bytes;
    int err;          /* errno of a failed write */
    const atomic_int *cancel;
    gk_progress bar;  /* on a terminal: the bytes so far */
} to_fd;

static int write_all(const void *data, size_t n, void *ud)
{
    to_fd *t = ud;
    if (t->cancel && atomic_load(t->cancel))
        return GK_EINTR;
    for (const char *p = data; n;) {
        ssize_t k = write(t->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            t->err = k < 0 ? errno : ENOSPC;
            return GK_EIO;
        }
        p += k, n -= (size_t)k, t->bytes += k;
    }
    gk_progress_update(&t->bar, t->bytes, NULL);
    return 0;
}

int gk_s3_fetch_temp(gk_s3 *s, const char *bucket, const char *key, const char *dir, int bar,
                     const atomic_int *cancel, int *fd, long long *bytes, gk_err *e)
{
    char tmp[4200], url[1400];
    snprintf(url, sizeof url, "s3://%s/%s", bucket, key);
    snprintf(tmp, sizeof tmp, "%s/gptkit-s3.XXXXXX", dir);
    to_fd t = {.fd = mkstemp(tmp), .cancel = cancel};
    *fd = -1;
    if (t.fd < 0) {
        gk_errno(e, tmp);
        return gk_errf(e, e->code, "%s (a temporary file for %s; set TMPDIR to another directory)",
                       e->msg, url);
    }
    unlink(tmp);
    if (bar) {
        gk_info("downloading %s", url);
        gk_progress_start(&t.bar, url, 0);
    }
    int rc = gk_s3_get(s, bucket, key, write_all, &t, e);
    if (bar)
        gk_progress_end(&t.bar);
    if (rc && t.err) {
        errno = t.err;
        gk_errno(e, dir);
        rc = gk_errf(e, GK_EIO, "%s (downloading %s there; set TMPDIR to another directory)",
                     e->msg, url);
    }
    if (rc) {
        close(t.fd);
        return rc;
    }
    *fd = t.fd;
    *bytes = t.bytes;
    return 0;
}

int gk_s3_fetch_file(gk_s3 *s, const char *bucket, const char *key, const char *path, gk_err *e)
{
    to_fd t = {.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (t.fd < 0)
        return gk_errno(e, path);
    int rc = gk_s3_get(s, bucket, key, write_all, &t, e);
    if (close(t.fd) != 0 && !rc)
        rc = gk_errno(e, path);
    if (rc && t.err) {
        errno = t.err;
        gk_errno(e, path);
        rc = gk_errf(e, GK_EIO, "%s (downloading s3://%s/%s; set TMPDIR to another directory)",
                     e->msg, bucket, key);
    }
    if (rc)
        unlink(path);
    return rc;
}

int gk_s3_fetch_url(const char *url, gk_s3_getenv env, void *ud, const char *dir, int *fd,
                    long long *bytes, long *retries, gk_err *e)
{
    char bucket[256], key[1100];
    gk_s3_conf conf;
    gk_s3 *s = NULL;
    *fd = -1;
    *retries = 0;
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e);
    if (!rc && !key[0])
        rc = gk_errf(e, GK_EUSAGE, "%s: names a bucket, not a checkpoint (s3://BUCKET/KEY)", url);
    if (!rc)
        rc = gk_s3_conf_discover(&conf, env, ud, e);
    if (!rc)
        rc = gk_s3_open(&s, &conf, e);
    if (!rc)
        rc = gk_s3_fetch_temp(s, bucket, key, dir, 1, NULL, fd, bytes, e);
    if (s)
        *retries = gk_s3_retries(s);
    gk_s3_close(s);
    return rc;
}
