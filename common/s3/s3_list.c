/* s3_list.c: ListObjectsV2, page after page (see s3.h). Owns nothing past a call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/s3/s3_int.h"

typedef struct list_state {
    gk_s3_list_fn fn;
    void *ud;
    const char *bucket;
    gk_err *e;
} list_state;

static int on_contents(const char *x, size_t n, void *ud)
{
    list_state *st = ud;
    char key[1100], size[32], etag[160];
    if (!s3_xml_get(x, n, NULL, "Key", key, sizeof key) || !s3_xml_get(x, n, NULL, "Size", size, sizeof size))
        return gk_errf(st->e, GK_EFORMAT, "s3://%s: a listing entry without Key or Size", st->bucket);
    s3_xml_get(x, n, NULL, "ETag", etag, sizeof etag);
    char *end;
    long long sz = strtoll(size, &end, 10);
    if (!size[0] || *end || sz < 0)
        return gk_errf(st->e, GK_EFORMAT, "s3://%s/%s: bad Size '%s' in the listing", st->bucket, key, size);
    size_t el = strlen(etag);
    const char *et = etag;
    if (el >= 2 && etag[0] == '"' && etag[el - 1] == '"') {
        etag[el - 1] = '\0';
        et = etag + 1;
    }
    gk_s3_entry ent = {key, sz, et};
    return st->fn(&ent, st->ud);
}

int gk_s3_list(gk_s3 *s, const char *bucket, const char *prefix, int page_size, gk_s3_list_fn fn, void *ud,
               gk_err *e)
{
    char token[2048] = "", etoken[3 * sizeof token], eprefix[3 * 1024 + 1], q[10000];
    if (s3_encode(prefix ? prefix : "", 0, eprefix, sizeof eprefix) < 0)
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: prefix too long", bucket, prefix);
    list_state st = {fn, ud, bucket, e};
    for (int page = 0;; page++) {
        /* names in order: continuation-token, list-type, max-keys, prefix */
        char ct[sizeof etoken + 32] = "", mk[32] = "";
        if (token[0]) {
            if (s3_encode(token, 0, etoken, sizeof etoken) < 0)
                return gk_errf(e, GK_EFORMAT, "s3://%s: continuation token too long", bucket);
            snprintf(ct, sizeof ct, "continuation-token=%s&", etoken);
        }
        if (page_size > 0)
            snprintf(mk, sizeof mk, "&max-keys=%d", page_size);
        snprintf(q, sizeof q, "%slist-type=2%s&prefix=%s", ct, mk, eprefix);
        s3_req r;
        s3_req_init(&r, "GET", bucket, NULL);
        r.query = q;
        r.max_body = (size_t)64 << 20;
        int rc = s3_do(s, &r, NULL, e);
        if (!rc)
            rc = s3_xml_each(r.body_out, r.body_len_out, "Contents", on_contents, &st);
        char trunc[16] = "";
        if (!rc) {
            s3_xml_get(r.body_out, r.body_len_out, NULL, "IsTruncated", trunc, sizeof trunc);
            s3_xml_get(r.body_out, r.body_len_out, NULL, "NextContinuationToken", token, sizeof token);
            if (strcmp(trunc, "true") == 0 && !token[0])
                rc = gk_errf(e, GK_EFORMAT, "s3://%s: a truncated listing without NextContinuationToken", bucket);
        }
        s3_req_free(&r);
        if (rc || strcmp(trunc, "true") != 0)
            return rc;
    }
}
