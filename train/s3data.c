/* s3data.c: shards in a bucket: their listing, their headers checked and ranged reads of their
 * tokens (common/io/shard_s3.h, shared with gpt-tokenize -d and gpt-evalppl) (see s3data.h).
 * Owns the client and the objects' bucket and key. */
#include "s3data.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/io/shard_s3.h"

typedef struct object {
    char *bucket, *key;
} object;

struct tr_s3data {
    gk_s3 *s;
    object *obj;
    size_t n, cap;
};

int tr_s3data_open(tr_s3data **out, const gk_s3_conf *conf, gk_err *e)
{
    *out = NULL;
    tr_s3data *d = calloc(1, sizeof *d);
    if (!d)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int rc = gk_s3_open(&d->s, conf, e);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

typedef struct matches {
    const char *glob;
    char **keys;
    int64_t *sizes;
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
        int64_t *q = p ? realloc(m->sizes, cap * sizeof *q) : NULL;
        if (p)
            m->keys = p;
        if (!q)
            return GK_ENOMEM;
        m->sizes = q, m->cap = cap;
    }
    m->sizes[m->n] = ent->size;
    return (m->keys[m->n] = strdup(ent->key)) ? (m->n++, 0) : GK_ENOMEM;
}

/* One object: remembered, its header checked, given to fn. */
static int add_object(tr_s3data *d, const char *bucket, const char *key, int64_t size,
                      tr_s3data_fn fn, void *ud, gk_err *e)
{
    if (gk_grow(&d->obj, &d->cap, d->n + 1, sizeof *d->obj, 16))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    object *o = &d->obj[d->n];
    o->bucket = strdup(bucket), o->key = strdup(key);
    gk_shard_map m = {0};
    size_t len = strlen(bucket) + strlen(key) + 7;
    if (o->bucket && o->key && (m.name = malloc(len)))
        snprintf(m.name, len, "s3://%s/%s", bucket, key);
    if (!m.name) {
        free(o->bucket);
        free(o->key);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    size_t obj = d->n++;
    int64_t data_off;
    int rc = gk_shard_s3_header(d->s, o->bucket, o->key, size, &m, &data_off, e);
    if (!rc)
        return fn(ud, &m, obj, data_off, e);
    gk_shard_map_close(&m);
    return rc;
}

int tr_s3data_add(tr_s3data *d, const char *url, const char *what, tr_s3data_fn fn, void *ud,
                  gk_err *e)
{
    char bucket[256], key[1100], prefix[1100];
    int rc = gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e);
    if (rc)
        return rc;
    snprintf(prefix, sizeof prefix, "%.*s", (int)strcspn(key, "*?["), key);
    matches m = {.glob = key};
    rc = gk_s3_list(d->s, bucket, prefix, 0, on_key, &m, e);
    if (rc == GK_ENOMEM)
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    if (!rc && m.n == 0)
        rc = gk_errf(e, GK_ENOTFOUND, "%s: no object matches '%s'", what, url);
    for (size_t i = 0; !rc && i < m.n; i++)
        rc = add_object(d, bucket, m.keys[i], m.sizes[i], fn, ud, e);
    if (rc == GK_EIO || rc == GK_EFORMAT)
        rc = gk_errf(e, rc, "%s: %s", what, e->msg);
    for (size_t i = 0; i < m.n; i++)
        free(m.keys[i]);
    free(m.keys);
    free(m.sizes);
    return rc;
}

int tr_s3data_read(tr_s3data *d, size_t obj, int64_t off, size_t n, void *buf, gk_err *e)
{
    const object *o = &d->obj[obj];
    return gk_shard_s3_range(d->s, o->bucket, o->key, off, n, buf, e);
}

long tr_s3data_retries(const tr_s3data *d) { return gk_s3_retries(d->s); }

void tr_s3data_close(tr_s3data *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->obj[i].bucket);
        free(d->obj[i].key);
    }
    free(d->obj);
    gk_s3_close(d->s);
    free(d);
}
