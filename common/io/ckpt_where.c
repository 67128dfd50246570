/* ckpt_where.c: what a user names as a checkpoint -> the file or object to open (see
 * ckpt_where.h). Owns a client for the few requests it makes. */
#include "common/io/ckpt_where.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"

/* Whether name is a checkpoint's name as gpt-train writes it in PREFIX/latest: one line, no '/'. */
static int pointer_name(const char *name)
{
    size_t n = strlen(name), ext = strlen(".safetensors");
    return n > ext && strcmp(name + n - ext, ".safetensors") == 0 && !strchr(name, '/') &&
           strcmp(name, "latest.safetensors");
}

/* The checkpoint dir/latest points at into key (dir "" or "P/"): 1 found, 0 no such pointer
 * (or an object "latest" that is no pointer, or one that cannot be read: opening the path
 * as given then says why, with the answer's whole message), else an error. */
static int follow(gk_s3 *s, const char *bucket, const char *dir, char *key, size_t cap, gk_err *e)
{
    char pkey[1200];
    gk_s3_text m = {.n = 0};
    snprintf(pkey, sizeof pkey, "%slatest", dir);
    gk_err ignore = {0};
    if (gk_s3_get(s, bucket, pkey, gk_s3_text_sink, &m, &ignore))
        return 0;
    m.buf[strcspn(m.buf, "\r\n")] = '\0';
    if (!pointer_name(m.buf))
        return gk_errf(e, GK_EFORMAT,
                       "s3://%s/%s: not the name of a checkpoint (gpt-train's pointer to the "
                       "latest one holds ckpt_STEP.safetensors)",
                       bucket, pkey);
    if ((size_t)snprintf(key, cap, "%s%s", dir, m.buf) >= cap)
        return gk_errf(e, GK_EUSAGE, "s3://%s/%s: the key is too long", bucket, pkey);
    return 1;
}

/* Whether the object exists: 1, 0, or -1 when that cannot be told (a HEAD's error has no
 * message: opening the path as given says why). */
static int object_exists(gk_s3 *s, const char *bucket, const char *key)
{
    gk_s3_stat st;
    gk_err ignore = {0};
    int rc = key[0] ? gk_s3_head(s, bucket, key, &st, &ignore) : GK_ENOTFOUND;
    return rc == 0 ? 1 : rc == GK_ENOTFOUND ? 0 : -1;
}

static int where_s3(gk_s3 *s, const char *bucket, const char *key, char *found, size_t cap,
                    gk_err *e)
{
    char dir[1100];
    size_t n = strlen(key);
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    snprintf(dir, sizeof dir, "%.*s", (int)(base - key), key); /* "" or "P/" */
    if (strcmp(base, "latest") == 0) /* the pointer itself */
        return follow(s, bucket, dir, found, cap, e);
    if (object_exists(s, bucket, key) != 0)
        return 0;
    if (strcmp(base, "latest.safetensors") == 0)
        return follow(s, bucket, dir, found, cap, e);
    snprintf(dir, sizeof dir, "%s%s", key, n && key[n - 1] != '/' ? "/" : ""); /* an out_dir */
    return follow(s, bucket, dir, found, cap, e);
}

int gk_ckpt_where_conf(const char *path, const gk_s3_conf *conf, char *out, size_t cap, gk_err *e)
{
    struct stat st;
    if (!gk_s3_is_url(path)) {
        size_t n = strlen(path);
        int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        if ((size_t)snprintf(out, cap, "%s%s%s", path,
                             !dir                      ? ""
                             : n && path[n - 1] == '/' ? ""
                                                       : "/",
                             dir ? "latest.safetensors" : "") >= cap)
            return gk_errf(e, GK_EUSAGE, "%s: path too long", path);
        return 0;
    }
    char bucket[256], key[1100], found[1200];
    gk_s3 *s = NULL;
    int rc = gk_s3_parse_url(path, bucket, sizeof bucket, key, sizeof key, e);
    if (!rc)
        rc = gk_s3_open(&s, conf, e);
    if (!rc)
        rc = where_s3(s, bucket, key, found, sizeof found, e);
    gk_s3_close(s);
    if (rc < 0)
        return rc;
    int m = rc ? snprintf(out, cap, "s3://%s/%s", bucket, found) : snprintf(out, cap, "%s", path);
    if (m < 0 || (size_t)m >= cap)
        return gk_errf(e, GK_EUSAGE, "%s: the URL is too long", path);
    if (rc)
        gk_verbose("%s: the latest checkpoint, %s", path, out);
    return 0;
}

int gk_ckpt_where(const char *path, gk_s3_getenv env, void *ud, char *out, size_t cap, gk_err *e)
{
    gk_s3_conf conf;
    int rc = gk_s3_is_url(path) ? gk_s3_conf_discover(&conf, env, ud, e) : 0;
    return rc ? rc : gk_ckpt_where_conf(path, gk_s3_is_url(path) ? &conf : NULL, out, cap, e);
}
