/* s3.h: objects in S3 and S3-compatible stores (AWS, OCI Object Storage, Google Cloud Storage's
 * interoperability API, MinIO, ...): s3://BUCKET/KEY names, the discovery of credentials and
 * endpoint as AWS's own tools do it, and the requests (HEAD, GET whole or a range, PUT,
 * conditional PUT, multipart upload, DELETE, ListObjectsV2), signed with AWS Signature Version 4
 * by libcurl (CURLOPT_AWS_SIGV4). A gk_s3 client owns a copy of its settings and a retry counter;
 * its calls may run on several threads at once (each request has its own curl handle).
 * Library code reads no environment: a tool's main calls gk_s3_conf_discover with getenv.
 *
 * Requests: path-style ENDPOINT/BUCKET/KEY or virtual-hosted SCHEME://BUCKET.HOST/KEY; keys are
 * percent-encoded except unreserved characters and '/'; x-amz-content-sha256 is the body's
 * SHA-256 (UNSIGNED-PAYLOAD for bodies that are not in memory); x-amz-security-token carries a
 * session token. Connecting times out after connect_timeout_s; a transfer that stalls
 * (under 1 byte/s for stall_timeout_s) fails.
 *
 * Retries (s3_http.c). Retried: 500, 502, 503 (SlowDown), 504, 429, 400 RequestTimeout, timeouts,
 * reset or dropped connections, a body cut short (not: a refused connection, an unknown host,
 * 4xx). A request is tried again and again, each retry counted (gk_s3_retries), until it
 * succeeds or one of two limits ends it:
 *   time   retry_ms (default 10 minutes; GPT_S3_RETRY_SECONDS): the time spent in tries that
 *          failed without delivering data plus the waits between tries; the last wait is cut
 *          so that the last try starts when that time is reached;
 *   count  max_attempts (AWS_MAX_ATTEMPTS, the profile's max_attempts; default none): tries in
 *          a row that delivered no new bytes. A try that delivered some (a download cut short,
 *          resumed from where it was) starts the count again and is not counted against it.
 * The wait before a retry is a random time in [0, min(backoff_ms * 2^k, 20 s)] ("full jitter",
 * AWS's standard retry mode), k the tries in a row without progress so far less one (0 after a
 * try that made progress): with the default 200 ms, up to 0.2, 0.4, ... 12.8 s, then 20 s
 * each. So by default a request failing without delivering data gives up after 10 minutes:
 * about 13 s of waits over its first 8 tries, then a try every 10 s on average, ~65 tries in
 * all (a stalled try takes stall_timeout_s of them). With retry_mode adaptive
 * (AWS_RETRY_MODE=adaptive), the client also spaces the starts of all its requests (all
 * threads) after an answer of 503 or 429, the gap doubling at each such answer (from backoff_ms
 * up to 5 s) and shrinking by 1/16 at each other answer, as AWS's adaptive mode slows its send
 * rate under throttling. A cancel flag (s3_int.h's s3_req.cancel) ends the waits and the
 * transfer. The final error names the tries, the time spent and the limit that ended them
 * (" (gave up after 66 tries and 600.0 s of retrying, the limit: GPT_S3_RETRY_SECONDS=600)").
 *
 * Errors (one line, naming the object): 403 names the bucket and the access key id used (never
 * the secret) and where it came from; 404 names the key or bucket (GK_ENOTFOUND); a wrong region
 * (301, or 400 AuthorizationHeaderMalformed) names the region the bucket is in when the answer
 * tells; no network says which endpoint could not be reached. */
#ifndef GK_S3_H
#define GK_S3_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* ---------------------------------------------------------------- settings (s3_conf.c) */

enum { GK_S3_RETRY_STANDARD = 0, GK_S3_RETRY_ADAPTIVE = 1 };

typedef struct gk_s3_conf {
    char endpoint[512];      /* "https://s3.REGION.amazonaws.com" when "" at gk_s3_open */
    char region[64];         /* "us-east-1" when "" */
    char key_id[256];        /* "": anonymous (requests are not signed) */
    char secret[256];
    char token[4096];        /* session token, or "" */
    char source[600];        /* where the credentials came from, for messages ("" unknown) */
    int path_style;          /* 1: ENDPOINT/BUCKET/KEY; 0: virtual-hosted BUCKET.HOST/KEY, but
                              * path-style for a bucket that is no host name (capitals, '_';
                              * '.' over https) */
    int max_attempts;        /* tries in a row without progress; 0: no limit (retry_ms bounds) */
    int retry_mode;          /* GK_S3_RETRY_STANDARD (0; AWS's "legacy"
                              * too) or GK_S3_RETRY_ADAPTIVE */
    long retry_ms;           /* time a request may spend failing and waiting; 0: 600000 (10 min) */
    int connect_timeout_s;   /* 0: 5 */
    int backoff_ms;          /* the first retry's bound; 0: 200 */
    int stall_timeout_s;     /* a transfer under 1 byte/s this long fails (and is retried); 0: 30 */
    size_t part_size;        /* multipart part size (gk_s3_put_file); 0: 64 MiB */
} gk_s3_conf;

/* An environment to read: returns the value of name or NULL (getenv fits, through a wrapper). */
typedef const char *(*gk_s3_getenv)(const char *name, void *ud);

/* Fills c as the AWS CLI would, from env and the files it names:
 *   profile     AWS_PROFILE, else AWS_DEFAULT_PROFILE, else "default"
 *   credentials AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); else the
 *               profile's aws_access_key_id, aws_secret_access_key, aws_session_token in the
 *               credentials file (AWS_SHARED_CREDENTIALS_FILE, else $HOME/.aws/credentials,
 *               section [NAME]), else in the config file (AWS_CONFIG_FILE, else
 *               $HOME/.aws/config, section [profile NAME], or [default]); else anonymous
 *   region      AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region, else us-east-1
 *   endpoint    AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the profile's endpoint_url,
 *               else AWS's (https://s3.REGION.amazonaws.com)
 *   addressing  the profile's addressing_style (path, virtual; under "s3 ="), else path-style
 *               for an endpoint of one's own and virtual-hosted for AWS's
 *   retries     max_attempts: AWS_MAX_ATTEMPTS, else the profile's max_attempts (1 or more),
 *               else none; retry_mode: AWS_RETRY_MODE, else the profile's retry_mode (legacy,
 *               standard, adaptive), else standard; retry_ms: GPT_S3_RETRY_SECONDS (seconds,
 *               decimals allowed, over 0 and at most a day), else 10 minutes
 * A profile named by AWS_PROFILE that neither file holds is an error (GK_EUSAGE) naming both
 * files, as is a bad retry setting (naming it); a file that cannot be read, other than a
 * missing one, is GK_EIO. */
int gk_s3_conf_discover(gk_s3_conf *c, gk_s3_getenv env, void *ud, gk_err *e);

/* Splits "s3://BUCKET/KEY" (KEY may be empty: "s3://BUCKET" and "s3://BUCKET/" name the
 * bucket). BUCKET: 1 to 255 of [A-Za-z0-9._-] (S3's names and OCI's, which allow capitals and
 * '_'), not "." or "..". GK_EUSAGE naming url otherwise, or when a part does not fit. */
int gk_s3_parse_url(const char *url, char *bucket, size_t bcap, char *key, size_t kcap, gk_err *e);
/* Whether s starts with "s3://". */
int gk_s3_is_url(const char *s);

/* The value of key in [section] of an INI text (AWS's files: '#' and ';' comments, "k = v",
 * an indented "k = v" under "s3 =" is found too) into out; 1 found, 0 not (out = ""); a value
 * longer than cap - 1 is cut. section is the name between the brackets, blanks trimmed. */
int gk_s3_ini_get(const char *text, const char *section, const char *key, char *out, size_t cap);
/* Whether text has [section]. */
int gk_s3_ini_has(const char *text, const char *section);

/* ---------------------------------------------------------------- client (s3.c) */

typedef struct gk_s3 gk_s3;

/* A client with a copy of c (defaults filled in). GK_EUSAGE for an endpoint that is not
 * http(s)://HOST[:PORT][/PATH]. */
int gk_s3_open(gk_s3 **out, const gk_s3_conf *c, gk_err *e);
void gk_s3_close(gk_s3 *s); /* accepts NULL */
/* Requests retried so far by this client (all threads): for the caller's log. */
long gk_s3_retries(const gk_s3 *s);
/* The settings in use (defaults filled in). */
const gk_s3_conf *gk_s3_settings(const gk_s3 *s);

typedef struct gk_s3_stat {
    int64_t size;
    char etag[128]; /* without quotes */
} gk_s3_stat;

/* HEAD: size and ETag. GK_ENOTFOUND when there is no such object. */
int gk_s3_head(gk_s3 *s, const char *bucket, const char *key, gk_s3_stat *st, gk_err *e);

/* GET of bytes [off, off + n) into buf: *got = the bytes read (fewer at the object's end; 0 at
 * or past it). */
int gk_s3_get_range(gk_s3 *s, const char *bucket, const char *key, int64_t off, size_t n,
                    void *buf, size_t *got, gk_err *e);

/* The whole object, in order, to sink (which returns 0 to go on, else stops the transfer: that
 * value is returned, or GK_EINTR when it is positive). A transfer cut short is resumed from the
 * bytes already given (Range, If-Match on the first answer's ETag), so sink never sees a byte
 * twice. */
typedef int (*gk_s3_sink)(const void *data, size_t n, void *ud);
int gk_s3_get(gk_s3 *s, const char *bucket, const char *key, gk_s3_sink sink, void *ud, gk_err *e);
/* A small object as text (a pointer, a lock): gk_s3_get(..., gk_s3_text_sink, &t, e) with t zeroed
 * fills t.buf, NUL-terminated; an object of sizeof t.buf bytes or more stops it (GK_EFORMAT). */
typedef struct gk_s3_text {
    char buf[512];
    size_t n;
} gk_s3_text;
int gk_s3_text_sink(const void *data, size_t n, void *ud);

/* PUT of buf[0..n). */
int gk_s3_put(gk_s3 *s, const char *bucket, const char *key, const void *buf, size_t n, gk_err *e);
/* PUT with If-None-Match: * (a lock): 0 created, 1 when the object exists already (412, or 409
 * from a store that answers a concurrent create so), nothing written then. */
int gk_s3_put_new(gk_s3 *s, const char *bucket, const char *key, const void *buf, size_t n,
                  gk_err *e);
/* PUT of the file at path: one PUT up to part_size, else a multipart upload of part_size parts,
 * aborted when a part fails. */
int gk_s3_put_file(gk_s3 *s, const char *bucket, const char *key, const char *path, gk_err *e);
/* The same, stopped when *cancel (NULL: never) is set: before the PUT and each part, and during
 * a transfer and its retries' waits: GK_EINTR, the multipart upload aborted. For a tool's signal
 * handler, which sets the flag. */
int gk_s3_put_file_cancel(gk_s3 *s, const char *bucket, const char *key, const char *path,
                          const atomic_int *cancel, gk_err *e);
/* DELETE (an absent key is no error, as in S3). */
int gk_s3_delete(gk_s3 *s, const char *bucket, const char *key, gk_err *e);

/* ---------------------------------------------------------------- multipart (s3_multipart.c) */

typedef struct gk_s3_upload gk_s3_upload;
/* Starts a multipart upload of key. The upload belongs to one thread at a time. */
int gk_s3_mpu_create(gk_s3 *s, const char *bucket, const char *key, gk_s3_upload **out, gk_err *e);
/* A part being uploaded, and its retries, stop (GK_EINTR) once *cancel is set (NULL: never). */
void gk_s3_mpu_cancel_on(gk_s3_upload *u, const atomic_int *cancel);
/* Uploads buf[0..n) as the next part (1, 2, ...; every part but the last at least 5 MiB). */
int gk_s3_mpu_part(gk_s3_upload *u, const void *buf, size_t n, gk_err *e);
/* Completes the upload (the object appears whole) / aborts it (its parts are dropped). Either
 * frees u, whatever the result. */
int gk_s3_mpu_complete(gk_s3_upload *u, gk_err *e);
int gk_s3_mpu_abort(gk_s3_upload *u, gk_err *e);
const char *gk_s3_mpu_id(const gk_s3_upload *u);
/* The multipart uploads in progress under prefix (ListMultipartUploads, page after page): fn gets
 * each one's key and upload id, and returns 0 to go on (else that value is returned). With
 * gk_s3_abort_upload, what a killed writer left is cleaned up. */
typedef int (*gk_s3_upload_fn)(const char *key, const char *upload_id, void *ud);
int gk_s3_list_uploads(gk_s3 *s, const char *bucket, const char *prefix, gk_s3_upload_fn fn,
                       void *ud, gk_err *e);
/* Aborts the upload id of key (one gone already is no error). */
int gk_s3_abort_upload(gk_s3 *s, const char *bucket, const char *key, const char *upload_id,
                       gk_err *e);

/* ---------------------------------------------------------------- listing (s3_list.c) */

/* One object of a listing; the strings live until the callback returns. */
typedef struct gk_s3_entry {
    const char *key;
    int64_t size;
    const char *etag; /* without quotes */
} gk_s3_entry;
/* Returns 0 to go on; anything else stops the listing and is returned. */
typedef int (*gk_s3_list_fn)(const gk_s3_entry *ent, void *ud);

/* ListObjectsV2 of the keys that start with prefix, in S3's order (UTF-8 bytes), page after
 * page (page_size keys per request: 0 is the server's default of 1000). */
int gk_s3_list(gk_s3 *s, const char *bucket, const char *prefix, int page_size, gk_s3_list_fn fn,
               void *ud, gk_err *e);

/* ---------------------------------------------------------------- local files (s3_file.c) */

/* Downloads the object into an unlinked temporary file in dir (a tool passes $TMPDIR, else
 * /tmp): *fd is open on it, *bytes its size. bar: say "downloading s3://BUCKET/KEY" and draw a
 * progress bar on a terminal. cancel (NULL: none) set stops it (GK_EINTR). A failed write names
 * dir and suggests TMPDIR. */
int gk_s3_fetch_temp(gk_s3 *s, const char *bucket, const char *key, const char *dir, int bar,
                     const atomic_int *cancel, int *fd, long long *bytes, gk_err *e);
/* Downloads the object into the file at path (created or truncated; removed when the download
 * fails). A failed write names path and suggests TMPDIR. */
int gk_s3_fetch_file(gk_s3 *s, const char *bucket, const char *key, const char *path, gk_err *e);
/* The object url names (s3://BUCKET/KEY, the key not empty), downloaded as gk_s3_fetch_temp does
 * (bar on) by a client made from env (gk_s3_conf_discover): for a tool that reads a checkpoint
 * from a bucket. *retries: the requests retried (the caller may say so). */
int gk_s3_fetch_url(const char *url, gk_s3_getenv env, void *ud, const char *dir, int *fd,
                    long long *bytes, long *retries, gk_err *e);

#endif
