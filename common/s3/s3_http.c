/* s3_http.c: one S3 request over libcurl, signed with libcurl's SigV4, retried with backoff and
 * jitter within a time budget and a count of tries without progress (s3.h's top comment says
 * how), its failure turned into one line naming the object and the tries (see s3_int.h, s3.h);
 * the adaptive mode's limiter (s3_throttle). Owns
 * libcurl's process-wide initialisation for this module (pthread_once) and the client's pool of
 * idle handles (kept alive connections); all else is per call. */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/s3/s3_int.h"

#ifndef GPTKIT_VERSION
#define GPTKIT_VERSION "dev"
#endif

enum { MAX_BACKOFF_MS = 20000 };

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc; /* written once under curl_once */
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

void s3_req_init(s3_req *r, const char *method, const char *bucket, const char *key)
{
    memset(r, 0, sizeof *r);
    r->method = method;
    r->bucket = bucket;
    r->key = key;
    r->range_end = -1;
    r->length = -1;
}

void s3_req_free(s3_req *r)
{
    free(r->body_out);
    r->body_out = NULL;
    r->body_len_out = 0;
}

int s3_encode(const char *key, int keep_slash, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~' ||
                    (keep_slash && *p == '/');
        if (o + (plain ? 1 : 3) >= cap)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return (int)o;
}

/* ---------------------------------------------------------------- one attempt */

typedef struct attempt {
    s3_req *r;
    CURL *c;
    int checked, ok2xx;  /* the status was looked at; it is 2xx (the body goes to the sink) */
    int64_t skip;        /* bytes of a 200 answer to a ranged request that were given already */
    size_t max;
    int too_big;
} attempt;

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    attempt *a = ud;
    size_t n = size * nitems;
    if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        a->r->etag[0] = a->r->region[0] = '\0';
        a->r->length = -1;
        return n;
    }
    const char *colon = memchr(buf, ':', n);
    if (!colon)
        return n;
    size_t kn = (size_t)(colon - buf), vn = n - kn - 1;
    const char *v = colon + 1;
    while (vn && (*v == ' ' || *v == '\t')) v++, vn--;
    while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' ')) vn--;
    if (vn >= 2 && v[0] == '"' && v[vn - 1] == '"') v++, vn -= 2;
    char val[128];
    snprintf(val, sizeof val, "%.*s", (int)vn, v);
#define IS(k) (kn == sizeof(k) - 1 && strncasecmp(buf, k, kn) == 0)
    if (IS("etag"))
        snprintf(a->r->etag, sizeof a->r->etag, "%s", val);
    else if (IS("x-amz-bucket-region"))
        snprintf(a->r->region, sizeof a->r->region, "%.63s", val);
    else if (IS("content-length"))
        a->r->length = strtoll(val, NULL, 10);
#undef IS
    return n;
}

static size_t on_body(char *buf, size_t size, size_t nitems, void *ud)
{
    attempt *a = ud;
    s3_req *r = a->r;
    size_t n = size * nitems;
    if (!a->checked) {
        long st = 0;
        curl_easy_getinfo(a->c, CURLINFO_RESPONSE_CODE, &st);
        a->checked = 1;
        a->ok2xx = st >= 200 && st < 300;
        if (st == 200 && (r->range_off > 0 || r->delivered > 0))
            a->skip = r->range_off + r->delivered; /* the server ignored Range: drop what was had */
    }
    if (a->ok2xx && r->sink) {
        size_t drop = a->skip > (int64_t)n ? n : (size_t)a->skip;
        a->skip -= (int64_t)drop;
        if (n > drop) {
            int rc = r->sink(buf + drop, n - drop, r->sink_ud);
            if (rc) {
                r->sink_rc = rc;
                return 0;
            }
            r->delivered += (int64_t)(n - drop);
        }
        return n;
    }
    if (r->body_len_out + n > a->max) {
        a->too_big = 1;
        return 0;
    }
    char *p = realloc(r->body_out, r->body_len_out + n + 1);
    if (!p)
        return 0;
    memcpy(p + r->body_len_out, buf, n);
    r->body_out = p;
    r->body_len_out += n;
    p[r->body_len_out] = '\0';
    return n;
}

/* Stops a transfer once the request's cancel flag is set. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    return atomic_load((const atomic_int *)ud) != 0;
}

/* Whether bucket can lead a host name (virtual-hosted addressing): lowercase letters, digits and
 * '-', and '.' only over plain http (a dotted name breaks https's wildcard certificates). As
 * AWS's tools do, other names go path-style. */
static int host_safe(const char *bucket, const char *scheme)
{
    for (const char *p = bucket; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              (*p == '.' && strcmp(scheme, "http") == 0)))
            return 0;
    return bucket[0] != '-';
}

/* The request's URL into url (path-style or virtual-hosted). */
static int make_url(const gk_s3 *s, const s3_req *r, char *url, size_t cap, gk_err *e)
{
    char key[3 * 1024 + 1] = "";
    if (r->key && s3_encode(r->key, 1, key, sizeof key) < 0)
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: key too long", r->bucket, r->key);
    const char *q = r->query && *r->query ? "?" : "";
    int n = s->c.path_style || !host_safe(r->bucket, s->scheme)
                ? snprintf(url, cap, "%s://%s%s/%s/%s%s%s", s->scheme, s->host, s->base, r->bucket,
                           key, q, *q ? r->query : "")
                : snprintf(url, cap, "%s://%s.%s%s/%s%s%s", s->scheme, r->bucket, s->host, s->base,
                           key, q, *q ? r->query : "");
    if (n < 0 || (size_t)n >= cap)
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: URL too long", r->bucket, r->key ? r->key : "");
    return 0;
}

static void sha256_hex(const void *buf, size_t n, char hex[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(buf, n, md, &len, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* ---------------------------------------------------------------- the pool of handles */

/* An idle handle of the pool (its connection kept open), else a new one; NULL: out of memory. */
static CURL *handle_take(gk_s3 *s)
{
    CURL *c = NULL;
    pthread_mutex_lock(&s->pool_mu);
    if (s->npool > 0)
        c = s->pool[--s->npool];
    pthread_mutex_unlock(&s->pool_mu);
    if (c)
        curl_easy_reset(c); /* options back to their defaults; connections and caches stay */
    return c ? c : curl_easy_init();
}

/* c back into the pool after a request that went well; after a network error (a connection
 * dropped, reset or stalled) it is closed, so that a retry starts on a new connection. */
static void handle_give(gk_s3 *s, CURL *c, CURLcode cr)
{
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL); /* the caller's, gone when it returns */
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    pthread_mutex_lock(&s->pool_mu);
    if (cr == CURLE_OK && s->npool < S3_POOL) {
        s->pool[s->npool++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&s->pool_mu);
    if (c)
        curl_easy_cleanup(c);
}

void s3_pool_free(gk_s3 *s)
{
    pthread_mutex_lock(&s->pool_mu);
    while (s->npool > 0) curl_easy_cleanup(s->pool[--s->npool]);
    pthread_mutex_unlock(&s->pool_mu);
}

/* One try: the curl result, r->status and the answer filled in. */
static CURLcode attempt_once(gk_s3 *s, s3_req *r, const char *url, const char *payload_hash,
                             char *errbuf)
{
    CURL *c = handle_take(s);
    if (!c)
        return CURLE_OUT_OF_MEMORY;
    struct curl_slist *h = NULL;
    char line[4200];
    snprintf(line, sizeof line, "x-amz-content-sha256: %s", payload_hash);
    h = curl_slist_append(h, line);
    if (s->c.token[0]) {
        snprintf(line, sizeof line, "x-amz-security-token: %s", s->c.token);
        h = curl_slist_append(h, line);
    }
    if (r->range_off > 0 || r->range_end >= 0 || r->delivered > 0) {
        int64_t from = r->range_off + r->delivered;
        if (r->range_end >= 0)
            snprintf(line, sizeof line, "Range: bytes=%lld-%lld", (long long)from,
                     (long long)r->range_end);
        else
            snprintf(line, sizeof line, "Range: bytes=%lld-", (long long)from);
        h = curl_slist_append(h, line);
    }
    if (r->delivered > 0 && r->if_match[0]) { /* resuming: the same object or nothing */
        snprintf(line, sizeof line, "If-Match: \"%s\"", r->if_match);
        h = curl_slist_append(h, line);
    }
    for (int i = 0; i < 4 && r->hdr[i]; i++) h = curl_slist_append(h, r->hdr[i]);
    attempt a = {.r = r, .c = c, .max = r->max_body ? r->max_body : (size_t)1 << 20};
    free(r->body_out);
    r->body_out = NULL;
    r->body_len_out = 0;
    r->status = 0;
    errbuf[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gptkit/" GPTKIT_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)s->c.connect_timeout_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)s->c.stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    if (r->cancel) { /* a cancel flag set stops the transfer too */
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)r->cancel);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    }
    if (s->c.key_id[0]) { /* libcurl signs: the key id and secret as user and password */
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
        curl_easy_setopt(c, CURLOPT_USERNAME, s->c.key_id);
        curl_easy_setopt(c, CURLOPT_PASSWORD, s->c.secret);
    }
    if (strcmp(r->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(r->method, "PUT") == 0 || strcmp(r->method, "POST") == 0) {
        h = curl_slist_append(h, "Content-Type: application/octet-stream");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
    } else if (strcmp(r->method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode cr = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    if (cr == CURLE_WRITE_ERROR && a.too_big)
        snprintf(errbuf, CURL_ERROR_SIZE, "answer larger than %zu bytes", a.max);
    handle_give(s, c, cr);
    curl_slist_free_all(h);
    return cr;
}

/* ---------------------------------------------------------------- errors and retries */

static int retryable_net(CURLcode cr)
{
    return cr == CURLE_RECV_ERROR || cr == CURLE_SEND_ERROR || cr == CURLE_PARTIAL_FILE ||
           cr == CURLE_OPERATION_TIMEDOUT || cr == CURLE_GOT_NOTHING || cr == CURLE_HTTP2 ||
           cr == CURLE_HTTP2_STREAM || cr == CURLE_SSL_CONNECT_ERROR;
}

static int retryable_status(long st, const s3_req *r)
{
    if (st == 500 || st == 502 || st == 503 || st == 504 || st == 429)
        return 1;
    char code[64];
    return st == 400 && r->body_out &&
           s3_xml_get(r->body_out, r->body_len_out, NULL, "Code", code, sizeof code) &&
           strcmp(code, "RequestTimeout") == 0;
}

/* ---------------------------------------------------------------- waits */

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Sleeps us microseconds (in slices of 50 ms when there is a cancel flag to watch): 1 when
 * cancel is set, at once or during the wait. */
static int nap(long long us, const atomic_int *cancel)
{
    for (;;) {
        if (cancel && atomic_load(cancel))
            return 1;
        if (us <= 0)
            return 0;
        long long d = cancel && us > 50000 ? 50000 : us;
        struct timespec ts = {(time_t)(d / 1000000), (long)(d % 1000000) * 1000};
        nanosleep(&ts, NULL);
        us -= d;
    }
}

/* A random time in [0, min(backoff_ms * 2^k, 20 s)] ("full jitter"), in microseconds. */
static long long backoff_us(const gk_s3 *s, int k, unsigned *seed)
{
    long long cap = (long long)s->c.backoff_ms * 1000;
    for (int i = 0; i < k && cap < MAX_BACKOFF_MS * 1000LL; i++) cap *= 2;
    if (cap > MAX_BACKOFF_MS * 1000LL)
        cap = MAX_BACKOFF_MS * 1000LL;
    return (long long)((double)rand_r(seed) / RAND_MAX * (double)cap);
}

long long s3_throttle_take(s3_throttle *t, long long now)
{
    long long wait = 0;
    pthread_mutex_lock(&t->mu);
    if (t->gap_us > 0) {
        long long start = t->next_us > now ? t->next_us : now;
        wait = start - now;
        t->next_us = start + t->gap_us;
    }
    pthread_mutex_unlock(&t->mu);
    return wait;
}

void s3_throttle_note(s3_throttle *t, int throttled, long long base_us)
{
    pthread_mutex_lock(&t->mu);
    if (throttled)
        t->gap_us = t->gap_us < base_us                  ? base_us
                    : t->gap_us > S3_THROTTLE_MAX_US / 2 ? S3_THROTTLE_MAX_US
                                                         : t->gap_us * 2;
    else if (t->gap_us > 0 && (t->gap_us -= t->gap_us / 16 + 1) < base_us / 16)
        t->gap_us = 0;
    pthread_mutex_unlock(&t->mu);
}

static int http_error(const gk_s3 *s, const s3_req *r, const char *tries, gk_err *e)
{
    char code[64] = "", msg[300] = "", region[64] = "", obj[1400];
    if (r->body_out) {
        s3_xml_get(r->body_out, r->body_len_out, NULL, "Code", code, sizeof code);
        s3_xml_get(r->body_out, r->body_len_out, NULL, "Message", msg, sizeof msg);
        s3_xml_get(r->body_out, r->body_len_out, NULL, "Region", region, sizeof region);
    }
    if (!region[0])
        snprintf(region, sizeof region, "%s", r->region);
    if (r->key && *r->key)
        snprintf(obj, sizeof obj, "s3://%s/%s", r->bucket, r->key);
    else
        snprintf(obj, sizeof obj, "s3://%s", r->bucket);
    long st = r->status;
    const char *why = msg[0] ? msg : code;
    if (st == 301 || strcmp(code, "AuthorizationHeaderMalformed") == 0 ||
        strcmp(code, "PermanentRedirect") == 0) {
        if (region[0] && strcmp(region, s->c.region) != 0)
            return gk_errf(e, GK_EIO, "%s: bucket %s is in region %s, not %s (set AWS_REGION=%s)",
                           obj, r->bucket, region, s->c.region, region);
        return gk_errf(e, GK_EIO,
                       "%s: wrong region or endpoint for bucket %s (region %s, endpoint %s): %s",
                       obj, r->bucket, s->c.region, s->c.endpoint, why[0] ? why : "HTTP 301");
    }
    if (st == 403) {
        if (!s->c.key_id[0])
            return gk_errf(e, GK_EIO, "%s: access denied to bucket %s for anonymous requests (%s)",
                           obj, r->bucket, s->c.source[0] ? s->c.source : "no credentials");
        const char *hint = strcmp(code, "SignatureDoesNotMatch") == 0
                               ? "the secret access key does not match: "
                           : strcmp(code, "InvalidAccessKeyId") == 0 ? "unknown access key id: "
                                                                     : "";
        return gk_errf(e, GK_EIO, "%s: access denied to bucket %s (%s%s) for access key id %s (%s)",
                       obj, r->bucket, hint, why[0] ? why : "HTTP 403", s->c.key_id,
                       s->c.source[0] ? s->c.source : "given");
    }
    if (strcmp(code, "InvalidToken") == 0 || strcmp(code, "ExpiredToken") == 0 ||
        strcmp(code, "TokenRefreshRequired") == 0)
        return gk_errf(e, GK_EIO, "%s: the session token %s (%s: %s) for access key id %s (%s)",
                       obj, code[0] == 'I' ? "was refused" : "has expired: renew the credentials",
                       code, why, s->c.key_id, s->c.source[0] ? s->c.source : "given");
    if (st == 404) {
        if (strcmp(code, "NoSuchBucket") == 0)
            return gk_errf(e, GK_ENOTFOUND, "s3://%s: no such bucket (at %s)", r->bucket,
                           s->c.endpoint);
        if (r->key && *r->key)
            return gk_errf(e, GK_ENOTFOUND, "%s: no such key%s", obj,
                           code[0] ? "" : " (or no such bucket)");
        return gk_errf(e, GK_ENOTFOUND, "%s: not found%s%s", obj, why[0] ? ": " : "", why);
    }
    return gk_errf(e, GK_EIO, "%s: %s %s: HTTP %ld%s%s%s", obj, r->method, s->c.endpoint, st,
                   why[0] ? ": " : "", why, tries);
}

static int net_error(const gk_s3 *s, const s3_req *r, CURLcode cr, const char *errbuf,
                     const char *tries, gk_err *e)
{
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cr);
    if (cr == CURLE_COULDNT_RESOLVE_HOST || cr == CURLE_COULDNT_CONNECT ||
        cr == CURLE_COULDNT_RESOLVE_PROXY)
        return gk_errf(e, GK_EIO,
                       "s3://%s: cannot reach %s: %s (no network? check AWS_ENDPOINT_URL)",
                       r->bucket, s->c.endpoint, why);
    return gk_errf(e, GK_EIO, "s3://%s/%s: %s %s: %s%s", r->bucket, r->key ? r->key : "", r->method,
                   s->c.endpoint, why, tries);
}

/* The tries of one request: what s3.h's limits count. */
typedef struct tries {
    int n, dry;         /* tries in all; the last ones in a row that delivered nothing new */
    long long spent_us; /* in tries that delivered nothing and in waits */
    unsigned seed;
} tries;

/* After a try that failed and may be retried (progress: it delivered new bytes): 0 to retry,
 * after the wait; 1 when a limit is reached, said in msg; -1 when r->cancel was set. */
static int retry_or_stop(gk_s3 *s, s3_req *r, tries *t, int progress, long long t0, char *msg,
                         size_t cap)
{
    t->dry = progress ? 0 : t->dry + 1;
    if (!progress)
        t->spent_us += now_us() - t0;
    long long budget = s->c.retry_ms * 1000LL;
    if (s->c.max_attempts > 0 && t->dry >= s->c.max_attempts) {
        if (t->n == t->dry)
            snprintf(msg, cap,
                     " (gave up after %d tries and %.1f s of "
                     "retrying, the limit: AWS_MAX_ATTEMPTS=%d)",
                     t->n, t->spent_us / 1e6, s->c.max_attempts);
        else
            snprintf(msg, cap,
                     " (gave up after %d tries, the last %d without progress, and %.1f s of "
                     "retrying, the limit: AWS_MAX_ATTEMPTS=%d)",
                     t->n, t->dry, t->spent_us / 1e6, s->c.max_attempts);
        return 1;
    }
    if (t->spent_us >= budget) {
        snprintf(msg, cap,
                 " (gave up after %d tries and %.1f s of "
                 "retrying, the limit: GPT_S3_RETRY_SECONDS=%g)",
                 t->n, t->spent_us / 1e6, (double)s->c.retry_ms / 1000);
        return 1;
    }
    long long wait = backoff_us(s, t->dry ? t->dry - 1 : 0, &t->seed);
    if (wait > budget - t->spent_us)
        wait = budget - t->spent_us; /* the last try at the limit */
    atomic_fetch_add(&s->retries, 1);
    long long w0 = now_us();
    int stop = nap(wait, r->cancel);
    t->spent_us += now_us() - w0;
    return stop ? -1 : 0;
}

static int stopped(const s3_req *r, gk_err *e)
{
    return gk_errf(e, GK_EINTR, "s3://%s/%s: stopped", r->bucket, r->key ? r->key : "");
}

int s3_do(gk_s3 *s, s3_req *r, const long *ok_status, gk_err *e)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return gk_errf(e, GK_EIO, "libcurl: initialisation failed: %s",
                       curl_easy_strerror(curl_init_rc));
    char url[8192], errbuf[CURL_ERROR_SIZE], hash[65], said[300] = "";
    int rc = make_url(s, r, url, sizeof url, e);
    if (rc)
        return rc;
    if (r->body && r->body_len)
        sha256_hex(r->body, r->body_len, hash);
    else
        sha256_hex("", 0, hash);
    tries t = {.seed = (unsigned)now_us() ^ (unsigned)(uintptr_t)r};
    int adaptive = s->c.retry_mode == GK_S3_RETRY_ADAPTIVE;
    for (;;) {
        if (adaptive && nap(s3_throttle_take(&s->throttle, now_us()), r->cancel))
            return stopped(r, e);
        int64_t had = r->delivered;
        long long t0 = now_us();
        CURLcode cr = attempt_once(s, r, url, hash, errbuf);
        t.n++;
        if (cr == CURLE_WRITE_ERROR && r->sink_rc)
            return r->sink_rc > 0 ? stopped(r, e) : r->sink_rc;
        if (cr == CURLE_ABORTED_BY_CALLBACK && r->cancel && atomic_load(r->cancel))
            return stopped(r, e);
        if (r->delivered > 0 && !r->if_match[0])
            snprintf(r->if_match, sizeof r->if_match, "%s", r->etag);
        if (adaptive && cr == CURLE_OK)
            s3_throttle_note(&s->throttle, r->status == 503 || r->status == 429,
                             s->c.backoff_ms * 1000LL);
        int again = cr == CURLE_OK ? retryable_status(r->status, r) : retryable_net(cr);
        if (again) {
            int go = retry_or_stop(s, r, &t, r->delivered > had, t0, said, sizeof said);
            if (go < 0)
                return stopped(r, e);
            if (go == 0)
                continue;
        } else if (t.n > 1 || cr != CURLE_OK) {
            snprintf(said, sizeof said, " (%d %s)", t.n, t.n == 1 ? "try" : "tries");
        }
        if (cr != CURLE_OK)
            return net_error(s, r, cr, errbuf, said, e);
        if (r->status >= 200 && r->status < 300)
            return 0;
        for (const long *p = ok_status; p && *p; p++)
            if (*p == r->status)
                return 0;
        return http_error(s, r, said, e);
    }
}
