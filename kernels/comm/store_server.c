/* store_server.c: the rendezvous store's server thread (store_wire.h): one thread polling the
 * listening socket, a wake pipe (gk_store_server_stop) and every client connection, all
 * non-blocking;
 * store_serve.c answers the requests. It alone touches the keys and connections, so it takes no
 * lock. A connection may hold one request and its reply at a time, of the job's size
 * (gk_store_limits); one that has not said HELLO within HELLO_S is dropped, and the oldest of those
 * is refused when more than the job's share of them wait. With no descriptor left (EMFILE) it
 * stops accepting for ACCEPT_PAUSE_S at a time, serving the connections it has. When stopping,
 * it serves on until every ranked connection has closed or the time allowed has passed.
 * Owns: the listening socket, the thread. Lifetime: gk_store_server_start .. stop. */
#include "kernels/comm/store_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPT_PAUSE_S 0.1 /* after accept failed for want of descriptors or memory */

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
    if (c->closing)
        c->dead = 1;
}

/* The most a connection's frame may be: a HELLO before its HELLO, else the job's. */
static size_t frame_cap(const server *sv, const conn *c)
{
    return c->rank < 0 ? HELLO_FRAME : sv->lim.frame;
}

static void conn_read(server *sv, conn *c)
{
    size_t want = 1024, have = c->in.n - c->in.off;
    if (c->closing)
        return;
    if (have >= 4 && gk_store_get_u32(c->in.p + c->in.off) > frame_cap(sv, c)) {
        c->dead = 1; /* conn_process would drop it too */
        return;
    }
    if (have >= 4 && gk_store_get_u32(c->in.p + c->in.off) + (size_t)4 > have)
        want = gk_store_get_u32(c->in.p + c->in.off) + (size_t)4 - have;
    if (have > 2 * frame_cap(sv, c) + 8 || gk_store_buf_reserve(&c->in, want)) {
        c->dead = 1;
        return;
    }
    ssize_t k = recv(c->fd, c->in.p + c->in.n, c->in.cap - c->in.n, MSG_DONTWAIT);
    if (k > 0)
        c->in.n += (size_t)k;
    else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        c->dead = 1;
}

/* Answers c's complete requests in order, one at a time: stops at one that waits, and while a
 * reply is still being sent. */
static void conn_process(server *sv, conn *c, int expired, int *changed)
{
    conn_flush(c);
    while (!c->dead && !c->closing && c->out.n == 0 && c->in.n - c->in.off >= 4) {
        uint32_t len = gk_store_get_u32(c->in.p + c->in.off);
        if (len == 0 || len > frame_cap(sv, c)) {
            c->dead = 1;
            break;
        }
        if (c->in.n - c->in.off - 4 < len)
            break;
        int rc = gk_store_serve(sv, c, c->in.p + c->in.off + 4, len, expired, changed);
        if (rc < 0)
            c->dead = 1;
        if (rc <= 0)
            break;
        c->waiting = expired = 0;
        c->in.off += 4 + (size_t)len;
        conn_flush(c);
    }
    if (c->in.off == c->in.n)
        c->in.n = c->in.off = 0;
}

/* Answers everything answerable, expiring waits that are due, until nothing changes. */
static void pump(server *sv)
{
    int changed;
    double now = gk_store_now();
    do {
        changed = 0;
        for (int i = 0; i < sv->nc; i++) {
            conn *c = sv->c[i];
            if (c->rank < 0 && !c->closing && now >= c->deadline)
                c->dead = 1; /* no HELLO in time */
            conn_process(sv, c, c->waiting && now >= c->deadline, &changed);
        }
    } while (changed);
}

static void conn_free(server *sv, conn *c)
{
    gk_store_conn_left(sv, c);
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

/* With more connections waiting for their HELLO than the job allows, the oldest is refused. */
static void limit_pending(server *sv)
{
    int pending = 0;
    conn *oldest = NULL;
    for (int i = 0; i < sv->nc; i++) {
        conn *c = sv->c[i];
        if (c->rank < 0 && !c->dead && !c->closing) {
            pending++;
            if (!oldest || c->deadline < oldest->deadline)
                oldest = c;
        }
    }
    if (oldest && pending > sv->lim.pending) {
        char why[120];
        snprintf(why, sizeof why, "more than %d connections are waiting to say HELLO",
                 sv->lim.pending);
        gk_store_refuse(sv, oldest, RF_BUSY, why);
        conn_flush(oldest);
    }
}

static void peer_name(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN], port[16];
    if (getpeername(fd, (struct sockaddr *)&ss, &len) ||
        getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV))
        snprintf(out, cap, "an unknown address");
    else
        snprintf(out, cap, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
}

static void accept_all(server *sv)
{
    for (;;) {
        int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
            errno != ECONNABORTED)
            sv->accept_at = gk_store_now() + ACCEPT_PAUSE_S; /* EMFILE, ENFILE, ENOBUFS, ENOMEM */
        if (fd < 0)
            return;
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
            sv->accept_at = gk_store_now() + ACCEPT_PAUSE_S;
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd, c->rank = -1, c->deadline = gk_store_now() + HELLO_S;
        peer_name(fd, c->peer, sizeof c->peer);
        sv->c[sv->nc++] = c;
        limit_pending(sv);
    }
}

/* The poll timeout: until the first wait or HELLO expires, accepting resumes, or the stop
 * deadline, else none. */
static int next_timeout(const server *sv)
{
    double t = sv->stopping ? sv->stop_deadline : -1;
    if (sv->accept_at > 0)
        t = t < 0 || sv->accept_at < t ? sv->accept_at : t;
    for (int i = 0; i < sv->nc; i++)
        if ((sv->c[i]->waiting || sv->c[i]->rank < 0) && (t < 0 || sv->c[i]->deadline < t))
            t = sv->c[i]->deadline;
    return t < 0 ? -1 : gk_store_ms_until(t);
}

/* Polls the wake pipe, the listening socket (unless accepting is paused) and the connections. */
static int poll_all(server *sv, struct pollfd *pf)
{
    int nc = sv->nc, listening = sv->accept_at <= gk_store_now();
    if (listening)
        sv->accept_at = 0;
    pf[0] = (struct pollfd){sv->wake[0], POLLIN, 0};
    pf[1] = (struct pollfd){listening ? sv->lfd : -1, POLLIN, 0};
    for (int i = 0; i < nc; i++)
        pf[i + 2] =
            (struct pollfd){sv->c[i]->fd,
                            (sv->c[i]->closing ? 0 : POLLIN) | (sv->c[i]->out.n ? POLLOUT : 0), 0};
    return poll(pf, nc + 2, next_timeout(sv)) < 0 && errno != EINTR ? -1 : 0;
}

static void *server_main(void *arg)
{
    server *sv = arg;
    struct pollfd *pf = NULL;
    int npf = 0;
    for (;;) {
        pump(sv);
        int ranks = reap(sv);
        if (sv->stopping && (ranks == 0 || gk_store_now() >= sv->stop_deadline))
            break;
        if (npf < sv->nc + 2) {
            struct pollfd *p = realloc(pf, (sv->nc + 16) * sizeof *p);
            if (!p)
                break; /* out of memory: the clients see the store close */
            pf = p, npf = sv->nc + 16;
        }
        int nc = sv->nc;
        if (poll_all(sv, pf))
            break;
        char why;
        if ((pf[0].revents & POLLIN) && read(sv->wake[0], &why, 1) == 1 && !sv->stopping)
            sv->stopping = 1, sv->stop_deadline = gk_store_now() + (why == 'w' ? sv->stop_wait : 0);
        for (int i = 0; i < nc; i++) {
            if (pf[i + 2].revents & POLLOUT)
                conn_flush(sv->c[i]);
            if (pf[i + 2].revents & (POLLIN | POLLHUP | POLLERR))
                conn_read(sv, sv->c[i]);
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
    gk_store_keys_free(sv);
    free(sv->c);
    free(sv->live);
    free(sv->left);
    free(sv);
}

static int is_loopback(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    return a->sa_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/* Listens at address a: 0, or errno (EADDRNOTAVAIL: not an address of this machine). */
static int listen_at(server *sv, const struct sockaddr *a, socklen_t len)
{
    int one = 1, zero = 0;
    int fd = socket(a->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    if (a->sa_family == AF_INET6) /* "::" takes IPv4 too */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    /* also lets gpt-train's spawner hold the port for us until we listen (train/spawn.c) */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a, len) || listen(fd, 1024)) {
        int err = errno;
        close(fd);
        return err;
    }
    sv->lfd = fd;
    return 0;
}

/* Listens on every address (IPv6 and IPv4 when the host has IPv6). */
static int listen_any(server *sv, int port)
{
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any,
                              .sin6_port = htons(port)};
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY),
                             .sin_port = htons(port)};
    int err = listen_at(sv, (struct sockaddr *)&a6, sizeof a6);
    return err == EAFNOSUPPORT ? listen_at(sv, (struct sockaddr *)&a4, sizeof a4) : err;
}

/* Listens at the first address of host that is this machine's (a loopback one only when every
 * rank is local: a host name that this machine's /etc/hosts maps to 127.0.1.1 is reached by the
 * other nodes at another address), else on every address. *bound: the port. */
static int server_listen(server *sv, const gk_store_config *cf, int *bound, gk_err *e)
{
    char port[16];
    snprintf(port, sizeof port, "%d", cf->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *res = NULL;
    int g = getaddrinfo(cf->host, port, &hints, &res), err = EADDRNOTAVAIL;
    if (g)
        return gk_errf(e, GK_EIO, "cannot listen at %s: %s", cf->host,
                       g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
    for (struct addrinfo *a = res; a && err == EADDRNOTAVAIL; a = a->ai_next)
        if (cf->local || !is_loopback(a->ai_addr))
            err = listen_at(sv, a->ai_addr, a->ai_addrlen);
    freeaddrinfo(res);
    if (err == EADDRNOTAVAIL) /* not this machine's: a service's address, say */
        err = listen_any(sv, cf->port);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (!err && getsockname(sv->lfd, (struct sockaddr *)&ss, &len))
        err = errno;
    if (err)
        return gk_errf(e, GK_EIO, "cannot listen on port %d: %s", cf->port, strerror(err));
    char host[INET6_ADDRSTRLEN], serv[16];
    if (getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV))
        snprintf(host, sizeof host, "?"), snprintf(serv, sizeof serv, "%d", cf->port);
    snprintf(sv->bound, sizeof sv->bound, "%s", host);
    *bound = atoi(serv);
    return 0;
}

static int server_config(server *sv, const gk_store_config *cf, gk_err *e)
{
    size_t n = cf->token ? strlen(cf->token) : 0;
    if (n > MAX_TOKEN)
        return gk_errf(e, GK_EUSAGE, "the job token has %zu bytes (at most %d)", n, MAX_TOKEN);
    memcpy(sv->token, cf->token ? cf->token : "", n + 1);
    sv->token_n = n;
    sv->world = cf->world > 0 && cf->world <= MAX_RANK ? cf->world : 0;
    gk_store_limits_for(&sv->lim, sv->world);
    sv->stop_wait = cf->stop_wait;
    sv->nb = 64;
    sv->tab = calloc(sv->nb, sizeof *sv->tab);
    return sv->tab ? 0 : gk_errf(e, GK_ENOMEM, "out of memory");
}

/* The thread takes no signals: they go to the process's other threads. */
int gk_store_server_start(gk_store_server **out, const gk_store_config *cf, int *bound, gk_err *e)
{
    server *sv = calloc(1, sizeof *sv);
    if (!sv)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    sv->lfd = sv->wake[0] = sv->wake[1] = -1;
    int rc = server_config(sv, cf, e);
    if (!rc)
        rc = server_listen(sv, cf, bound, e);
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

const char *gk_store_server_bound(const gk_store_server *sv) { return sv->bound; }

void gk_store_server_stop(gk_store_server *sv, char how)
{
    while (write(sv->wake[1], &how, 1) < 0 && errno == EINTR)
        ;
    pthread_join(sv->thread, NULL);
    server_free(sv);
}
