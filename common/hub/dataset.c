/* dataset.c: files of a HuggingFace dataset repository, listed through the hub's tree API and
 * downloaded into the HF cache as model files are (see hub.h). */
#include "common/hub/hub.h"

#include <dirent.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/grow.h"
#include "common/hub/hub_int.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"
#define PREFIX "hf://datasets/"
#define MAX_LISTING ((size_t)64 << 20) /* bytes of one page of the tree listing */
#define MAX_PAGES 10000

typedef struct ds_file {
    char *path;
    long long size;
} ds_file;

struct gk_hub_dataset {
    char url[1024];       /* as given, for messages */
    char repo[256];       /* OWNER/NAME */
    char revision[96];    /* @REV: a branch, tag or commit; "main" by default */
    char pattern[1024];   /* PATH, maybe a glob */
    char endpoint[1024];
    const char *token;
    int offline;
    double stall_s;       /* gk_hub_conf's */
    hub_repo r;           /* the cache's repository and the snapshot's commit */
    ds_file *files;
    int n;
    size_t cap;
};

int gk_hub_is_dataset_url(const char *s) { return strncmp(s, PREFIX, strlen(PREFIX)) == 0; }

/* ---------------------------------------------------------------- names */

/* Whether a path from the listing is safe under the snapshot: components neither empty, "."
 * nor "..", no backslash or control character. */
static int safe_path(const char *p)
{
    if (!*p || strlen(p) > 1000)
        return 0;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\')
            return 0;
    for (const char *c = p; c;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        c = slash ? slash + 1 : NULL;
    }
    return 1;
}

/* Whether a file of the repository is one the pattern names: a glob match (a '*' does not
 * cross '/', a leading '.' must be named), or a file under the folder it names. */
static int wanted(const gk_hub_dataset *d, const char *path)
{
    size_t n = strlen(d->pattern);
    if (fnmatch(d->pattern, path, FNM_PATHNAME | FNM_PERIOD) == 0)
        return 1;
    return strncmp(path, d->pattern, n) == 0 && path[n] == '/';
}

/* path percent-encoded as a URL path ('/' kept), into out. */
static void url_escape(const char *path, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p && k + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p)) {
            out[k++] = (char)*p;
        } else {
            out[k++] = '%';
            out[k++] = hex[*p >> 4];
            out[k++] = hex[*p & 15];
        }
    }
    out[k] = '\0';
}

static int add_file(gk_hub_dataset *d, const char *path, long long size, gk_err *e)
{
    if (gk_grow(&d->files, &d->cap, (size_t)d->n + 1, sizeof *d->files, 64))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    if (!(d->files[d->n].path = strdup(path)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    d->files[d->n++].size = size;
    return 0;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const ds_file *)a)->path, ((const ds_file *)b)->path);
}

/* ---------------------------------------------------------------- the hub's listing */

/* One page of GET /api/datasets/REPO/tree/main/FOLDER?recursive=1: a JSON array of
 * {"type": "file"|"directory", "path", "size", "lfs": {"oid", "size"}}. */
static int parse_page(gk_hub_dataset *d, const char *url, const char *body, size_t len, gk_err *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!json_is_array(root)) {
        json_decref(root);
        return gk_errf(e, GK_EFORMAT, "%s: the hub's file listing is not a JSON array", url);
    }
    int rc = 0;
    size_t i;
    json_t *it;
    json_array_foreach(root, i, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        const char *path = json_string_value(json_object_get(it, "path"));
        json_t *size = json_object_get(it, "size");
        if (!type || strcmp(type, "file") != 0)
            continue;
        if (!path || !safe_path(path)) {
            rc = gk_errf(e, GK_EFORMAT, "%s: the hub's listing names an unsafe path", url);
            break;
        }
        if (wanted(d, path) && (rc = add_file(d, path, json_is_integer(size) ?
                                              (long long)json_integer_value(size) : -1, e)))
            break;
    }
    json_decref(root);
    return rc;
}

/* The error for a listing's answer h other than 200 (asked at url, of folder). */
static int listing_refused(const gk_hub_dataset *d, const hub_head *h, const char *url,
                           const char *folder, gk_err *e)
{
    char kind[300];
    snprintf(kind, sizeof kind, "dataset %s", d->repo);
    if (h->status == 404 && !strcmp(h->err_code, "RevisionNotFound"))
        return gk_errf(e, GK_ENOTFOUND, "%s: dataset %s has no revision %s on %s", d->url, d->repo,
                       d->revision, d->endpoint);
    if (hub_is_refusal(h) || (h->status == 404 && !*folder))
        return hub_refused(h, d->url, kind, d->endpoint, d->token && *d->token, e);
    if (h->status == 404)
        return gk_errf(e, GK_ENOTFOUND, "%s: dataset %s has no folder %s", d->url, d->repo, folder);
    return gk_errf(e, GK_EIO, "%s: HTTP %ld%s%s", url, h->status, h->err_msg[0] ? ": " : "",
                   h->err_msg);
}

/* The pages of the listing, from the first to the last (Link: rel="next"; a page on another
 * host than the endpoint's is fetched without the token). */
static int list_remote(gk_hub_dataset *d, gk_err *e)
{
    char folder[1024], esc[3072], url[8192], next[4096];
    /* the deepest folder without a wildcard: the listing starts there */
    size_t cut = strcspn(d->pattern, "*?[");
    snprintf(folder, sizeof folder, "%.*s", (int)cut, d->pattern);
    char *slash = strrchr(folder, '/');
    *(slash ? slash : folder) = '\0';
    url_escape(folder, esc, sizeof esc);
    snprintf(url, sizeof url, "%s/api/datasets/%s/tree/%s%s%s?recursive=1", d->endpoint, d->repo,
             d->revision, *esc ? "/" : "", esc);
    int rc = 0;
    for (int page = 0; rc == 0 && page < MAX_PAGES; page++) {
        char *body = NULL;
        size_t len = 0;
        hub_head h;
        rc = hub_http_get_mem(url, d->endpoint, d->token, MAX_LISTING, &body, &len, &h, next,
                              sizeof next, e);
        if (rc == 0 && h.status != 200)
            rc = listing_refused(d, &h, url, folder, e);
        if (rc == 0)
            rc = parse_page(d, url, body, len, e);
        free(body);
        if (rc || !*next)
            return rc;
        snprintf(url, sizeof url, "%s", next);
    }
    return rc ? rc : gk_errf(e, GK_EFORMAT, "%s: more than %d pages of files", d->url, MAX_PAGES);
}

/* ---------------------------------------------------------------- the cache (offline) */

static int walk(gk_hub_dataset *d, const char *root, const char *rel, int depth, gk_err *e)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *dh = opendir(dir);
    if (!dh)
        return gk_errno(e, dir);
    int rc = 0;
    struct dirent *ent;
    while (rc == 0 && depth < 32 && (ent = readdir(dh))) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
            continue;
        char sub[2048], full[6200];
        struct stat st;
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", ent->d_name);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        if (stat(full, &st) != 0)
            continue; /* a link to a blob not there */
        if (S_ISDIR(st.st_mode))
            rc = walk(d, root, sub, depth + 1, e);
        else if (S_ISREG(st.st_mode) && wanted(d, sub))
            rc = add_file(d, sub, (long long)st.st_size, e);
    }
    closedir(dh);
    return rc;
}

static int list_cached(gk_hub_dataset *d, gk_err *e)
{
    if (hub_is_commit(d->revision))
        memcpy(d->r.rev, d->revision, 41);
    else
        hub_read_ref(d->r.repodir, d->revision, d->r.rev, sizeof d->r.rev);
    if (!d->r.rev[0])
        return gk_errf(e, GK_ENOTFOUND, "%s: not in the HuggingFace cache (%s) and HF_HUB_OFFLINE "
                       "is set", d->url, d->r.repodir);
    char snap[4096];
    snprintf(snap, sizeof snap, "%s/snapshots/%s", d->r.repodir, d->r.rev);
    return walk(d, snap, "", 0, e);
}

/* ---------------------------------------------------------------- API */

static int parse_url(gk_hub_dataset *d, const char *url, gk_err *e)
{
    const char *s = url + strlen(PREFIX), *a = strchr(s, '/'), *b = a ? strchr(a + 1, '/') : NULL;
    if (!b || !b[1])
        return gk_errf(e, GK_EUSAGE, "%s: give the files as hf://datasets/OWNER/NAME/PATH (PATH "
                       "a file, a folder or a glob such as 'data/*.parquet')", url);
    snprintf(d->repo, sizeof d->repo, "%.*s", (int)(b - s), s);
    char *at = strchr(d->repo, '@');
    snprintf(d->revision, sizeof d->revision, "%s", at ? at + 1 : "main");
    if (at)
        *at = '\0';
    if ((at && strlen(at + 1) >= sizeof d->revision) ||
        !hub_valid_name(d->revision, strlen(d->revision)))
        return gk_errf(e, GK_EUSAGE, "%s: '%s' is not a revision (a branch, tag or commit of "
                       "[A-Za-z0-9._-])", url, d->revision);
    snprintf(d->pattern, sizeof d->pattern, "%s", b + 1);
    size_t n = strlen(d->pattern);
    while (n && d->pattern[n - 1] == '/')
        d->pattern[--n] = '\0';
    if (strlen(b + 1) >= sizeof d->pattern || (size_t)(b - s) >= sizeof d->repo ||
        !gk_hub_valid_repo(d->repo) || !strchr(d->repo, '/'))
        return gk_errf(e, GK_EUSAGE, "%s: '%s' is not a dataset id (OWNER/NAME)", url, d->repo);
    return 0;
}

int gk_hub_dataset_open(gk_hub_dataset **out, const char *url, const gk_hub_conf *c, gk_err *e)
{
    gk_hub_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    snprintf(d->url, sizeof d->url, "%s", url);
    int rc = parse_url(d, url, e);
    snprintf(d->endpoint, sizeof d->endpoint, "%s",
             c->endpoint && *c->endpoint ? c->endpoint : DEFAULT_ENDPOINT);
    for (size_t n = strlen(d->endpoint); n > 0 && d->endpoint[n - 1] == '/'; n--)
        d->endpoint[n - 1] = '\0';
    d->token = c->token;
    d->offline = c->offline;
    d->stall_s = c->stall_s;
    d->r = (hub_repo){.repo = d->repo, .endpoint = d->endpoint, .token = c->token,
                      .url_prefix = "datasets/", .revision = d->revision, .listed_size = -1};
    int w = snprintf(d->r.repodir, sizeof d->r.repodir, "%s/datasets--%s", c->cache, d->repo);
    if (rc == 0 && (w < 0 || (size_t)w >= sizeof d->r.repodir))
        rc = gk_errf(e, GK_EUSAGE, "HuggingFace cache path too long");
    char *slash = strchr(d->r.repodir + strlen(c->cache) + 1, '/'); /* OWNER/NAME -> OWNER--NAME */
    if (rc == 0 && slash) {
        memmove(slash + 2, slash + 1, strlen(slash + 1) + 1);
        slash[0] = slash[1] = '-';
    }
    if (rc == 0)
        rc = d->offline ? list_cached(d, e) : list_remote(d, e);
    if (rc == 0 && d->n == 0)
        rc = gk_errf(e, GK_ENOTFOUND, "%s: no file of dataset %s matches %s%s", url, d->repo,
                     d->pattern,
                     d->offline ? " in the HuggingFace cache (HF_HUB_OFFLINE is set)" : "");
    if (rc) {
        gk_hub_dataset_close(d);
        return rc;
    }
    qsort(d->files, (size_t)d->n, sizeof *d->files, by_path);
    *out = d;
    return 0;
}

int gk_hub_dataset_files(const gk_hub_dataset *d) { return d->n; }

const char *gk_hub_dataset_file(const gk_hub_dataset *d, int i) { return d->files[i].path; }

long long gk_hub_dataset_size(const gk_hub_dataset *d, int i) { return d->files[i].size; }

int gk_hub_dataset_fetch(gk_hub_dataset *d, int i, char *path, size_t cap, int background,
                         atomic_int *cancel, gk_err *e)
{
    const char *file = d->files[i].path;
    int rc = 0;
    if (!d->offline) {
        char esc[3072];
        url_escape(file, esc, sizeof esc);
        d->r.url_file = esc;
        d->r.ctl = (hub_get_ctl){background, cancel, d->stall_s};
        d->r.listed_size = d->files[i].size;
        rc = hub_fetch_file(&d->r, file, 1, e);
        d->r.url_file = NULL;
        d->r.listed_size = -1;
        if (rc > 0 && !hub_is_commit(d->revision))
            rc = hub_write_ref(d->r.repodir, d->revision, d->r.rev, e);
    }
    if (rc < 0)
        return rc;
    int n = snprintf(path, cap, "%s/snapshots/%s/%s", d->r.repodir, d->r.rev, file);
    if (n < 0 || (size_t)n >= cap)
        return gk_errf(e, GK_EUSAGE, "%s: cache path too long", d->r.repodir);
    return 0;
}

void gk_hub_dataset_close(gk_hub_dataset *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n; i++)
        free(d->files[i].path);
    free(d->files);
    free(d);
}
