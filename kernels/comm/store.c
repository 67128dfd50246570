/* store.c: the rendezvous store's client (store.h), one per rank, and the wire helpers that it
 * shares with the server thread (store_wire.h, store_server.c; rank 0 starts one). Every read and
 * write polls against a deadline; a connection that fails or times out mid-request is dropped and
 * every later call fails at once with the reason. */
#include "kernels/comm/store.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kernels/comm/store_wire.h"

#define RETRY_MS 100 /* pause between connection attempts */

/* ---- the wire helpers (store_wire.h) ---- */

double gks_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Rounded up, so that a poll does not wake early and spin. */
int gks_ms_until(double deadline)
{
    double ms = (deadline - gks_now()) * 1e3;
    return ms <= 0 ? 0 : ms >= INT_MAX ? INT_MAX : (int)ms + 1;
}

void gks_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

uint32_t gks_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void gks_put_u64(uint8_t *p, uint64_t v)
{
    gks_put_u32(p, (uint32_t)v);
    gks_put_u32(p + 4, (uint32_t)(v >> 32));
}

uint64_t gks_get_u64(const uint8_t *p)
{
    return gks_get_u32(p) | (uint64_t)gks_get_u32(p + 4) << 32;
}

int gks_buf_reserve(gks_buf *b, size_t more)
{
    if (b->cap - b->n >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < more)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p, b->cap = cap;
    return 0;
}

int gks_buf_put(gks_buf *b, const void *p, size_t n)
{
    if (gks_buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

int gks_buf_field(gks_buf *b, const void *p, size_t n)
{
    uint8_t len[4];
    gks_put_u32(len, (uint32_t)n);
    return gks_buf_put(b, len, 4) || gks_buf_put(b, p, n) ? -1 : 0;
}

size_t gks_frame_begin(gks_buf *b, int code, int *fail)
{
    size_t at = b->n;
    uint8_t head[5] = {0, 0, 0, 0, (uint8_t)code};
    *fail |= gks_buf_put(b, head, 5);
    return at;
}

void gks_frame_end(gks_buf *b, size_t at) { gks_put_u32(b->p + at, (uint32_t)(b->n - at - 4)); }

int gks_rd_field(gks_rd *r, const uint8_t **p, size_t *n)
{
    if (r->n < 4 || r->n - 4 < gks_get_u32(r->p))
        return -1;
    *n = gks_get_u32(r->p), *p = r->p + 4;
    r->p += 4 + *n, r->n -= 4 + *n;
    return 0;
}

int gks_rd_u64(gks_rd *r, uint64_t *v)
{
    const uint8_t *p;
    size_t n;
    if (gks_rd_field(r, &p, &n) || n != 8)
        return -1;
    *v = gks_get_u64(p);
    return 0;
}

int gks_rd_key(gks_rd *r, char *key)
{
    const uint8_t *p;
    size_t n;
    if (gks_rd_field(r, &p, &n) || n == 0 || n > MAX_KEY || memchr(p, 0, n))
        return -1;
    memcpy(key, p, n);
    key[n] = 0;
    return 0;
}

/* ---- the client ---- */

struct gk_store {
    int fd, rank, port;
    double timeout_s;
    gks_server *srv; /* rank 0's */
    char host[256], addr[300], local[INET6_ADDRSTRLEN + 16], lost[200];
};

typedef struct field {
    const void *p;
    size_t n;
} field;

/* Drops the connection after a failure mid-request; every later call repeats why. */
static int lose(gk_store *s, const char *why, gk_err *e)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    snprintf(s->lost, sizeof s->lost, "%s", why);
    return gk_errf(e, GK_EIO, "rendezvous at %s: %s", s->addr, why);
}

/* Sends (wr) or receives n bytes by deadline; span: the seconds allowed, for the message. */
static int xfer(gk_store *s, int wr, uint8_t *p, size_t n, double deadline, double span, gk_err *e)
{
    char why[120];
    while (n) {
        struct pollfd pf = {s->fd, wr ? POLLOUT : POLLIN, 0};
        int r = poll(&pf, 1, gks_ms_until(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            snprintf(why, sizeof why, "the store did not answer within %g s", span);
            return lose(s, why, e);
        }
        ssize_t k = r < 0 ? -1
                    : wr  ? send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : recv(s->fd, p, n, MSG_DONTWAIT);
        if (k > 0)
            p += k, n -= (size_t)k;
        else if (k == 0)
            return lose(s, "the store closed the connection", e);
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return lose(s, strerror(errno), e);
    }
    return 0;
}

/* One request (op, fields) and its reply, within span seconds. The reply's body goes to *reply
 * (status byte first; the caller frees reply->p). Returns ST_OK, ST_TIMEOUT (when may_wait) or
 * an error. */
static int call(gk_store *s, int op, const field *f, int nf, double span, int may_wait,
                gks_buf *reply, gk_err *e)
{
    *reply = (gks_buf){0};
    if (s->fd < 0)
        return gk_errf(e, GK_EIO, "rendezvous at %s: %s", s->addr, s->lost);
    gks_buf req = {0};
    int fail = 0;
    size_t at = gks_frame_begin(&req, op, &fail);
    for (int i = 0; i < nf; i++)
        fail |= gks_buf_field(&req, f[i].p, f[i].n);
    if (fail) {
        free(req.p);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    gks_frame_end(&req, at);
    double deadline = gks_now() + span;
    uint8_t head[4];
    int rc = xfer(s, 1, req.p, req.n, deadline, span, e);
    free(req.p);
    if (rc || (rc = xfer(s, 0, head, 4, deadline, span, e)))
        return rc;
    uint32_t len = gks_get_u32(head);
    if (len == 0 || len > MAX_FRAME || gks_buf_reserve(reply, len))
        return lose(s, len ? "the store's answer is too long" : "malformed answer", e);
    if ((rc = xfer(s, 0, reply->p, len, deadline, span, e)))
        return rc;
    reply->n = len;
    gks_rd r = {reply->p + 1, len - 1};
    const uint8_t *text;
    size_t n;
    if (reply->p[0] == ST_ERR && !gks_rd_field(&r, &text, &n))
        return gk_errf(e, GK_EFORMAT, "rendezvous at %s: %.*s", s->addr, (int)n,
                       (const char *)text);
    if (reply->p[0] == ST_OK || (may_wait && reply->p[0] == ST_TIMEOUT))
        return reply->p[0];
    return lose(s, "malformed answer", e);
}

/* The reply's first field, which must be n bytes (n 0: any length, *len gets it). */
static const uint8_t *answer(gk_store *s, const gks_buf *reply, size_t n, size_t *len, gk_err *e)
{
    gks_rd r = {reply->p + 1, reply->n - 1};
    const uint8_t *p;
    size_t got;
    if (gks_rd_field(&r, &p, &got) || (n && got != n)) {
        lose(s, "malformed answer", e);
        return NULL;
    }
    if (len)
        *len = got;
    return p;
}

static int check_key(const gk_store *s, const char *key, gk_err *e)
{
    size_t n = strlen(key);
    if (n == 0 || n > MAX_KEY)
        return gk_errf(e, GK_EUSAGE, "rendezvous at %s: a key of %zu bytes (1 to %d)", s->addr, n,
                       MAX_KEY);
    return 0;
}

int gk_store_set(gk_store *s, const char *key, const void *val, size_t n, gk_err *e)
{
    if (check_key(s, key, e))
        return e->code;
    if (n > MAX_VALUE)
        return gk_errf(e, GK_EUSAGE,
                       "rendezvous at %s: key '%s': a value of %zu bytes (at most %zu)", s->addr,
                       key, n, MAX_VALUE);
    field f[2] = {{key, strlen(key)}, {val, n}};
    gks_buf r;
    int rc = call(s, OP_SET, f, 2, s->timeout_s, 0, &r, e);
    free(r.p);
    return rc;
}

static int not_set(const gk_store *s, const char *key, gk_err *e)
{
    return gk_errf(e, GK_EIO, "rendezvous at %s: key '%s' not set within %g s", s->addr, key,
                   s->timeout_s);
}

int gk_store_get(gk_store *s, const char *key, void **val, size_t *n, gk_err *e)
{
    *val = NULL, *n = 0;
    if (check_key(s, key, e))
        return e->code;
    uint8_t ms[8];
    gks_put_u64(ms, (uint64_t)(s->timeout_s * 1e3 + 0.5));
    field f[2] = {{key, strlen(key)}, {ms, 8}};
    gks_buf r;
    int rc = call(s, OP_GET, f, 2, s->timeout_s + GRACE_S, 1, &r, e);
    const uint8_t *p;
    size_t len;
    if (rc == ST_TIMEOUT)
        rc = not_set(s, key, e);
    else if (rc == ST_OK && !(p = answer(s, &r, 0, &len, e)))
        rc = GK_EIO;
    else if (rc == ST_OK && !(*val = malloc(len + 1)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    else if (rc == ST_OK) {
        memcpy(*val, p, len);
        ((char *)*val)[len] = 0;
        *n = len;
    }
    free(r.p);
    return rc;
}

int gk_store_add(gk_store *s, const char *key, int64_t delta, int64_t *result, gk_err *e)
{
    if (check_key(s, key, e))
        return e->code;
    uint8_t d[8];
    gks_put_u64(d, (uint64_t)delta);
    field f[2] = {{key, strlen(key)}, {d, 8}};
    gks_buf r;
    int rc = call(s, OP_ADD, f, 2, s->timeout_s, 0, &r, e);
    const uint8_t *p;
    if (!rc && !(p = answer(s, &r, 8, NULL, e)))
        rc = GK_EIO;
    else if (!rc)
        *result = (int64_t)gks_get_u64(p);
    free(r.p);
    return rc;
}

int gk_store_wait(gk_store *s, const char *const *keys, int nkeys, gk_err *e)
{
    if (nkeys <= 0)
        return 0;
    field *f = malloc((size_t)(nkeys + 1) * sizeof *f);
    if (!f)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    uint8_t ms[8];
    gks_put_u64(ms, (uint64_t)(s->timeout_s * 1e3 + 0.5));
    f[0] = (field){ms, 8};
    int rc = 0;
    for (int i = 0; i < nkeys && !rc; i++) {
        rc = check_key(s, keys[i], e);
        f[i + 1] = (field){keys[i], strlen(keys[i])};
    }
    gks_buf r = {0};
    if (!rc)
        rc = call(s, OP_WAIT, f, nkeys + 1, s->timeout_s + GRACE_S, 1, &r, e);
    free(f);
    const uint8_t *p;
    if (rc == ST_TIMEOUT && !(p = answer(s, &r, 4, NULL, e)))
        rc = GK_EIO;
    else if (rc == ST_TIMEOUT)
        rc = gks_get_u32(p) < (uint32_t)nkeys ? not_set(s, keys[gks_get_u32(p)], e)
                                               : lose(s, "malformed answer", e);
    free(r.p);
    return rc;
}

int gk_store_check(gk_store *s, const char *key, gk_err *e)
{
    if (check_key(s, key, e))
        return e->code;
    field f = {key, strlen(key)};
    gks_buf r;
    int rc = call(s, OP_CHECK, &f, 1, s->timeout_s, 0, &r, e);
    const uint8_t *p;
    if (!rc)
        rc = (p = answer(s, &r, 1, NULL, e)) ? p[0] != 0 : GK_EIO;
    free(r.p);
    return rc;
}

int gk_store_gone(gk_store *s, int *ranks, int cap, gk_err *e)
{
    gks_buf r;
    int rc = call(s, OP_GONE, NULL, 0, s->timeout_s, 0, &r, e);
    const uint8_t *p;
    size_t len;
    if (!rc && (!(p = answer(s, &r, 0, &len, e)) || len % 4))
        rc = s->fd < 0 ? GK_EIO : lose(s, "malformed answer", e);
    else if (!rc) {
        rc = (int)(len / 4);
        for (int i = 0; i < rc && i < cap; i++)
            ranks[i] = (int)gks_get_u32(p + 4 * (size_t)i);
    }
    free(r.p);
    return rc;
}

/* ---- connecting ---- */

/* Waits for a non-blocking connect to finish; 1 connected, else 0 with why. */
static int connected(int fd, double deadline, char *why, size_t cap)
{
    struct pollfd pf = {fd, POLLOUT, 0};
    int r, err = 0;
    socklen_t len = sizeof err;
    while ((r = poll(&pf, 1, gks_ms_until(deadline))) < 0 && errno == EINTR)
        ;
    if (r == 0)
        err = ETIMEDOUT;
    else if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
        err = errno;
    if (err)
        snprintf(why, cap, "%s", strerror(err));
    return !err;
}

/* One attempt at each address of host:port: the connected socket, or -1 and why. */
static int dial(const gk_store *s, double deadline, char *why, size_t cap)
{
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    struct addrinfo hints = {0}, *res;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(s->host, port, &hints, &res);
    if (g) {
        snprintf(why, cap, "%s: %s", s->host, g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            snprintf(why, cap, "socket: %s", strerror(errno));
            continue;
        }
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc && errno != EINPROGRESS)
            snprintf(why, cap, "%s", strerror(errno));
        else if (rc == 0 || connected(fd, deadline, why, cap))
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* This end's numeric address ("::ffff:10.0.0.2" becomes "10.0.0.2"). */
static void local_name(gk_store *s)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(s->fd, (struct sockaddr *)&ss, &len) ||
        getnameinfo((struct sockaddr *)&ss, len, s->local, sizeof s->local, NULL, 0,
                    NI_NUMERICHOST))
        snprintf(s->local, sizeof s->local, "127.0.0.1");
    if (strncmp(s->local, "::ffff:", 7) == 0 && strchr(s->local, '.'))
        memmove(s->local, s->local + 7, strlen(s->local + 7) + 1);
}

/* Connects (retrying until the timeout: rank 0 may start after the others) and says HELLO. */
static int client_connect(gk_store *s, gk_err *e)
{
    double deadline = gks_now() + s->timeout_s;
    char why[320] = "no address tried";
    while ((s->fd = dial(s, deadline, why, sizeof why)) < 0) {
        int ms = gks_ms_until(deadline);
        if (ms == 0)
            return gk_errf(e, GK_EIO, "rendezvous at %s: no store answered within %g s (%s)",
                           s->addr, s->timeout_s, why);
        poll(NULL, 0, ms < RETRY_MS ? ms : RETRY_MS);
    }
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    local_name(s);
    uint8_t rank[8];
    gks_put_u64(rank, (uint64_t)s->rank);
    field f = {rank, 8};
    gks_buf r;
    double left = deadline - gks_now();
    int rc = call(s, OP_HELLO, &f, 1, left > 1 ? left : 1, 0, &r, e);
    free(r.p);
    return rc;
}

int gk_store_open(gk_store **out, const char *host, int port, int serve, int rank,
                  double timeout_s, gk_err *e)
{
    *out = NULL;
    if (!host || !*host || strlen(host) >= 256)
        return gk_errf(e, GK_EUSAGE, "rendezvous: host '%.64s' is empty or too long",
                       host ? host : "");
    if (port < !serve || port > 65535 || rank < 0 || rank >= MAX_RANK || !(timeout_s > 0))
        return gk_errf(e, GK_EUSAGE, "rendezvous at %s:%d as rank %d with a timeout of %g s: "
                       "a value is out of range", host, port, rank, timeout_s);
    gk_store *s = calloc(1, sizeof *s);
    if (!s)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    s->fd = -1, s->rank = rank, s->port = port, s->timeout_s = timeout_s;
    snprintf(s->host, sizeof s->host, "%s", host);
    int rc = serve ? gks_server_start(&s->srv, port, timeout_s, &s->port, e) : 0;
    snprintf(s->addr, sizeof s->addr, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, s->port);
    if (!rc)
        rc = client_connect(s, e);
    if (rc) {
        if (s->fd >= 0)
            close(s->fd);
        if (s->srv)
            gks_server_stop(s->srv, 'n');
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int gk_store_port(const gk_store *s) { return s->port; }

const char *gk_store_address(const gk_store *s) { return s->addr; }

const char *gk_store_local_host(const gk_store *s) { return s->local; }

void gk_store_close(gk_store *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    if (s->srv)
        gks_server_stop(s->srv, 'w');
    free(s);
}
