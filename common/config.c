/* config.c: typed config keys: setting, formatting, printing, JSON (see config.h).
 * File parsing, includes and preset lookup are in config_file.c. */
#include "common/config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/num.h"
#include "common/text/utf8.h"

struct gk_config {
    const gk_config_key *table;
    void *values;
    size_t n;       /* keys in table */
    char **strs;    /* per key: the owned string a string field points to */
    char **origins; /* per key: where the value came from; NULL = default */
    char **defs;    /* per key: the default, formatted canonically */
};

/* ---- helpers --------------------------------------------------------------------------- */

static void *field(const gk_config *cfg, size_t i)
{
    return (char *)cfg->values + cfg->table[i].offset;
}

static long find_index(const gk_config *cfg, const char *key)
{
    for (size_t i = 0; i < cfg->n; i++)
        if (strcmp(cfg->table[i].name, key) == 0)
            return (long)i;
    return -1;
}

const gk_config_key *gk_config_find(const gk_config *cfg, const char *key)
{
    long i = find_index(cfg, key);
    return i < 0 ? NULL : &cfg->table[i];
}

size_t gk_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t *row = malloc((lb + 1) * sizeof *row);
    if (!row)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[lb];
    free(row);
    return d;
}

static int unknown_key(const gk_config *cfg, const char *key, const char *origin, gk_err *err)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < cfg->n; i++) {
        size_t d = gk_edit_distance(key, cfg->table[i].name);
        if (d < best_d) {
            best_d = d;
            best = cfg->table[i].name;
        }
    }
    size_t len = strlen(key);
    if (best && best_d <= 1 + len / 4 && best_d < len)
        return gk_errf(err, GK_EUSAGE, "%s: unknown key '%s' (did you mean '%s'?)", origin, key,
                       best);
    return gk_errf(err, GK_EUSAGE, "%s: unknown key '%s'", origin, key);
}

/* Prefixes err's message with "origin: ". */
static int prefixed(gk_err *err, int code, const char *origin)
{
    if (!err)
        return code;
    char tmp[sizeof err->msg];
    memcpy(tmp, err->msg, sizeof tmp);
    return gk_errf(err, code, "%s: %.900s", origin, tmp);
}

static int parse_bool(const char *s, bool *out)
{
    static const char *yes[] = { "true", "1", "yes", "on" };
    static const char *no[] = { "false", "0", "no", "off" };
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = true, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = false, 0;
    }
    return -1;
}

static int in_choices(const char *choices, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = choices; p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0)
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

static int set_string(gk_config *cfg, size_t i, const char *value, const char *origin, gk_err *err)
{
    const gk_config_key *k = &cfg->table[i];
    size_t len = strlen(value), ok = gk_utf8_valid_prefix(value, len);
    if (ok < len) /* the config goes into checkpoints as JSON, which holds UTF-8 only */
        return gk_errf(err, GK_EUSAGE, "%s: %s: not UTF-8 (byte 0x%02X at offset %zu)", origin,
                       k->name, (unsigned char)value[ok], ok);
    if (k->choices && !in_choices(k->choices, value))
        return gk_errf(err, GK_EUSAGE, "%s: %s: '%s' is not one of %s", origin, k->name, value,
                       k->choices);
    char *copy = strdup(value);
    if (!copy)
        return gk_errf(err, GK_ENOMEM, "%s: out of memory", origin);
    free(cfg->strs[i]);
    cfg->strs[i] = copy;
    *(const char **)field(cfg, i) = copy;
    return 0;
}

/* Parses value for key i and stores it; origin is only used in messages. */
static int set_index(gk_config *cfg, size_t i, const char *value, const char *origin, gk_err *err)
{
    const gk_config_key *k = &cfg->table[i];
    int rc = 0;
    switch (k->type) {
    case GK_CT_INT: {
        int64_t lo = k->has_range ? (int64_t)k->min : INT64_MIN;
        int64_t hi = k->has_range ? (int64_t)k->max : INT64_MAX;
        int64_t v;
        rc = gk_parse_i64(value, lo, hi, &v, k->name, err);
        if (rc == 0)
            *(int64_t *)field(cfg, i) = v;
        break;
    }
    case GK_CT_DOUBLE: {
        double lo = k->has_range ? k->min : -HUGE_VAL, hi = k->has_range ? k->max : HUGE_VAL;
        double v;
        rc = gk_parse_double(value, lo, hi, &v, k->name, err);
        if (rc == 0)
            *(double *)field(cfg, i) = v;
        break;
    }
    case GK_CT_BOOL: {
        bool v;
        if (parse_bool(value, &v) != 0)
            return gk_errf(err, GK_EUSAGE, "%s: %s: '%s' is not a boolean (true/false)", origin,
                           k->name, value);
        *(bool *)field(cfg, i) = v;
        break;
    }
    case GK_CT_STRING:
        return set_string(cfg, i, value, origin, err);
    }
    return rc ? prefixed(err, rc, origin) : 0;
}

/* ---- create / free / set --------------------------------------------------------------- */

void gk_config_free(gk_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n; i++) {
        free(cfg->strs[i]);
        free(cfg->origins[i]);
        free(cfg->defs[i]);
    }
    free(cfg->strs);
    free(cfg->origins);
    free(cfg->defs);
    free(cfg);
}

int gk_config_create(gk_config **out, const gk_config_key *table, void *values, gk_err *err)
{
    *out = NULL;
    gk_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return gk_errf(err, GK_ENOMEM, "config: out of memory");
    cfg->table = table;
    cfg->values = values;
    while (table[cfg->n].name)
        cfg->n++;
    cfg->strs = calloc(cfg->n + 1, sizeof *cfg->strs);
    cfg->origins = calloc(cfg->n + 1, sizeof *cfg->origins);
    cfg->defs = calloc(cfg->n + 1, sizeof *cfg->defs);
    if (!cfg->strs || !cfg->origins || !cfg->defs) {
        gk_config_free(cfg);
        return gk_errf(err, GK_ENOMEM, "config: out of memory");
    }
    for (size_t i = 0; i < cfg->n; i++) {
        char origin[160], buf[4096];
        snprintf(origin, sizeof origin, "default of %s", table[i].name);
        int rc = set_index(cfg, i, table[i].def ? table[i].def : "", origin, err);
        if (rc == 0 && gk_config_format(cfg, table[i].name, buf, sizeof buf) == 0)
            cfg->defs[i] = strdup(buf);
        if (rc == 0 && !cfg->defs[i])
            rc = gk_errf(err, GK_ENOMEM, "config: out of memory");
        if (rc != 0) {
            gk_config_free(cfg);
            return rc;
        }
    }
    *out = cfg;
    return 0;
}

int gk_config_set(gk_config *cfg, const char *key, const char *value, const char *origin,
                  gk_err *err)
{
    char obuf[160];
    if (!origin) {
        snprintf(obuf, sizeof obuf, "--%.150s", key);
        origin = obuf;
    }
    long i = find_index(cfg, key);
    if (i < 0)
        return unknown_key(cfg, key, origin, err);
    int rc = set_index(cfg, (size_t)i, value, origin, err);
    if (rc != 0)
        return rc;
    char *o = strdup(origin);
    if (!o)
        return gk_errf(err, GK_ENOMEM, "%s: out of memory", origin);
    free(cfg->origins[i]);
    cfg->origins[i] = o;
    return 0;
}

int gk_config_set_arg(gk_config *cfg, const char *arg, gk_err *err)
{
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) != 0 || eq == arg + 2 || !arg[2])
        return gk_errf(err, GK_EUSAGE, "%s: expected --key=value", arg);
    if (!eq) /* "--key": a known key is missing its value; any other is unknown */
        return find_index(cfg, arg + 2) < 0
                   ? unknown_key(cfg, arg + 2, arg, err)
                   : gk_errf(err, GK_EUSAGE, "%s: expected %s=VALUE", arg, arg);
    char key[160];
    size_t n = (size_t)(eq - arg);
    if (n >= sizeof key)
        return gk_errf(err, GK_EUSAGE, "%.60s...: key too long", arg);
    memcpy(key, arg, n);
    key[n] = '\0';
    return gk_config_set(cfg, key + 2, eq + 1, key, err);
}

const char *gk_config_origin(const gk_config *cfg, const char *key)
{
    long i = find_index(cfg, key);
    return i < 0 ? NULL : cfg->origins[i];
}

const char *gk_config_multiples(int64_t v, int64_t m, char *out, size_t cap)
{
    int64_t lo = v / m * m;
    if (lo > 0 && lo != v)
        snprintf(out, cap, "%lld or %lld", (long long)lo, (long long)(lo + m));
    else
        snprintf(out, cap, "%lld", (long long)(lo == v && v > 0 ? v : lo + m));
    return out;
}

/* ---- formatting and printing ----------------------------------------------------------- */

/* Shortest %g form that reads back as the same double. */
static void format_double(double v, char *buf, size_t cap)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static int needs_quotes(const char *s)
{
    if (!*s || s[0] == ' ' || s[0] == '\t' || s[strlen(s) - 1] == ' ' || s[strlen(s) - 1] == '\t')
        return 1;
    return strpbrk(s, "#\"'\\\n\r\t") != NULL;
}

static void format_string(const char *s, char *buf, size_t cap)
{
    if (!needs_quotes(s)) {
        snprintf(buf, cap, "%s", s);
        return;
    }
    size_t o = 0;
    if (cap < 3) {
        if (cap)
            buf[0] = '\0';
        return;
    }
    buf[o++] = '"';
    for (; *s && o + 4 < cap; s++) {
        char c = *s;
        if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t') {
            buf[o++] = '\\';
            c = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c;
        }
        buf[o++] = c;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

int gk_config_format(const gk_config *cfg, const char *key, char *buf, size_t cap)
{
    long i = find_index(cfg, key);
    if (i < 0)
        return GK_ENOTFOUND;
    const void *f = field(cfg, (size_t)i);
    switch (cfg->table[i].type) {
    case GK_CT_INT: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)f); break;
    case GK_CT_DOUBLE: format_double(*(const double *)f, buf, cap); break;
    case GK_CT_BOOL: snprintf(buf, cap, "%s", *(const bool *)f ? "true" : "false"); break;
    case GK_CT_STRING: format_string(*(const char *const *)f, buf, cap); break;
    }
    return 0;
}

/* Key i's value as .conf text, whole however long (malloc'd; NULL when out of memory). */
static char *format_whole(const gk_config *cfg, size_t i)
{
    size_t cap = 64; /* an int, a bool, a double's %.17g */
    if (cfg->table[i].type == GK_CT_STRING)
        cap = 2 * strlen(*(const char *const *)field(cfg, i)) + 6; /* every char escaped, quotes */
    char *buf = malloc(cap);
    if (buf)
        gk_config_format(cfg, cfg->table[i].name, buf, cap);
    return buf;
}

void gk_config_print(const gk_config *cfg, FILE *f)
{
    for (size_t i = 0; i < cfg->n; i++) {
        char *text = format_whole(cfg, i);
        const char *buf = text ? text : "?";
        int changed = cfg->defs[i] && strcmp(buf, cfg->defs[i]) != 0;
        if (changed)
            fprintf(f, "%s = %s  # %s\n", cfg->table[i].name, buf,
                    cfg->origins[i] ? cfg->origins[i] : "changed");
        else
            fprintf(f, "%s = %s\n", cfg->table[i].name, buf);
        free(text);
    }
}

void gk_config_help(const gk_config_key *table, FILE *f)
{
    static const char *tnames[] = { "N", "X", "BOOL", "STR" };
    for (const gk_config_key *k = table; k->name; k++) {
        char lhs[200];
        snprintf(lhs, sizeof lhs, "--%s=%s", k->name, k->choices ? k->choices : tnames[k->type]);
        fprintf(f, "  %-32s %s (default: %s)\n", lhs, k->help ? k->help : "",
                k->def && *k->def ? k->def : "\"\"");
    }
}

/* ---- JSON ------------------------------------------------------------------------------ */

json_t *gk_config_to_jansson(const gk_config *cfg, gk_err *err)
{
    json_t *obj = json_object();
    for (size_t i = 0; obj && i < cfg->n; i++) {
        const void *f = field(cfg, i);
        json_t *v = NULL;
        switch (cfg->table[i].type) {
        case GK_CT_INT: v = json_integer((json_int_t)*(const int64_t *)f); break;
        case GK_CT_DOUBLE: v = json_real(*(const double *)f); break;
        case GK_CT_BOOL: v = json_boolean(*(const bool *)f); break;
        case GK_CT_STRING: v = json_string(*(const char *const *)f); break;
        }
        if (!v || json_object_set_new(obj, cfg->table[i].name, v) != 0) {
            json_decref(obj);
            return gk_errf(err, GK_EFORMAT, "config: cannot store %s as JSON (not UTF-8?)",
                           cfg->table[i].name), NULL;
        }
    }
    if (!obj)
        gk_errf(err, GK_ENOMEM, "config: out of memory");
    return obj;
}

char *gk_config_to_json(const gk_config *cfg, gk_err *err)
{
    json_t *obj = gk_config_to_jansson(cfg, err);
    if (!obj)
        return NULL;
    char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(obj);
    if (!s)
        gk_errf(err, GK_ENOMEM, "config: out of memory");
    return s;
}

/* Turns a JSON value into .conf text for key type t; returns 0 or -1 (wrong JSON type). */
static int json_to_text(enum gk_ctype t, const json_t *v, char *buf, size_t cap, const char **text)
{
    *text = buf;
    switch (t) {
    case GK_CT_INT:
        if (json_is_integer(v))
            return snprintf(buf, cap, "%lld", (long long)json_integer_value(v)), 0;
        if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))
            && fabs(json_real_value(v)) < 9e15)
            return snprintf(buf, cap, "%.0f", json_real_value(v)), 0;
        return -1;
    case GK_CT_DOUBLE:
        if (!json_is_number(v))
            return -1;
        return snprintf(buf, cap, "%.17g", json_number_value(v)), 0;
    case GK_CT_BOOL:
        if (!json_is_boolean(v))
            return -1;
        return snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false"), 0;
    case GK_CT_STRING:
        if (!json_is_string(v))
            return -1;
        *text = json_string_value(v);
        return 0;
    }
    return -1;
}

int gk_config_from_jansson(gk_config *cfg, const json_t *obj, const char *origin, gk_err *err)
{
    static const char *tnames[] = { "an integer", "a number", "a boolean", "a string" };
    if (!json_is_object(obj))
        return gk_errf(err, GK_EFORMAT, "%s: config is not a JSON object", origin);
    const char *key;
    json_t *v;
    json_t *o = (json_t *)obj; /* jansson's iteration API is not const-correct */
    json_object_foreach (o, key, v) {
        long i = find_index(cfg, key);
        if (i < 0)
            return unknown_key(cfg, key, origin, err);
        char buf[64];
        const char *text;
        if (json_to_text(cfg->table[i].type, v, buf, sizeof buf, &text) != 0)
            return gk_errf(err, GK_EFORMAT, "%s: %s: expected %s", origin, key,
                           tnames[cfg->table[i].type]);
        int rc = gk_config_set(cfg, key, text, origin, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int gk_config_from_json(gk_config *cfg, const char *json, const char *origin, gk_err *err)
{
    json_error_t je;
    json_t *obj = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!obj)
        return gk_errf(err, GK_EFORMAT, "%s: bad config JSON at byte %d: %s", origin, je.position,
                       je.text);
    int rc = gk_config_from_jansson(cfg, obj, origin, err);
    json_decref(obj);
    return rc;
}
