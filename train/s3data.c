/* s3data.c: shards in a bucket downloaded into a data directory before training (see s3data.h).
 * Owns the client while fetching and the data directory until tr_s3data_close. */
#include "s3data.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

struct tr_s3data {
    char dir[4096];
    size_t files;
};

typedef struct out_buf {
    char *s;
    size_t n, cap;
} out_buf;

static int append(out_buf *b, const char *s)
{
    size_t k = strlen(s);
    if (b->n + k + 2 > b->cap) {
        size_t cap = (b->n + k + 2) * 2;
        char *p = realloc(b->s, cap);
        if (!p)
            return GK_ENOMEM;
        b->s = p, b->cap = cap;
    }
    if (b->n)
        b->s[b->n++] = ',';
    memcpy(b->s + b->n, s, k + 1);
    b->n += k;
    return 0;
}

typedef struct matches {
    const char *glob;
    char **keys;
    size_t n, cap;
} matches;

static int on_key(const gk_s3_entry *ent, void *ud)
{
    matches *m = ud;
    if (fnmatch(m->glob, ent->key, 0) != 0)
        return 0;
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        char **p = realloc(m->keys, cap * sizeof *p);
        if (!p)
            return GK_ENOMEM;
        m->keys = p, m->cap = cap;
    }
    return (m->keys[m->n] = strdup(ent->key)) ? (m->n++, 0) : GK_ENOMEM;
}

/* One s3:// pattern: its objects into d->dir, their paths appended to b. */
static int fetch_pattern(tr_s3data *d, gk_s3 *s, const char *url, const char *what, out_buf *b, gk_err *e)
{
    char bucket[256], key[1100], prefix[1100], path[4200];
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e);
    if (rc)
        return rc;
    snprintf(prefix, sizeof prefix, "%.*s", (int)strcspn(key, "*?["), key);
    matches m = {.glob = key};
    rc = gk_s3_list(s, bucket, prefix, 0, on_key, &m, e);
    if (rc == GK_ENOMEM)
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    if (!rc && m.n == 0)
        rc = gk_errf(e, GK_ENOTFOUND, "%s: no object matches '%s'", what, url);
    for (size_t i = 0; !rc && i < m.n; i++) {
        snprintf(path, sizeof path, "%s/%05zu.bin", d->dir, d->files++);
        gk_info("%s: downloading s3://%s/%s", what, bucket, m.keys[i]);
        rc = gk_s3_fetch_file(s, bucket, m.keys[i], path, e);
        if (rc == GK_EIO)
            rc = gk_errf(e, rc, "%s: %s", what, e->msg);
        if (!rc && append(b, path))
            rc = gk_errf(e, GK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < m.n; i++)
        free(m.keys[i]);
    free(m.keys);
    return rc;
}

int tr_s3data_fetch(tr_s3data **out, const char *patterns, const gk_s3_conf *conf, const char *tmpdir,
                    const char *what, char **local, gk_err *e)
{
    *out = NULL;
    *local = NULL;
    if (!strstr(patterns, "s3://"))
        return 0;
    tr_s3data *d = calloc(1, sizeof *d);
    char *copy = strdup(patterns), *save = NULL;
    out_buf b = {0};
    gk_s3 *s = NULL;
    int rc = d && copy ? 0 : gk_errf(e, GK_ENOMEM, "out of memory");
    int n = d ? snprintf(d->dir, sizeof d->dir, "%s/gpt-train-data.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp") : 0;
    if (!rc && strpbrk(d->dir, ", "))
        rc = gk_errf(e, GK_EUSAGE, "%s: TMPDIR %s holds a comma or a space, which split patterns", what, tmpdir);
    if (!rc && (n < 0 || (size_t)n >= sizeof d->dir || !mkdtemp(d->dir))) {
        gk_errno(e, d->dir);
        rc = gk_errf(e, GK_EIO, "%s: %s (the data directory; set TMPDIR to another directory)", what, e->msg);
        d->dir[0] = '\0';
    }
    if (!rc)
        rc = gk_s3_open(&s, conf, e);
    for (char *p = rc ? NULL : strtok_r(copy, ", ", &save); !rc && p; p = strtok_r(NULL, ", ", &save))
        rc = gk_s3_is_url(p) ? fetch_pattern(d, s, p, what, &b, e)
             : append(&b, p) ? gk_errf(e, GK_ENOMEM, "out of memory") : 0;
    if (s && gk_s3_retries(s))
        gk_warn("%s: %ld requests retried", what, gk_s3_retries(s));
    gk_s3_close(s);
    free(copy);
    if (rc) {
        free(b.s);
        tr_s3data_close(d);
        return rc;
    }
    *out = d;
    *local = b.s;
    return 0;
}

void tr_s3data_close(tr_s3data *d)
{
    if (!d)
        return;
    DIR *dir = d->dir[0] ? opendir(d->dir) : NULL;
    if (dir) {
        for (struct dirent *de; (de = readdir(dir));)
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                unlinkat(dirfd(dir), de->d_name, 0);
        closedir(dir);
        rmdir(d->dir);
    }
    free(d);
}
