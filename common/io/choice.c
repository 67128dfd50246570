/* choice.c: multiple-choice items in HellaSwag's JSON Lines format (see choice.h). jansson
 * parses each line; the texts are encoded by gk_text_encode, as every tool encodes text. */
#include "common/io/choice.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"
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
    size_t keep;                   /* bytes of ctx that hold at least context tokens */
} loader;

/* Appends the tokens of text[0..len) to it->ids (length *n, capacity *cap); *count: how many.
 * Every error names the file and line. */
static int encode(const loader *ld, gk_choice_item *it, const char *text, size_t len, size_t *n,
                  size_t *cap, size_t *count, gk_err *e)
{
    size_t before = *n;
    int rc = gk_text_encoder_run(ld->enc, text, len, 0, &it->ids, n, cap, NULL, e);
    *count = *n - before;
    if (rc) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        rc = gk_errf(e, rc, "%s:%ld: %s", ld->s->name, it->line, msg);
    }
    return rc;
}

/* See choice.h. No pre-token spans such a p (letter, digit, other and contraction pieces hold no
 * whitespace after their first character; whitespace pieces hold nothing else), so the whole
 * text's pieces from p on are those of text[p:] (the regex has no look-behind), and a char
 * vocabulary's characters too (p is an ASCII boundary). */
size_t gk_choice_ctx_start(const char *text, size_t len, size_t keep)
{
    const unsigned char *u = (const unsigned char *)text;
    for (size_t p = len > keep ? len - keep : 0; p > 0; p--)
        if (u[p - 1] > ' ' && u[p - 1] < 0x7f && (u[p] == ' ' || (u[p] >= '\t' && u[p] <= '\r')))
            return p;
    return 0;
}

/* ctx's tokens, of which only the last context are kept (a row keeps its last context + 1
 * tokens, and every ending has one at least): a long ctx is encoded from gk_choice_ctx_start on,
 * which gives those tokens exactly, and whole only when that holds fewer. */
static int encode_ctx(const loader *ld, gk_choice_item *it, const char *text, size_t *n,
                      size_t *cap, gk_err *e)
{
    size_t len = strlen(text), from = gk_choice_ctx_start(text, len, ld->keep), count = 0;
    int rc = encode(ld, it, text + from, len - from, n, cap, &count, e);
    if (!rc && from && count < (size_t)ld->context) { /* too few after all: the whole text */
        *n = 0;
        rc = encode(ld, it, text, len, n, cap, &count, e);
    }
    if (!rc && count > (size_t)ld->context) {
        memmove(it->ids, it->ids + count - (size_t)ld->context,
                (size_t)ld->context * sizeof *it->ids);
        *n = count = (size_t)ld->context;
    }
    it->n_ctx = (int)count;
    return rc;
}

/* The keys of one line: ctx (string), endings (2..GK_CHOICE_MAX strings), label (an integer,
 * or a string of digits as some copies of HellaSwag hold it, naming an ending). */
static int check_keys(json_t *o, int *label, char *why, size_t cap)
{
    json_t *ctx = json_object_get(o, "ctx"), *ends = json_object_get(o, "endings");
    json_t *lab = json_object_get(o, "label");
    size_t k = json_array_size(ends);
    if (!json_is_string(ctx)) return snprintf(why, cap, "no \"ctx\" string"), -1;
    if (!json_is_array(ends) || k < 2 || k > GK_CHOICE_MAX)
        return snprintf(why, cap, "\"endings\" must be an array of 2 to %d strings",
                        GK_CHOICE_MAX), -1;
    for (size_t i = 0; i < k; i++)
        if (!json_is_string(json_array_get(ends, i)))
            return snprintf(why, cap, "ending %zu is not a string", i), -1;
    const char *str = json_string_value(lab);
    long l = -1;
    if (!lab) return snprintf(why, cap, "no \"label\" (the index of the right ending)"), -1;
    if (json_is_integer(lab) && json_integer_value(lab) >= 0 && (size_t)json_integer_value(lab) < k)
        l = (long)json_integer_value(lab);
    else if (str && *str && strspn(str, "0123456789") == strlen(str) && strlen(str) < 4)
        l = strtol(str, NULL, 10);
    if (l < 0 || (size_t)l >= k) { /* 1.5, "x", true, 7: shown as JSON, 40 bytes at most */
        char *shown = json_dumps(lab, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(why, cap, "\"label\" must be an integer 0 to %zu (the index of the right "
                 "ending), not %.40s%s", k - 1, shown ? shown : "that",
                 shown && strlen(shown) > 40 ? "..." : "");
        free(shown);
        return -1;
    }
    *label = (int)l;
    return 0;
}

/* prefix then text into out[0..cap), control characters and U+FEFF (a byte-order mark) escaped:
 * jansson quotes the bytes it stopped at, which may be invisible. */
static void shown(char *out, size_t cap, const char *prefix, const char *text)
{
    size_t o = (size_t)snprintf(out, cap, "%s", prefix);
    for (const unsigned char *u = (const unsigned char *)text; *u && o + 8 < cap; u++) {
        if (u[0] == 0xEF && u[1] == 0xBB && u[2] == 0xBF)
            o += (size_t)snprintf(out + o, cap - o, "\\uFEFF"), u += 2;
        else if (*u < ' ' || *u == 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "\\x%02X", *u);
        else
            out[o++] = (char)*u;
    }
    out[o < cap ? o : cap - 1] = '\0';
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
    if (!o && json_error_code(&je) == json_error_out_of_memory)
        return gk_errf(e, GK_ENOMEM, "%s:%ld: out of memory", s->name, it->line);
    if (!json_is_object(o)) {
        if (o) snprintf(why, sizeof why, "not a JSON object");
        else shown(why, sizeof why, "not JSON: ", je.text);
        json_decref(o);
        return item_error(e, s->name, it->line, why);
    }
    int rc = check_keys(o, &it->label, why, sizeof why) ? item_error(e, s->name, it->line, why) : 0;
    size_t n = 0, cap = 0, count = 0;
    if (!rc) rc = encode_ctx(ld, it, json_string_value(json_object_get(o, "ctx")), &n, &cap, e);
    if (!rc && !it->n_ctx) rc = item_error(e, s->name, it->line, "\"ctx\" is empty");
    json_t *ends = json_object_get(o, "endings");
    it->n_endings = rc ? 0 : (int)json_array_size(ends);
    for (int k = 0; !rc && k < it->n_endings; k++) {
        const char *end = json_string_value(json_array_get(ends, (size_t)k));
        char *spaced = malloc(strlen(end) + 2);
        if (!spaced) rc = gk_errf(e, GK_ENOMEM, "%s:%ld: out of memory", s->name, it->line);
        else sprintf(spaced, " %s", end);
        if (!rc) rc = encode(ld, it, spaced, strlen(spaced), &n, &cap, &count, e);
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
        if (lineno == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0) /* a byte-order mark */
            memmove(line, line + 3, (size_t)(len -= 3) + 1);
        if (blank(line)) continue;
        if (strlen(line) != (size_t)len) {
            rc = item_error(e, s->name, lineno, "a NUL byte: not JSON Lines");
            break;
        }
        if (gk_grow(&s->items, &cap, (size_t)s->n + 1, sizeof *s->items, 256)) {
            rc = gk_errf(e, GK_ENOMEM, "%s:%ld: out of memory", s->name, lineno);
            break;
        }
        gk_choice_item *it = &s->items[s->n++];
        memset(it, 0, sizeof *it);
        it->line = lineno;
        rc = take_line(ld, it, line, e);
        errno = 0; /* for the next getline's */
    }
    if (!rc && !feof(f) && errno == ENOMEM) /* getline could not hold the next line */
        rc = gk_errf(e, GK_ENOMEM, "%s:%ld: out of memory", s->name, lineno + 1);
    else if (!rc && ferror(f))
        rc = gk_errno(e, s->name); /* a directory: EISDIR */
    free(line);
    return rc;
}

/* Bytes of the longest token (GPT-2's: 128), special tokens left out: ctx is encoded without. */
static size_t longest_token(const gk_vocab *v)
{
    size_t most = 1, len;
    for (uint32_t id = 0; id < gk_vocab_size(v); id++)
        if ((int32_t)id != gk_vocab_eot(v) && gk_vocab_token(v, id, &len) && len > most) most = len;
    return most;
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
    loader ld = {s, NULL, vocab_limit, context,
                 (size_t)(context > 0 ? context : 1) * longest_token(v)};
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
