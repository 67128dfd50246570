/* choice.c: multiple-choice items in HellaSwag's JSON Lines format (see choice.h). jansson
 * parses each line; the texts are encoded by gk_text_encode, as every tool encodes text. */
#include "common/io/choice.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/proc.h"
#include "common/text/encode_text.h"

static int item_error(gk_err *e, const char *name, long line, const char *what)
{
    return gk_errf(e, GK_EFORMAT, "%s:%ld: %s", name, line, what);
}

/* What every line of a load needs. */
typedef struct loader {
    gk_choice_set *s;
    gk_text_encoder *enc;
    uint32_t vocab_limit;
    int context;
} loader;

/* Appends the tokens of text to it->ids (length *n, capacity *cap); *count: how many. */
static int encode(const loader *ld, gk_choice_item *it, const char *text, size_t *n, size_t *cap,
                  size_t *count, gk_err *e)
{
    const gk_choice_set *s = ld->s;
    size_t before = *n;
    int rc = gk_text_encoder_run(ld->enc, text, strlen(text), 0, &it->ids, n, cap, NULL, e);
    *count = *n - before;
    if (rc == GK_EFORMAT) { /* a character a char vocabulary lacks: name the line */
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        rc = item_error(e, s->name, it->line, msg);
    }
    return rc;
}

/* The keys of one line: ctx (string), endings (2..GK_CHOICE_MAX strings), label (integer, or a
 * string of digits as some copies of HellaSwag hold it). */
static int check_keys(json_t *o, int *label, char *why, size_t cap)
{
    json_t *ctx = json_object_get(o, "ctx"), *ends = json_object_get(o, "endings");
    json_t *lab = json_object_get(o, "label");
    size_t k = json_array_size(ends);
    if (!json_is_string(ctx)) return snprintf(why, cap, "no \"ctx\" string"), -1;
    if (!json_is_array(ends) || k < 2 || k > GK_CHOICE_MAX)
        return snprintf(why, cap, "\"endings\" must be an array of 2 to %d strings", GK_CHOICE_MAX), -1;
    for (size_t i = 0; i < k; i++)
        if (!json_is_string(json_array_get(ends, i)))
            return snprintf(why, cap, "ending %zu is not a string", i), -1;
    char *end = NULL;
    long l = -1;
    if (json_is_integer(lab)) l = (long)json_integer_value(lab);
    else if (json_is_string(lab) && *json_string_value(lab)) {
        errno = 0;
        l = strtol(json_string_value(lab), &end, 10);
        if (*end || errno) l = -1;
    } else {
        return snprintf(why, cap, "no \"label\" (the index of the right ending)"), -1;
    }
    if (l < 0 || (size_t)l >= k)
        return snprintf(why, cap, "\"label\" must be 0 to %zu", k - 1), -1;
    *label = (int)l;
    return 0;
}

/* Parses and encodes one line into it. */
static int take_line(const loader *ld, gk_choice_item *it, const char *text, gk_err *e)
{
    gk_choice_set *s = ld->s;
    int context = ld->context;
    uint32_t vocab_limit = ld->vocab_limit;
    json_error_t je;
    char why[200];
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o)) {
        if (o) snprintf(why, sizeof why, "not a JSON object");
        else snprintf(why, sizeof why, "not JSON: %s", je.text);
        json_decref(o);
        return item_error(e, s->name, it->line, why);
    }
    int rc = check_keys(o, &it->label, why, sizeof why) ? item_error(e, s->name, it->line, why) : 0;
    size_t n = 0, cap = 0, count = 0;
    if (!rc) rc = encode(ld, it, json_string_value(json_object_get(o, "ctx")), &n, &cap, &count, e);
    it->n_ctx = (int)count;
    if (!rc && !count) rc = item_error(e, s->name, it->line, "\"ctx\" is empty");
    json_t *ends = json_object_get(o, "endings");
    it->n_endings = rc ? 0 : (int)json_array_size(ends);
    for (int k = 0; !rc && k < it->n_endings; k++) {
        const char *end = json_string_value(json_array_get(ends, (size_t)k));
        char *spaced = malloc(strlen(end) + 2);
        if (!spaced) rc = gk_errf(e, GK_ENOMEM, "out of memory");
        else sprintf(spaced, " %s", end);
        if (!rc) rc = encode(ld, it, spaced, &n, &cap, &count, e);
        free(spaced);
        it->end_len[k] = (int)count;
        if (!rc && count > (size_t)context) {
            snprintf(why, sizeof why, "ending %d is %zu tokens, more than the context (%d)", k,
                     count, context);
            rc = item_error(e, s->name, it->line, why);
        }
        int row = it->n_ctx + (int)count;
        if (row > s->max_row) s->max_row = row;
    }
    for (size_t i = 0; !rc && i < n; i++)
        if (it->ids[i] >= vocab_limit) {
            snprintf(why, sizeof why, "token %u is outside the model's vocabulary (%u)", it->ids[i],
                     vocab_limit);
            rc = item_error(e, s->name, it->line, why);
        }
    if (!rc && it->n_endings > s->max_endings) s->max_endings = it->n_endings;
    json_decref(o);
    return rc;
}

static int blank(const char *line)
{
    return line[strspn(line, " \t\r\n")] == '\0';
}

static int read_items(const loader *ld, FILE *f, gk_err *e)
{
    gk_choice_set *s = ld->s;
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    long lineno = 0;
    int rc = 0;
    errno = 0;
    for (ssize_t len; !rc && (len = getline(&line, &linecap, f)) >= 0;) {
        lineno++;
        if (blank(line)) continue;
        if (strlen(line) != (size_t)len) {
            rc = item_error(e, s->name, lineno, "a NUL byte: not JSON Lines");
            break;
        }
        if (s->n == cap) {
            gk_choice_item *ni = realloc(s->items, (cap = cap ? 2 * cap : 256) * sizeof *ni);
            if (!ni) {
                rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", s->name);
                break;
            }
            s->items = ni;
        }
        gk_choice_item *it = &s->items[s->n++];
        memset(it, 0, sizeof *it);
        it->line = lineno;
        rc = take_line(ld, it, line, e);
    }
    if (!rc && ferror(f)) rc = gk_errno(e, s->name); /* a directory: EISDIR */
    free(line);
    return rc;
}

int gk_choice_load(gk_choice_set *s, const char *path, const gk_vocab *v, uint32_t vocab_limit,
                   int context, gk_err *e)
{
    memset(s, 0, sizeof *s);
    int is_stdin = strcmp(path, "-") == 0;
    s->name = strdup(is_stdin ? "stdin" : path);
    if (!s->name) return gk_errf(e, GK_ENOMEM, "out of memory");
    if (!v)
        return gk_errf(e, GK_ENOTFOUND, "%s: multiple-choice items need a vocabulary: the "
                       "checkpoint has none; give -V", s->name);
    if (is_stdin && gk_std_was_closed(STDIN_FILENO)) /* reopened on /dev/null: not an input */
        return gk_errf(e, GK_EIO, "standard input is closed (give input files, or redirect it)");
    loader ld = {s, NULL, vocab_limit, context};
    int rc = gk_text_encoder_create(&ld.enc, v, e);
    FILE *f = rc ? NULL : is_stdin ? stdin : fopen(path, "r");
    if (!rc && !f) rc = gk_errno(e, path);
    if (!rc) rc = read_items(&ld, f, e);
    if (f && !is_stdin) fclose(f);
    gk_text_encoder_free(ld.enc);
    return rc;
}

void gk_choice_free(gk_choice_set *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->items[i].ids);
    free(s->items);
    free(s->name);
    memset(s, 0, sizeof *s);
}
