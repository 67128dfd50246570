/* hub.c: the HuggingFace cache layout and filling it from the hub (see hub.h). */
#include "common/hub/hub.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/hub/hub_int.h"
#include "common/log.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"

/* ---------------------------------------------------------------- paths */

int gk_hub_cache_dir(char *out, size_t cap, const char *hub, const char *home, const char *user,
                     gk_err *e)
{
    int n;
    if (hub && *hub)
        n = snprintf(out, cap, "%s", hub);
    else if (home && *home)
        n = snprintf(out, cap, "%s/hub", home);
    else
        n = snprintf(out, cap, "%s/.cache/huggingface/hub", user && *user ? user : ".");
    if (n < 0 || (size_t)n >= cap)
        return gk_errf(e, GK_EUSAGE, "HuggingFace cache path too long");
    return 0;
}

int hub_valid_name(const char *s, size_t n)
{
    if (n == 0 || n > 96)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return 0;
        if (s[i] == '.' && (i == 0 || (i + 1 < n && s[i + 1] == '.')))
            return 0; /* no ".", "..", hidden names */
    }
    return 1;
}

int hub_is_commit(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == 40 && s[n] == '\0';
}

int gk_hub_valid_repo(const char *repo)
{
    const char *slash = strchr(repo, '/');
    if (!slash)
        return hub_valid_name(repo, strlen(repo));
    return hub_valid_name(repo, (size_t)(slash - repo)) &&
           hub_valid_name(slash + 1, strlen(slash + 1));
}

int hub_mkdirs(char *path, gk_err *e)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(path, 0777);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return gk_errno(e, path);
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return gk_errno(e, path);
    return 0;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The commit refs/REF names, or "" when there is none (or a ref holds no commit id). */
void hub_read_ref(const char *repodir, const char *ref, char *rev, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/refs/%s", repodir, ref);
    rev[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(rev, (int)cap, f))
        rev[strcspn(rev, " \r\n")] = '\0';
    fclose(f);
    if (!hub_is_commit(rev))
        rev[0] = '\0';
}

int hub_write_ref(const char *repodir, const char *ref, const char *rev, gk_err *e)
{
    char dir[4096], path[4200], tmp[4300];
    if (!hub_is_commit(rev)) /* a ref names a commit, never a branch */
        return gk_errf(e, GK_EFORMAT, "%s: refs/%s: '%s' is not a commit id", repodir, ref, rev);
    snprintf(dir, sizeof dir, "%s/refs", repodir);
    int rc = hub_mkdirs(dir, e);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/%s", dir, ref);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return gk_errno(e, tmp);
    int bad = fputs(rev, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        rc = gk_errno(e, path);
        unlink(tmp);
    }
    return rc;
}

/* ---------------------------------------------------------------- sha256 */

int gk_sha256_file(const char *path, char hex[65], gk_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gk_errno(e, path);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 20), md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    int rc = 0;
    if (!ctx || !buf || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        rc = gk_errf(e, GK_ENOMEM, "%s: cannot set up sha256", path);
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, 1 << 20, f)) > 0)
        if (EVP_DigestUpdate(ctx, buf, n) != 1)
            rc = gk_errf(e, GK_EIO, "%s: sha256 failed", path);
    if (rc == 0 && ferror(f))
        rc = gk_errno(e, path);
    if (rc == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
        rc = gk_errf(e, GK_EIO, "%s: sha256 failed", path);
    for (unsigned i = 0; rc == 0 && i < mdlen && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    EVP_MD_CTX_free(ctx);
    free(buf);
    fclose(f);
    return rc;
}

static int is_sha256(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return n == 64;
}

/* ---------------------------------------------------------------- one file */

/* Downloads the blob named by h into blobs/ (unless there) and links it into the snapshot. */
static int fetch_blob(hub_repo *r, const char *file, const char *url, const hub_head *h, gk_err *e)
{
    char blob[4300], part[4400], link[4400], target[600];
    snprintf(blob, sizeof blob, "%s/blobs", r->repodir);
    int rc = hub_mkdirs(blob, e);
    if (rc)
        return rc;
    snprintf(blob, sizeof blob, "%s/blobs/%s", r->repodir, h->etag);
    if (!exists(blob)) {
        snprintf(part, sizeof part, "%s.incomplete", blob);
        if (h->size >= 0)
            gk_info("downloading %s/%s (%.1f MB)", r->repo, file, (double)h->size / 1e6);
        char label[600];
        snprintf(label, sizeof label, "%s/%s", r->repo, file);
        rc = hub_http_get(url, r->endpoint, r->token, part, h->size, label, &r->ctl, e);
        char hex[65];
        if (rc == 0 && is_sha256(h->etag) && (rc = gk_sha256_file(part, hex, e)) == 0 &&
            strcasecmp(hex, h->etag) != 0) {
            unlink(part);
            return gk_errf(e, GK_EFORMAT, "%s/%s: checksum mismatch: sha256 %s, the hub says %s "
                           "(download deleted; try again)", r->repo, file, hex, h->etag);
        }
        if (rc == 0 && rename(part, blob) != 0)
            rc = gk_errno(e, blob);
        if (rc)
            return rc;
    }
    /* a file in folders (data/train/x.parquet) links from as deep: ../../../../blobs/ETAG */
    const char *slash = strrchr(file, '/');
    snprintf(link, sizeof link, "%s/snapshots/%s/%.*s", r->repodir, r->rev,
             slash ? (int)(slash - file) : 0, file);
    if ((rc = hub_mkdirs(link, e)))
        return rc;
    snprintf(link, sizeof link, "%s/snapshots/%s/%s", r->repodir, r->rev, file);
    size_t len = 0;
    for (const char *p = file; (p = strchr(p, '/')) && len + 3 < sizeof target; p++)
        len += (size_t)snprintf(target + len, sizeof target - len, "../");
    snprintf(target + len, sizeof target - len, "../../blobs/%s", h->etag);
    unlink(link);
    if (symlink(target, link) != 0)
        return gk_errno(e, link);
    return 0;
}

int hub_is_refusal(const hub_head *h)
{
    return h->status == 401 || h->status == 403 ||
           (h->status == 404 && (!strcmp(h->err_code, "RepoNotFound") ||
                                 !strcmp(h->err_code, "GatedRepo")));
}

int hub_refused(const hub_head *h, const char *who, const char *kind, const char *endpoint,
                int have_token, gk_err *e)
{
    const char *msg = h->err_msg, *code = h->err_code;
    if (!strcmp(code, "GatedRepo"))
        return gk_errf(e, GK_ENOTFOUND, "%s: %s is gated on %s%s%s%s", who, kind, endpoint,
                       *msg ? ": " : "", msg, have_token ? "" : " (set HF_TOKEN to a token "
                       "of an account with access)");
    if (*msg && strcmp(code, "RepoNotFound") != 0)
        return gk_errf(e, GK_ENOTFOUND, "%s: %s refuses access to the %s (HTTP %ld%s%s): %s%s",
                       who, endpoint, kind, h->status, *code ? ", " : "", code, msg,
                       have_token ? "" : " (no HF_TOKEN is set)");
    if (have_token)
        return gk_errf(e, GK_ENOTFOUND, "%s: %s not found on %s, or HF_TOKEN has no access to "
                       "it", who, kind, endpoint);
    return gk_errf(e, GK_ENOTFOUND, "%s: %s not found on %s (or private or gated: set HF_TOKEN)",
                   who, kind, endpoint);
}

int hub_head_check(const hub_head *h, const char *repo, const char *endpoint, const char *url,
                   const char *file, int required, int have_token, gk_err *e)
{
    if (hub_is_refusal(h))
        return hub_refused(h, repo, "repository", endpoint, have_token, e);
    if (h->status == 404 && !required)
        return 0;
    if (h->status == 404)
        return gk_errf(e, GK_ENOTFOUND, "%s: the hub (%s) has no file %s in this repository",
                       repo, endpoint, file);
    if (h->status >= 400 || h->status < 200)
        return gk_errf(e, GK_EIO, "%s: HTTP %ld", url, h->status);
    if (!h->etag[0] || !hub_valid_name(h->etag, strlen(h->etag)))
        return gk_errf(e, GK_EFORMAT, "%s: no usable ETag in the hub's answer", url);
    if (!hub_is_commit(h->commit))
        return gk_errf(e, GK_EFORMAT, "%s: the answer names no commit (an X-Repo-Commit of 40 "
                       "hex digits): is %s a HuggingFace hub?", url, endpoint);
    return 1;
}

int hub_fetch_file(hub_repo *r, const char *file, int required, gk_err *e)
{
    char url[4096];
    snprintf(url, sizeof url, "%s/%s%s/resolve/%s/%s", r->endpoint,
             r->url_prefix ? r->url_prefix : "", r->repo, r->revision ? r->revision : "main",
             r->url_file ? r->url_file : file);
    hub_head h;
    int rc = hub_http_head(url, r->endpoint, r->token, &h, e);
    if (rc == 0)
        rc = hub_head_check(&h, r->repo, r->endpoint, url, file, required,
                            r->token && *r->token, e);
    if (rc <= 0)
        return rc;
    if (r->listed_size >= 0 && h.size >= 0 && h.size != r->listed_size)
        return gk_errf(e, GK_EFORMAT, "%s/%s: the hub's listing says %lld bytes, its answer for "
                       "the file %lld (did the repository change? try again)", r->repo, file,
                       (long long)r->listed_size, (long long)h.size);
    if (h.size < 0)
        h.size = r->listed_size; /* the bound of the download */
    if (!r->rev[0]) /* the first answer's commit: every file goes into its snapshot */
        snprintf(r->rev, sizeof r->rev, "%s", h.commit);
    rc = fetch_blob(r, file, url, &h, e);
    return rc ? rc : 1;
}

/* ---------------------------------------------------------------- snapshots */

static int snapshot_has(const hub_repo *r, const char *file)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/snapshots/%s/%s", r->repodir, r->rev, file);
    return exists(path);
}

/* The files of need[0..n) that the cached snapshot lacks, as "a, b and c", into out; how many. */
static size_t snapshot_lacks(const hub_repo *r, const char *const *need, size_t n, char *out,
                             size_t cap)
{
    size_t missing = 0, len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        missing += !snapshot_has(r, need[i]);
    for (size_t i = 0, k = 0; i < n && len < cap; i++) {
        if (snapshot_has(r, need[i]))
            continue;
        k++;
        const char *sep = k == 1 ? "" : k == missing ? " and " : ", ";
        int w = snprintf(out + len, cap - len, "%s%s", sep, need[i]);
        len += w > 0 ? (size_t)w : 0;
    }
    return missing;
}

/* A snapshot in the cache that lacks some files is named with them (not "not in the cache"):
 * offline, or when fetching them failed (e holds why). */
static int partial_snapshot(const hub_repo *r, const char *const *need, size_t n, int offline,
                            int rc, gk_err *e)
{
    char lacks[1024], why[sizeof e->msg];
    size_t missing = snapshot_lacks(r, need, n, lacks, sizeof lacks);
    if (missing == 0 || missing == n)
        return rc;
    if (offline)
        return gk_errf(e, GK_ENOTFOUND, "%s: the HuggingFace cache's snapshot %s/snapshots/%s "
                       "lacks %s, and HF_HUB_OFFLINE is set (copy %s there, or unset "
                       "HF_HUB_OFFLINE to download %s)", r->repo, r->repodir, r->rev, lacks,
                       missing == 1 ? "it" : "them", missing == 1 ? "it" : "them");
    snprintf(why, sizeof why, "%s", e->msg);
    return gk_errf(e, rc, "%s; the cached snapshot %s/snapshots/%s lacks %s", why, r->repodir,
                   r->rev, lacks);
}

int gk_hub_snapshot(char *dir, size_t cap, const char *repo, const char *const *need, size_t n_need,
                    const char *const *want, size_t n_want, const gk_hub_conf *c, gk_err *e)
{
    if (!gk_hub_valid_repo(repo))
        return gk_errf(e, GK_EUSAGE, "'%s' is not a HuggingFace repository id (NAME or ORG/NAME)",
                       repo);
    hub_repo r = {.repo = repo, .listed_size = -1, .ctl = {.stall_s = c->stall_s}};
    char mangled[256];
    int rc = 0;
    snprintf(mangled, sizeof mangled, "models--%s", repo);
    for (char *p = strchr(mangled, '/'); p; p = strchr(p, '/')) { /* ORG/NAME -> ORG--NAME */
        memmove(p + 2, p + 1, strlen(p + 1) + 1);
        p[0] = p[1] = '-';
    }
    snprintf(r.repodir, sizeof r.repodir, "%s/%s", c->cache, mangled);
    hub_read_ref(r.repodir, "main", r.rev, sizeof r.rev);
    size_t have = 0;
    for (size_t i = 0; r.rev[0] && i < n_need; i++)
        have += (size_t)snapshot_has(&r, need[i]);
    if (!r.rev[0] || have < n_need) {
        const char *ep = c->endpoint;
        if (c->offline) {
            rc = gk_errf(e, GK_ENOTFOUND, "%s: not in the HuggingFace cache (%s) and "
                         "HF_HUB_OFFLINE is set", repo, r.repodir);
            return r.rev[0] ? partial_snapshot(&r, need, n_need, 1, rc, e) : rc;
        }
        hub_repo cached = r; /* its rev: the snapshot to name if fetching fails */
        char endpoint[1024];
        snprintf(endpoint, sizeof endpoint, "%s", ep && *ep ? ep : DEFAULT_ENDPOINT);
        for (size_t n = strlen(endpoint); n > 0 && endpoint[n - 1] == '/'; n--)
            endpoint[n - 1] = '\0';
        r.endpoint = endpoint;
        r.token = c->token;
        r.rev[0] = '\0'; /* the hub's answer names the current commit */
        for (size_t i = 0; rc >= 0 && i < n_need + n_want; i++) {
            int required = i < n_need;
            const char *file = required ? need[i] : want[i - n_need];
            rc = hub_fetch_file(&r, file, required, e);
        }
        if (rc < 0)
            return cached.rev[0] ? partial_snapshot(&cached, need, n_need, 0, rc, e) : rc;
        if ((rc = hub_write_ref(r.repodir, "main", r.rev, e)))
            return rc;
    }
    int n = snprintf(dir, cap, "%s/snapshots/%s", r.repodir, r.rev);
    if (n < 0 || (size_t)n >= cap)
        return gk_errf(e, GK_EUSAGE, "%s: cache path too long", r.repodir);
    return 0;
}
