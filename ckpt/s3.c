/* s3.c: gpt-ckpt's s3:// checkpoints: the object downloaded into an unlinked temporary file (in
 * $TMPDIR, else /tmp) that the checkpoint reader maps, named by its URL in every message.
 * Credentials, region and endpoint from the environment and ~/.aws (gk_s3_conf_discover).
 * Owns the temporary's descriptor until it is handed to the caller. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ck.h"
#include "common/log.h"
#include "common/s3/s3.h"

static const char *env(const char *name, void *ud)
{
    (void)ud;
    return getenv(name);
}

typedef struct to_fd {
    int fd;
    long long bytes;
    const char *tmp;
    int err; /* errno of a failed write */
} to_fd;

static int write_all(const void *data, size_t n, void *ud)
{
    to_fd *t = ud;
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
    return 0;
}

int ck_s3_fetch(const char *url, int *fd, long long *bytes, gk_err *e)
{
    char bucket[256], key[1100], tmp[4200];
    gk_s3_conf conf;
    gk_s3 *s = NULL;
    *fd = -1;
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e);
    if (!rc && !key[0])
        rc = gk_errf(e, GK_EUSAGE, "%s: names a bucket, not a checkpoint (s3://BUCKET/KEY)", url);
    if (!rc)
        rc = gk_s3_conf_discover(&conf, env, NULL, e);
    if (!rc)
        rc = gk_s3_open(&s, &conf, e);
    if (rc)
        return rc;
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/gpt-ckpt.XXXXXX", dir && *dir ? dir : "/tmp");
    to_fd t = {mkstemp(tmp), 0, tmp, 0};
    if (t.fd < 0) {
        gk_errno(e, tmp);
        rc = gk_errf(e, e->code, "%s (a temporary file for %s; set TMPDIR to another directory)", e->msg, url);
    } else {
        unlink(tmp);
        gk_info("downloading %s", url);
        rc = gk_s3_get(s, bucket, key, write_all, &t, e);
        if (rc && t.err) {
            errno = t.err;
            gk_errno(e, dir && *dir ? dir : "/tmp");
            rc = gk_errf(e, GK_EIO, "%s (downloading %s there; set TMPDIR to another directory)", e->msg, url);
        }
    }
    if (gk_s3_retries(s))
        gk_warn("%s: %ld requests retried", url, gk_s3_retries(s));
    gk_s3_close(s);
    if (rc) {
        if (t.fd >= 0)
            close(t.fd);
        return rc;
    }
    *fd = t.fd;
    *bytes = t.bytes;
    return 0;
}
