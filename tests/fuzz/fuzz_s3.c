/* fuzz_s3.c: common/s3's readers of outside input, without a network: the XML of S3's answers
 * (s3_xml_get of the elements the client reads, s3_xml_each over a listing's Contents, as
 * s3_list.c walks them), AWS's INI files (gk_s3_ini_get, gk_s3_ini_has) and s3:// URLs
 * (gk_s3_parse_url). The same bytes go to each. Properties: every value ends inside its buffer
 * and is never longer than the input; an INI value has no line break and no blank at either end
 * (but where it was cut at its buffer's end); a URL accepted splits into a bucket of
 * [A-Za-z0-9._-] (not "." or "..") and the key after its '/', which together give back the URL. */
#include <string.h>

#include "common/s3/s3.h"
#include "common/s3/s3_int.h"
#include "tests/fuzz/fuzz.h"

static void check_value(const char *v, size_t cap, size_t in)
{
    const char *z = memchr(v, 0, cap);
    FZ_ASSERT(z != NULL, "value not terminated");
    FZ_ASSERT((size_t)(z - v) <= in, "value of %zu bytes from %zu", (size_t)(z - v), in);
}

static int on_contents(const char *x, size_t n, void *ud)
{
    char key[64], size[32];
    size_t *count = ud;
    (*count)++;
    if (s3_xml_get(x, n, NULL, "Key", key, sizeof key))
        check_value(key, sizeof key, n);
    if (s3_xml_get(x, n, NULL, "Size", size, sizeof size))
        check_value(size, sizeof size, n);
    return *count > 100000;
}

static void check_xml(const char *x, size_t n)
{
    static const char *const names[] = {"Code", "Message", "Region", "UploadId", "IsTruncated",
                                        "NextContinuationToken", "ETag"};
    char out[48];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        memset(out, 0x55, sizeof out);
        if (s3_xml_get(x, n, NULL, names[i], out, sizeof out))
            check_value(out, sizeof out, n);
    }
    size_t from = 0, last = 0;
    for (int i = 0; i < 1000 && s3_xml_get(x, n, &from, "Key", out, sizeof out); i++) {
        FZ_ASSERT(from > last && from <= n, "the position went from %zu to %zu (of %zu)", last,
                  from, n);
        last = from;
    }
    size_t count = 0;
    s3_xml_each(x, n, "Contents", on_contents, &count);
}

static void check_ini(const char *text)
{
    static const char *const sections[] = {"default", "profile work", "s3"};
    static const char *const keys[] = {"aws_access_key_id", "region", "addressing_style", "s3"};
    char v[40];
    for (size_t s = 0; s < 3; s++) {
        gk_s3_ini_has(text, sections[s]);
        for (size_t k = 0; k < 4; k++) {
            memset(v, 0x55, sizeof v);
            int found = gk_s3_ini_get(text, sections[s], keys[k], v, sizeof v);
            check_value(v, sizeof v, strlen(text));
            size_t n = strlen(v);
            FZ_ASSERT(found || n == 0, "not found, yet '%s'", v);
            int cut = n == sizeof v - 1; /* a longer value is cut: it may end in a blank there */
            FZ_ASSERT(!strchr(v, '\n') &&
                          (n == 0 ||
                           (v[0] != ' ' && (cut || (v[n - 1] != ' ' && v[n - 1] != '\r')))),
                      "value '%s' not trimmed", v);
        }
    }
}

static void check_url(const char *url)
{
    char bucket[32], key[64], back[128];
    gk_err e;
    if (gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, &e) != 0) {
        FZ_ASSERT(e.code == GK_EUSAGE && memchr(e.msg, 0, sizeof e.msg), "error %d", e.code);
        return;
    }
    FZ_ASSERT(bucket[0] && strcmp(bucket, ".") && strcmp(bucket, ".."), "bucket '%s'", bucket);
    FZ_ASSERT(strspn(bucket, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                  strlen(bucket),
              "bucket '%s'", bucket);
    snprintf(back, sizeof back, "s3://%s%s%s", bucket, key[0] || strchr(url + 5, '/') ? "/" : "",
             key);
    FZ_ASSERT(strcmp(back, url) == 0, "'%s' split into '%s' and '%s'", url, bucket, key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_xml((const char *)data, size);
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    check_ini(text);
    check_url(text);
    if (size < 120) { /* as a URL of its own */
        char url[128];
        snprintf(url, sizeof url, "s3://%s", text);
        check_url(url);
    }
    free(text);
    return 0;
}
