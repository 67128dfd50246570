/* s3unsent.c: a checkpoint of an out_dir in a bucket whose upload failed for good is not lost with
 * the staging directory: it is moved to TMPDIR/gpt-train-unsent.HASH (HASH: of the out_dir's URL,
 * so that the next run with the same TMPDIR finds it; the file "url" there names the out_dir),
 * with a copy of metrics.jsonl, and the error names it. The next run of that out_dir uploads it,
 * moves latest to it and removes it before resuming (see s3out.h). Owns that directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "run.h"
#include "s3out_int.h"

/* The directory that keeps this out_dir's checkpoint whose upload failed for good:
 * TMPDIR/gpt-train-unsent.HASH, HASH the FNV-1a hash of the URL (found again by the next run with
 * the same TMPDIR; its file "url" names the out_dir). Never a staging directory: no sweep takes
 * it. */
void tr_unsent_dir(tr_s3out *o, const char *tmpdir)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = o->url; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    snprintf(o->unsent, sizeof o->unsent, "%s/gpt-train-unsent.%016llx",
             tmpdir && *tmpdir ? tmpdir : "/tmp", (unsigned long long)h);
}

/* The newest ckpt_STEP.safetensors in the unsent directory into name, when its "url" is this
 * out_dir's: its step, else -1. */
static int64_t unsent_newest(const tr_s3out *o, char *name, size_t cap)
{
    char path[4400], url[1400] = "";
    snprintf(path, sizeof path, "%s/url", o->unsent);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int same =
        fgets(url, sizeof url, f) && (url[strcspn(url, "\n")] = '\0', strcmp(url, o->url) == 0);
    fclose(f);
    int64_t newest = -1;
    DIR *d = same ? opendir(o->unsent) : NULL;
    for (struct dirent *de; d && (de = readdir(d));)
        if (tr_ckpt_step(de->d_name) > newest) {
            newest = tr_ckpt_step(de->d_name);
            snprintf(name, cap, "%.40s", de->d_name); /* ckpt_ + at most 19 digits + .safetensors */
        }
    if (d)
        closedir(d);
    return newest;
}

static void unsent_remove(const tr_s3out *o)
{
    DIR *d = opendir(o->unsent);
    for (struct dirent *de; d && (de = readdir(d));)
        if (tr_ckpt_step(de->d_name) >= 0 || !strcmp(de->d_name, "url") ||
            !strcmp(de->d_name, "metrics.jsonl"))
            unlinkat(dirfd(d), de->d_name, 0);
    if (d)
        closedir(d);
    rmdir(o->unsent);
}

static int copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY | O_CLOEXEC),
        out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ssize_t n = 0;
    while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        n = -1;
    return out < 0 || n < 0 ? -1 : 0;
}

/* After stage/name's upload failed for good: moves it (and a copy of metrics.jsonl) into the
 * unsent directory, in place of an older one; where into *kept ("" when it could not be kept). */
void tr_unsent_keep(tr_s3out *o, const char *name, char *kept, size_t cap)
{
    char from[4400], to[4400], old[64];
    kept[0] = '\0';
    if (mkdir(o->unsent, 0700) != 0 && errno != EEXIST)
        return;
    if (unsent_newest(o, old, sizeof old) < 0)
        /* another out_dir's (a hash collision): start over */
        unsent_remove(o), mkdir(o->unsent, 0700);
    snprintf(to, sizeof to, "%s/url", o->unsent);
    FILE *f = fopen(to, "w");
    if (!f || fprintf(f, "%s\n", o->url) < 0 || fclose(f) != 0)
        return;
    snprintf(from, sizeof from, "%s/%s", o->stage.path, name);
    snprintf(to, sizeof to, "%s/%s", o->unsent, name);
    if (rename(from, to) != 0)
        return;
    DIR *d = opendir(o->unsent);
    for (struct dirent *de; d && (de = readdir(d));)
        if (tr_ckpt_step(de->d_name) >= 0 && strcmp(de->d_name, name) != 0)
            unlinkat(dirfd(d), de->d_name, 0);
    if (d)
        closedir(d);
    snprintf(from, sizeof from, "%s/metrics.jsonl", o->stage.path);
    snprintf(kept, cap, "%s/metrics.jsonl", o->unsent);
    if (access(from, F_OK) == 0 && copy_file(from, kept) != 0)
        unlink(kept);
    snprintf(kept, cap, "%s", to);
}

/* At the start: a checkpoint a run could not upload, newer than latest, is uploaded (with the
 * metrics it kept), latest moved to it, and removed here; the run then resumes from it as from
 * any latest. One not newer than latest is removed. A run that does not resume is refused, as
 * for an out_dir holding checkpoints. */
int tr_unsent_pick_up(tr_s3out *o, const char *init_from, gk_err *e)
{
    char name[64], latest[64], path[4400], key[1200], text[80];
    int64_t step = unsent_newest(o, name, sizeof name);
    if (step < 0)
        return 0;
    int rc = tr_s3out_read_latest(o, latest, sizeof latest, e);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/%s", o->unsent, name);
    if (latest[0] && tr_ckpt_step(latest) >= step) {
        gk_info("removing %s: the unsent checkpoint of an earlier run, not newer than %s/%s", path,
                o->url, latest);
        unsent_remove(o);
        return 0;
    }
    if (strcmp(init_from, "resume") != 0 && strcmp(init_from, "auto") != 0)
        return gk_errf(e, GK_EUSAGE,
                       "out_dir %s has a newer checkpoint than its latest, kept "
                       "at %s after its upload failed: continue the run with "
                       "--init_from=auto (it is uploaded first), or remove it",
                       o->url, path);
    gk_info("uploading %s to %s (kept there after its upload failed)", path, o->url);
    key_of(o, name, key, sizeof key);
    rc = gk_s3_put_file(o->s3, o->bucket, key, path, e);
    snprintf(path, sizeof path, "%s/metrics.jsonl", o->unsent);
    key_of(o, "metrics.jsonl", key, sizeof key);
    if (!rc && access(path, F_OK) == 0)
        rc = gk_s3_put_file(o->s3, o->bucket, key, path, e);
    int n = snprintf(text, sizeof text, "%s\n", name);
    key_of(o, "latest", key, sizeof key);
    if (!rc)
        rc = gk_s3_put(o->s3, o->bucket, key, text, (size_t)n, e);
    if (rc) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        return gk_errf(e, rc, "uploading %s/%s (kept there after its upload failed) to %s: %s",
                       o->unsent, name, o->url, msg);
    }
    unsent_remove(o);
    return 0;
}

