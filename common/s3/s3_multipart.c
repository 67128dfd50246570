/* s3_multipart.c: multipart uploads (CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
 * AbortMultipartUpload; see s3.h), and the cleanup of those a killed process left
 * (ListMultipartUploads, abort by id). Owns an upload's id and the ETags of its parts until
 * complete or abort frees it. One thread at a time per upload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/s3/s3_int.h"

struct gk_s3_upload {
    gk_s3 *s;
    char *bucket, *key;
    char id[1024];
    char (*etags)[128]; /* of parts 1..n */
    int n;
    size_t cap;
    const atomic_int *cancel; /* stops a part's transfer and its retries (NULL: never) */
};

void gk_s3_mpu_cancel_on(gk_s3_upload *u, const atomic_int *cancel) { u->cancel = cancel; }

static void upload_free(gk_s3_upload *u)
{
    if (!u)
        return;
    free(u->bucket);
    free(u->key);
    free(u->etags);
    free(u);
}

const char *gk_s3_mpu_id(const gk_s3_upload *u) { return u->id; }

int gk_s3_mpu_create(gk_s3 *s, const char *bucket, const char *key, gk_s3_upload **out, gk_err *e)
{
    *out = NULL;
    gk_s3_upload *u = calloc(1, sizeof *u);
    if (!u || !(u->bucket = strdup(bucket)) || !(u->key = strdup(key))) {
        upload_free(u);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    u->s = s;
    s3_req r;
    s3_req_init(&r, "POST", bucket, key);
    r.query = "uploads=";
    int rc = s3_do(s, &r, NULL, e);
    if (!rc && (!s3_xml_get(r.body_out, r.body_len_out, NULL, "UploadId", u->id, sizeof u->id) ||
                !u->id[0]))
        rc = gk_errf(e, GK_EFORMAT,
                     "s3://%s/%s: no UploadId in the answer to CreateMultipartUpload", bucket, key);
    s3_req_free(&r);
    if (rc) {
        upload_free(u);
        return rc;
    }
    *out = u;
    return 0;
}

/* The query "partNumber=N&uploadId=ID" (sorted by name, as SigV4 wants it). */
static int upload_query(const gk_s3_upload *u, int part, char *q, size_t cap)
{
    char id[3 * sizeof u->id];
    if (s3_encode(u->id, 0, id, sizeof id) < 0)
        return -1;
    int n = part > 0 ? snprintf(q, cap, "partNumber=%d&uploadId=%s", part, id)
                     : snprintf(q, cap, "uploadId=%s", id);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int gk_s3_mpu_part(gk_s3_upload *u, const void *buf, size_t n, gk_err *e)
{
    if (u->n == 10000)
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: more than 10000 parts (raise the part size)",
                       u->bucket, u->key);
    if (gk_grow(&u->etags, &u->cap, (size_t)u->n + 1, sizeof *u->etags, 16))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    char q[4096];
    if (upload_query(u, u->n + 1, q, sizeof q))
        return gk_errf(e, GK_EFORMAT, "s3://%s/%s: upload id too long", u->bucket, u->key);
    s3_req r;
    s3_req_init(&r, "PUT", u->bucket, u->key);
    r.query = q;
    r.body = buf;
    r.body_len = n;
    r.cancel = u->cancel;
    int rc = s3_do(u->s, &r, NULL, e);
    if (!rc && !r.etag[0])
        rc = gk_errf(e, GK_EFORMAT, "s3://%s/%s: no ETag in the answer to part %d", u->bucket,
                     u->key, u->n + 1);
    if (!rc)
        snprintf(u->etags[u->n++], sizeof u->etags[0], "%s", r.etag);
    s3_req_free(&r);
    return rc;
}

/* The CompleteMultipartUpload body: every part's number and ETag. */
static char *complete_body(const gk_s3_upload *u, size_t *len)
{
    size_t cap = 128 + (size_t)u->n * 200;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    size_t o = (size_t)snprintf(b, cap, "<CompleteMultipartUpload>");
    for (int i = 0; i < u->n; i++)
        o += (size_t)snprintf(b + o, cap - o,
                              "<Part><PartNumber>%d</PartNumber><ETag>\"%s\"</ETag></Part>", i + 1,
                              u->etags[i]);
    o += (size_t)snprintf(b + o, cap - o, "</CompleteMultipartUpload>");
    *len = o;
    return b;
}

int gk_s3_mpu_complete(gk_s3_upload *u, gk_err *e)
{
    char q[4096];
    size_t len = 0;
    char *body = complete_body(u, &len);
    int rc = body ? 0 : gk_errf(e, GK_ENOMEM, "out of memory");
    if (!rc && upload_query(u, 0, q, sizeof q))
        rc = gk_errf(e, GK_EFORMAT, "s3://%s/%s: upload id too long", u->bucket, u->key);
    if (!rc) {
        s3_req r;
        s3_req_init(&r, "POST", u->bucket, u->key);
        r.query = q;
        r.body = body;
        r.body_len = len;
        rc = s3_do(u->s, &r, NULL, e);
        /* S3 may answer 200 with an <Error> in the body when completing fails late */
        char code[64];
        if (!rc && s3_xml_get(r.body_out, r.body_len_out, NULL, "Code", code, sizeof code) &&
            !s3_xml_get(r.body_out, r.body_len_out, NULL, "CompleteMultipartUploadResult", NULL, 0))
            rc = gk_errf(e, GK_EIO, "s3://%s/%s: completing the upload failed: %s", u->bucket,
                         u->key, code);
        s3_req_free(&r);
    }
    free(body);
    if (rc) {
        gk_err e2;
        gk_s3_mpu_abort(u, &e2);
        return rc;
    }
    upload_free(u);
    return 0;
}

int gk_s3_mpu_abort(gk_s3_upload *u, gk_err *e)
{
    char q[4096];
    int rc = 0;
    if (upload_query(u, 0, q, sizeof q))
        rc = gk_errf(e, GK_EFORMAT, "s3://%s/%s: upload id too long", u->bucket, u->key);
    if (!rc) {
        static const long ok[] = {404, 0}; /* gone already */
        s3_req r;
        s3_req_init(&r, "DELETE", u->bucket, u->key);
        r.query = q;
        rc = s3_do(u->s, &r, ok, e);
        s3_req_free(&r);
    }
    upload_free(u);
    return rc;
}

/* ---------------------------------------------------------------- leftovers */

int gk_s3_abort_upload(gk_s3 *s, const char *bucket, const char *key, const char *id, gk_err *e)
{
    gk_s3_upload u = {.s = s, .bucket = (char *)bucket, .key = (char *)key};
    char q[4096];
    snprintf(u.id, sizeof u.id, "%s", id);
    if (upload_query(&u, 0, q, sizeof q))
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: upload id too long", bucket, key);
    static const long ok[] = {404, 0};
    s3_req r;
    s3_req_init(&r, "DELETE", bucket, key);
    r.query = q;
    int rc = s3_do(s, &r, ok, e);
    s3_req_free(&r);
    return rc;
}

typedef struct uploads_state {
    gk_s3_upload_fn fn;
    void *ud;
    const char *bucket;
    gk_err *e;
    char kmark[1100], imark[1024]; /* the next page's key and upload id markers ("": none) */
    char ep[3 * 1024 + 1];         /* the prefix, encoded */
} uploads_state;

static int on_upload(const char *x, size_t n, void *ud)
{
    uploads_state *st = ud;
    char key[1100], id[1024];
    if (!s3_xml_get(x, n, NULL, "Key", key, sizeof key) ||
        !s3_xml_get(x, n, NULL, "UploadId", id, sizeof id))
        return gk_errf(st->e, GK_EFORMAT,
                       "s3://%s: an upload without Key or UploadId in the listing", st->bucket);
    return st->fn(key, id, st->ud);
}

/* ListMultipartUploads' query: names in order: key-marker, prefix, upload-id-marker, uploads. */
static int uploads_query(void *ud, char *q, size_t cap, gk_err *e)
{
    uploads_state *st = ud;
    char ek[3 * sizeof st->kmark], ei[3 * sizeof st->imark];
    if (s3_encode(st->kmark, 0, ek, sizeof ek) < 0 || s3_encode(st->imark, 0, ei, sizeof ei) < 0)
        return gk_errf(e, GK_EFORMAT, "s3://%s: listing marker too long", st->bucket);
    int n = snprintf(q, cap, "%s%s%sprefix=%s&%s%s%suploads=", st->kmark[0] ? "key-marker=" : "",
                     st->kmark[0] ? ek : "", st->kmark[0] ? "&" : "", st->ep,
                     st->imark[0] ? "upload-id-marker=" : "", st->imark[0] ? ei : "",
                     st->imark[0] ? "&" : "");
    if (n < 0 || (size_t)n >= cap)
        return gk_errf(e, GK_EFORMAT, "s3://%s: listing marker too long", st->bucket);
    return 0;
}

static int uploads_markers(void *ud, const char *xml, size_t n, int truncated, gk_err *e)
{
    uploads_state *st = ud;
    st->kmark[0] = st->imark[0] = '\0';
    s3_xml_get(xml, n, NULL, "NextKeyMarker", st->kmark, sizeof st->kmark);
    s3_xml_get(xml, n, NULL, "NextUploadIdMarker", st->imark, sizeof st->imark);
    if (truncated && !st->kmark[0])
        return gk_errf(e, GK_EFORMAT, "s3://%s: a truncated list of uploads without NextKeyMarker",
                       st->bucket);
    return 0;
}

int gk_s3_list_uploads(gk_s3 *s, const char *bucket, const char *prefix, gk_s3_upload_fn fn,
                       void *ud, gk_err *e)
{
    uploads_state st = {.fn = fn, .ud = ud, .bucket = bucket, .e = e};
    if (s3_encode(prefix ? prefix : "", 0, st.ep, sizeof st.ep) < 0)
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: prefix too long", bucket, prefix);
    return s3_list_pages(s, bucket, "Upload", uploads_query, on_upload, uploads_markers, &st, e);
}
