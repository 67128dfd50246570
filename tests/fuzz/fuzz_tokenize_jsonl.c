/* fuzz_tokenize_jsonl.c: gpt-tokenize's JSON Lines reader (tokenize/jsonl.c) on a file read
 * through tk_source (plain or compressed). The input's first byte picks the settings: bit 0
 * --skip-bad, bits 1-2 the field ("text", "meta.body", "a.b.c", "t"), bits 3-4 --max-line
 * (64, 1000, 65536 or the default), bit 5 the file read as one JSON array of objects; the rest
 * is the file. Properties: each call returns 0 or a negative gk_err code with a message, and
 * nothing but close after an error; a document's text is never longer than the line (item)
 * bound (a JSON string is no longer than its line); a run that succeeds without --skip-bad
 * gives the same documents with it, and no bad lines; with --skip-bad only a line past the bound,
 * the array's own syntax (its brackets and commas) or the source itself can fail, never one
 * bad line or item; tk_jsonl_detect does not depend on bytes past the first non-blank one
 * after a byte order mark. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tokenize/input.h"
#include "tokenize/jsonl.h"

#define DOCS_MAX 20000

typedef struct result {
    int rc;
    size_t docs;
    unsigned long long sum; /* a hash of the documents' texts, in order */
    long long bad;
} result;

static result read_all(const char *path, const tk_jsonl_opts *o)
{
    result r = {0};
    gk_err e = {0};
    tk_source *src = NULL;
    tk_jsonl *j = NULL;
    int more = 0;
    r.rc = tk_source_open(&src, path, &e);
    if (r.rc == 0)
        r.rc = tk_source_next(src, &more, &e);
    if (r.rc == 0 && more)
        r.rc = tk_jsonl_open(&j, src, "f.jsonl", o, "", 0, &e);
    while (r.rc == 0 && more && j && r.docs < DOCS_MAX) {
        const char *text;
        size_t len;
        r.rc = tk_jsonl_next(j, &text, &len, &more, &e);
        if (r.rc || !more)
            break;
        FZ_ASSERT(len <= (o->max_line ? o->max_line : TK_JSONL_MAX_LINE), "a text of %zu bytes",
                  len);
        r.docs++;
        r.sum = r.sum * 1000003u + len;
        for (size_t i = 0; i < len; i++)
            r.sum = r.sum * 31u + (unsigned char)text[i];
    }
    if (r.rc)
        FZ_ASSERT(r.rc < 0 && e.code == r.rc && e.msg[0], "rc %d, code %d, '%s'", r.rc, e.code,
                  e.msg);
    if (r.rc && o->skip_bad) /* what parse_doc says of one line or item: skipped, not failed */
        FZ_ASSERT(r.rc != GK_EFORMAT || !j || !(strstr(e.msg, "not JSON:") ||
                  strstr(e.msg, "not a JSON object") || strstr(e.msg, "no field \"") ||
                  strstr(e.msg, "not a string")), "--skip-bad failed: %s", e.msg);
    r.bad = j ? tk_jsonl_bad(j) : 0;
    tk_jsonl_close(j);
    tk_source_close(src);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const fields[] = {"text", "meta.body", "a.b.c", "t"};
    static const size_t lines[] = {64, 1000, 65536, 0};
    if (size < 1)
        return 0;
    tk_jsonl_opts o = {fields[(data[0] >> 1) & 3], lines[(data[0] >> 3) & 3], data[0] & 1,
                       (data[0] >> 5) & 1};
    const char *path = fz_file(0, data + 1, size - 1);
    if (!path)
        return 0;
    size_t blank = tk_json_bom((const char *)data + 1, size - 1);
    while (blank + 1 < size && strchr(" \t\r\n", data[1 + blank]))
        blank++;
    int d1 = tk_jsonl_detect("x.jsonl", (const char *)data + 1, size - 1, 0);
    int d2 = tk_jsonl_detect("x.jsonl", (const char *)data + 1,
                             blank + 1 < size ? blank + 1 : size - 1, 0);
    FZ_ASSERT(d1 == d2, "detect %d on the whole, %d on its start", d1, d2);
    result r = read_all(path, &o);
    if (r.rc == 0 && !o.skip_bad && r.docs < DOCS_MAX) {
        o.skip_bad = 1;
        result s = read_all(path, &o);
        FZ_ASSERT(s.rc == 0 && s.docs == r.docs && s.sum == r.sum && s.bad == 0,
                  "--skip-bad: rc %d, %zu documents (not %zu), %lld bad", s.rc, s.docs, r.docs,
                  s.bad);
    }
    return 0;
}
