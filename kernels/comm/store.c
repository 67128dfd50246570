/* store.c: the rendezvous store's client (store.h), one per rank (rank 0 starts the server
 * thread too: store_server.c). Every read and write polls against a deadline; a connection that
 * fails or times out mid-request is dropped and every later call fails at once with the reason;
 * a refused HELLO fails the open. One request at a time (a mutex around each), so that the comms
 * of several threads may share it. */
#include "kernels/comm/store.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kernels/comm/store_wire.h"

#define RETRY_MS 100 /* pause between connection attempts */

/* ---- the client ---- */

struct gk_store {
    pthread_mutex_t mu;   /* one request at a time */
    int fd, rank, port;
    double timeout_s;
    gk_store_server *srv; /* rank 0's */
    const volatile sig_atomic_t *stop;
    size_t most; /* the job's longest value, as HELLO's answer says */
    char host[256], addr[300], local[INET6_ADDRSTRLEN + 16], lost[200];
    char token[MAX_TOKEN + 1], token_name[64];
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
        int r = poll(&pf, 1, gk_store_ms_until(deadline));
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

/* A REFUSED answer to HELLO (r: its fields): GK_EUSAGE naming why, the token's variable for a
 * wrong token. The store closes the connection. */
static int refused(gk_store *s, gk_store_rd *r, gk_err *e)
{
    const uint8_t *why, *text;
    size_t n, len;
    if (gk_store_rd_field(r, &why, &n) || n != 1 || gk_store_rd_field(r, &text, &len))
        return lose(s, "malformed answer", e);
    int named = why[0] == RF_TOKEN && s->token_name[0];
    gk_errf(e, GK_EUSAGE, "rendezvous at %s: refused: %.*s%s%s%s", s->addr, (int)len,
            (const char *)text, named ? " (" : "", named ? s->token_name : "", named ? ")" : "");
    lose(s, e->msg + strlen("rendezvous at ") + strlen(s->addr) + 2, NULL);
    return GK_EUSAGE;
}

/* One request (op, fields) and its reply, within span seconds. The reply's body goes to *reply
 * (status byte first; the caller frees reply->p). Returns ST_OK, ST_TIMEOUT (when may_wait) or
 * an error. */
static int call_locked(gk_store *s, int op, const field *f, int nf, double span, int may_wait,
                       gk_store_buf *reply, gk_err *e)
{
    *reply = (gk_store_buf){0};
    if (s->fd < 0)
        return gk_errf(e, GK_EIO, "rendezvous at %s: %s", s->addr, s->lost);
    gk_store_buf req = {0};
    int fail = 0;
    size_t at = gk_store_frame_begin(&req, op, &fail);
    for (int i = 0; i < nf; i++)
        fail |= gk_store_buf_field(&req, f[i].p, f[i].n);
    if (fail) {
        free(req.p);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    gk_store_frame_end(&req, at);
    double deadline = gk_store_now() + span;
    uint8_t head[4];
    int rc = xfer(s, 1, req.p, req.n, deadline, span, e);
    free(req.p);
    if (rc || (rc = xfer(s, 0, head, 4, deadline, span, e)))
        return rc;
    uint32_t len = gk_store_get_u32(head);
    if (len == 0 || len > MAX_FRAME || gk_store_buf_reserve(reply, len))
        return lose(s, len ? "the store's answer is too long" : "malformed answer", e);
    if ((rc = xfer(s, 0, reply->p, len, deadline, span, e)))
        return rc;
    reply->n = len;
    gk_store_rd r = {reply->p + 1, len - 1};
    const uint8_t *text;
    size_t n;
    if (reply->p[0] == ST_ERR && !gk_store_rd_field(&r, &text, &n))
        return gk_errf(e, GK_EFORMAT, "rendezvous at %s: %.*s", s->addr, (int)n,
                       (const char *)text);
    if (reply->p[0] == ST_REFUSED && op == OP_HELLO)
        return refused(s, &r, e);
    if (reply->p[0] == ST_OK || (may_wait && reply->p[0] == ST_TIMEOUT))
        return reply->p[0];
    return lose(s, "malformed answer", e);
}

static int call(gk_store *s, int op, const field *f, int nf, double span, int may_wait,
                gk_store_buf *reply, gk_err *e)
{
    pthread_mutex_lock(&s->mu);
    int rc = call_locked(s, op, f, nf, span, may_wait, reply, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The reply's first field, which must be n bytes (n 0: any length, *len gets it). */
static const uint8_t *answer(gk_store *s, const gk_store_buf *reply, size_t n, size_t *len,
                             gk_err *e)
{
    gk_store_rd r = {reply->p + 1, reply->n - 1};
    const uint8_t *p;
    size_t got;
    if (gk_store_rd_field(&r, &p, &got) || (n && got != n)) {
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
    if (n > s->most)
        return gk_errf(e, GK_EUSAGE, "rendezvous at %s: key '%s': a value of %zu bytes (this "
                       "job's values: %zu at most)", s->addr, key, n, s->most);
    field f[2] = {{key, strlen(key)}, {val, n}};
    gk_store_buf r;
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
    gk_store_put_u64(ms, (uint64_t)(s->timeout_s * 1e3 + 0.5));
    field f[2] = {{key, strlen(key)}, {ms, 8}};
    gk_store_buf r;
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
    gk_store_put_u64(d, (uint64_t)delta);
    field f[2] = {{key, strlen(key)}, {d, 8}};
    gk_store_buf r;
    int rc = call(s, OP_ADD, f, 2, s->timeout_s, 0, &r, e);
    const uint8_t *p;
    if (!rc && !(p = answer(s, &r, 8, NULL, e)))
        rc = GK_EIO;
    else if (!rc)
        *result = (int64_t)gk_store_get_u64(p);
    free(r.p);
    return rc;
}

/* WAIT for keys up to timeout_s: 0, 1 when the time passed (*missing: the first key absent). */
static int wait_keys(gk_store *s, const char *const *keys, int nkeys, double timeout_s,
                     int *missing, gk_err *e)
{
    if (nkeys <= 0)
        return 0;
    field *f = malloc((size_t)(nkeys + 1) * sizeof *f);
    if (!f)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    uint8_t ms[8];
    gk_store_put_u64(ms, (uint64_t)(timeout_s * 1e3 + 0.5));
    f[0] = (field){ms, 8};
    int rc = 0;
    for (int i = 0; i < nkeys && !rc; i++) {
        rc = check_key(s, keys[i], e);
        f[i + 1] = (field){keys[i], strlen(keys[i])};
    }
    gk_store_buf r = {0};
    if (!rc)
        rc = call(s, OP_WAIT, f, nkeys + 1, timeout_s + GRACE_S, 1, &r, e);
    free(f);
    const uint8_t *p;
    if (rc == ST_TIMEOUT && !(p = answer(s, &r, 4, NULL, e)))
        rc = GK_EIO;
    else if (rc == ST_TIMEOUT && gk_store_get_u32(p) >= (uint32_t)nkeys)
        rc = lose(s, "malformed answer", e);
    else if (rc == ST_TIMEOUT)
        *missing = (int)gk_store_get_u32(p);
    free(r.p);
    return rc;
}

int gk_store_wait(gk_store *s, const char *const *keys, int nkeys, gk_err *e)
{
    int missing = 0, rc = wait_keys(s, keys, nkeys, s->timeout_s, &missing, e);
    return rc == ST_TIMEOUT ? not_set(s, keys[missing], e) : rc;
}

int gk_store_wait_for(gk_store *s, const char *const *keys, int nkeys, double timeout_s, gk_err *e)
{
    int missing = 0;
    if (!(timeout_s >= 0) || timeout_s > 1e9)
        return gk_errf(e, GK_EUSAGE, "rendezvous at %s: a wait of %g s", s->addr, timeout_s);
    return wait_keys(s, keys, nkeys, timeout_s, &missing, e);
}

int gk_store_check(gk_store *s, const char *key, gk_err *e)
{
    if (check_key(s, key, e))
        return e->code;
    field f = {key, strlen(key)};
    gk_store_buf r;
    int rc = call(s, OP_CHECK, &f, 1, s->timeout_s, 0, &r, e);
    const uint8_t *p;
    if (!rc)
        rc = (p = answer(s, &r, 1, NULL, e)) ? p[0] != 0 : GK_EIO;
    free(r.p);
    return rc;
}

int gk_store_gone(gk_store *s, int *ranks, int cap, gk_err *e)
{
    gk_store_buf r;
    int rc = call(s, OP_GONE, NULL, 0, s->timeout_s, 0, &r, e);
    const uint8_t *p;
    size_t len;
    if (!rc && (!(p = answer(s, &r, 0, &len, e)) || len % 4))
        rc = s->fd < 0 ? GK_EIO : lose(s, "malformed answer", e);
    else if (!rc) {
        rc = (int)(len / 4);
        for (int i = 0; i < rc && i < cap; i++)
            ranks[i] = (int)gk_store_get_u32(p + 4 * (size_t)i);
    }
    free(r.p);
    return rc;
}

int gk_store_connected(gk_store *s, gk_err *e)
{
    gk_store_buf r;
    int rc = call(s, OP_RANKS, NULL, 0, s->timeout_s, 0, &r, e);
    const uint8_t *p;
    if (!rc)
        rc = (p = answer(s, &r, 4, NULL, e)) ? (int)(gk_store_get_u32(p) & 0x7fffffff) : GK_EIO;
    free(r.p);
    return rc;
}

int64_t gk_store_refusals(gk_store *s, char *last, size_t cap, gk_err *e)
{
    int64_t count = 0;
    int rc = gk_store_check(s, GK_STORE_REFUSED, e);
    if (rc == 1)
        rc = gk_store_add(s, GK_STORE_REFUSED, 0, &count, e);
    if (cap)
        last[0] = '\0';
    void *val = NULL;
    size_t n = 0;
    if (rc == 0 && count > 0 && cap &&
        (rc = gk_store_get(s, GK_STORE_REFUSED_LAST, &val, &n, e)) == 0)
        snprintf(last, cap, "%.*s", (int)n, (const char *)val);
    free(val);
    return rc < 0 ? rc : count;
}

/* ---- connecting ---- */

/* Waits for a non-blocking connect to finish; 1 connected, else 0 with why. */
static int connected(int fd, double deadline, char *why, size_t cap)
{
    struct pollfd pf = {fd, POLLOUT, 0};
    int r, err = 0;
    socklen_t len = sizeof err;
    while ((r = poll(&pf, 1, gk_store_ms_until(deadline))) < 0 && errno == EINTR)
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

/* HELLO: rank, protocol version, token, pid. */
static int hello(gk_store *s, double deadline, gk_err *e)
{
    uint8_t rank[8], version[8], pid[8];
    gk_store_put_u64(rank, (uint64_t)s->rank);
    gk_store_put_u64(version, VERSION);
    gk_store_put_u64(pid, (uint64_t)getpid());
    field f[4] = {{rank, 8}, {version, 8}, {s->token, strlen(s->token)}, {pid, 8}};
    gk_store_buf r;
    double left = deadline - gk_store_now();
    int rc = call(s, OP_HELLO, f, 4, left > 1 ? left : 1, 0, &r, e);
    const uint8_t *most;
    if (!rc && !(most = answer(s, &r, 8, NULL, e)))
        rc = GK_EIO;
    else if (!rc)
        s->most = gk_store_get_u64(most) < MAX_VALUE ? (size_t)gk_store_get_u64(most) : MAX_VALUE;
    free(r.p);
    return rc;
}

static int stopped(const gk_store *s, gk_err *e)
{
    return gk_errf(e, GK_EINTR, "rendezvous at %s: stopped by a signal while connecting", s->addr);
}

/* Connects and says HELLO, retrying until the timeout (rank 0 may start after the others, and a
 * store short of descriptors may drop a connection): an answer, a refusal or the timeout ends
 * it. */
static int client_connect(gk_store *s, gk_err *e)
{
    double deadline = gk_store_now() + s->timeout_s;
    char why[320] = "no address tried";
    for (;;) {
        if (s->stop && *s->stop)
            return stopped(s, e);
        if ((s->fd = dial(s, deadline, why, sizeof why)) >= 0) {
            int one = 1;
            setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            local_name(s);
            int rc = hello(s, deadline, e);
            if (rc != GK_EIO || s->fd >= 0)
                return rc; /* answered, refused, or out of memory */
            snprintf(why, sizeof why, "%s", s->lost); /* the store dropped it: again */
        }
        int ms = gk_store_ms_until(deadline);
        if (ms == 0)
            return gk_errf(e, GK_EIO, "rendezvous at %s: no store answered within %g s (%s)",
                           s->addr, s->timeout_s, why);
        poll(NULL, 0, ms < RETRY_MS ? ms : RETRY_MS);
    }
}

static int check_open(const char *host, int port, int rank, const gk_store_opts *o, gk_err *e)
{
    if (!host || !*host || strlen(host) >= 256)
        return gk_errf(e, GK_EUSAGE, "rendezvous: host '%.64s' is empty or too long",
                       host ? host : "");
    if (port < !o->serve || port > 65535 || rank < 0 || rank >= MAX_RANK ||
        !(o->timeout_s > 0) || o->world < 0 || (o->world > 0 && rank >= o->world))
        return gk_errf(e, GK_EUSAGE, "rendezvous at %s:%d as rank %d of %d with a timeout of %g "
                       "s: a value is out of range", host, port, rank, o->world, o->timeout_s);
    if (o->token && strlen(o->token) > MAX_TOKEN)
        return gk_errf(e, GK_EUSAGE, "rendezvous: the job token has %zu bytes (at most %d)",
                       strlen(o->token), MAX_TOKEN);
    return 0;
}

int gk_store_open_opts(gk_store **out, const char *host, int port, int rank,
                       const gk_store_opts *o, gk_err *e)
{
    *out = NULL;
    if (check_open(host, port, rank, o, e))
        return e->code;
    gk_store *s = calloc(1, sizeof *s);
    if (!s)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    s->fd = -1, s->rank = rank, s->port = port, s->timeout_s = o->timeout_s, s->stop = o->stop;
    pthread_mutex_init(&s->mu, NULL);
    snprintf(s->host, sizeof s->host, "%s", host);
    snprintf(s->token, sizeof s->token, "%s", o->token ? o->token : "");
    snprintf(s->token_name, sizeof s->token_name, "%s", o->token_name ? o->token_name : "");
    gk_store_config cf = {host, o->token, port, o->world, o->local, o->timeout_s};
    int rc = o->serve ? gk_store_server_start(&s->srv, &cf, &s->port, e) : 0;
    snprintf(s->addr, sizeof s->addr, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, s->port);
    if (!rc)
        rc = client_connect(s, e);
    if (rc) {
        if (s->fd >= 0)
            close(s->fd);
        if (s->srv)
            gk_store_server_stop(s->srv, 'n');
        pthread_mutex_destroy(&s->mu);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int gk_store_open(gk_store **out, const char *host, int port, int serve, int rank,
                  double timeout_s, gk_err *e)
{
    gk_store_opts o = {.serve = serve, .local = 1, .timeout_s = timeout_s};
    return gk_store_open_opts(out, host, port, rank, &o, e);
}

const char *gk_store_bound(const gk_store *s)
{
    return s->srv ? gk_store_server_bound(s->srv) : NULL;
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
        gk_store_server_stop(s->srv, 'w');
    pthread_mutex_destroy(&s->mu);
    free(s);
}
