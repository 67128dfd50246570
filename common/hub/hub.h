/* hub.h: HuggingFace model and dataset repositories: the local cache layout and downloads into it.
 * Owns nothing past a call (paths go into caller buffers). libcurl is initialised on first use;
 * a call may run on any thread, one download per call. Messages (progress, "downloading ...")
 * go to stderr through log.h / progress.h.
 *
 * The cache, as huggingface_hub lays it out (so Python tools and gptkit share it):
 *   CACHE = $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
 *   CACHE/models--ORG--NAME/refs/main          the commit hash "main" points to (40 hex)
 *   CACHE/models--ORG--NAME/blobs/ETAG         file contents, named by the hub's ETag (sha256 of
 *                                              the content for LFS files, git blob sha1 else)
 *   CACHE/models--ORG--NAME/blobs/ETAG.incomplete   a partial download (resumed by Range)
 *   CACHE/models--ORG--NAME/snapshots/REV/FILE  relative symlink to ../../blobs/ETAG
 * A repo id without an organisation ("gpt2") is models--gpt2.
 *
 * The protocol ($HF_ENDPOINT, default https://huggingface.co; $HF_TOKEN sent as a bearer token):
 *   HEAD ENDPOINT/REPO/resolve/main/FILE without following redirects (relative redirects, i.e.
 *   renamed repos, are followed): X-Repo-Commit gives REV, X-Linked-Etag (else ETag) the blob
 *   name, X-Linked-Size (else Content-Length) the size. Then GET of the same URL following
 *   redirects (to the CDN for LFS files), with "Range: bytes=N-" to continue an .incomplete blob.
 *   An ETag of 64 hex digits is the content's sha256 and is checked. Connecting times out after
 *   5 s, so machines without network fail fast; interrupted or stalled transfers are resumed (4
 *   retries; at most gk_hub_conf.stall_s without data in all). A download stops (and its file is
 *   deleted) once it passes the announced size (HEAD's, or a dataset listing's). At most 5
 *   redirects. The token goes only to the endpoint's own scheme, host and port (never to an LFS
 *   CDN or another host a listing's next page names: that page is fetched without it). An answer
 *   without a commit id is refused; refs/NAME only ever holds a commit id. A refusal (401, 403,
 *   404 RepoNotFound/GatedRepo) is reported with the hub's X-Error-Code and X-Error-Message.
 *   $HF_HUB_OFFLINE=1 forbids the network. */
#ifndef GK_HUB_H
#define GK_HUB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The hub settings, which the tool takes from the environment (common/env.h) and the library
 * reads from here only. */
typedef struct gk_hub_conf {
    const char *endpoint; /* NULL or "": https://huggingface.co (HF_ENDPOINT) */
    const char *token;    /* NULL or "": none (HF_TOKEN) */
    int offline;          /* the cache only (HF_HUB_OFFLINE) */
    const char *cache;    /* the cache directory (gk_hub_cache_dir) */
    double stall_s;       /* <= 0: 120. The most seconds one download may go without data, its
                           * retries together (GPT_HUB_STALL_S); an attempt is given up and
                           * resumed after min(30, stall_s / 2) s without data */
} gk_hub_conf;

/* The cache directory (CACHE above, from the tool's $HF_HUB_CACHE, $HF_HOME and $HOME: each NULL
 * or "" when unset; no HOME: ./.cache/huggingface/hub) into out[0..cap). GK_EUSAGE if it does
 * not fit. */
int gk_hub_cache_dir(char *out, size_t cap, const char *hf_hub_cache, const char *hf_home,
                     const char *home, gk_err *e);

/* Whether repo looks like a hub repo id: NAME or ORG/NAME, each [A-Za-z0-9._-]+, no "..". */
int gk_hub_valid_repo(const char *repo);

/* Makes sure the snapshot of repo's main branch holds every file of need[0..n_need) and, where
 * the hub has them, of want[0..n_want) (a 404 on those is not an error), downloading what is
 * missing; writes the snapshot directory into dir[0..cap). A complete cached snapshot is used
 * without any network access. Errors name the repo and file: GK_ENOTFOUND (no such repo or
 * file; offline and not cached), GK_EIO (network: message says which endpoint could not be
 * reached and why), GK_EFORMAT (checksum mismatch: the blob is deleted). The cache, endpoint,
 * token and offline flag come from c. */
int gk_hub_snapshot(char *dir, size_t cap, const char *repo, const char *const *need, size_t n_need,
                    const char *const *want, size_t n_want, const gk_hub_conf *c, gk_err *e);

/* ---------------------------------------------------------------- datasets (dataset.c)
 * hf://datasets/OWNER/NAME[@REV]/PATH: PATH a file, a folder (every file under it) or a glob
 * (fnmatch: '*' and '?' do not cross '/', a leading '.' must be named); REV a branch, tag or
 * commit (default main). The files are listed by GET
 * ENDPOINT/api/datasets/OWNER/NAME/tree/REV/FOLDER?recursive=1 (FOLDER: PATH's part before its
 * first wildcard, up to a '/'; pages followed by the Link header's rel="next"), sorted by path,
 * and fetched one at a time into CACHE/datasets--OWNER--NAME/ as model files are (HEAD and GET
 * of ENDPOINT/datasets/OWNER/NAME/resolve/REV/FILE, resumed, sha256-checked, a cached blob
 * reused; snapshots/COMMIT/FILE in folders as in the repository; refs/REV names COMMIT unless
 * REV is one). Offline, the files are those of that cached snapshot. The settings come from
 * the tool (gk_hub_conf). */
typedef struct gk_hub_dataset gk_hub_dataset;

/* Whether s starts with "hf://datasets/". */
int gk_hub_is_dataset_url(const char *s);
/* Lists the files url names (at least one, else GK_ENOTFOUND). Errors name url. */
int gk_hub_dataset_open(gk_hub_dataset **out, const char *url, const gk_hub_conf *c, gk_err *e);
int gk_hub_dataset_files(const gk_hub_dataset *d);
const char *gk_hub_dataset_file(const gk_hub_dataset *d, int i); /* its path in the repository */
long long gk_hub_dataset_size(const gk_hub_dataset *d, int i);   /* bytes, -1 unknown */
/* Makes sure file i is in the cache (downloading it unless offline) and writes its path there.
 * background: no progress bar (the caller's thread draws its own); cancel (NULL: none), once
 * set nonzero by another thread, stops the download (GK_EINTR; it resumes next time). One call
 * at a time per dataset (any thread). */
int gk_hub_dataset_fetch(gk_hub_dataset *d, int i, char *path, size_t cap, int background,
                         atomic_int *cancel, gk_err *e);
void gk_hub_dataset_close(gk_hub_dataset *d); /* accepts NULL */

/* sha256 of a file as 64 lowercase hex digits (+ NUL) into hex[65]. */
int gk_sha256_file(const char *path, char hex[65], gk_err *e);

#endif
