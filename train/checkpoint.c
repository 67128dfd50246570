/* checkpoint.c: step checkpoints in out_dir: ckpt_STEP.safetensors written atomically (model_io.c),
 * latest.safetensors re-pointed to it, older ones pruned to keep_last (see run.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "run.h"

int64_t tr_ckpt_step(const char *name)
{
    long long step;
    char tail[32];
    if (sscanf(name, "ckpt_%lld.safetensor%31s", &step, tail) == 2 && strcmp(tail, "s") == 0)
        return step;
    return -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Removes all but the newest keep_last step checkpoints. */
static void prune(const tr_run *r)
{
    DIR *d = opendir(r->s.out_dir);
    if (!d)
        return;
    int64_t steps[4096];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096)
        if (tr_ckpt_step(de->d_name) >= 0)
            steps[n++] = tr_ckpt_step(de->d_name);
    closedir(d);
    qsort(steps, n, sizeof *steps, cmp_i64);
    for (size_t i = 0; i + (size_t)r->s.keep_last < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ckpt_%08lld.safetensors", r->s.out_dir, (long long)steps[i]);
        unlink(path);
    }
}

int tr_checkpoint(tr_run *r, gk_err *e)
{
    char name[64], path[4096], link[4096], tmp[4200];
    snprintf(name, sizeof name, "ckpt_%08lld.safetensors", (long long)r->st.step);
    snprintf(path, sizeof path, "%s/%s", r->s.out_dir, name);
    int rc = tr_save(path, r->model, r->vocab, &r->st, r->settings_json, 1, e);
    if (rc)
        return rc;
    snprintf(link, sizeof link, "%s/latest.safetensors", r->s.out_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", link, (long)getpid());
    unlink(tmp);
    if (symlink(name, tmp) != 0 || rename(tmp, link) != 0) {
        unlink(tmp);
        return gk_errno(e, link);
    }
    r->last_saved_step = r->st.step;
    prune(r);
    gk_info("saved %s", path);
    return 0;
}

int tr_checkpoint_wait(tr_run *r, gk_err *e)
{
    (void)r, (void)e;
    return 0;
}

void tr_checkpoint_close(tr_run *r)
{
    (void)r;
}
