/* stage.c: outputs written locally, then uploaded (see stage.h). */
#include "stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

int tk_stage_path(tk_stage *st, const char *out, char *path, size_t cap, gk_err *e)
{
    char bucket[256], key[1100];
    if (!out || !gk_s3_is_url(out)) {
        snprintf(path, cap, "%s", out ? out : "-");
        return 0;
    }
    int rc = gk_s3_parse_url(out, bucket, sizeof bucket, key, sizeof key, e);
    size_t len = strlen(key);
    if (!rc && (!len || key[len - 1] == '/'))
        rc = gk_errf(e, GK_EUSAGE, "%s: names no object (s3://BUCKET/KEY)", out);
    if (!rc && !st->s3)
        rc = gk_errf(e, GK_EUSAGE, "%s: buckets are not written here", out);
    if (rc)
        return rc;
    if (!st->dir[0]) {
        int n = snprintf(st->dir, sizeof st->dir, "%s/gpt-tokenize.XXXXXX", st->tmpdir);
        if (n < 0 || (size_t)n >= sizeof st->dir || !mkdtemp(st->dir)) {
            st->dir[0] = '\0';
            return gk_errf(e, GK_EIO, "%s: cannot make a temporary directory for %s (set TMPDIR to another directory)",
                           st->tmpdir, out);
        }
    }
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    int n = snprintf(path, cap, "%s/%d-%s", st->dir, st->n++, base);
    if (n < 0 || (size_t)n >= cap)
        return gk_errf(e, GK_EUSAGE, "%s: name too long", out);
    return 0;
}

int tk_stage_put(tk_stage *st, const char *path, const char *url, gk_err *e)
{
    char bucket[256], key[1100];
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e);
    if (!rc) {
        gk_verbose("uploading %s", url);
        rc = gk_s3_put_file(st->s3, bucket, key, path, e);
    }
    unlink(path);
    return rc;
}

void tk_stage_delete(tk_stage *st, const char *url)
{
    char bucket[256], key[1100];
    gk_err e = {0};
    if (gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, &e) == 0 &&
        gk_s3_delete(st->s3, bucket, key, &e) != 0)
        gk_warn("%s", e.msg);
}

void tk_stage_close(tk_stage *st)
{
    if (st->dir[0])
        rmdir(st->dir);
    st->dir[0] = '\0';
}
