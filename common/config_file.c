/* config_file.c: .conf file parsing, includes and preset lookup (see config.h). A file that
 * cannot be opened is a config error (GK_EUSAGE), as is a key set twice in one file. */
#include "common/config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/datadir.h"
#include "common/grow.h"

#define MAX_DEPTH 16

/* The chain of files being read, outermost first (for cycle detection and messages). */
typedef struct include_stack {
    int depth;
    const char *names[MAX_DEPTH + 1]; /* as given */
    char *real[MAX_DEPTH + 1];        /* realpath() */
} include_stack;

static int load(gk_config *cfg, const char *path, include_stack *st, const char *from, gk_err *err);

/* ---- one line -------------------------------------------------------------------------- */

static char *skip_ws(char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static int is_key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
        || c == '.' || c == '-';
}

/* Unquotes p (starting at the quote) in place; *rest is what follows the closing quote. */
static int unquote(char *p, char **rest)
{
    char q = *p, *o = p;
    for (char *s = p + 1; *s; s++) {
        if (*s == q) {
            *o = '\0';
            *rest = s + 1;
            return 0;
        }
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s == 't' ? '\t' : *s;
        } else {
            *o++ = *s;
        }
    }
    return -1;
}

/* Splits a line into key and value, in place. Returns 1 for a blank/comment line, 0 for an
 * assignment, or a GK_EUSAGE code with the message prefixed by where. */
static int parse_line(char *line, char **key, char **value, const char *where, gk_err *err)
{
    line[strcspn(line, "\r\n")] = '\0';
    char *p = skip_ws(line);
    if (*p == '\0' || *p == '#')
        return 1;
    *key = p;
    while (is_key_char(*p))
        p++;
    char *key_end = p;
    p = skip_ws(p);
    if (key_end == *key || *p != '=')
        return gk_errf(err, GK_EUSAGE, "%s: expected 'key = value', got '%.60s'", where, *key);
    *key_end = '\0';
    p = skip_ws(p + 1);
    if (*p == '"' || *p == '\'') {
        char *rest;
        if (unquote(p, &rest) != 0)
            return gk_errf(err, GK_EUSAGE, "%s: %s: unterminated quoted value", where, *key);
        rest = skip_ws(rest);
        if (*rest != '\0' && *rest != '#')
            return gk_errf(err, GK_EUSAGE, "%s: %s: unexpected '%.40s' after quoted value", where,
                           *key, rest);
        *value = p;
        return 0;
    }
    *value = p;
    p[strcspn(p, "#")] = '\0';
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        p[--n] = '\0';
    return 0;
}

/* ---- includes -------------------------------------------------------------------------- */

/* The file an include names: relative to the including file, else a preset. */
static int include_path(const char *cur, const char *name, char *out, size_t cap, gk_err *err)
{
    if (name[0] == '/') {
        snprintf(out, cap, "%s", name);
        return 0;
    }
    const char *slash = strrchr(cur, '/');
    int dirlen = slash ? (int)(slash - cur) : 0;
    if ((size_t)snprintf(out, cap, "%.*s%s%s", dirlen, cur, slash ? "/" : "", name) >= cap)
        return gk_errf(err, GK_EUSAGE, "%s: path too long", name);
    if (access(out, F_OK) == 0 || strchr(name, '/'))
        return 0;
    if (gk_config_resolve_path(name, out, cap, NULL) == 0)
        return 0;
    snprintf(out, cap, "%.*s%s%s", dirlen, cur, slash ? "/" : "", name);
    return 0;
}

static int cycle_error(const include_stack *st, int first, const char *where, const char *name,
                       gk_err *err)
{
    char chain[700] = "";
    size_t o = 0;
    for (int i = first; i < st->depth && o < sizeof chain; i++)
        o += (size_t)snprintf(chain + o, sizeof chain - o, "%s -> ", st->names[i]);
    return gk_errf(err, GK_EUSAGE, "%s: include cycle: %s%s", where, chain, name);
}

static int do_include(gk_config *cfg, const char *value, include_stack *st, const char *where,
                      gk_err *err)
{
    char path[PATH_MAX];
    int rc = include_path(st->names[st->depth - 1], value, path, sizeof path, err);
    if (rc != 0)
        return rc;
    if (st->depth >= MAX_DEPTH)
        return gk_errf(err, GK_EUSAGE, "%s: includes nested deeper than %d", where, MAX_DEPTH);
    return load(cfg, path, st, where, err);
}

/* ---- files ----------------------------------------------------------------------------- */

/* The keys one file has set so far, with their lines (a key may be set once per file). */
typedef struct seen_keys {
    const gk_config_key **key;
    long *line;
    size_t n, cap;
} seen_keys;

/* Records that key was set at line of path; a second time is an error naming both lines. */
static int note_key(seen_keys *sk, const gk_config *cfg, const char *key, long line,
                    const char *path, const char *where, gk_err *err)
{
    const gk_config_key *k = gk_config_find(cfg, key);
    if (!k)
        return 0; /* unknown: gk_config_set says so */
    for (size_t i = 0; i < sk->n; i++)
        if (sk->key[i] == k)
            return gk_errf(err, GK_EUSAGE, "%s: duplicate key '%s' (first set at %s:%ld)", where,
                           key, path, sk->line[i]);
    if (sk->n == sk->cap) {
        size_t cap;
        if (gk_grow_cap(sk->cap, sk->n + 1, sizeof(long), 16, &cap))
            return gk_errf(err, GK_ENOMEM, "%s: out of memory", where);
        const gk_config_key **nk = realloc(sk->key, cap * sizeof *nk);
        if (nk)
            sk->key = nk;
        long *nl = realloc(sk->line, cap * sizeof *nl);
        if (nl)
            sk->line = nl;
        if (!nk || !nl)
            return gk_errf(err, GK_ENOMEM, "%s: out of memory", where);
        sk->cap = cap;
    }
    sk->key[sk->n] = k;
    sk->line[sk->n++] = line;
    return 0;
}

static int load_lines(gk_config *cfg, FILE *fp, include_stack *st, gk_err *err)
{
    const char *path = st->names[st->depth - 1];
    char *line = NULL, where[PATH_MAX + 32];
    size_t cap = 0;
    seen_keys seen = { 0 };
    int rc = 0;
    for (long lineno = 1; rc == 0 && getline(&line, &cap, fp) >= 0; lineno++) {
        char *key = NULL, *value = NULL;
        snprintf(where, sizeof where, "%s:%ld", path, lineno);
        rc = parse_line(line, &key, &value, where, err);
        if (rc == 1)
            rc = 0;
        else if (rc == 0 && strcmp(key, "include") == 0)
            rc = do_include(cfg, value, st, where, err);
        else if (rc == 0 && (rc = note_key(&seen, cfg, key, lineno, path, where, err)) == 0)
            rc = gk_config_set(cfg, key, value, where, err);
    }
    if (rc == 0 && ferror(fp))
        rc = gk_errno(err, path);
    free(seen.key);
    free(seen.line);
    free(line);
    return rc;
}

/* A config file that cannot be opened: a config error (exit 2), not a runtime one. */
static int open_error(const char *what, gk_err *err)
{
    return gk_errf(err, GK_EUSAGE, "%s: %s", what, strerror(errno));
}

/* Reads path; from is the including FILE:LINE (NULL at top level) for messages. */
static int load(gk_config *cfg, const char *path, include_stack *st, const char *from, gk_err *err)
{
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "%s%s%s", from ? from : "", from ? ": include " : "", path);
    char *real = realpath(path, NULL);
    if (!real)
        return open_error(what, err);
    for (int i = 0; i < st->depth; i++) {
        if (strcmp(st->real[i], real) == 0) {
            free(real);
            return cycle_error(st, i, from, path, err);
        }
    }
    FILE *fp = fopen(path, "r");
    if (!fp) {
        int saved = errno;
        free(real);
        errno = saved;
        return open_error(what, err);
    }
    st->names[st->depth] = path;
    st->real[st->depth++] = real;
    int rc = load_lines(cfg, fp, st, err);
    fclose(fp);
    free(st->real[--st->depth]);
    return rc;
}

int gk_config_load_file(gk_config *cfg, const char *path, gk_err *err)
{
    include_stack st = { 0 };
    return load(cfg, path, &st, NULL, err);
}

/* ---- preset lookup --------------------------------------------------------------------- */

static int try_path(const char *dir, const char *name, const char *ext, char *out, size_t cap)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s/%s%s", dir, name, ext) >= sizeof buf)
        return -1;
    if (access(buf, F_OK) != 0)
        return -1;
    if (strlen(buf) >= cap)
        return 1;
    strcpy(out, buf);
    return 0;
}

static const char *config_dir; /* gk_config_set_dir's */

void gk_config_set_dir(const char *dir) { config_dir = dir; }

int gk_config_resolve_path(const char *name, char *out, size_t cap, gk_err *err)
{
    if (access(name, F_OK) == 0) {
        if (strlen(name) >= cap)
            return gk_errf(err, GK_EUSAGE, "%s: path too long", name);
        strcpy(out, name);
        return 0;
    }
    if (strchr(name, '/'))
        return gk_errf(err, GK_EUSAGE, "%s: %s", name, strerror(ENOENT));
    const char *env = config_dir;
    char presets[PATH_MAX], checkout[PATH_MAX];
    gk_datadir(presets, sizeof presets - 8);
    strcat(presets, "/configs");
    /* a binary of a build directory in a checkout: that checkout's presets before installed ones */
    const char *dirs[3] = { env && *env ? env : NULL,
                            gk_datadir_checkout_configs(checkout, sizeof checkout), presets };
    size_t n = strlen(name);
    int has_ext = n > 5 && strcmp(name + n - 5, ".conf") == 0;
    for (int d = 0; d < 3; d++) {
        for (int e = 0; dirs[d] && e < (has_ext ? 1 : 2); e++) {
            int r = try_path(dirs[d], name, e ? ".conf" : "", out, cap);
            if (r == 0)
                return 0;
            if (r == 1)
                return gk_errf(err, GK_EUSAGE, "%s: path too long", name);
        }
    }
    return gk_errf(err, GK_EUSAGE, "%s: no such config (looked in ., %s%s%s%s%s)", name,
                   dirs[0] ? dirs[0] : "", dirs[0] ? ", " : "", dirs[1] ? dirs[1] : "",
                   dirs[1] ? ", " : "", dirs[2]);
}
