/* vocab_char.c: the char vocabulary format: a JSON array of one-character strings (the sorted
 * code points of a training text), read from a file or memory and written back. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/io/readall.h"
#include "common/text/utf8.h"
#include "common/text/vocab_formats.h"
#include "common/text/vocab_int.h"

/* The char vocab as a compact JSON array of one-character strings plus a newline. */
int gk_vocab_chars_json(const gk_vocab *v, char **out, size_t *len, gk_err *e)
{
    json_t *arr = json_array();
    char *s = NULL;
    int rc = arr ? 0 : GK_ENOMEM;
    for (uint32_t i = 0; i < v->n && !rc; i++) {
        json_t *c = json_stringn((const char *)v->bytes + v->off[i], v->off[i + 1] - v->off[i]);
        if (!c || json_array_append_new(arr, c)) rc = GK_ENOMEM;
    }
    size_t n = rc ? 0 : json_dumpb(arr, NULL, 0, JSON_COMPACT);
    if (!rc && (!n || !(s = malloc(n + 2)) || json_dumpb(arr, s, n, JSON_COMPACT) != n))
        rc = GK_ENOMEM;
    json_decref(arr);
    if (rc) {
        free(s);
        return gk_errf(e, rc, "char vocab to JSON: out of memory");
    }
    s[n] = '\n';
    s[n + 1] = '\0';
    *out = s;
    *len = n + 1;
    return 0;
}

int gk_vocab_save_chars(const gk_vocab *v, FILE *f, gk_err *e)
{
    if (v->type != GK_VOCAB_CHAR)
        return gk_errf(e, GK_EUSAGE, "save char vocab: not a char-level vocab");
    char *s;
    size_t n;
    int rc = gk_vocab_chars_json(v, &s, &n, e);
    if (rc) return rc;
    rc = fwrite(s, 1, n, f) != n || fflush(f) || ferror(f);
    free(s);
    return rc ? gk_errno(e, "save char vocab") : 0;
}

/* Parses a char vocab from the JSON array text[0..len) (messages name name). */
int gk_vocab_parse_chars(gk_vocab **out, const char *text, size_t len, const char *name, gk_err *e)
{
    json_error_t je;
    json_t *arr = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    *out = NULL;
    if (!arr) return gk_errf(e, GK_EFORMAT, "%s:%d:%d: %s", name, je.line, je.column, je.text);
    if (!json_is_array(arr)) {
        json_decref(arr);
        return gk_errf(e, GK_EFORMAT, "%s: not a JSON array of characters", name);
    }
    size_t n = json_array_size(arr);
    uint32_t *cps = malloc((n ? n : 1) * sizeof *cps);
    int rc = cps ? 0 : gk_errf(e, GK_ENOMEM, "%s: out of memory", name);
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *s = json_array_get(arr, i);
        const unsigned char *b = (const unsigned char *)json_string_value(s);
        size_t sl = json_string_length(s);
        uint32_t cp = GK_UTF8_INVALID;
        if (!b || !sl || gk_utf8_next(b, sl, &cp) != sl || cp == GK_UTF8_INVALID)
            rc = gk_errf(e, GK_EFORMAT, "%s: element %zu is not a one-character string", name, i);
        cps[i] = cp;
    }
    json_decref(arr);
    gk_vocab *v = rc ? NULL : gk_vocab_alloc(GK_VOCAB_CHAR);
    if (!rc && !v) rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", name);
    if (!rc) {
        v->cps = cps, v->n = (uint32_t)n, cps = NULL;
        if (gk_vocab_finish_chars(v, name, e)) {
            rc = GK_EFORMAT;
            if (e) e->code = rc;
        }
    }
    if (rc) {
        gk_vocab_free(v);
        v = NULL;
    }
    free(cps);
    *out = v;
    return rc;
}

int gk_vocab_load_chars(gk_vocab **out, const char *path, gk_err *e)
{
    char *text;
    size_t len;
    *out = NULL;
    int rc = gk_read_file(path, GK_VOCAB_FILE_MAX, &text, &len, e);
    if (rc) return rc;
    rc = gk_vocab_parse_chars(out, text, len, path, e);
    free(text);
    return rc;
}
