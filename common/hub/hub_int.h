/* hub_int.h: the HTTP side of hub.c (hub_http.c): one HEAD, one resumable GET; and the parsing
 * of a HEAD answer and hub.c's checks of it as pure functions apart from the network (so that
 * tests/fuzz/fuzz_hub.c feeds them arbitrary bytes). Not part of the API. Owns nothing past a
 * call; each call makes its own curl handle (thread-safe). */
#ifndef GK_HUB_INT_H
#define GK_HUB_INT_H

#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "common/err.h"

/* How a download runs: quiet draws no progress bar (another thread draws one); cancel, when not
 * NULL and once nonzero, stops it (GK_EINTR; the .incomplete file stays for a later resume);
 * stall_s (<= 0: HUB_STALL_S) bounds the seconds it may go without data, all its attempts
 * together (gk_hub_conf.stall_s). */
typedef struct hub_get_ctl {
    int quiet;
    atomic_int *cancel;
    double stall_s;
} hub_get_ctl;

enum { HUB_STALL_S = 120, HUB_MAX_REDIRECTS = 5 };

typedef struct hub_head {
    long status;          /* HTTP status of the last response (after relative redirects) */
    char commit[96];      /* X-Repo-Commit of the first response that has one, or "" */
    char etag[160];       /* X-Linked-Etag (the first response's that has one), else the last
                           * response's ETag, without W/ and quotes, or "" */
    int64_t size;         /* X-Linked-Size (as X-Linked-Etag), else Content-Length, or -1 */
    char err_code[64];    /* the last response's X-Error-Code (GatedRepo, RepoNotFound, ...) */
    char err_msg[320];    /* and X-Error-Message, printable ASCII only (else '?'), or "" */
} hub_head;

/* The parsing of one HEAD answer: hub_head_begin, then hub_head_line for every header line as
 * libcurl hands it (CRLF included, not NUL-terminated; a status line "HTTP/..." starts a new
 * response and forgets the last one's headers but X-Repo-Commit and X-Linked-*, which the first
 * response that has them gives), then hub_head_end with the HTTP status (after each response:
 * the relative redirects of one HEAD are parsed as one answer). */
typedef struct hub_head_parse {
    hub_head *h;
    char location[2048];
    char linked_etag[160], etag[160];
    int64_t linked_size, length;
} hub_head_parse;
void hub_head_begin(hub_head_parse *s, hub_head *h); /* clears h */
void hub_head_line(hub_head_parse *s, const char *line, size_t n);
/* Fills h's status, etag and size. A relative redirect (3xx, Location "/..."): returns 1 with
 * the URL to ask next (endpoint's scheme and host + Location) in next[0..cap); else 0. */
int hub_head_end(hub_head_parse *s, long status, const char *endpoint, char *next, size_t cap);

/* hub.c's reading of a HEAD answer h for file of repo (asked at url; have_token: HF_TOKEN was
 * sent): 1 when it names a blob to fetch (an ETag that is a safe file name: no '/', no leading
 * '.', no "..") of a commit (40 hex digits), 0 when the file is absent and not required, else a
 * GK_E* error naming repo or url (a refusal as hub_refused says it). */
int hub_head_check(const hub_head *h, const char *repo, const char *endpoint, const char *url,
                   const char *file, int required, int have_token, gk_err *e);
/* The error (GK_ENOTFOUND) for the hub's refusal h (HTTP 401 or 403, or 404 with X-Error-Code
 * RepoNotFound or GatedRepo) of who (a repo id or a URL), kind ("repository", "dataset ORG/NAME")
 * on endpoint: what the hub's X-Error-Code and X-Error-Message say, with "set HF_TOKEN" only
 * when have_token is 0. */
int hub_refused(const hub_head *h, const char *who, const char *kind, const char *endpoint,
                int have_token, gk_err *e);
/* Whether h is a refusal of the whole repository (above) rather than of one file. */
int hub_is_refusal(const hub_head *h);
/* Whether s[0..n) may name a directory entry of the cache (ETag, commit): 1..96 characters of
 * [A-Za-z0-9._-], not starting with '.', no "..". */
int hub_valid_name(const char *s, size_t n);
/* Whether s is a commit id: 40 lowercase hex digits. */
int hub_is_commit(const char *s);
/* Whether url has endpoint's scheme, host and port (case-insensitive host; no default ports
 * assumed): the only URLs HF_TOKEN is sent to. */
int hub_same_origin(const char *url, const char *endpoint);

/* ---------------------------------------------------------------- hub.c, for dataset.c */

/* One repository of the cache being filled. */
typedef struct hub_repo {
    const char *repo, *endpoint, *token; /* token: NULL or "" for none */
    const char *url_prefix;              /* "" or NULL for models, "datasets/" for datasets */
    const char *url_file;                /* the file's name as in URLs (escaped), NULL: as is */
    const char *revision;                /* the branch, tag or commit asked for; NULL: main */
    int64_t listed_size;                 /* the file's size in a listing, -1 unknown (a bound
                                          * as the HEAD's is; they must agree) */
    char repodir[2400];                  /* CACHE/models--ORG--NAME */
    char rev[96];                        /* the commit the snapshot is of; "" until known */
    hub_get_ctl ctl;                     /* how its downloads run */
} hub_repo;

/* HEAD then (unless the blob is cached) a resumable GET of file, checked against a sha256 ETag;
 * linked into snapshots/REV/FILE (REV from the answer when r->rev is ""). 1: fetched, 0: absent
 * on the hub and not required, < 0: error. */
int hub_fetch_file(hub_repo *r, const char *file, int required, gk_err *e);
int hub_mkdirs(char *path, gk_err *e);
/* The commit refs/REF of a cached repository names ("" when absent or not a commit id), and
 * writing it (GK_EFORMAT unless rev is a commit id: a ref never names a branch). */
void hub_read_ref(const char *repodir, const char *ref, char *rev, size_t cap);
int hub_write_ref(const char *repodir, const char *ref, const char *rev, gk_err *e);

/* In every request below, token (NULL or "": none) is sent as "Authorization: Bearer TOKEN"
 * (libcurl's bearer authentication) to URLs of endpoint's origin only (hub_same_origin): never to
 * the host a redirect (an LFS CDN) or a listing's next page names. Redirects: at most
 * HUB_MAX_REDIRECTS, http and https only. */

/* HEAD url; follows relative redirects only (renamed repos), as huggingface_hub does.
 * Network failures are GK_EIO naming the endpoint; HTTP errors are left in h->status. */
int hub_http_head(const char *url, const char *endpoint, const char *token, hub_head *h, gk_err *e);

/* GET url (following redirects) into path, continuing what path already holds with a Range
 * request; retries interrupted and stalled transfers (an attempt with no data for
 * min(30, stall_s / 2) s), up to ctl->stall_s s without data in all. size (-1: unknown) bounds
 * the transfer: past it, the download stops and path is deleted (GK_EFORMAT); label names the
 * file in the progress bar and messages. */
int hub_http_get(const char *url, const char *endpoint, const char *token, const char *path,
                 int64_t size, const char *label, const hub_get_ctl *ctl, gk_err *e);

/* GET url (following redirects) into *body (NUL-terminated, *len bytes; the caller frees it),
 * at most max bytes; the HTTP status and X-Error-* headers of the last response in *h (an HTTP
 * error is no error here), its Link header's rel="next" URL in next[0..cap) ("" if none: the
 * hub's pagination). */
int hub_http_get_mem(const char *url, const char *endpoint, const char *token, size_t max,
                     char **body, size_t *len, hub_head *h, char *next, size_t cap, gk_err *e);
/* The rel="next" URL of one header line (libcurl's, CRLF included) into next, if it is a Link
 * header that has one; else next is left as it is. */
void hub_link_next(const char *line, size_t n, char *next, size_t cap);

#endif
