/* s3.c: gpt-ckpt's s3:// outputs: a checkpoint to write is written into a temporary directory
 * (in $TMPDIR, else /tmp: the tool's gk_env), then uploaded (multipart when large) and removed.
 * Credentials, region and endpoint from the environment and ~/.aws (gk_s3_conf_discover with
 * gk_env_getenv). The staging directory is a gk_stagedir (locked; swept once its process is
 * gone). A checkpoint to read is common/io/ckpt_src.h's (cmd.c). Owns the temporaries until
 * they are handed over or removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ck.h"
#include "common/env.h"
#include "common/io/stagedir.h"
#include "common/log.h"
#include "common/s3/s3.h"

/* A client for url's store (credentials, region and endpoint from the environment and ~/.aws),
 * and url's bucket and key (which must not be empty). */
static int open_client(const char *url, char *bucket, size_t bcap, char *key, size_t kcap,
                       gk_s3 **s, gk_err *e)
{
    gk_s3_conf conf;
    *s = NULL;
    int rc = gk_s3_parse_url(url, bucket, bcap, key, kcap, e);
    if (!rc && !key[0])
        rc = gk_errf(e, GK_EUSAGE, "%s: names a bucket, not a checkpoint (s3://BUCKET/KEY)", url);
    if (!rc)
        rc = gk_s3_conf_discover(&conf, gk_env_getenv, NULL, e);
    if (!rc)
        rc = gk_s3_open(s, &conf, e);
    return rc;
}

/* TMPDIR/gpt-ckpt.XXXXXX from ck_out_begin to ck_out_finish (one output) */
static gk_stagedir stage;

int ck_out_check(const char *out, gk_err *e)
{
    char bucket[256], key[1100];
    if (!gk_s3_is_url(out))
        return 0;
    int rc = gk_s3_parse_url(out, bucket, sizeof bucket, key, sizeof key, e);
    if (!rc && !key[0])
        rc = gk_errf(e, GK_EUSAGE, "%s: names a bucket, not a checkpoint (s3://BUCKET/KEY)", out);
    return rc;
}

int ck_out_begin(const char *out, const gk_env *env, char *path, size_t cap, gk_err *e)
{
    if (!gk_s3_is_url(out)) {
        snprintf(path, cap, "%s", out);
        return 0;
    }
    char bucket[256], key[1100];
    gk_s3 *s = NULL;
    int rc = open_client(out, bucket, sizeof bucket, key, sizeof key, &s, e); /* the URL's checks */
    gk_s3_close(s);
    if (rc)
        return rc;
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    if ((rc = gk_stagedir_make(&stage, env->tmpdir, "gpt-ckpt", e)))
        return gk_errf(e, rc, "%s (writing %s there first)", e->msg, out);
    if ((size_t)snprintf(path, cap, "%s/%s", stage.path, *base ? base : "checkpoint.safetensors") >=
        cap) {
        gk_stagedir_remove(&stage);
        return gk_errf(e, GK_EUSAGE, "%s: name too long", out);
    }
    return 0;
}

int ck_out_finish(const char *out, const char *path, int rc, gk_err *e)
{
    if (!gk_s3_is_url(out))
        return rc;
    char bucket[256], key[1100];
    gk_s3 *s = NULL;
    if (rc) { /* the local write failed: say where it went */
        gk_err keep = *e;
        gk_errf(e, keep.code, "%s (writing %s there first; set TMPDIR to another directory)",
                keep.msg, out);
    } else if (!(rc = open_client(out, bucket, sizeof bucket, key, sizeof key, &s, e))) {
        gk_info("uploading %s", out);
        rc = gk_s3_put_file(s, bucket, key, path, e);
        if (gk_s3_retries(s))
            gk_warn("%s: %ld requests retried", out, gk_s3_retries(s));
    }
    gk_s3_close(s);
    unlink(path);
    gk_stagedir_remove(&stage);
    return rc;
}
