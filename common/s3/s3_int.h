/* s3_int.h: the request engine under s3.h's operations (s3_http.c): one S3 request built, signed
 * by libcurl, retried and turned into an error naming the object; and the few XML elements the
 * answers carry (s3_xml.c). Not part of the API. A request owns its answer body until
 * s3_req_free; the client's counter is atomic and its pool of idle handles under its mutex,
 * everything else is per call. */
#ifndef GK_S3_INT_H
#define GK_S3_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/s3/s3.h"

enum { S3_POOL = 32 }; /* idle handles kept (the read-ahead runs up to 16 fetchers) */

/* The adaptive retry mode's limiter, shared by a client's threads: request starts spaced by at
 * least gap_us; a throttling answer doubles the gap (from base_us up to S3_THROTTLE_MAX_US),
 * any other shrinks it by 1/16 (to none below base_us / 16). Times in microseconds of
 * CLOCK_MONOTONIC. */
enum { S3_THROTTLE_MAX_US = 5000000 };
typedef struct s3_throttle {
    pthread_mutex_t mu;
    long long gap_us, next_us; /* the gap; the earliest start of the next request */
} s3_throttle;
/* How long to wait before a request that would start at now_us (0 while there is no gap); the
 * next one's start is moved on by the gap. */
long long s3_throttle_take(s3_throttle *t, long long now_us);
/* An answer came: throttled (503, 429) or not. */
void s3_throttle_note(s3_throttle *t, int throttled, long long base_us);

struct gk_s3 {
    gk_s3_conf c;
    char scheme[8];        /* "http" or "https" */
    char host[400];        /* HOST[:PORT] of the endpoint */
    char base[256];        /* the endpoint's path, "" or "/PATH" without a trailing '/' */
    char sigv4[96];        /* "aws:amz:REGION:s3" */
    atomic_long retries;
    s3_throttle throttle;  /* used in retry_mode adaptive */
    /* idle libcurl handles, each with its open connection, reused by the next request of any
     * thread (one thread at a time per handle): no new TCP (and TLS) connection a request */
    pthread_mutex_t pool_mu;
    void *pool[S3_POOL];
    int npool;
};

typedef struct s3_req {
    /* what to ask */
    const char *method;        /* GET, HEAD, PUT, POST, DELETE */
    const char *bucket, *key;  /* key NULL or "": the bucket itself */
    const char *query;         /* NULL or "a=1&b=2": encoded, sorted by name, every name with '=' */
    const void *body;          /* PUT/POST body in memory (NULL: empty) */
    size_t body_len;
    const char *hdr[4];        /* extra header lines ("If-None-Match: *"), NULL-terminated */
    int64_t range_off;         /* bytes from range_off ... */
    int64_t range_end;         /* ... to range_end inclusive; -1: to the end. No Range header
                                * when range_off = 0 and range_end = -1 (and nothing given yet) */
    gk_s3_sink sink;           /* a 2xx answer's body goes here (else into body_out) */
    void *sink_ud;
    size_t max_body;           /* body_out's bound (0: 1 MiB) */
    const atomic_int *cancel;  /* NULL, or set: the transfer and the waits stop (GK_EINTR) */
    /* what came back (of the last attempt) */
    long status;
    char etag[128];            /* without quotes */
    char if_match[128];        /* the ETag of the first answer that gave bytes (for resuming) */
    char region[64];           /* x-amz-bucket-region */
    int64_t length;            /* Content-Length, -1 unknown */
    int64_t delivered;         /* bytes given to sink, over all attempts */
    int sink_rc;               /* what sink returned when it stopped the transfer */
    char *body_out;            /* NUL-terminated, body_len_out bytes (2xx without sink, or error) */
    size_t body_len_out;
} s3_req;

/* A request with everything zero, range_end -1. */
void s3_req_init(s3_req *r, const char *method, const char *bucket, const char *key);
void s3_req_free(s3_req *r);

/* Runs r, retrying as s3.h says (its top comment). 0 when the final answer is 2xx, or when it is a
 * status listed in ok_status (0-terminated, may be NULL: e.g. 412 for a conditional PUT, 416 for a
 * range past the end); r->status tells. Otherwise an error naming s3://BUCKET/KEY: GK_ENOTFOUND for
 * 404, GK_EIO else (network, 403, region, 5xx after the last try: the tries, the time spent and the
 * limit reached said at the end); GK_EINTR when r->cancel was set. */
int s3_do(gk_s3 *s, s3_req *r, const long *ok_status, gk_err *e);
/* Closes the idle handles of s's pool (gk_s3_close). */
void s3_pool_free(gk_s3 *s);

/* A paged listing (s3_list.c): GET on bucket with the query query(ud) writes (cap bytes), each
 * <item> element of the answer given to each (stops when it returns nonzero: that is returned),
 * then markers(ud) reads from the answer what the next page's query needs (truncated: whether
 * IsTruncated said there is one; an error when the marker is missing); until a page is not
 * truncated. ListObjectsV2 and ListMultipartUploads. */
typedef int (*s3_page_query)(void *ud, char *q, size_t cap, gk_err *e);
typedef int (*s3_page_markers)(void *ud, const char *xml, size_t n, int truncated, gk_err *e);
int s3_list_pages(gk_s3 *s, const char *bucket, const char *item, s3_page_query query,
                  int (*each)(const char *inner, size_t len, void *ud), s3_page_markers markers,
                  void *ud, gk_err *e);

/* The text of the first <name>...</name> in xml[0..n), entities &amp; &lt; &gt; &quot; &apos;
 * decoded, into out (cut at cap - 1); *from (NULL: 0) is where to start, and is moved past the
 * element. 1 found, 0 not. No attributes on name; nested elements are returned as text. */
int s3_xml_get(const char *xml, size_t n, size_t *from, const char *name, char *out, size_t cap);
/* Calls fn for each <name>...</name> in xml[0..n) with its inner text (not decoded): the
 * <Contents> of a listing. Stops when fn returns nonzero and returns that. */
int s3_xml_each(const char *xml, size_t n, const char *name,
                int (*fn)(const char *inner, size_t len, void *ud), void *ud);

/* key percent-encoded for a URL path ('/' kept) / a query value ('/' encoded) into out; the
 * length, or -1 when it does not fit. */
int s3_encode(const char *key, int keep_slash, char *out, size_t cap);

#endif
