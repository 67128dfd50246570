/* store_server.c: the rendezvous store's server (store_wire.h): one thread polling the listening
 * socket, a wake pipe (gks_server_stop) and every client connection, all non-blocking. It alone
 * touches its keys (a hash table) and connections, so it takes no lock. It knows which ranks'
 * connections have closed, and in which order (GONE); when stopping, it serves on until every
 * ranked connection has closed or the time allowed has passed.
 * Owns: the listening socket, the thread, the keys. Lifetime: gks_server_start .. stop. */
#include "kernels/comm/store_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct kv {
    struct kv *next;
    char *key;
    uint8_t *val;
    size_t n;
} kv;

typedef struct conn {
    int fd, rank; /* rank: -1 until its HELLO */
    int waiting, dead;
    double deadline; /* of the GET or WAIT it is waiting in */
    gks_buf in, out;
} conn;

struct gks_server {
    int lfd, wake[2], stopping;
    double stop_wait, stop_deadline;
    pthread_t thread;
    conn **c;
    int nc, cc;
    kv **tab;
    size_t nb, nkeys;    /* buckets (a power of 2), keys */
    int *live;           /* per rank: connections open after HELLO */
    uint64_t *left;      /* per rank: when its last connection closed (a departure's number) */
    uint64_t departures; /* so far */
    int nr;              /* ranks live and left have room for */
};
typedef struct gks_server server;

static size_t kv_bucket(const server *sv, const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (; *key; key++)
        h = (h ^ (uint8_t)*key) * 1099511628211ull;
    return (size_t)h & (sv->nb - 1);
}

static kv *kv_find(const server *sv, const char *key)
{
    for (kv *x = sv->tab[kv_bucket(sv, key)]; x; x = x->next)
        if (strcmp(x->key, key) == 0)
            return x;
    return NULL;
}

static int kv_grow(server *sv)
{
    size_t nb = sv->nb * 2, old = sv->nb;
    kv **tab = calloc(nb, sizeof *tab), **was = sv->tab;
    if (!tab)
        return -1;
    sv->tab = tab, sv->nb = nb;
    for (size_t i = 0; i < old; i++)
        for (kv *x = was[i], *next; x; x = next) {
            next = x->next;
            size_t b = kv_bucket(sv, x->key);
            x->next = tab[b], tab[b] = x;
        }
    free(was);
    return 0;
}

static int kv_put(server *sv, const char *key, const void *val, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return -1;
    if (n)
        memcpy(copy, val, n);
    kv *x = kv_find(sv, key);
    if (!x) {
        if (sv->nkeys >= sv->nb && kv_grow(sv))
            return free(copy), -1;
        if (!(x = calloc(1, sizeof *x)) || !(x->key = strdup(key)))
            return free(x), free(copy), -1;
        size_t b = kv_bucket(sv, key);
        x->next = sv->tab[b], sv->tab[b] = x;
        sv->nkeys++;
    }
    free(x->val);
    x->val = copy, x->n = n;
    return 0;
}

static int rank_hello(server *sv, int rank)
{
    if (rank >= sv->nr) {
        int nr = rank + 64;
        int *live = realloc(sv->live, nr * sizeof *live);
        if (live)
            sv->live = live;
        uint64_t *left = live ? realloc(sv->left, nr * sizeof *left) : NULL;
        if (!left)
            return -1;
        sv->left = left;
        memset(sv->live + sv->nr, 0, (nr - sv->nr) * sizeof *live);
        memset(sv->left + sv->nr, 0, (nr - sv->nr) * sizeof *left);
        sv->nr = nr;
    }
    sv->live[rank]++;
    sv->left[rank] = 0;
    return 0;
}

/* Appends a reply with status and up to one field (p, n; p NULL: none). */
static int reply(conn *c, int status, const void *p, size_t n)
{
    int fail = 0;
    size_t at = gks_frame_begin(&c->out, status, &fail);
    if (p)
        fail |= gks_buf_field(&c->out, p, n);
    if (!fail)
        gks_frame_end(&c->out, at);
    return fail ? -1 : 1;
}

static int reply_u32(conn *c, int status, uint32_t v)
{
    uint8_t b[4];
    gks_put_u32(b, v);
    return reply(c, status, b, 4);
}

/* A GET or WAIT whose key `missing` is absent: waits, or answers TIMEOUT once expired. */
static int pend(conn *c, uint64_t timeout_ms, uint32_t missing, int expired)
{
    if (expired)
        return reply_u32(c, ST_TIMEOUT, missing);
    if (!c->waiting)
        c->waiting = 1, c->deadline = gks_now() + (double)timeout_ms * 1e-3;
    return 0;
}

static int serve_add(server *sv, conn *c, gks_rd *r, int *changed)
{
    char key[MAX_KEY + 1], text[MAX_KEY + 40];
    uint64_t delta;
    if (gks_rd_key(r, key) || gks_rd_u64(r, &delta))
        return -1;
    kv *x = kv_find(sv, key);
    long long v = 0;
    if (x) {
        char *end;
        snprintf(text, 32, "%.*s", (int)(x->n < 31 ? x->n : 31), (const char *)x->val);
        errno = 0;
        v = strtoll(text, &end, 10);
        if (x->n == 0 || x->n > 30 || *end || errno) {
            snprintf(text, sizeof text, "key '%s' is not an integer", key);
            return reply(c, ST_ERR, text, strlen(text));
        }
    }
    v = (long long)((uint64_t)v + delta);
    snprintf(text, sizeof text, "%lld", v);
    if (kv_put(sv, key, text, strlen(text)))
        return -1;
    *changed = 1;
    uint8_t b[8];
    gks_put_u64(b, (uint64_t)v);
    return reply(c, ST_OK, b, 8);
}

static int serve_wait(server *sv, conn *c, gks_rd *r, int expired)
{
    char key[MAX_KEY + 1];
    uint64_t ms;
    if (gks_rd_u64(r, &ms))
        return -1;
    for (uint32_t i = 0; r->n; i++) {
        if (gks_rd_key(r, key))
            return -1;
        if (!kv_find(sv, key))
            return pend(c, ms, i, expired);
    }
    return reply(c, ST_OK, NULL, 0);
}

static int by_departure(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The ranks gone, in the order they left: the first is the likeliest cause of a failure. */
static int serve_gone(server *sv, conn *c)
{
    uint64_t *order = malloc((size_t)(sv->nr + 1) * sizeof *order);
    uint8_t *list = malloc((size_t)(sv->nr + 1) * 4);
    int n = 0, rc = -1;
    for (int rank = 0; order && list && rank < sv->nr; rank++)
        if (sv->left[rank] && !sv->live[rank])
            order[n++] = sv->left[rank] << 24 | (uint64_t)rank;
    if (order && list) {
        qsort(order, (size_t)n, sizeof *order, by_departure);
        for (int i = 0; i < n; i++)
            gks_put_u32(list + 4 * i, (uint32_t)(order[i] & (MAX_RANK - 1)));
        rc = reply(c, ST_OK, list, 4 * (size_t)n);
    }
    free(order);
    free(list);
    return rc;
}

/* Answers one request (body, n bytes): 1 answered, 0 waiting, -1 malformed or out of memory. */
static int serve(server *sv, conn *c, const uint8_t *body, size_t n, int expired, int *changed)
{
    gks_rd r = {body + 1, n - 1};
    char key[MAX_KEY + 1];
    const uint8_t *p;
    size_t len;
    uint64_t v;
    kv *x;
    if (c->rank < 0 && body[0] != OP_HELLO)
        return -1;
    switch (body[0]) {
    case OP_HELLO:
        if (c->rank >= 0 || gks_rd_u64(&r, &v) || v >= MAX_RANK || rank_hello(sv, (int)v))
            return -1;
        c->rank = (int)v;
        return reply(c, ST_OK, NULL, 0);
    case OP_SET:
        if (gks_rd_key(&r, key) || gks_rd_field(&r, &p, &len) || len > MAX_VALUE ||
            kv_put(sv, key, p, len))
            return -1;
        *changed = 1;
        return reply(c, ST_OK, NULL, 0);
    case OP_GET:
        if (gks_rd_key(&r, key) || gks_rd_u64(&r, &v))
            return -1;
        return (x = kv_find(sv, key)) ? reply(c, ST_OK, x->val, x->n) : pend(c, v, 0, expired);
    case OP_ADD:
        return serve_add(sv, c, &r, changed);
    case OP_CHECK:
        if (gks_rd_key(&r, key))
            return -1;
        return reply(c, ST_OK, kv_find(sv, key) ? "\1" : "\0", 1);
    case OP_WAIT:
        return serve_wait(sv, c, &r, expired);
    case OP_GONE:
        return serve_gone(sv, c);
    }
    return -1;
}

static void conn_flush(conn *c)
{
    while (!c->dead && c->out.off < c->out.n) {
        ssize_t k = send(c->fd, c->out.p + c->out.off, c->out.n - c->out.off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            c->out.off += (size_t)k;
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        else if (errno != EINTR)
            c->dead = 1;
    }
    c->out.n = c->out.off = 0;
}

static void conn_read(conn *c)
{
    size_t want = 65536, have = c->in.n - c->in.off;
    if (have >= 4 && gks_get_u32(c->in.p + c->in.off) + (size_t)4 > have)
        want = gks_get_u32(c->in.p + c->in.off) + (size_t)4 - have;
    if (have > 2 * MAX_FRAME || gks_buf_reserve(&c->in, want)) {
        c->dead = 1;
        return;
    }
    ssize_t k = recv(c->fd, c->in.p + c->in.n, c->in.cap - c->in.n, MSG_DONTWAIT);
    if (k > 0)
        c->in.n += (size_t)k;
    else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        c->dead = 1;
}

/* Answers c's complete requests in order, stopping at one that waits. */
static void conn_process(server *sv, conn *c, int expired, int *changed)
{
    while (!c->dead && c->in.n - c->in.off >= 4) {
        uint32_t len = gks_get_u32(c->in.p + c->in.off);
        if (len == 0 || len > MAX_FRAME) {
            c->dead = 1;
            break;
        }
        if (c->in.n - c->in.off - 4 < len)
            break;
        int rc = serve(sv, c, c->in.p + c->in.off + 4, len, expired, changed);
        if (rc < 0)
            c->dead = 1;
        if (rc <= 0)
            break;
        c->waiting = expired = 0;
        c->in.off += 4 + (size_t)len;
    }
    if (c->in.off == c->in.n)
        c->in.n = c->in.off = 0;
    conn_flush(c);
}

/* Answers everything answerable, expiring waits that are due, until nothing changes. */
static void pump(server *sv)
{
    int changed;
    double now = gks_now();
    do {
        changed = 0;
        for (int i = 0; i < sv->nc; i++) {
            conn *c = sv->c[i];
            conn_process(sv, c, c->waiting && now >= c->deadline, &changed);
        }
    } while (changed);
}

static void conn_free(server *sv, conn *c)
{
    if (c->rank >= 0)
        if (--sv->live[c->rank] == 0)
            sv->left[c->rank] = ++sv->departures;
    close(c->fd);
    free(c->in.p);
    free(c->out.p);
    free(c);
}

/* Frees the dead connections; returns how many live ones have said HELLO. */
static int reap(server *sv)
{
    int ranks = 0;
    for (int i = 0; i < sv->nc;) {
        if (sv->c[i]->dead) {
            conn_free(sv, sv->c[i]);
            sv->c[i] = sv->c[--sv->nc];
            continue;
        }
        ranks += sv->c[i]->rank >= 0;
        i++;
    }
    return ranks;
}

static void accept_all(server *sv)
{
    for (;;) {
        int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or a connection that died in the queue */
        conn *c = calloc(1, sizeof *c);
        if (sv->nc == sv->cc) {
            int cc = sv->cc ? 2 * sv->cc : 16;
            conn **a = realloc(sv->c, cc * sizeof *a);
            if (a)
                sv->c = a, sv->cc = cc;
        }
        if (!c || sv->nc == sv->cc) {
            free(c);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd, c->rank = -1;
        sv->c[sv->nc++] = c;
    }
}

/* The poll timeout: until the first wait expires or the stop deadline, else none. */
static int next_timeout(const server *sv)
{
    double t = sv->stopping ? sv->stop_deadline : -1;
    for (int i = 0; i < sv->nc; i++)
        if (sv->c[i]->waiting && (t < 0 || sv->c[i]->deadline < t))
            t = sv->c[i]->deadline;
    return t < 0 ? -1 : gks_ms_until(t);
}

static void *server_main(void *arg)
{
    server *sv = arg;
    struct pollfd *pf = NULL;
    int npf = 0;
    for (;;) {
        pump(sv);
        int ranks = reap(sv);
        if (sv->stopping && (ranks == 0 || gks_now() >= sv->stop_deadline))
            break;
        if (npf < sv->nc + 2) {
            struct pollfd *p = realloc(pf, (sv->nc + 16) * sizeof *p);
            if (!p)
                break; /* out of memory: the clients see the store close */
            pf = p, npf = sv->nc + 16;
        }
        pf[0] = (struct pollfd){sv->wake[0], POLLIN, 0};
        pf[1] = (struct pollfd){sv->lfd, POLLIN, 0};
        int nc = sv->nc;
        for (int i = 0; i < nc; i++)
            pf[i + 2] = (struct pollfd){sv->c[i]->fd,
                                        POLLIN | (sv->c[i]->out.n ? POLLOUT : 0), 0};
        if (poll(pf, nc + 2, next_timeout(sv)) < 0 && errno != EINTR)
            break;
        char why;
        if ((pf[0].revents & POLLIN) && read(sv->wake[0], &why, 1) == 1 && !sv->stopping)
            sv->stopping = 1, sv->stop_deadline = gks_now() + (why == 'w' ? sv->stop_wait : 0);
        for (int i = 0; i < nc; i++) {
            if (pf[i + 2].revents & POLLOUT)
                conn_flush(sv->c[i]);
            if (pf[i + 2].revents & (POLLIN | POLLHUP | POLLERR))
                conn_read(sv->c[i]);
        }
        if (pf[1].revents & POLLIN)
            accept_all(sv);
    }
    for (int i = 0; i < sv->nc; i++)
        conn_free(sv, sv->c[i]);
    sv->nc = 0;
    free(pf);
    return NULL;
}

static void server_free(server *sv)
{
    if (sv->lfd >= 0)
        close(sv->lfd);
    for (int i = 0; i < 2; i++)
        if (sv->wake[i] >= 0)
            close(sv->wake[i]);
    for (size_t i = 0; sv->tab && i < sv->nb; i++)
        for (kv *x = sv->tab[i], *next; x; x = next) {
            next = x->next;
            free(x->key);
            free(x->val);
            free(x);
        }
    free(sv->tab);
    free(sv->c);
    free(sv->live);
    free(sv->left);
    free(sv);
}

/* Listens on every address (IPv6 and IPv4 when the host has IPv6) at port; *bound: the port. */
static int server_listen(server *sv, int port, int *bound, gk_err *e)
{
    int one = 1, zero = 0, v6 = 1;
    sv->lfd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sv->lfd < 0)
        v6 = 0, sv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sv->lfd < 0)
        return gk_errno(e, "socket");
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6, a->sin6_addr = in6addr_any, a->sin6_port = htons(port);
        setsockopt(sv->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET, a->sin_addr.s_addr = htonl(INADDR_ANY), a->sin_port = htons(port);
        len = sizeof *a;
    }
    /* also lets gpt-train's spawner hold the port for us until we listen (train/spawn.c) */
    setsockopt(sv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(sv->lfd, (struct sockaddr *)&ss, len) || listen(sv->lfd, 1024) ||
        getsockname(sv->lfd, (struct sockaddr *)&ss, &len))
        return gk_errf(e, GK_EIO, "cannot listen on port %d: %s", port, strerror(errno));
    *bound = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                      : ((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

/* The thread takes no signals: they go to the process's other threads. */
int gks_server_start(gks_server **out, int port, double stop_wait, int *bound, gk_err *e)
{
    server *sv = calloc(1, sizeof *sv);
    if (!sv)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    sv->lfd = sv->wake[0] = sv->wake[1] = -1;
    sv->stop_wait = stop_wait;
    sv->nb = 64;
    sv->tab = calloc(sv->nb, sizeof *sv->tab);
    int rc = sv->tab ? 0 : gk_errf(e, GK_ENOMEM, "out of memory");
    if (!rc)
        rc = server_listen(sv, port, bound, e);
    if (!rc && pipe2(sv->wake, O_CLOEXEC | O_NONBLOCK))
        rc = gk_errno(e, "pipe");
    if (!rc) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int err = pthread_create(&sv->thread, NULL, server_main, sv);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (err)
            rc = gk_errf(e, GK_EIO, "cannot start the store's thread: %s", strerror(err));
    }
    if (rc)
        server_free(sv);
    else
        *out = sv;
    return rc;
}

void gks_server_stop(gks_server *sv, char how)
{
    while (write(sv->wake[1], &how, 1) < 0 && errno == EINTR)
        ;
    pthread_join(sv->thread, NULL);
    server_free(sv);
}
