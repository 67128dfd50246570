/* jsonl.c: documents from JSON Lines (see jsonl.h). */
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
    json_t *doc;            /* the line whose text was handed out */
    char first_bad[1024];
};

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

int tk_jsonl_detect(const char *name, const char *head, size_t n, int field_given)
{
    size_t i = 0;
    while (i < n && is_blank(head[i]))
        i++;
    if (i == n || head[i] != '{')
        return 0;
    if (field_given)
        return 1;
    if (!name)
        return 0;
    static const char *const packs[] = {".gz", ".bz2", ".xz", ".lzma", ".zst", ".lz4"};
    size_t len = strlen(name);
    for (size_t k = 0; k < sizeof packs / sizeof *packs; k++)
        if (ends_with(name, len, packs[k])) {
            len -= strlen(packs[k]);
            break;
        }
    return ends_with(name, len, ".jsonl") || ends_with(name, len, ".ndjson") ||
           ends_with(name, len, ".json");
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
    j->cap = cap;
    memcpy(j->buf, head, nhead);
    j->end = nhead;
    *out = j;
    return 0;
}

/* ---------------------------------------------------------------- lines */

static int too_long(tk_jsonl *j, gk_err *e)
{
    return gk_errf(e, GK_EFORMAT, "%s:%lld: a line longer than %zu bytes (--max-line raises "
                   "the bound)", j->name, (long long)j->line + 1, j->max_line);
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
        memmove(j->buf, j->buf + j->start, j->end - j->start);
        j->end -= j->start;
        j->start = 0;
        if (j->end > j->max_line)
            return too_long(j, e);
        if (j->cap - j->end < READ_BYTES) {
            char *nb = realloc(j->buf, j->cap * 2);
            if (!nb)
                return gk_errf(e, GK_ENOMEM, "%s:%lld: out of memory (a line of %zu bytes)",
                               j->name, (long long)j->line + 1, j->end);
            j->buf = nb;
            j->cap *= 2;
        }
        size_t got = 0;
        int rc = tk_source_read(j->src, j->buf + j->end, j->cap - j->end, &got, e);
        if (rc)
            return rc;
        j->end += got;
        j->eof = got == 0;
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

/* Parses one line; 0 with the document in j->doc, else an error naming FILE:LINE. */
static int parse_line(tk_jsonl *j, const char *line, size_t n, json_t **text, gk_err *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(line, n, JSON_ALLOW_NUL, &jerr);
    long long ln = (long long)j->line;
    if (!root) /* a pretty-printed .json file fails on its first line: say how it was read */
        return gk_errf(e, GK_EFORMAT, "%s:%lld: not JSON: %s (column %d)%s", j->name, ln, jerr.text,
                       jerr.column, ln == 1 && ends_with(j->name, strlen(j->name), ".json")
                                        ? "; a .json input is read as JSON Lines, one object a line"
                                        : "");
    int rc = 0;
    json_t *v = NULL;
    char keys[200];
    if (!json_is_object(root))
        rc = gk_errf(e, GK_EFORMAT, "%s:%lld: %s, not a JSON object", j->name, ln, type_name(root));
    else if (!(v = find_field(root, j->field))) {
        list_keys(root, keys, sizeof keys);
        rc = gk_errf(e, GK_EFORMAT, "%s:%lld: no field \"%s\" (the object has: %s; --field NAME "
                     "picks one)", j->name, ln, j->field, keys[0] ? keys : "no fields");
    } else if (!json_is_string(v))
        rc = gk_errf(e, GK_EFORMAT, "%s:%lld: field \"%s\" is %s, not a string", j->name, ln,
                     j->field, type_name(v));
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
        char *line = NULL;
        size_t n = 0, i = 0;
        int rc = next_line(j, &line, &n, more, e);
        if (rc || !*more)
            return rc;
        while (i < n && is_blank(line[i]))
            i++;
        if (i == n)
            continue;
        json_t *v;
        if ((rc = parse_line(j, line, n, &v, e)) == 0) {
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
