/* s3_conf.c: s3:// URLs, AWS's INI files and the discovery of credentials, region and endpoint
 * and retry settings (see s3.h). Owns nothing past a call; reads the files it is told of, no
 * environment. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/s3/s3.h"

/* ---------------------------------------------------------------- s3://BUCKET/KEY */

int gk_s3_is_url(const char *s) { return s && strncmp(s, "s3://", 5) == 0; }

int gk_s3_parse_url(const char *url, char *bucket, size_t bcap, char *key, size_t kcap, gk_err *e)
{
    if (!gk_s3_is_url(url))
        return gk_errf(e, GK_EUSAGE, "%s: not an s3:// URL (s3://BUCKET/KEY)",
                       url ? url : "(null)");
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (bn == 0)
        return gk_errf(e, GK_EUSAGE, "%s: no bucket name (s3://BUCKET/KEY)", url);
    if (bn > 255 || (bn == 1 && b[0] == '.') || (bn == 2 && b[0] == '.' && b[1] == '.'))
        return gk_errf(e, GK_EUSAGE, "%s: bad bucket name", url);
    for (size_t i = 0; i < bn; i++) {
        char ch = b[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '_'))
            return gk_errf(e, GK_EUSAGE,
                           "%s: bad bucket name: '%c' (letters, digits, '.', '-', '_')", url, ch);
    }
    const char *k = slash ? slash + 1 : "";
    if (bn >= bcap || strlen(k) >= kcap)
        return gk_errf(e, GK_EUSAGE, "%s: too long", url);
    memcpy(bucket, b, bn);
    bucket[bn] = '\0';
    strcpy(key, k);
    return 0;
}

/* ---------------------------------------------------------------- INI */

static const char *skip_blank(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    return p;
}

static const char *trim_end(const char *p, const char *end)
{
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
    return end;
}

/* Calls on_line for each line of text with the section it is in (blank and comment lines
 * skipped); a section header is reported with key == NULL. Stops when on_line returns nonzero. */
typedef int (*ini_line_fn)(const char *sec, size_t secn, const char *k, size_t kn, const char *v,
                           size_t vn, void *ud);

static int ini_walk(const char *text, ini_line_fn fn, void *ud)
{
    const char *sec = "", *p = text;
    size_t secn = 0;
    while (*p) {
        const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
        const char *a = skip_blank(p, end), *z = trim_end(a, end);
        p = nl ? nl + 1 : end;
        if (a == z || *a == '#' || *a == ';')
            continue;
        if (*a == '[') {
            const char *close = memchr(a, ']', (size_t)(z - a));
            if (!close)
                continue;
            sec = skip_blank(a + 1, close);
            secn = (size_t)(trim_end(sec, close) - sec);
            if (fn(sec, secn, NULL, 0, NULL, 0, ud))
                return 1;
            continue;
        }
        const char *eq = memchr(a, '=', (size_t)(z - a));
        if (!eq)
            continue;
        const char *v = skip_blank(eq + 1, z);
        if (fn(sec, secn, a, (size_t)(trim_end(a, eq) - a), v, (size_t)(z - v), ud))
            return 1;
    }
    return 0;
}

typedef struct ini_query {
    const char *section, *key;
    char *out;
    size_t cap;
    int found;
} ini_query;

static int on_ini_get(const char *sec, size_t secn, const char *k, size_t kn, const char *v,
                      size_t vn, void *ud)
{
    ini_query *q = ud;
    if (!k || secn != strlen(q->section) || strncmp(sec, q->section, secn) != 0)
        return 0;
    if (kn != strlen(q->key) || strncmp(k, q->key, kn) != 0)
        return 0;
    if (vn >= q->cap)
        vn = q->cap - 1;
    memcpy(q->out, v, vn);
    q->out[vn] = '\0';
    q->found = 1;
    return 1;
}

int gk_s3_ini_get(const char *text, const char *section, const char *key, char *out, size_t cap)
{
    ini_query q = {section, key, out, cap, 0};
    out[0] = '\0';
    if (text)
        ini_walk(text, on_ini_get, &q);
    return q.found;
}

static int on_ini_has(const char *sec, size_t secn, const char *k, size_t kn, const char *v,
                      size_t vn, void *ud)
{
    (void)kn, (void)v, (void)vn;
    const char *want = ud;
    return !k && secn == strlen(want) && strncmp(sec, want, secn) == 0;
}

int gk_s3_ini_has(const char *text, const char *section)
{
    return text && ini_walk(text, on_ini_has, (void *)section);
}

/* ---------------------------------------------------------------- discovery */

/* path's contents (at most 1 MiB) into *text (caller frees); a missing file: 0 with NULL. */
static int read_small(const char *path, char **text, gk_err *e)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT || errno == ENOTDIR ? 0 : gk_errno(e, path);
    char *buf = malloc((1 << 20) + 1);
    if (!buf) {
        fclose(f);
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, 1 << 20, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return gk_errf(e, GK_EIO, "%s: read error", path);
    }
    buf[n] = '\0';
    *text = buf;
    return 0;
}

static const char *env_get(gk_s3_getenv env, void *ud, const char *name)
{
    const char *v = env ? env(name, ud) : NULL;
    return v && *v ? v : NULL;
}

/* The file named by var, else $HOME/.aws/NAME, into path. */
static void aws_file(char *path, size_t cap, gk_s3_getenv env, void *ud, const char *var,
                     const char *name)
{
    const char *v = env_get(env, ud, var), *home = env_get(env, ud, "HOME");
    if (v)
        snprintf(path, cap, "%s", v);
    else
        snprintf(path, cap, "%s/.aws/%s", home ? home : "", name);
}

static void set(char *dst, size_t cap, const char *v) { snprintf(dst, cap, "%s", v ? v : ""); }

/* Credentials of the profile in one INI text, if it has aws_access_key_id. */
static int creds_from(gk_s3_conf *c, const char *text, const char *section, const char *file)
{
    char id[sizeof c->key_id];
    if (!gk_s3_ini_get(text, section, "aws_access_key_id", id, sizeof id) || !id[0])
        return 0;
    set(c->key_id, sizeof c->key_id, id);
    gk_s3_ini_get(text, section, "aws_secret_access_key", c->secret, sizeof c->secret);
    gk_s3_ini_get(text, section, "aws_session_token", c->token, sizeof c->token);
    snprintf(c->source, sizeof c->source, "profile %s in %s", section, file);
    return 1;
}

/* The profile's section in the config file: [default] or [profile NAME] (either for default). */
static const char *config_section(const char *cfg, const char *profile, char *buf, size_t cap)
{
    snprintf(buf, cap, "profile %s", profile);
    if (strcmp(profile, "default") == 0 && !gk_s3_ini_has(cfg, buf))
        return "default";
    return buf;
}

/* max_attempts, retry_mode and retry_ms from the environment, else the profile (s3.h). */
static int retry_settings(gk_s3_conf *c, gk_s3_getenv env, void *ud, const char *cfg,
                          const char *csec, const char *cfg_path, gk_err *e)
{
    char file[64], where[1500];
    const char *v = env_get(env, ud, "AWS_MAX_ATTEMPTS"), *end;
    snprintf(where, sizeof where, "AWS_MAX_ATTEMPTS=%.64s", v ? v : "");
    if (!v && gk_s3_ini_get(cfg, csec, "max_attempts", file, sizeof file) && file[0])
        v = file,
        snprintf(where, sizeof where, "max_attempts = %s in [%s] of %s", file, csec, cfg_path);
    if (v) {
        long n = strtol(v, (char **)&end, 10);
        if (*end || end == v || n < 1 || n > 1000000)
            return gk_errf(e, GK_EUSAGE, "%s: not a number of tries (1 or more)", where);
        c->max_attempts = (int)n;
    }
    v = env_get(env, ud, "AWS_RETRY_MODE");
    snprintf(where, sizeof where, "AWS_RETRY_MODE=%.64s", v ? v : "");
    if (!v && gk_s3_ini_get(cfg, csec, "retry_mode", file, sizeof file) && file[0])
        v = file,
        snprintf(where, sizeof where, "retry_mode = %s in [%s] of %s", file, csec, cfg_path);
    if (v && strcmp(v, "adaptive") == 0)
        c->retry_mode = GK_S3_RETRY_ADAPTIVE;
    else if (v && strcmp(v, "standard") != 0 && strcmp(v, "legacy") != 0)
        return gk_errf(e, GK_EUSAGE, "%s: not a retry mode (standard, adaptive or legacy)", where);
    v = env_get(env, ud, "GPT_S3_RETRY_SECONDS");
    if (v) {
        double sec = strtod(v, (char **)&end);
        if (*end || end == v || !(sec > 0 && sec <= 86400))
            return gk_errf(e, GK_EUSAGE,
                           "GPT_S3_RETRY_SECONDS=%.64s: not a time "
                           "in seconds (over 0, at most 86400)",
                           v);
        c->retry_ms = sec * 1000 < 1 ? 1 : (long)(sec * 1000);
    }
    return 0;
}

int gk_s3_conf_discover(gk_s3_conf *c, gk_s3_getenv env, void *ud, gk_err *e)
{
    memset(c, 0, sizeof *c);
    const char *profile = env_get(env, ud, "AWS_PROFILE");
    if (!profile)
        profile = env_get(env, ud, "AWS_DEFAULT_PROFILE");
    int named = profile != NULL;
    if (!profile)
        profile = "default";
    char cred_path[1024], cfg_path[1024], sec[300];
    aws_file(cred_path, sizeof cred_path, env, ud, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
    aws_file(cfg_path, sizeof cfg_path, env, ud, "AWS_CONFIG_FILE", "config");
    char *cred = NULL, *cfg = NULL;
    int rc = read_small(cred_path, &cred, e);
    if (!rc)
        rc = read_small(cfg_path, &cfg, e);
    if (rc)
        goto out;
    const char *csec = config_section(cfg, profile, sec, sizeof sec);
    if (named && !gk_s3_ini_has(cred, profile) && !gk_s3_ini_has(cfg, csec)) {
        rc = gk_errf(e, GK_EUSAGE, "AWS profile '%s' not found in %s or %s", profile, cred_path,
                     cfg_path);
        goto out;
    }
    const char *id = env_get(env, ud, "AWS_ACCESS_KEY_ID"),
               *secret = env_get(env, ud, "AWS_SECRET_ACCESS_KEY");
    if (id && secret) {
        set(c->key_id, sizeof c->key_id, id);
        set(c->secret, sizeof c->secret, secret);
        set(c->token, sizeof c->token, env_get(env, ud, "AWS_SESSION_TOKEN"));
        set(c->source, sizeof c->source, "AWS_ACCESS_KEY_ID in the environment");
    } else if (!creds_from(c, cred, profile, cred_path) && !creds_from(c, cfg, csec, cfg_path)) {
        set(c->source, sizeof c->source, "no credentials: anonymous requests");
    }
    const char *region = env_get(env, ud, "AWS_REGION");
    if (!region)
        region = env_get(env, ud, "AWS_DEFAULT_REGION");
    if (region)
        set(c->region, sizeof c->region, region);
    else if (!gk_s3_ini_get(cfg, csec, "region", c->region, sizeof c->region) || !c->region[0])
        set(c->region, sizeof c->region, "us-east-1");
    const char *ep = env_get(env, ud, "AWS_ENDPOINT_URL_S3");
    if (!ep)
        ep = env_get(env, ud, "AWS_ENDPOINT_URL");
    if (ep)
        set(c->endpoint, sizeof c->endpoint, ep);
    else
        gk_s3_ini_get(cfg, csec, "endpoint_url", c->endpoint, sizeof c->endpoint);
    char style[32];
    if (gk_s3_ini_get(cfg, csec, "addressing_style", style, sizeof style) &&
        strcmp(style, "auto") != 0)
        c->path_style = strcmp(style, "path") == 0;
    else
        c->path_style = c->endpoint[0] != '\0';
    rc = retry_settings(c, env, ud, cfg, csec, cfg_path, e);
out:
    free(cred);
    free(cfg);
    return rc;
}
