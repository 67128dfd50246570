/* s3_xml.c: the few XML elements of S3's answers (Code, Message, Region, UploadId, ETag, and a
 * listing's Contents, Key, Size, IsTruncated, NextContinuationToken), found by name in a bounded
 * buffer. Not a general XML parser: S3's answers have no CDATA, no attributes on these elements
 * and no nesting of an element in itself; every read stays inside [0, n). Owns nothing. */
#include <string.h>

#include "common/s3/s3_int.h"

/* The first "<name>" or "<name " at or after *pos in x[0..n); its content's start and end
 * (before "</name>") in *a, *b. 1 found. A self-closing "<name/>" is found, empty. */
static int find_elem(const char *x, size_t n, size_t pos, const char *name, size_t *a, size_t *b,
                     size_t *after)
{
    size_t nl = strlen(name);
    for (size_t i = pos; i + nl + 2 <= n; i++) {
        if (x[i] != '<' || memcmp(x + i + 1, name, nl) != 0)
            continue;
        size_t j = i + 1 + nl;
        if (j < n && x[j] == '/' && j + 1 < n && x[j + 1] == '>') {
            *a = *b = j;
            *after = j + 2;
            return 1;
        }
        if (j >= n || (x[j] != '>' && x[j] != ' '))
            continue;
        const char *gt = memchr(x + j, '>', n - j);
        if (!gt)
            return 0;
        size_t start = (size_t)(gt - x) + 1;
        for (size_t k = start; k + nl + 3 <= n; k++) {
            if (x[k] == '<' && x[k + 1] == '/' && memcmp(x + k + 2, name, nl) == 0 &&
                x[k + 2 + nl] == '>') {
                *a = start;
                *b = k;
                *after = k + nl + 3;
                return 1;
            }
        }
        return 0;
    }
    return 0;
}

static size_t decode(const char *s, size_t n, char *out, size_t cap)
{
    static const struct { const char *ent; char ch; } ents[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''},
        {"&#34;", '"'}, {"&#39;", '\''}, {"&#x2F;", '/'}};
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap;) {
        size_t k = 0, m = sizeof ents / sizeof ents[0];
        if (s[i] == '&')
            for (k = 0; k < m; k++) {
                size_t el = strlen(ents[k].ent);
                if (i + el <= n && memcmp(s + i, ents[k].ent, el) == 0)
                    break;
            }
        if (s[i] == '&' && k < m) {
            out[o++] = ents[k].ch;
            i += strlen(ents[k].ent);
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    return o;
}

int s3_xml_get(const char *xml, size_t n, size_t *from, const char *name, char *out, size_t cap)
{
    size_t a, b, after;
    if (cap)
        out[0] = '\0';
    if (!xml || !find_elem(xml, n, from ? *from : 0, name, &a, &b, &after))
        return 0;
    if (cap)
        decode(xml + a, b - a, out, cap);
    if (from)
        *from = after;
    return 1;
}

int s3_xml_each(const char *xml, size_t n, const char *name,
                int (*fn)(const char *inner, size_t len, void *ud), void *ud)
{
    size_t pos = 0, a, b, after;
    while (xml && find_elem(xml, n, pos, name, &a, &b, &after)) {
        int rc = fn(xml + a, b - a, ud);
        if (rc)
            return rc;
        pos = after;
    }
    return 0;
}
