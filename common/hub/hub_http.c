/* hub_http.c: HEAD and resumable GET over libcurl for hub.c (see hub_int.h, hub.h).
 * Owns libcurl's process-wide initialisation (pthread_once); everything else is per call. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/hub/hub_int.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/progress.h"

#ifndef GPTKIT_VERSION
#define GPTKIT_VERSION "dev"
#endif

enum { CONNECT_TIMEOUT_S = 5, STALL_TIMEOUT_S = 30, MAX_ATTEMPTS = 5 };

/* ---------------------------------------------------------------- handles */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc; /* written once under curl_once, read after it */

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* libcurl's global set-up, done once for the process whichever thread asks first. */
static int curl_ready(gk_err *e)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return gk_errf(e, GK_EIO, "libcurl: initialisation failed: %s", curl_easy_strerror(curl_init_rc));
    return 0;
}

/* A handle with the settings every request shares (token: sent as a bearer token unless NULL
 * or empty); *hdrs must be freed by the caller. */
static CURL *new_handle(const char *url, const char *token, char *errbuf, struct curl_slist **hdrs)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    *hdrs = NULL;
    if (token && *token) {
        char auth[512];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        *hdrs = curl_slist_append(NULL, auth);
    }
    errbuf[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gptkit/" GPTKIT_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)STALL_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    return c;
}

static int net_error(gk_err *e, const char *endpoint, CURLcode rc, const char *errbuf)
{
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT ||
        rc == CURLE_COULDNT_RESOLVE_PROXY || (rc == CURLE_OPERATION_TIMEDOUT && strstr(why, "onnect")))
        return gk_errf(e, GK_EIO, "cannot reach %s: %s (no network? set HF_ENDPOINT to a mirror, "
                       "or copy the model into the HuggingFace cache)", endpoint, why);
    return gk_errf(e, GK_EIO, "%s: %s", endpoint, why);
}

/* ---------------------------------------------------------------- HEAD */

static void trim_copy(char *dst, size_t cap, const char *v, size_t n)
{
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
    if (n >= 2 && v[0] == 'W' && v[1] == '/') v += 2, n -= 2;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
    if (n >= cap) n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

void hub_head_begin(hub_head_parse *s, hub_head *h)
{
    memset(h, 0, sizeof *h);
    memset(s, 0, sizeof *s);
    s->h = h;
    s->linked_size = s->length = -1;
}

void hub_head_line(hub_head_parse *s, const char *buf, size_t n)
{
    if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) { /* a new response: forget the last one's */
        s->location[0] = s->linked_etag[0] = s->etag[0] = s->h->commit[0] = '\0';
        s->linked_size = s->length = -1;
        return;
    }
    const char *colon = memchr(buf, ':', n);
    if (!colon)
        return;
    size_t klen = (size_t)(colon - buf), vlen = n - klen - 1;
    const char *v = colon + 1;
    char num[32];
#define IS(k) (klen == sizeof(k) - 1 && strncasecmp(buf, k, klen) == 0)
    if (IS("location"))
        trim_copy(s->location, sizeof s->location, v, vlen);
    else if (IS("x-repo-commit"))
        trim_copy(s->h->commit, sizeof s->h->commit, v, vlen);
    else if (IS("x-linked-etag"))
        trim_copy(s->linked_etag, sizeof s->linked_etag, v, vlen);
    else if (IS("etag"))
        trim_copy(s->etag, sizeof s->etag, v, vlen);
    else if (IS("x-linked-size") || IS("content-length")) {
        trim_copy(num, sizeof num, v, vlen);
        char *end;
        long long x = strtoll(num, &end, 10);
        if (*num && !*end && x >= 0)
            *(IS("content-length") ? &s->length : &s->linked_size) = x;
    }
#undef IS
}

int hub_head_end(hub_head_parse *s, long status, const char *endpoint, char *next, size_t cap)
{
    hub_head *h = s->h;
    h->status = status;
    snprintf(h->etag, sizeof h->etag, "%s", s->linked_etag[0] ? s->linked_etag : s->etag);
    h->size = s->linked_size >= 0 ? s->linked_size : s->length;
    if (!(status >= 300 && status < 400 && s->location[0] == '/'))
        return 0;
    /* relative redirect: the repo was renamed; ask again at the new place */
    const char *p = strstr(endpoint, "://");
    const char *host_end = p ? strchr(p + 3, '/') : NULL;
    int hostlen = host_end ? (int)(host_end - endpoint) : (int)strlen(endpoint);
    snprintf(next, cap, "%.*s%s", hostlen, endpoint, s->location);
    return 1;
}

static size_t on_head_header(char *buf, size_t size, size_t nitems, void *ud)
{
    hub_head_line(ud, buf, size * nitems);
    return size * nitems;
}

int hub_http_head(const char *url, const char *endpoint, const char *token, hub_head *h, gk_err *e)
{
    int rc = curl_ready(e);
    if (rc)
        return rc;
    char cur[4096], errbuf[CURL_ERROR_SIZE];
    snprintf(cur, sizeof cur, "%s", url);
    for (int hops = 0; hops < 5; hops++) {
        struct curl_slist *hdrs;
        CURL *c = new_handle(cur, token, errbuf, &hdrs);
        if (!c)
            return gk_errf(e, GK_ENOMEM, "libcurl: cannot create a handle");
        hub_head_parse s;
        hub_head_begin(&s, h);
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
        CURLcode cr = curl_easy_perform(c);
        long status = 0;
        if (cr == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        if (cr != CURLE_OK)
            return net_error(e, endpoint, cr, errbuf);
        if (!hub_head_end(&s, status, endpoint, cur, sizeof cur))
            return 0;
    }
    return gk_errf(e, GK_EIO, "%s: too many redirects", url);
}

/* ---------------------------------------------------------------- GET */

typedef struct get_state {
    CURL *c;
    FILE *fp;
    int64_t start;        /* bytes in the file when this attempt began */
    int64_t total;        /* expected size, -1 unknown */
    int checked;          /* the response status was looked at */
    int failed_io;
    atomic_int *cancel;
    gk_progress bar;
} get_state;

static size_t on_body(char *buf, size_t size, size_t nitems, void *ud)
{
    get_state *s = ud;
    size_t n = size * nitems;
    if (!s->checked) {
        long status = 0;
        curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200 && s->start > 0) { /* the server ignored the Range: start over */
            if (fflush(s->fp) != 0 || ftruncate(fileno(s->fp), 0) != 0) {
                s->failed_io = 1;
                return 0;
            }
            rewind(s->fp);
            s->start = 0;
        }
        s->checked = 1;
    }
    if (fwrite(buf, 1, n, s->fp) != n) {
        s->failed_io = 1;
        return 0;
    }
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal, (void)ulnow;
    get_state *s = ud;
    gk_progress_update(&s->bar, s->start + (int64_t)dlnow, "");
    return s->cancel && atomic_load(s->cancel); /* nonzero: libcurl stops the transfer */
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* One attempt; *retry set when the transfer broke off and may be continued. */
static int get_once(const char *url, const char *endpoint, const char *token, const char *path,
                    int64_t size, const char *label, const hub_get_ctl *ctl, int *retry, gk_err *e)
{
    *retry = 0;
    get_state s = {.start = file_size(path), .total = size, .cancel = ctl ? ctl->cancel : NULL};
    if (size >= 0 && s.start > size) {
        if (truncate(path, 0) != 0)
            return gk_errno(e, path);
        s.start = 0;
    }
    if (size >= 0 && s.start == size)
        return 0;
    s.fp = fopen(path, "ab");
    if (!s.fp)
        return gk_errno(e, path);
    char errbuf[CURL_ERROR_SIZE], range[48];
    struct curl_slist *hdrs;
    s.c = new_handle(url, token, errbuf, &hdrs);
    if (!s.c) {
        fclose(s.fp);
        return gk_errf(e, GK_ENOMEM, "libcurl: cannot create a handle");
    }
    if (s.start > 0) {
        snprintf(range, sizeof range, "%lld-", (long long)s.start);
        curl_easy_setopt(s.c, CURLOPT_RANGE, range);
        gk_info("%s: resuming at byte %lld", label, (long long)s.start);
    }
    curl_easy_setopt(s.c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(s.c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(s.c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(s.c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(s.c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(s.c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(s.c, CURLOPT_XFERINFODATA, &s);
    gk_progress_start(&s.bar, label, size > 0 ? size : 0);
    if (ctl && ctl->quiet)
        s.bar.active = 0;
    CURLcode cr = curl_easy_perform(s.c);
    gk_progress_end(&s.bar);
    long status = 0;
    curl_easy_getinfo(s.c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(s.c);
    curl_slist_free_all(hdrs);
    int closed = fclose(s.fp);
    if (s.failed_io || closed != 0)
        return gk_errno(e, path);
    if (cr == CURLE_ABORTED_BY_CALLBACK)
        return gk_errf(e, GK_EINTR, "%s: download stopped", label);
    if (cr == CURLE_HTTP_RETURNED_ERROR && status == 416) { /* stale partial file: start over */
        if (truncate(path, 0) != 0)
            return gk_errno(e, path);
        *retry = 1;
        return gk_errf(e, GK_EIO, "%s: range not satisfiable", url);
    }
    if (cr == CURLE_HTTP_RETURNED_ERROR)
        return gk_errf(e, status == 404 ? GK_ENOTFOUND : GK_EIO, "%s: HTTP %ld", url, status);
    if (cr == CURLE_PARTIAL_FILE || cr == CURLE_RECV_ERROR || cr == CURLE_GOT_NOTHING ||
        cr == CURLE_SEND_ERROR || (cr == CURLE_OPERATION_TIMEDOUT && file_size(path) > s.start)) {
        *retry = 1;
        gk_info("%s: connection lost after %lld bytes (%s)", label, (long long)file_size(path),
                errbuf[0] ? errbuf : curl_easy_strerror(cr));
    }
    if (cr != CURLE_OK)
        return net_error(e, endpoint, cr, errbuf);
    return 0;
}

int hub_http_get(const char *url, const char *endpoint, const char *token, const char *path,
                 int64_t size, const char *label, const hub_get_ctl *ctl, gk_err *e)
{
    int rc = curl_ready(e), retry = 1;
    for (int attempt = 0; rc == 0 && retry && attempt < MAX_ATTEMPTS; attempt++) {
        rc = get_once(url, endpoint, token, path, size, label, ctl, &retry, e);
        if (rc == 0)
            retry = 0;
        else if (retry && attempt + 1 < MAX_ATTEMPTS)
            rc = 0;
    }
    if (rc)
        return rc;
    int64_t got = file_size(path);
    if (size >= 0 && got != size)
        return gk_errf(e, GK_EIO, "%s: got %lld bytes, the hub announced %lld", url,
                       (long long)got, (long long)size);
    return 0;
}

/* ---------------------------------------------------------------- GET into memory */

typedef struct mem_state {
    char *buf;
    size_t len, cap, max;
    int too_big;
    char *next;     /* the Link header's rel="next" URL */
    size_t next_cap;
} mem_state;

static size_t on_mem_body(char *buf, size_t size, size_t nitems, void *ud)
{
    mem_state *m = ud;
    size_t n = size * nitems;
    if (m->len + n + 1 > m->max) {
        m->too_big = 1;
        return 0;
    }
    if (gk_grow(&m->buf, &m->cap, m->len + n + 1, 1, 1 << 16))
        return 0;
    memcpy(m->buf + m->len, buf, n);
    m->len += n;
    m->buf[m->len] = '\0';
    return n;
}

void hub_link_next(const char *line, size_t n, char *next, size_t cap)
{
    if (n < 5 || strncasecmp(line, "link:", 5) != 0)
        return;
    const char *end = line + n;
    for (const char *p = line + 5; p < end;) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        const char *gt = lt ? memchr(lt, '>', (size_t)(end - lt)) : NULL;
        if (!gt)
            return;
        const char *comma = memchr(gt, ',', (size_t)(end - gt));
        const char *stop = comma ? comma : end;
        size_t plen = (size_t)(stop - gt);
        int is_next = 0;
        for (size_t i = 0; i + 10 <= plen; i++)
            if (strncasecmp(gt + i, "rel=\"next\"", 10) == 0)
                is_next = 1;
        size_t ulen = (size_t)(gt - lt - 1);
        if (is_next && ulen < cap) {
            memcpy(next, lt + 1, ulen);
            next[ulen] = '\0';
            return;
        }
        p = stop + (comma != NULL);
    }
}

static size_t on_mem_header(char *buf, size_t size, size_t nitems, void *ud)
{
    mem_state *m = ud;
    hub_link_next(buf, size * nitems, m->next, m->next_cap);
    return size * nitems;
}

int hub_http_get_mem(const char *url, const char *endpoint, const char *token, size_t max,
                     char **body, size_t *len, long *status, char *next, size_t next_cap, gk_err *e)
{
    int rc = curl_ready(e);
    if (rc)
        return rc;
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdrs;
    CURL *c = new_handle(url, token, errbuf, &hdrs);
    if (!c)
        return gk_errf(e, GK_ENOMEM, "libcurl: cannot create a handle");
    mem_state m = {.max = max, .next = next, .next_cap = next_cap};
    next[0] = '\0';
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_mem_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_mem_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &m);
    CURLcode cr = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    if (m.too_big)
        rc = gk_errf(e, GK_EFORMAT, "%s: an answer of more than %zu bytes", url, max);
    else if (cr != CURLE_OK)
        rc = net_error(e, endpoint, cr, errbuf);
    if (rc) {
        free(m.buf);
        return rc;
    }
    if (!m.buf && !(m.buf = calloc(1, 1)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    *body = m.buf;
    *len = m.len;
    return 0;
}
