/* stage.c: outputs written locally, then uploaded; what a signal or a killed run leaves of them
 * (see stage.h). */
#include "stage.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/io/outfile.h"
#include "common/log.h"

/* For the signal handler: the staging directory's path (fixed storage, set before it is
 * published), whether an upload is under way, and the signal that cancels it. */
static char sig_dir[4096];
static atomic_int sig_dir_set, uploading, cancel_sig;

int tk_stage_signal(int sig)
{
    if (atomic_load(&uploading)) {
        atomic_store(&cancel_sig, sig);
        return 1;
    }
    if (atomic_load(&sig_dir_set))
        gk_stagedir_remove_path(sig_dir);
    return 0;
}

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
    if (!st->dir.path[0]) {
        if ((rc = gk_stagedir_make(&st->dir, st->tmpdir, "gpt-tokenize", e)))
            return gk_errf(e, rc, "%s (writing %s there first)", e->msg, out);
        snprintf(sig_dir, sizeof sig_dir, "%s", st->dir.path);
        atomic_store(&sig_dir_set, 1);
    }
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    int n = snprintf(path, cap, "%s/%d-%s", st->dir.path, st->n++, base);
    if (n < 0 || (size_t)n >= cap)
        return gk_errf(e, GK_EUSAGE, "%s: name too long", out);
    return 0;
}

typedef struct leftover {
    tk_stage *st;
    const char *bucket, *key;
} leftover;

static int abort_left(const char *key, const char *upload_id, void *ud)
{
    leftover *l = ud;
    gk_err e = {0};
    if (strcmp(key, l->key) != 0)
        return 0;
    if (gk_s3_abort_upload(l->st->s3, l->bucket, key, upload_id, &e))
        gk_warn("%s", e.msg);
    else
        gk_info("aborted the upload of s3://%s/%s left by a run that was killed", l->bucket, key);
    return 0;
}

/* Dies of sig, as the signal handler would have: temporaries and the staging directory gone. */
static void die_of(tk_stage *st, int sig)
{
    gk_outfile_unlink_temps();
    atomic_store(&sig_dir_set, 0);
    gk_stagedir_remove(&st->dir);
    signal(sig, SIG_DFL);
    raise(sig);
}

int tk_stage_put(tk_stage *st, const char *path, const char *url, gk_err *e)
{
    char bucket[256], key[1100];
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e);
    leftover l = {st, bucket, key};
    if (!rc)
        rc = gk_s3_list_uploads(st->s3, bucket, key, abort_left, &l, e);
    if (!rc) {
        gk_verbose("uploading %s", url);
        atomic_store(&uploading, 1);
        rc = gk_s3_put_file_cancel(st->s3, bucket, key, path, &cancel_sig, e);
        atomic_store(&uploading, 0);
    }
    unlink(path);
    int sig = atomic_load(&cancel_sig);
    if (sig)
        die_of(st, sig);
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
    atomic_store(&sig_dir_set, 0);
    gk_stagedir_remove(&st->dir);
}
