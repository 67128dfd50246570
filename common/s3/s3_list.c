/* s3_list.c: ListObjectsV2, page after page (see s3.h), and the paged-listing loop it shares
 * with ListMultipartUploads (s3_int.h). Owns nothing past a call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/s3/s3_int.h"

typedef struct list_state {
    gk_s3_list_fn fn;
    void *ud;
    const char *bucket;
    gk_err *e;
    int page_size;
    char token[2048];          /* the next page's continuation token ("": the first page) */
    char eprefix[3 * 1024 + 1];
} list_state;

static int on_contents(const char *x, size_t n, void *ud)
{
    list_state *st = ud;
    char key[1100], size[32], etag[160];
    if (!s3_xml_get(x, n, NULL, "Key", key, sizeof key) ||
        !s3_xml_get(x, n, NULL, "Size", size, sizeof size))
        return gk_errf(st->e, GK_EFORMAT, "s3://%s: a listing entry without Key or Size",
                       st->bucket);
    s3_xml_get(x, n, NULL, "ETag", etag, sizeof etag);
    char *end;
    long long sz = strtoll(size, &end, 10);
    if (!size[0] || *end || sz < 0)
        return gk_errf(st->e, GK_EFORMAT, "s3://%s/%s: bad Size '%s' in the listing", st->bucket,
                       key, size);
    size_t el = strlen(etag);
    const char *et = etag;
    if (el >= 2 && etag[0] == '"' && etag[el - 1] == '"') {
        etag[el - 1] = '\0';
        et = etag + 1;
    }
    gk_s3_entry ent = {key, sz, et};
    return st->fn(&ent, st->ud);
}

int s3_list_pages(gk_s3 *s, const char *bucket, const char *item, s3_page_query query,
                  int (*each)(const char *inner, size_t len, void *ud), s3_page_markers markers,
                  void *ud, gk_err *e)
{
    char q[10000];
    for (;;) {
        int rc = query(ud, q, sizeof q, e);
        if (rc)
            return rc;
        s3_req r;
        s3_req_init(&r, "GET", bucket, NULL);
        r.query = q;
        r.max_body = (size_t)64 << 20;
        rc = s3_do(s, &r, NULL, e);
        if (!rc)
            rc = s3_xml_each(r.body_out, r.body_len_out, item, each, ud);
        char trunc[16] = "";
        if (!rc) {
            s3_xml_get(r.body_out, r.body_len_out, NULL, "IsTruncated", trunc, sizeof trunc);
            rc = markers(ud, r.body_out, r.body_len_out, strcmp(trunc, "true") == 0, e);
        }
        s3_req_free(&r);
        if (rc || strcmp(trunc, "true") != 0)
            return rc;
    }
}

/* ListObjectsV2's query: names in order: continuation-token, list-type, max-keys, prefix. */
static int list_query(void *ud, char *q, size_t cap, gk_err *e)
{
    list_state *st = ud;
    char etoken[3 * sizeof st->token], ct[sizeof etoken + 32] = "", mk[32] = "";
    if (st->token[0]) {
        if (s3_encode(st->token, 0, etoken, sizeof etoken) < 0)
            return gk_errf(e, GK_EFORMAT, "s3://%s: continuation token too long", st->bucket);
        snprintf(ct, sizeof ct, "continuation-token=%s&", etoken);
    }
    if (st->page_size > 0)
        snprintf(mk, sizeof mk, "&max-keys=%d", st->page_size);
    snprintf(q, cap, "%slist-type=2%s&prefix=%s", ct, mk, st->eprefix);
    return 0;
}

static int list_markers(void *ud, const char *xml, size_t n, int truncated, gk_err *e)
{
    list_state *st = ud;
    st->token[0] = '\0';
    s3_xml_get(xml, n, NULL, "NextContinuationToken", st->token, sizeof st->token);
    if (truncated && !st->token[0])
        return gk_errf(e, GK_EFORMAT, "s3://%s: a truncated listing without NextContinuationToken",
                       st->bucket);
    return 0;
}

int gk_s3_list(gk_s3 *s, const char *bucket, const char *prefix, int page_size, gk_s3_list_fn fn,
               void *ud, gk_err *e)
{
    list_state st = {fn, ud, bucket, e, page_size, "", ""};
    if (s3_encode(prefix ? prefix : "", 0, st.eprefix, sizeof st.eprefix) < 0)
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: prefix too long", bucket, prefix);
    return s3_list_pages(s, bucket, "Contents", list_query, on_contents, list_markers, &st, e);
}
