/* hub_http.c: HEAD and resumable GET over libcurl for hub.c (see hub_int.h, hub.h): where the
 * token may go (the endpoint's origin), the redirect limit, a download's bound (the announced
 * size) and its stall clock (no data for so long, all attempts together).
 * Owns libcurl's process-wide initialisation (pthread_once); everything else is per call. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
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
        return gk_errf(e, GK_EIO, "libcurl: initialisation failed: %s",
                       curl_easy_strerror(curl_init_rc));
    return 0;
}

/* A handle with the settings every request shares: token (unless NULL or empty) as bearer
 * authentication when url is of endpoint's origin (libcurl drops it on a redirect to another
 * host, port or scheme), at most HUB_MAX_REDIRECTS redirects, http and https only. */
static CURL *new_handle(const char *url, const char *endpoint, const char *token, char *errbuf)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    if (token && *token && hub_same_origin(url, endpoint)) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token);
    }
    errbuf[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gptkit/" GPTKIT_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)STALL_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)HUB_MAX_REDIRECTS);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    return c;
}

int hub_same_origin(const char *url, const char *endpoint)
{
    const char *u = strstr(url, "://"), *p = strstr(endpoint, "://");
    if (!u || !p || u - url != p - endpoint || strncasecmp(url, endpoint, (size_t)(u - url)) != 0)
        return 0;
    size_t un = strcspn(u + 3, "/?#"), pn = strcspn(p + 3, "/?#");
    return un == pn && un > 0 && strncasecmp(u + 3, p + 3, un) == 0 && !memchr(u + 3, '@', un);
}

static int net_error(gk_err *e, const char *endpoint, CURLcode rc, const char *errbuf)
{
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT ||
        rc == CURLE_COULDNT_RESOLVE_PROXY ||
        (rc == CURLE_OPERATION_TIMEDOUT && strstr(why, "onnect")))
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

/* A hub's message as printable ASCII (a hostile one cannot write escape sequences). */
static void printable_copy(char *dst, size_t cap, const char *v, size_t n)
{
    trim_copy(dst, cap, v, n);
    for (char *p = dst; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = '?';
}

void hub_head_line(hub_head_parse *s, const char *buf, size_t n)
{
    hub_head *h = s->h;
    if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        /* a new response: forget the last one's own headers; the commit and the X-Linked-*
         * headers of the first that has them stay (a relative redirect to an LFS file) */
        s->location[0] = s->etag[0] = h->err_code[0] = h->err_msg[0] = '\0';
        s->length = -1;
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
    else if (IS("x-repo-commit") && !h->commit[0])
        trim_copy(h->commit, sizeof h->commit, v, vlen);
    else if (IS("x-linked-etag") && !s->linked_etag[0])
        trim_copy(s->linked_etag, sizeof s->linked_etag, v, vlen);
    else if (IS("etag"))
        trim_copy(s->etag, sizeof s->etag, v, vlen);
    else if (IS("x-error-code"))
        printable_copy(h->err_code, sizeof h->err_code, v, vlen);
    else if (IS("x-error-message"))
        printable_copy(h->err_msg, sizeof h->err_msg, v, vlen);
    else if ((IS("x-linked-size") && s->linked_size < 0) || IS("content-length")) {
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
    hub_head_parse s; /* across the hops: the first answer's commit stays */
    hub_head_begin(&s, h);
    for (int hops = 0; hops <= HUB_MAX_REDIRECTS; hops++) {
        CURL *c = new_handle(cur, endpoint, token, errbuf);
        if (!c)
            return gk_errf(e, GK_ENOMEM, "libcurl: cannot create a handle");
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &s);
        CURLcode cr = curl_easy_perform(c);
        long status = 0;
        if (cr == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        if (cr != CURLE_OK)
            return net_error(e, endpoint, cr, errbuf);
        if (!hub_head_end(&s, status, endpoint, cur, sizeof cur))
            return 0;
    }
    return gk_errf(e, GK_EIO, "%s: more than %d redirects (a redirect loop?)", url,
                   (int)HUB_MAX_REDIRECTS);
}

/* ---------------------------------------------------------------- GET */

/* The seconds one download has gone without data, over its attempts. */
typedef struct stall_clock {
    double budget;      /* allowed in all (hub_get_ctl.stall_s) */
    double per_attempt; /* an attempt without data this long ends, and is retried */
    double spent;       /* so far: pauses of STALL_TICK_S or more */
    int stalls;         /* attempts ended so */
} stall_clock;

enum { STALL_TICK_S = 1, POLL_MS = 100 };

typedef struct get_state {
    CURL *c;
    FILE *fp;
    int64_t start;        /* bytes in the file when this attempt began */
    int64_t total;        /* expected size, -1 unknown */
    int64_t got;          /* bytes written by this attempt */
    int64_t over;         /* past total: the answer's size (over_announced) or bytes so far */
    int over_announced;
    int checked;          /* the response status was looked at */
    int failed_io;
    int stalled;          /* 1: no data for per_attempt s; 2: the budget is spent */
    atomic_int *cancel;
    stall_clock *clock;
    double last_data;     /* when data last came (or the attempt began) */
    curl_off_t last_now;
    gk_progress bar;
} get_state;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The first bytes of an answer: a 200 to a Range request starts the file over; an answer
 * that announces more than the expected size is refused before anything is written. */
static int body_begins(get_state *s)
{
    long status = 0;
    curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200 && s->start > 0) { /* the server ignored the Range: start over */
        if (fflush(s->fp) != 0 || ftruncate(fileno(s->fp), 0) != 0) {
            s->failed_io = 1;
            return -1;
        }
        rewind(s->fp);
        s->start = 0;
    }
    curl_off_t len = -1;
    curl_easy_getinfo(s->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    if (s->total >= 0 && len >= 0 && s->start + (int64_t)len > s->total) {
        s->over = s->start + (int64_t)len;
        s->over_announced = 1;
        return -1;
    }
    s->checked = 1;
    return 0;
}

static size_t on_body(char *buf, size_t size, size_t nitems, void *ud)
{
    get_state *s = ud;
    size_t n = size * nitems;
    if (!s->checked && body_begins(s) != 0)
        return 0;
    if (s->total >= 0 && s->start + s->got + (int64_t)n > s->total) {
        s->over = s->start + s->got + (int64_t)n; /* past the announced size: stop */
        return 0;
    }
    if (fwrite(buf, 1, n, s->fp) != n) {
        s->failed_io = 1;
        return 0;
    }
    s->got += (int64_t)n;
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal, (void)ulnow;
    get_state *s = ud;
    stall_clock *k = s->clock;
    double now = now_s(), gap = now - s->last_data;
    if (dlnow > s->last_now) {
        if (gap >= STALL_TICK_S)
            k->spent += gap;
        s->last_data = now;
        s->last_now = dlnow;
    } else if (k->spent + gap >= k->budget || gap >= k->per_attempt) {
        s->stalled = k->spent + gap >= k->budget ? 2 : 1;
        k->spent += gap;
        k->stalls += s->stalled == 1;
        return 1; /* libcurl stops the transfer */
    }
    gk_progress_update(&s->bar, s->start + (int64_t)dlnow, "");
    return s->cancel && atomic_load(s->cancel);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* The outcome of one attempt's transfer cr (retry: it broke off and may be continued). */
static int get_outcome(const get_state *s, CURLcode cr, long status, const char *url,
                       const char *endpoint, const char *path, const char *label,
                       const char *errbuf, int *retry, gk_err *e)
{
    if (s->over) {
        unlink(path);
        return gk_errf(e, GK_EFORMAT, "%s: the hub sends more than the %lld bytes it announced "
                       "(%s %lld); the download is stopped and deleted", label,
                       (long long)s->total, s->over_announced ? "an answer of" : "at least",
                       (long long)s->over);
    }
    if (s->stalled == 2)
        return gk_errf(e, GK_EIO, "%s: the download from %s stalled: no data for %g s in all "
                       "(%lld of %lld bytes; it resumes there next time; GPT_HUB_STALL_S sets "
                       "how long to wait)", label, endpoint, s->clock->budget,
                       (long long)file_size(path), (long long)s->total);
    if (s->stalled == 1) {
        *retry = 1;
        gk_info("%s: no data for %g s after %lld bytes: trying again", label,
                s->clock->per_attempt, (long long)file_size(path));
        return gk_errf(e, GK_EIO, "%s: the download from %s stalled %d times (no data for %g s; "
                       "%lld of %lld bytes; it resumes there next time)", label, endpoint,
                       s->clock->stalls, s->clock->per_attempt, (long long)file_size(path),
                       (long long)s->total);
    }
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
        cr == CURLE_SEND_ERROR || (cr == CURLE_OPERATION_TIMEDOUT && s->got > 0)) {
        *retry = 1;
        gk_info("%s: connection lost after %lld bytes (%s)", label, (long long)file_size(path),
                errbuf[0] ? errbuf : curl_easy_strerror(cr));
    }
    if (cr == CURLE_TOO_MANY_REDIRECTS)
        return gk_errf(e, GK_EIO, "%s: more than %d redirects (a redirect loop?)", url,
                       (int)HUB_MAX_REDIRECTS);
    if (cr != CURLE_OK)
        return net_error(e, endpoint, cr, errbuf);
    return 0;
}

/* curl_easy_perform on a multi handle woken at least every POLL_MS, so that on_progress sees a
 * stall within that time (the easy interface looks about once a second). */
static CURLcode perform(CURL *c)
{
    CURLM *m = curl_multi_init();
    if (!m || curl_multi_add_handle(m, c) != CURLM_OK) {
        curl_multi_cleanup(m);
        return CURLE_OUT_OF_MEMORY;
    }
    CURLcode cr = CURLE_OK;
    int running = 1;
    while (running) {
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc == CURLM_OK && running)
            mc = curl_multi_poll(m, NULL, 0, POLL_MS, NULL);
        if (mc != CURLM_OK) {
            cr = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_RECV_ERROR;
            break;
        }
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE)
            cr = msg->data.result;
    curl_multi_remove_handle(m, c);
    curl_multi_cleanup(m);
    return cr;
}

/* One attempt; *retry set when the transfer broke off and may be continued. */
static int get_once(const char *url, const char *endpoint, const char *token, const char *path,
                    int64_t size, const char *label, const hub_get_ctl *ctl, stall_clock *clock,
                    int *retry, gk_err *e)
{
    *retry = 0;
    get_state s = {.start = file_size(path), .total = size, .cancel = ctl ? ctl->cancel : NULL,
                   .clock = clock, .last_data = now_s()};
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
    s.c = new_handle(url, endpoint, token, errbuf);
    if (!s.c) {
        fclose(s.fp);
        return gk_errf(e, GK_ENOMEM, "libcurl: cannot create a handle");
    }
    if (s.start > 0) {
        snprintf(range, sizeof range, "%lld-", (long long)s.start);
        curl_easy_setopt(s.c, CURLOPT_RANGE, range);
        gk_info("%s: resuming at byte %lld", label, (long long)s.start);
    }
    curl_easy_setopt(s.c, CURLOPT_LOW_SPEED_TIME, 0L); /* on_progress watches for stalls */
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
    CURLcode cr = perform(s.c);
    gk_progress_end(&s.bar);
    long status = 0;
    curl_easy_getinfo(s.c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(s.c);
    int closed = fclose(s.fp);
    if (s.failed_io || closed != 0)
        return gk_errno(e, path);
    return get_outcome(&s, cr, status, url, endpoint, path, label, errbuf, retry, e);
}

int hub_http_get(const char *url, const char *endpoint, const char *token, const char *path,
                 int64_t size, const char *label, const hub_get_ctl *ctl, gk_err *e)
{
    int rc = curl_ready(e), retry = 1;
    double budget = ctl && ctl->stall_s > 0 ? ctl->stall_s : HUB_STALL_S;
    stall_clock clock = {budget, budget / 2 < STALL_TIMEOUT_S ? budget / 2 : STALL_TIMEOUT_S, 0, 0};
    for (int attempt = 0; rc == 0 && retry && attempt < MAX_ATTEMPTS; attempt++) {
        rc = get_once(url, endpoint, token, path, size, label, ctl, &clock, &retry, e);
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
    hub_head_parse head; /* the X-Error-* headers */
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
    size_t n = size * nitems;
    if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) /* a redirect's Link is not the answer's */
        m->next[0] = '\0';
    hub_head_line(&m->head, buf, n);
    hub_link_next(buf, n, m->next, m->next_cap);
    return n;
}

int hub_http_get_mem(const char *url, const char *endpoint, const char *token, size_t max,
                     char **body, size_t *len, hub_head *h, char *next, size_t next_cap, gk_err *e)
{
    int rc = curl_ready(e);
    if (rc)
        return rc;
    char errbuf[CURL_ERROR_SIZE];
    CURL *c = new_handle(url, endpoint, token, errbuf);
    if (!c)
        return gk_errf(e, GK_ENOMEM, "libcurl: cannot create a handle");
    mem_state m = {.max = max, .next = next, .next_cap = next_cap};
    hub_head_begin(&m.head, h);
    next[0] = '\0';
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_mem_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_mem_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &m);
    CURLcode cr = curl_easy_perform(c);
    h->status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->status);
    curl_easy_cleanup(c);
    if (m.too_big)
        rc = gk_errf(e, GK_EFORMAT, "%s: an answer of more than %zu bytes", url, max);
    else if (cr == CURLE_TOO_MANY_REDIRECTS)
        rc = gk_errf(e, GK_EIO, "%s: more than %d redirects (a redirect loop?)", url,
                     (int)HUB_MAX_REDIRECTS);
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
