/* inputs_s3.c: s3:// operands to inputs, and each object's download when it is read (see
 * inputs.h). A listing is S3's (ListObjectsV2, sorted by the keys' bytes); keys ending in '/'
 * (the "folders" consoles make) are skipped. */
#include "inputs.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

int tk_inputs_fetch_s3(tk_inputs *in, int i, char *path, size_t cap, gk_err *e)
{
    char bucket[256], key[1100];
    if (in->s3fd > 0) { /* one temporary at a time */
        close(in->s3fd);
        in->s3fd = 0;
    }
    int rc = gk_s3_parse_url(in->paths[i], bucket, sizeof bucket, key, sizeof key, e), fd = -1;
    long long bytes = 0;
    if (!rc)
        rc = gk_s3_fetch_temp(in->s3, bucket, key, in->tmpdir, 1, NULL, &fd, &bytes, e);
    if (rc)
        return rc;
    in->s3fd = fd;
    snprintf(path, cap, "/dev/fd/%d", fd);
    return 0;
}
