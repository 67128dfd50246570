/* fuzz_conf.c: gpt-train's settings (train/settings.c's key table) from a .conf file with
 * includes, --key=value overrides and a checkpoint's JSON copy. Input: MAIN \0 A \0 B \0 ARGS \0
 * JSON. MAIN, A and B are written as main.conf, a.conf and b.conf in one directory (an include
 * names them, or a preset of train/configs); inputs with a '/' in them are skipped so that no
 * include leaves those. ARGS holds gpt-train's command lines (its own option table, tr_cli: -c
 * NAME, --key=value, -q, -v, --print-config), one argument a line, an empty line between two
 * command lines. Properties: a failure is one gk_err with a message, a missing include
 * included; every value always lies in its key's range and choices (a rejected value is never
 * stored); a config tr_settings_check accepts keeps what it checks; gk_config_print's text and
 * gk_config_to_json's reload to the same values. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/opt.h"
#include "tests/fuzz/fuzz.h"
/* gpt-train's key table, option table and checks themselves. Compiled in here rather than
 * linked as a target named fuzz_train_* would be: train's other modules pull in the kernels,
 * which do not link under clang's sanitizers and libFuzzer (C++ UBSan runtime, duplicate ifunc
 * resolvers). */
#include "train/settings.c"

static char dir[64];

static void remove_dir(void)
{
    static const char *files[] = {"main.conf", "a.conf", "b.conf", "print.conf", ""};
    char p[128];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        remove(p);
    }
}

/* dir/name holding data[0..n), or NULL. The directory is made once per process. */
static const char *put(const char *name, const void *data, size_t n)
{
    static char path[4][128];
    static int next;
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/gk-fuzz-conf.XXXXXX", t && *t && strlen(t) < 30 ? t : "/tmp");
        if (!mkdtemp(dir)) return dir[0] = '\0', NULL;
        atexit(remove_dir);
        gk_config_set_dir("train/configs"); /* gpt-train's main: $GPT_CONFIG_DIR (gk_env) */
    }
    char *p = path[next++ & 3];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return NULL;
    int bad = n && fwrite(data, 1, n, f) != n;
    return fclose(f) || bad ? NULL : p;
}

static void check_failure(int rc, const gk_err *e)
{
    FZ_ASSERT(rc < 0 && e->code == rc && e->msg[0], "rc %d, code %d, message '%s'", rc, e->code,
              e->msg);
}

static int in_choices(const char *choices, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = choices; p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL)
        if (!strncmp(p, s, n) && (p[n] == '|' || !p[n])) return 1;
    return 0;
}

/* Every value lies in its key's range or choices. */
static void in_range(const tr_settings *s)
{
    for (const gk_config_key *k = tr_settings_keys; k->name; k++) {
        const void *f = (const char *)s + k->offset;
        if (k->type == GK_CT_INT && k->has_range)
            FZ_ASSERT(*(const int64_t *)f >= (int64_t)k->min &&
                          *(const int64_t *)f <= (int64_t)k->max,
                      "%s = %lld", k->name, (long long)*(const int64_t *)f);
        if (k->type == GK_CT_DOUBLE && k->has_range)
            FZ_ASSERT(*(const double *)f >= k->min && *(const double *)f <= k->max, "%s = %g",
                      k->name, *(const double *)f);
        if (k->type == GK_CT_STRING)
            FZ_ASSERT(*(const char *const *)f &&
                          (!k->choices || in_choices(k->choices, *(const char *const *)f)),
                      "%s", k->name);
    }
}

static void same_values(const tr_settings *a, const tr_settings *b, const char *how)
{
    for (const gk_config_key *k = tr_settings_keys; k->name; k++) {
        const void *x = (const char *)a + k->offset, *y = (const char *)b + k->offset;
        int same = k->type == GK_CT_INT      ? *(const int64_t *)x == *(const int64_t *)y
                   : k->type == GK_CT_DOUBLE ? !memcmp(x, y, sizeof(double))
                   : k->type == GK_CT_BOOL
                       ? *(const bool *)x == *(const bool *)y
                       : !strcmp(*(const char *const *)x, *(const char *const *)y);
        FZ_ASSERT(same, "%s: %s differs", how, k->name);
    }
}

/* What tr_settings_check promises of a config it accepts. */
static void checked(const tr_settings *s, const gk_config *cfg)
{
    FZ_ASSERT(s->train_data[0] && s->out_dir[0] && s->init_from[0], "an empty path");
    if (!strcmp(s->init_from, "scratch") ||
        (gk_config_origin(cfg, "n_head") && gk_config_origin(cfg, "n_embd")))
        FZ_ASSERT(s->n_embd % s->n_head == 0, "n_head %lld, n_embd %lld", (long long)s->n_head,
                  (long long)s->n_embd);
    FZ_ASSERT(s->batch_size * s->block_size <= 0x7FFFFFFF, "tokens per micro-batch");
    if (s->decay_lr && strcmp(s->lr_schedule, "constant"))
        FZ_ASSERT(s->lr_decay_iters > s->warmup_iters && s->min_lr <= s->learning_rate, "schedule");
    if (s->decay_lr && !strcmp(s->lr_schedule, "wsd"))
        FZ_ASSERT(tr_wsd_decay_start(s) >= s->warmup_iters &&
                      tr_wsd_decay_start(s) < s->lr_decay_iters,
                  "wsd decay from step %lld", (long long)tr_wsd_decay_start(s));
}

/* The printout and the JSON copy load into fresh configs with the same values. */
static void reload(const tr_settings *s, const gk_config *cfg)
{
    gk_err e = {0};
    char *text = NULL, *json = gk_config_to_json(cfg, &e);
    size_t len = 0;
    FZ_ASSERT(json, "to_json: %s", e.msg);
    FILE *f = open_memstream(&text, &len);
    gk_config_print(cfg, f);
    fclose(f);
    const char *path = put("print.conf", text, len);
    tr_settings t;
    gk_config *c = NULL;
    FZ_ASSERT(gk_config_create(&c, tr_settings_keys, &t, &e) == 0, "%s", e.msg);
    FZ_ASSERT(path && gk_config_load_file(c, path, &e) == 0, "printout: %s", e.msg);
    same_values(s, &t, "printout");
    gk_config_free(c);
    FZ_ASSERT(gk_config_create(&c, tr_settings_keys, &t, &e) == 0, "%s", e.msg);
    FZ_ASSERT(gk_config_from_json(c, json, "json", &e) == 0, "json: %s", e.msg);
    same_values(s, &t, "json");
    gk_config_free(c);
    free(text);
    free(json);
}

/* gpt-train's -c: the name in the fuzz directory, else as gpt-train finds it (path, preset:
 * tr_settings_load_config). */
static int load_config(void *cfg, const char *name, gk_err *e)
{
    char path[4096];
    if (strchr(name, '/')) return 0; /* stay inside the fuzz directory and the presets */
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0 ? gk_config_load_file(cfg, path, e)
                                   : tr_settings_load_config(cfg, name, e);
}

/* The lines of text as gpt-train's command line (settings.h's tr_cli, the table gpt-train
 * parses with; -c through load_config): 0, 1 (help or version) or an error. */
static int args(gk_config *cfg, char *text, gk_err *e)
{
    int first = 0, argc = 1;
    tr_cli c;
    tr_cli_init(&c, cfg, load_config);
    char *argv[65] = {"gpt-train"};
    for (char *line = text, *nl; line && *text && argc < 64; line = nl ? nl + 1 : NULL) {
        if ((nl = strchr(line, '\n'))) *nl = '\0';
        argv[argc++] = line;
    }
    int rc = gk_opt_parse(c.tab, argc, argv, &first, e);
    FZ_ASSERT(rc <= 0 || rc == GK_OPT_HELP || rc == GK_OPT_VERSION, "gk_opt_parse: %d", rc);
    FZ_ASSERT(rc || (first >= 1 && first <= argc), "first operand %d of %d", first, argc);
    return rc;
}

static char *part(const uint8_t **p, size_t *n)
{
    const uint8_t *a, *rest;
    size_t na, nrest;
    fz_split(*p, *n, 0, &a, &na, &rest, &nrest);
    char *s = malloc(na + 1);
    if (na) memcpy(s, a, na);
    s[na] = '\0';
    *p = rest, *n = nrest;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *parts[5];
    for (int i = 0; i < 5; i++) parts[i] = part(&data, &size);
    int skip = strchr(parts[0], '/') || strchr(parts[1], '/') || strchr(parts[2], '/');
    const char *main_path = skip ? NULL : put("main.conf", parts[0], strlen(parts[0]));
    if (main_path && put("a.conf", parts[1], strlen(parts[1])) &&
        put("b.conf", parts[2], strlen(parts[2]))) {
        tr_settings s;
        gk_config *cfg = NULL;
        gk_err e = {0};
        FZ_ASSERT(gk_config_create(&cfg, tr_settings_keys, &s, &e) == 0, "%s", e.msg);
        int rc = gk_config_load_file(cfg, main_path, &e);
        if (rc) check_failure(rc, &e);
        in_range(&s);
        for (char *cmd = parts[3], *end; !rc && cmd; cmd = end ? end + 2 : NULL) {
            if ((end = strstr(cmd, "\n\n"))) *end = '\0';
            char *copy = strdup(cmd); /* gone before the next command line is parsed */
            if ((rc = args(cfg, copy, &e)) < 0) check_failure(rc, &e);
            rc = rc > 0 ? 0 : rc; /* --help, --version: the next command line */
            free(copy);
        }
        in_range(&s);
        if (!rc && parts[4][0] && (rc = gk_config_from_json(cfg, parts[4], "json", &e)) != 0)
            check_failure(rc, &e);
        in_range(&s);
        if (!rc) {
            reload(&s, cfg);
            if ((rc = tr_settings_check(&s, cfg, &e)) != 0) check_failure(rc, &e);
            else checked(&s, cfg), in_range(&s);
        }
        gk_config_free(cfg);
    }
    for (int i = 0; i < 5; i++) free(parts[i]);
    return 0;
}
