/* shard_s3.c: shards in a bucket: ranged reads and the header's check (see shard_s3.h). */
#include "common/io/shard_s3.h"

#include <stdio.h>

int gk_shard_s3_range(gk_s3 *s, const char *bucket, const char *key, int64_t off, size_t n,
                      void *buf, gk_err *e)
{
    size_t got = 0;
    int rc = gk_s3_get_range(s, bucket, key, off, n, buf, &got, e);
    if (!rc && got != n)
        rc = gk_errf(e, GK_EFORMAT,
                     "s3://%s/%s: %zu bytes at %lld, where %zu were expected (the object changed?)",
                     bucket, key, got, (long long)off, n);
    return rc;
}

int gk_shard_s3_header(gk_s3 *s, const char *bucket, const char *key, int64_t size, gk_shard_map *m,
                       int64_t *data_off, gk_err *e)
{
    unsigned char b[GK_SHARD_HEADER_BYTES];
    size_t want = size < (int64_t)sizeof b ? (size_t)size : sizeof b;
    m->size = (size_t)size;
    m->raw = 1, m->width = 2, *data_off = 0; /* empty: a raw file of no tokens */
    if (size == 0)
        return 0;
    gk_shard_kind kind;
    gk_shard_header h;
    int rc = gk_shard_s3_range(s, bucket, key, 0, want, b, e);
    if (!rc)
        rc = gk_shard_parse(b, want, size, m->name, &kind, &h, e);
    if (!rc && kind == GK_SHARD_TEXT)
        rc = gk_errf(e, GK_EFORMAT, "%s: not a token shard (no shard header, and it reads as text)",
                     m->name);
    if (rc)
        return rc;
    m->raw = kind == GK_SHARD_RAW;
    if (m->raw && size % 2)
        return gk_errf(e, GK_EFORMAT, "%s: object ends in the middle of a token", m->name);
    m->width = h.width;
    m->count = h.tokens;
    m->vocab_size = h.vocab_size;
    m->fingerprint = h.fingerprint;
    *data_off = m->raw ? 0 : GK_SHARD_HEADER_BYTES;
    return 0;
}
