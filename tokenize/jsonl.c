/* jsonl.c: documents from JSON Lines and JSON arrays of objects (see jsonl.h). */
#include "jsonl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_BYTES ((size_t)1 << 16)

struct tk_jsonl {
    tk_source *src;
    char *name;
    const char *field;
    size_t max_line;
    int skip_bad, eof;
    char *buf;
    size_t cap, start, end; /* unread bytes: buf[start, end) */
    int64_t line, bad;
    /* a JSON array: where the scan is (buf[start, scan) is the item so far), its state, the
     * nesting inside the item, the items begun and the line the current one began on */
    int array, state, depth, in_str, esc;
    size_t scan;
    int64_t item, item_line;
    json_t *doc;            /* the line whose text was handed out */
    char first_bad[1024];
};

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

size_t tk_json_bom(const char *head, size_t n)
{
    return n >= 3 && memcmp(head, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
}

/* Whether name (its one compression suffix dropped) ends in .jsonl, .ndjson or .json; 2 for
 * .json. */
static int json_name(const char *name)
{
    static const char *const packs[] = {".gz", ".bz2", ".xz", ".lzma", ".zst", ".lz4"};
    size_t len = strlen(name);
    for (size_t k = 0; k < sizeof packs / sizeof *packs; k++)
        if (ends_with(name, len, packs[k])) {
            len -= strlen(packs[k]);
            break;
        }
    return ends_with(name, len, ".json")
               ? 2
               : ends_with(name, len, ".jsonl") || ends_with(name, len, ".ndjson");
}

static int starts_with(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

int tk_jsonl_detect(const char *name, const char *head, size_t n, int field_given)
{
    size_t i = tk_json_bom(head, n);
    while (i < n && is_blank(head[i]))
        i++;
    if (i == n)
        return TK_JSON_NONE;
    int named = name ? json_name(name) : 0;
    char c = head[i];
    if ((c == '{' || c == '[') && (field_given || named))
        return c == '{' ? TK_JSON_LINES : TK_JSON_ARRAY;
    const char *p = head + i;
    int scalar = c == '"' || c == '-' || (c >= '0' && c <= '9') || starts_with(p, n - i, "true") ||
                 starts_with(p, n - i, "false") || starts_with(p, n - i, "null");
    return named == 2 && scalar ? TK_JSON_SCALAR : TK_JSON_NONE;
}

int tk_jsonl_open(tk_jsonl **out, tk_source *src, const char *name, const tk_jsonl_opts *o,
                  const char *head, size_t nhead, gk_err *e)
{
    tk_jsonl *j = calloc(1, sizeof *j);
    size_t cap = nhead + READ_BYTES;
    if (!j || !(j->name = strdup(name)) || !(j->buf = malloc(cap))) {
        if (j)
            free(j->name);
        free(j);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    j->src = src;
    j->field = o->field ? o->field : "text";
    j->max_line = o->max_line ? o->max_line : TK_JSONL_MAX_LINE;
    j->skip_bad = o->skip_bad;
    j->array = o->array;
    j->cap = cap;
    memcpy(j->buf, head, nhead);
    j->end = nhead;
    *out = j;
    return 0;
}

/* ---------------------------------------------------------------- lines */

static int too_long(tk_jsonl *j, gk_err *e)
{
    if (j->array)
        return gk_errf(e, GK_EFORMAT,
                       "%s:%lld: item %lld: longer than %zu bytes (--max-line raises the bound)",
                       j->name, (long long)j->item_line, (long long)j->item, j->max_line);
    return gk_errf(e, GK_EFORMAT, "%s:%lld: a line longer than %zu bytes (--max-line raises "
                   "the bound)", j->name, (long long)j->line + 1, j->max_line);
}

/* Moves the unread bytes buf[start, end) to the front and reads more after them (eof set at the
 * end of the input); more than max_line unread bytes is an error. */
static int read_more(tk_jsonl *j, gk_err *e)
{
    memmove(j->buf, j->buf + j->start, j->end - j->start);
    j->end -= j->start;
    j->scan -= j->array ? j->start : 0;
    j->start = 0;
    if (j->end > j->max_line)
        return too_long(j, e);
    if (j->cap - j->end < READ_BYTES) {
        char *nb = realloc(j->buf, j->cap * 2);
        if (!nb)
            return gk_errf(e, GK_ENOMEM, "%s:%lld: out of memory (%zu bytes of one %s)", j->name,
                           (long long)j->line + 1, j->end, j->array ? "item" : "line");
        j->buf = nb;
        j->cap *= 2;
    }
    size_t got = 0;
    int rc = tk_source_read(j->src, j->buf + j->end, j->cap - j->end, &got, e);
    if (rc)
        return rc;
    j->end += got;
    j->eof = got == 0;
    return 0;
}

/* The next line into *line, *n (its '\n' dropped); *more = 0 at the end of the input. */
static int next_line(tk_jsonl *j, char **line, size_t *n, int *more, gk_err *e)
{
    for (;;) {
        char *nl = memchr(j->buf + j->start, '\n', j->end - j->start);
        if (nl || (j->eof && j->start < j->end)) {
            char *at = j->buf + j->start, *stop = nl ? nl : j->buf + j->end;
            if ((size_t)(stop - at) > j->max_line)
                return too_long(j, e);
            j->start = (size_t)(stop - j->buf) + (nl != NULL);
            j->line++;
            *line = at;
            *n = (size_t)(stop - at);
            *more = 1;
            return 0;
        }
        if (j->eof) {
            *more = 0;
            return 0;
        }
        int rc = read_more(j, e);
        if (rc)
            return rc;
    }
}

/* ---------------------------------------------------------------- arrays */

/* Where a JSON array's scan is: before its '[', before its first item or its ']', after a ',',
 * inside an item, after an item, after the ']'. */
enum { A_OPEN, A_FIRST, A_ITEM, A_VALUE, A_AFTER, A_END };

/* Scans on to the end of the item begun at buf[start]: 1 when it is found (scan just past it),
 * 0 when the bytes read so far end first. An object or array ends at its closing bracket, a
 * string at its closing quote, anything else before a ',', ']' or blank; strings are skipped
 * whole, so brackets in them do not count. What is inside is jansson's to check. */
static int scan_value(tk_jsonl *j)
{
    for (; j->scan < j->end; j->scan++) {
        char c = j->buf[j->scan];
        if (j->in_str) {
            if (j->esc)
                j->esc = 0;
            else if (c == '\\')
                j->esc = 1;
            else if (c == '"' && (j->in_str = 0) == 0 && j->depth == 0) {
                j->scan++;
                return 1;
            }
        } else if (j->depth == 0 && j->scan > j->start &&
                   (c == ',' || c == ']' || c == '}' || is_blank(c))) {
            return 1;
        } else if (c == '"') {
            j->in_str = 1;
        } else if (c == '{' || c == '[') {
            j->depth++;
        } else if ((c == '}' || c == ']') && j->depth > 0 && --j->depth == 0) {
            j->scan++;
            return 1;
        }
        j->line += c == '\n';
    }
    return 0;
}

static int array_error(tk_jsonl *j, const char *what, gk_err *e)
{
    return gk_errf(e, GK_EFORMAT, "%s:%lld: %s", j->name, (long long)j->line + 1, what);
}

/* The JSON array's punctuation: c (not blank) at buf[scan] in the state between items. */
static int array_punct(tk_jsonl *j, char c, gk_err *e)
{
    if (j->state == A_OPEN && c != '[')
        return array_error(j, "not a JSON array", e);
    if (j->state == A_END)
        return array_error(j, "more after the array's closing ']' (one array of objects a file)",
                           e);
    if (j->state == A_AFTER && c != ',' && c != ']')
        return gk_errf(e, GK_EFORMAT, "%s:%lld: '%c' after item %lld, where ',' or ']' should be",
                       j->name, (long long)j->line + 1, c, (long long)j->item);
    if (j->state == A_ITEM && c == ']')
        return array_error(j, "']' after ',' (a trailing comma is not JSON)", e);
    if (j->state == A_OPEN || j->state == A_AFTER || (j->state == A_FIRST && c == ']')) {
        j->state = j->state == A_OPEN ? A_FIRST : c == ',' ? A_ITEM : A_END;
        j->start = ++j->scan;
        return 0;
    }
    j->state = A_VALUE; /* an item begins here */
    j->start = j->scan;
    j->depth = j->in_str = j->esc = 0;
    j->item++;
    j->item_line = j->line + 1;
    return 0;
}

/* The next item of a JSON array into *item, *n; *more = 0 after its ']'. */
static int next_item(tk_jsonl *j, char **item, size_t *n, int *more, gk_err *e)
{
    for (;;) {
        while (j->scan < j->end) {
            char c = j->buf[j->scan];
            int rc = 0;
            if (j->state == A_VALUE) {
                if (!scan_value(j))
                    break;
                if (j->scan - j->start > j->max_line)
                    return too_long(j, e);
                *item = j->buf + j->start;
                *n = j->scan - j->start;
                j->start = j->scan;
                j->state = A_AFTER;
                *more = 1;
                return 0;
            }
            if (is_blank(c)) {
                j->line += c == '\n';
                j->start = ++j->scan;
            } else if ((rc = array_punct(j, c, e))) {
                return rc;
            }
        }
        if (j->eof && j->state == A_END) {
            *more = 0;
            return 0;
        }
        if (j->eof)
            return array_error(j,
                               "the file ends inside the JSON array (no closing ']': truncated?)",
                               e);
        int rc = read_more(j, e);
        if (rc)
            return rc;
    }
}

/* ---------------------------------------------------------------- fields */

static json_t *find_field(json_t *root, const char *field)
{
    json_t *v = json_object_get(root, field);
    if (v || !strchr(field, '.'))
        return v;
    char path[512];
    snprintf(path, sizeof path, "%s", field);
    v = root;
    for (char *save = NULL, *key = strtok_r(path, ".", &save); v && key;
         key = strtok_r(NULL, ".", &save))
        v = json_is_object(v) ? json_object_get(v, key) : NULL;
    return v;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    default: return "not a string";
    }
}

/* "id, url, content" (the first few keys of an object) into out. */
static void list_keys(json_t *obj, char *out, size_t cap)
{
    size_t len = 0, k = 0;
    const char *key;
    json_t *v;
    out[0] = '\0';
    json_object_foreach(obj, key, v) {
        if (len >= cap)
            break;
        int w = k++ < 6 ? snprintf(out + len, cap - len, "%s%s", len ? ", " : "", key)
                        : snprintf(out + len, cap - len, ", ...");
        len += w > 0 ? (size_t)w : 0;
        if (k > 6)
            break;
    }
}

/* Parses one line or item (at, "FILE:LINE" or "FILE:LINE: item N", labels errors); 0 with the
 * document in j->doc and its text in *text. */
static int parse_doc(tk_jsonl *j, const char *doc, size_t n, const char *at, json_t **text,
                     gk_err *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(doc, n, JSON_ALLOW_NUL | (j->array ? JSON_DECODE_ANY : 0), &jerr);
    if (!root && !j->array && j->line == 1 && ends_with(j->name, strlen(j->name), ".json") &&
        memchr(doc, '{', n)) /* a pretty-printed .json fails on its
                              * first line: say how it was read */
        return gk_errf(e, GK_EFORMAT,
                       "%s: not JSON Lines: its first line is not a whole JSON object (%s, column "
                       "%d): a .json input is read as JSON Lines, one object a line, or as a JSON "
                       "array of objects, not as one object over several lines",
                       j->name, jerr.text, jerr.column);
    if (!root)
        return gk_errf(e, GK_EFORMAT, "%s: not JSON: %s (column %d)", at, jerr.text, jerr.column);
    int rc = 0;
    json_t *v = NULL;
    char keys[200];
    if (!json_is_object(root))
        rc = gk_errf(e, GK_EFORMAT, "%s: %s, not a JSON object", at, type_name(root));
    else if (!(v = find_field(root, j->field))) {
        list_keys(root, keys, sizeof keys);
        rc = gk_errf(e, GK_EFORMAT, "%s: no field \"%s\" (the object has: %s; --field NAME "
                     "picks one)", at, j->field, keys[0] ? keys : "no fields");
    } else if (!json_is_string(v))
        rc = gk_errf(e, GK_EFORMAT, "%s: field \"%s\" is %s, not a string", at, j->field,
                     type_name(v));
    if (rc) {
        json_decref(root);
        return rc;
    }
    j->doc = root;
    *text = v;
    return 0;
}

int tk_jsonl_next(tk_jsonl *j, const char **text, size_t *len, int *more, gk_err *e)
{
    json_decref(j->doc);
    j->doc = NULL;
    for (;;) {
        char *doc = NULL, at[1100];
        size_t n = 0, i = 0;
        int rc = j->array ? next_item(j, &doc, &n, more, e) : next_line(j, &doc, &n, more, e);
        if (rc || !*more)
            return rc;
        while (!j->array && i < n && is_blank(doc[i]))
            i++;
        if (i == n)
            continue; /* a blank line */
        if (j->array)
            snprintf(at, sizeof at, "%.900s:%lld: item %lld", j->name, (long long)j->item_line,
                     (long long)j->item);
        else
            snprintf(at, sizeof at, "%.900s:%lld", j->name, (long long)j->line);
        json_t *v = NULL;
        if ((rc = parse_doc(j, doc, n, at, &v, e)) == 0) {
            *text = json_string_value(v);
            *len = json_string_length(v);
            return 0;
        }
        if (!j->skip_bad || rc != GK_EFORMAT)
            return rc;
        if (j->bad++ == 0)
            snprintf(j->first_bad, sizeof j->first_bad, "%s", e->msg);
    }
}

int64_t tk_jsonl_bad(const tk_jsonl *j) { return j->bad; }

const char *tk_jsonl_first_bad(const tk_jsonl *j) { return j->first_bad; }

void tk_jsonl_close(tk_jsonl *j)
{
    if (!j)
        return;
    json_decref(j->doc);
    free(j->buf);
    free(j->name);
    free(j);
}
