/* config.h: typed configuration keys (`key = value` files, --key=value overrides, JSON copies).
 * Owns: a gk_config binds a caller's key table to a caller's values struct; it owns the strings
 * that string fields point to and each key's origin, until gk_config_free. One gk_config per
 * thread.
 *
 * File syntax (.conf), one statement per line:
 *   # whole-line comment                 blank lines are ignored
 *   learning_rate = 6e-4   # trailing comment ('#' ends an unquoted value)
 *   out_dir = "out dir/#1"               quotes ("..." or '...') keep '#' and spaces; \" \'
 *                                        \\ escape, and \n \r \t stand for newline, CR and tab
 *   include = base.conf                  relative to the including file's directory; if not found
 *                                        and the name has no '/', looked up like a preset
 *                                        (gk_config_resolve_path); cycles and depth > 16 are errors
 * Values by type:
 *   int    decimal with optional suffix K M G T (x1000^n) or Ki Mi Gi Ti (x1024^n), or 1e6 form;
 *          overflow and [min, max] checked (see num.h)
 *   double strtod syntax, whole string, finite, [min, max] checked
 *   bool   true/false, 1/0, yes/no, on/off (any case; so Python's True/False work)
 *   string any valid UTF-8 (refused where set otherwise: configs are stored as JSON); `choices`
 *          ("cpu|cuda"), when set, lists the accepted values
 * A key may be set once per file ("FILE:LINE: duplicate key 'n_layer' (first set at FILE:LINE)");
 * across files the later assignment wins (a file overrides what it included before, and
 * --key=value overrides files). Errors are one line: "FILE:LINE: unknown key 'lerning_rate' (did
 * you mean 'learning_rate'?)", "FILE:LINE: learning_rate: 'abc' is not a number"; for command-line
 * overrides the origin is "--KEY" instead of FILE:LINE. A file or include that cannot be opened,
 * like every other config mistake, is GK_EUSAGE (the tools exit 2). */
#ifndef GK_CONFIG_H
#define GK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

struct json_t; /* jansson */

enum gk_ctype {
    GK_CT_INT,    /* field is int64_t */
    GK_CT_DOUBLE, /* field is double */
    GK_CT_BOOL,   /* field is bool */
    GK_CT_STRING, /* field is const char *: points into the gk_config (valid until free) */
};

typedef struct gk_config_key {
    const char *name;    /* key name; a table ends with an entry whose name is NULL */
    enum gk_ctype type;
    size_t offset;       /* offsetof(values struct, field) */
    const char *def;     /* default, written as in a .conf file ("6e-4", "true", "out") */
    const char *help;    /* one line, for --help */
    bool has_range;      /* int/double: value must lie in [min, max] */
    double min, max;
    const char *choices; /* string: "a|b|c" accepted values, or NULL for any */
} gk_config_key;

/* Table-entry helpers: the key name is the field name. */
#define GK_CK(st, f, ty, def, help) { #f, ty, offsetof(st, f), def, help, false, 0, 0, NULL }
#define GK_CK_INT(st, f, def, help) GK_CK(st, f, GK_CT_INT, def, help)
#define GK_CK_DOUBLE(st, f, def, help) GK_CK(st, f, GK_CT_DOUBLE, def, help)
#define GK_CK_BOOL(st, f, def, help) GK_CK(st, f, GK_CT_BOOL, def, help)
#define GK_CK_STR(st, f, def, help) GK_CK(st, f, GK_CT_STRING, def, help)
#define GK_CK_INT_R(st, f, def, lo, hi, help) \
    { #f, GK_CT_INT, offsetof(st, f), def, help, true, lo, hi, NULL }
#define GK_CK_DOUBLE_R(st, f, def, lo, hi, help) \
    { #f, GK_CT_DOUBLE, offsetof(st, f), def, help, true, lo, hi, NULL }
#define GK_CK_CHOICE(st, f, def, choices, help) \
    { #f, GK_CT_STRING, offsetof(st, f), def, help, false, 0, 0, choices }
#define GK_CK_END { NULL, GK_CT_INT, 0, NULL, NULL, false, 0, 0, NULL }

typedef struct gk_config gk_config;

/* Binds table and values (both must outlive the config) and sets every field to its default.
 * A default that does not parse is a programming error, reported as GK_EUSAGE. */
int gk_config_create(gk_config **out, const gk_config_key *table, void *values, gk_err *err);
/* Frees the config and the strings it owns (string fields then dangle). NULL-safe. */
void gk_config_free(gk_config *cfg);

/* Reads a .conf file (see the syntax above). On error, keys assigned before the bad line keep
 * their new values. GK_EUSAGE for any mistake (missing file included); GK_EIO if reading fails. */
int gk_config_load_file(gk_config *cfg, const char *path, gk_err *err);
/* Sets one key from text. origin names where it came from in messages and in gk_config_print
 * ("FILE:LINE", "--KEY"); NULL means "--KEY". */
int gk_config_set(gk_config *cfg, const char *key, const char *value, const char *origin,
                  gk_err *err);
/* Applies one command-line argument "--key=value" (origin "--key"). "--key" alone is an error
 * saying so ("--bias: expected --bias=VALUE", or the unknown-key message). */
int gk_config_set_arg(gk_config *cfg, const char *arg, gk_err *err);

/* Where the key's current value came from, or NULL if it is the default (or unknown key). */
const char *gk_config_origin(const gk_config *cfg, const char *key);

/* For "v is not a multiple of m" messages: the multiples of m (> 0) nearest v (> 0), the one
 * below and the one above ("4 or 6"), or only the one above where the one below would be 0
 * ("3"); written to out[0..cap), which is returned. */
const char *gk_config_multiples(int64_t v, int64_t m, char *out, size_t cap);
/* The table entry for key, or NULL. */
const gk_config_key *gk_config_find(const gk_config *cfg, const char *key);
/* The value of a key as .conf text (quoted if needed) into buf. Returns 0, or GK_ENOTFOUND. */
int gk_config_format(const gk_config *cfg, const char *key, char *buf, size_t cap);

/* Prints "key = value" for every key in table order; keys set away from their default get
 * "  # ORIGIN". The output is itself a valid .conf file. */
void gk_config_print(const gk_config *cfg, FILE *f);
/* Prints "  --key=TYPE  help (default: X)" lines for --help. */
void gk_config_help(const gk_config_key *table, FILE *f);

/* The effective config as a JSON object {key: value} (ints, reals, booleans, strings), in table
 * order. gk_config_to_json returns a malloc'd compact string; free() it. */
struct json_t *gk_config_to_jansson(const gk_config *cfg, gk_err *err);
char *gk_config_to_json(const gk_config *cfg, gk_err *err);
/* Sets every key found in a JSON object as above (resume); origin names the source in messages
 * ("ckpt.safetensors:gptkit.train"). Unknown keys and mistyped values are errors. */
int gk_config_from_jansson(gk_config *cfg, const struct json_t *obj, const char *origin,
                           gk_err *err);
int gk_config_from_json(gk_config *cfg, const char *json, const char *origin, gk_err *err);

/* The directory searched for presets before the installed ones (the tool's $GPT_CONFIG_DIR, or
 * the deprecated $GPTKIT_CONFIG_DIR: common/env.h), or NULL or "": none. Process-wide: the tool
 * sets it once, before reading configs; dir is used, not copied. */
void gk_config_set_dir(const char *dir);

/* Finds a config file: NAME itself if it exists; else, when NAME has no '/', in the directory of
 * gk_config_set_dir, then gk_datadir()/configs (datadir.h), trying NAME and NAME.conf in each.
 * Writes the path found to out. Returns 0, or GK_EUSAGE when not found (the message lists where
 * it looked) or when the path is longer than cap. */
int gk_config_resolve_path(const char *name, char *out, size_t cap, gk_err *err);

/* Levenshtein distance between a and b (for did-you-mean suggestions). */
size_t gk_edit_distance(const char *a, const char *b);

#endif
