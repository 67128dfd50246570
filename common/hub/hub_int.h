/* hub_int.h: the HTTP side of hub.c (hub_http.c): one HEAD, one resumable GET. Not part of the
 * API. Owns nothing past a call; each call makes its own curl handle (thread-safe). */
#ifndef GK_HUB_INT_H
#define GK_HUB_INT_H

#include <stdint.h>

#include "common/err.h"

typedef struct hub_head {
    long status;          /* HTTP status of the last response (after relative redirects) */
    char commit[96];      /* X-Repo-Commit, or "" */
    char etag[160];       /* X-Linked-Etag, else ETag, without W/ and quotes, or "" */
    int64_t size;         /* X-Linked-Size, else Content-Length, or -1 */
} hub_head;

/* HEAD url; follows relative redirects only (renamed repos), as huggingface_hub does.
 * Network failures are GK_EIO naming the endpoint; HTTP errors are left in h->status. */
int hub_http_head(const char *url, const char *endpoint, hub_head *h, gk_err *e);

/* GET url (following redirects) into path, continuing what path already holds with a Range
 * request; retries interrupted transfers. size (-1: unknown) is checked at the end; label names
 * the file in the progress bar and messages. */
int hub_http_get(const char *url, const char *endpoint, const char *path, int64_t size,
                 const char *label, gk_err *e);

#endif
