/* s3.c: the S3 client (gk_s3) and its object requests: HEAD, GET of a range or of a whole object,
 * PUT (plain, conditional, of a file), DELETE (see s3.h). Owns the client; the requests
 * themselves run in s3_http.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/s3/s3_int.h"

/* ---------------------------------------------------------------- the client */

/* Splits endpoint into scheme, HOST[:PORT] and path. */
static int parse_endpoint(gk_s3 *s, gk_err *e)
{
    const char *ep = s->c.endpoint, *rest;
    if (strncmp(ep, "https://", 8) == 0)
        strcpy(s->scheme, "https"), rest = ep + 8;
    else if (strncmp(ep, "http://", 7) == 0)
        strcpy(s->scheme, "http"), rest = ep + 7;
    else
        return gk_errf(e, GK_EUSAGE,
                       "S3 endpoint %s: expected http://HOST[:PORT] or https://HOST[:PORT]", ep);
    size_t hn = strcspn(rest, "/?#");
    if (hn == 0 || hn >= sizeof s->host || rest[hn] == '?' || rest[hn] == '#')
        return gk_errf(e, GK_EUSAGE, "S3 endpoint %s: expected http(s)://HOST[:PORT][/PATH]", ep);
    memcpy(s->host, rest, hn);
    s->host[hn] = '\0';
    size_t pn = strlen(rest + hn);
    while (pn && rest[hn + pn - 1] == '/') pn--;
    if (pn >= sizeof s->base)
        return gk_errf(e, GK_EUSAGE, "S3 endpoint %s: path too long", ep);
    memcpy(s->base, rest + hn, pn);
    s->base[pn] = '\0';
    return 0;
}

int gk_s3_open(gk_s3 **out, const gk_s3_conf *c, gk_err *e)
{
    *out = NULL;
    gk_s3 *s = calloc(1, sizeof *s);
    if (!s)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    s->c = *c;
    if (!s->c.region[0])
        snprintf(s->c.region, sizeof s->c.region, "us-east-1");
    if (!s->c.endpoint[0])
        snprintf(s->c.endpoint, sizeof s->c.endpoint, "https://s3.%s.amazonaws.com", s->c.region);
    if (s->c.max_attempts < 0)
        s->c.max_attempts = 0; /* no limit by count: retry_ms bounds */
    if (s->c.retry_ms <= 0)
        s->c.retry_ms = 600000;
    if (s->c.connect_timeout_s <= 0)
        s->c.connect_timeout_s = 5;
    if (s->c.backoff_ms <= 0)
        s->c.backoff_ms = 200;
    if (s->c.stall_timeout_s <= 0)
        s->c.stall_timeout_s = 30;
    if (!s->c.part_size)
        s->c.part_size = (size_t)64 << 20;
    snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", s->c.region);
    atomic_init(&s->retries, 0);
    int rc = parse_endpoint(s, e);
    if (!rc && pthread_mutex_init(&s->pool_mu, NULL) != 0)
        rc = gk_errf(e, GK_ENOMEM, "cannot create a mutex");
    if (!rc && pthread_mutex_init(&s->throttle.mu, NULL) != 0) {
        pthread_mutex_destroy(&s->pool_mu);
        rc = gk_errf(e, GK_ENOMEM, "cannot create a mutex");
    }
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void gk_s3_close(gk_s3 *s)
{
    if (!s)
        return;
    s3_pool_free(s);
    pthread_mutex_destroy(&s->pool_mu);
    pthread_mutex_destroy(&s->throttle.mu);
    memset(s->c.secret, 0, sizeof s->c.secret);
    memset(s->c.token, 0, sizeof s->c.token);
    free(s);
}

long gk_s3_retries(const gk_s3 *s) { return atomic_load(&((gk_s3 *)s)->retries); }
const gk_s3_conf *gk_s3_settings(const gk_s3 *s) { return &s->c; }

/* ---------------------------------------------------------------- reads */

int gk_s3_head(gk_s3 *s, const char *bucket, const char *key, gk_s3_stat *st, gk_err *e)
{
    s3_req r;
    s3_req_init(&r, "HEAD", bucket, key);
    int rc = s3_do(s, &r, NULL, e);
    if (!rc) {
        st->size = r.length;
        snprintf(st->etag, sizeof st->etag, "%s", r.etag);
    }
    s3_req_free(&r);
    return rc;
}

typedef struct buf_sink {
    char *buf;
    size_t cap, len;
} buf_sink;

static int to_buf(const void *data, size_t n, void *ud)
{
    buf_sink *b = ud;
    if (n > b->cap - b->len)
        return GK_EFORMAT; /* more than asked for: the server ignored the range's end */
    memcpy(b->buf + b->len, data, n);
    b->len += n;
    return 0;
}

int gk_s3_get_range(gk_s3 *s, const char *bucket, const char *key, int64_t off, size_t n, void *buf,
                    size_t *got, gk_err *e)
{
    *got = 0;
    if (n == 0)
        return 0;
    static const long ok[] = {416, 0}; /* at or past the end */
    buf_sink b = {buf, n, 0};
    s3_req r;
    s3_req_init(&r, "GET", bucket, key);
    r.range_off = off;
    r.range_end = off + (int64_t)n - 1;
    r.sink = to_buf;
    r.sink_ud = &b;
    int rc = s3_do(s, &r, ok, e);
    if (rc == GK_EFORMAT)
        rc = gk_errf(e, GK_EFORMAT,
                     "s3://%s/%s: the answer to a range request of %zu bytes at %lld was longer",
                     bucket, key, n, (long long)off);
    *got = b.len;
    s3_req_free(&r);
    return rc;
}

int gk_s3_get(gk_s3 *s, const char *bucket, const char *key, gk_s3_sink sink, void *ud, gk_err *e)
{
    s3_req r;
    s3_req_init(&r, "GET", bucket, key);
    r.sink = sink;
    r.sink_ud = ud;
    int rc = s3_do(s, &r, NULL, e);
    s3_req_free(&r);
    return rc;
}

/* ---------------------------------------------------------------- writes */

static int put(gk_s3 *s, const char *bucket, const char *key, const void *buf, size_t n, int if_new,
               const atomic_int *cancel, gk_err *e)
{
    static const long ok[] = {412, 409, 0};
    s3_req r;
    s3_req_init(&r, "PUT", bucket, key);
    r.body = buf;
    r.body_len = n;
    r.cancel = cancel;
    if (if_new)
        r.hdr[0] = "If-None-Match: *";
    int rc = s3_do(s, &r, if_new ? ok : NULL, e);
    if (!rc && (r.status == 412 || r.status == 409))
        rc = 1;
    s3_req_free(&r);
    return rc;
}

int gk_s3_put(gk_s3 *s, const char *bucket, const char *key, const void *buf, size_t n, gk_err *e)
{
    return put(s, bucket, key, buf, n, 0, NULL, e);
}

int gk_s3_put_new(gk_s3 *s, const char *bucket, const char *key, const void *buf, size_t n,
                  gk_err *e)
{
    return put(s, bucket, key, buf, n, 1, NULL, e);
}

int gk_s3_delete(gk_s3 *s, const char *bucket, const char *key, gk_err *e)
{
    static const long ok[] = {404, 0};
    s3_req r;
    s3_req_init(&r, "DELETE", bucket, key);
    int rc = s3_do(s, &r, ok, e);
    s3_req_free(&r);
    return rc;
}

/* Reads up to n bytes of f into buf: the count, or -1 on a read error. */
static long long read_full(FILE *f, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t k = fread(buf + got, 1, n - got, f);
        if (k == 0)
            return ferror(f) ? -1 : (long long)got;
        got += k;
    }
    return (long long)got;
}

int gk_s3_put_file(gk_s3 *s, const char *bucket, const char *key, const char *path, gk_err *e)
{
    return gk_s3_put_file_cancel(s, bucket, key, path, NULL, e);
}

/* GK_EINTR naming the object when cancel (may be NULL) is set. */
static int cancelled(const atomic_int *cancel, const char *bucket, const char *key, gk_err *e)
{
    return cancel && atomic_load(cancel)
               ? gk_errf(e, GK_EINTR, "s3://%s/%s: upload interrupted", bucket, key)
               : 0;
}

int gk_s3_put_file_cancel(gk_s3 *s, const char *bucket, const char *key, const char *path,
                          const atomic_int *cancel, gk_err *e)
{
    if (cancelled(cancel, bucket, key, e))
        return GK_EINTR;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gk_errno(e, path);
    size_t ps = s->c.part_size;
    char *buf = malloc(ps + 1);
    if (!buf) {
        fclose(f);
        return gk_errf(e, GK_ENOMEM, "%s: out of memory for a part of %zu bytes", path, ps);
    }
    int rc = 0;
    long long n = read_full(f, buf, ps + 1); /* one byte more tells whether it fits one PUT */
    if (n < 0) {
        rc = gk_errno(e, path);
    } else if ((size_t)n <= ps) {
        rc = put(s, bucket, key, buf, (size_t)n, 0, cancel, e);
    } else {
        gk_s3_upload *u = NULL;
        rc = gk_s3_mpu_create(s, bucket, key, &u, e);
        if (!rc)
            gk_s3_mpu_cancel_on(u, cancel);
        char carry = buf[ps];
        while (!rc && n > 0) {
            if ((rc = cancelled(cancel, bucket, key, e)))
                break; /* aborted below: no upload left in progress */
            rc = gk_s3_mpu_part(u, buf, (size_t)n > ps ? ps : (size_t)n, e);
            if (rc || (size_t)n <= ps)
                break;
            buf[0] = carry;
            n = read_full(f, buf + 1, ps);
            if (n < 0) {
                rc = gk_errno(e, path);
                break;
            }
            n += 1;
            carry = buf[ps];
        }
        if (!rc)
            rc = cancelled(cancel, bucket, key, e);
        if (u) {
            gk_err e2;
            if (rc)
                gk_s3_mpu_abort(u, &e2);
            else
                rc = gk_s3_mpu_complete(u, e);
        }
    }
    free(buf);
    fclose(f);
    return rc;
}

int gk_s3_text_sink(const void *data, size_t n, void *ud)
{
    gk_s3_text *t = ud;
    if (t->n + n >= sizeof t->buf)
        return GK_EFORMAT;
    memcpy(t->buf + t->n, data, n);
    t->n += n;
    t->buf[t->n] = '\0';
    return 0;
}
