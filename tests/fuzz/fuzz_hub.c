/* fuzz_hub.c: the hub's reading of an HTTP answer without a network: the header lines of a HEAD
 * answer (hub_head_line: ETag / X-Linked-Etag, X-Linked-Size / Content-Length, X-Repo-Commit,
 * Location; status lines of redirects) as libcurl hands them, the redirect that follows
 * (hub_head_end) and hub.c's check of the answer (hub_head_check), the Link header of the
 * dataset listing's pages (hub_link_next: the next URL ends inside its buffer), plus repo ids
 * (gk_hub_valid_repo). The input is the header block, one line per '\n'; the HTTP status is the
 * number in its last "HTTP/..." line (200 without one). Properties: every field ends inside its
 * buffer; a size is -1 or >= 0; a relative redirect stays on the endpoint's origin (where the
 * token may go); an answer accepted names a blob that cannot leave the cache's blobs/ directory
 * and a commit id (what refs/ may hold); the hub's X-Error-Message is kept as printable ASCII
 * only; a repo id accepted makes a cache directory name without '/' or "..". */
#include <string.h>

#include "common/hub/hub.h"
#include "common/hub/hub_int.h"
#include "tests/fuzz/fuzz.h"

static const char *const endpoints[] = {"https://huggingface.co",
                                        "http://127.0.0.1:8080/mirror/hf"};

/* The status of a status line "HTTP/1.1 302 Found", or -1. */
static long status_of(const char *line, size_t n)
{
    if (n < 5 || strncmp(line, "HTTP/", 5) != 0)
        return -1;
    const char *sp = memchr(line, ' ', n);
    size_t from = sp ? (size_t)(sp - line) + 1 : n;
    long v = 0;
    for (size_t i = from; i < n && i < from + 3 && line[i] >= '0' && line[i] <= '9'; i++)
        v = v * 10 + (line[i] - '0');
    return v;
}

static void check_answer(const uint8_t *data, size_t size, const char *endpoint)
{
    hub_head h;
    hub_head_parse s;
    hub_head_begin(&s, &h);
    long status = 200;
    for (size_t at = 0; at < size;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (data + at)) + 1 : size - at;
        long st = status_of((const char *)data + at, n);
        status = st >= 0 ? st : status;
        hub_head_line(&s, (const char *)data + at, n);
        char link[64];
        memset(link, 0x55, sizeof link);
        link[0] = '\0';
        hub_link_next((const char *)data + at, n, link, sizeof link);
        FZ_ASSERT(memchr(link, 0, sizeof link) && !strchr(link, '>'),
                  "Link's next unterminated or with '>'");
        at += n;
    }
    char next[4096];
    memset(next, 0x55, sizeof next);
    int redirect = hub_head_end(&s, status, endpoint, next, sizeof next);
    FZ_ASSERT(memchr(h.commit, 0, sizeof h.commit) && memchr(h.etag, 0, sizeof h.etag),
              "unterminated field");
    FZ_ASSERT(h.size >= -1 && h.status == status, "size %lld, status %ld", (long long)h.size,
              h.status);
    if (redirect) {
        const char *host_end = strchr(strstr(endpoint, "://") + 3, '/');
        size_t hostlen = host_end ? (size_t)(host_end - endpoint) : strlen(endpoint);
        FZ_ASSERT(memchr(next, 0, sizeof next) && strncmp(next, endpoint, hostlen) == 0 &&
                  next[hostlen] == '/', "redirect to '%.200s' leaves %s", next, endpoint);
    }
    gk_err e = {0};
    for (const char *p = h.err_msg; *p; p++)
        FZ_ASSERT(*p >= 0x20 && *p < 0x7f, "X-Error-Message kept byte %#x", (unsigned char)*p);
    int rc = hub_head_check(&h, "org/model", endpoint, "URL", "model.safetensors", status & 1,
                            (int)(size & 1), &e);
    if (rc == 1)
        FZ_ASSERT(h.etag[0] && h.etag[0] != '.' && !strchr(h.etag, '/') && !strstr(h.etag, "..") &&
                  hub_is_commit(h.commit) && h.status >= 200 && h.status < 400,
                  "accepted ETag '%s', commit '%s' (HTTP %ld)", h.etag, h.commit, h.status);
    else
        FZ_ASSERT(rc == 0 ? status == 404 : e.msg[0] != '\0', "hub_head_check %d: '%s'", rc, e.msg);
    if (redirect)
        FZ_ASSERT(hub_same_origin(next, endpoint), "a relative redirect '%.200s' is not of %s's "
                  "origin", next, endpoint);
}

static void check_repo(const uint8_t *data, size_t size)
{
    char repo[256];
    if (size >= sizeof repo)
        return;
    memcpy(repo, data, size);
    repo[size] = '\0';
    if (!gk_hub_valid_repo(repo))
        return;
    const char *slash = strchr(repo, '/');
    FZ_ASSERT(repo[0] != '.' && !strstr(repo, "..") &&
                  (!slash || (slash[1] != '.' && !strchr(slash + 1, '/'))),
              "repo id '%s' accepted", repo);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++)
        check_answer(data, size, endpoints[i]);
    check_repo(data, size);
    return 0;
}
