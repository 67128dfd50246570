/* test_store.c: the rendezvous store (kernels/comm/store.h) across processes on loopback (the
 * ranks: comm_harness.h): its operations, timeouts, junk on the wire, a taken port, a late
 * server, and ranks that are gone; and what it lets in: the address it listens on, the job
 * token, a duplicate rank, floods of values and connections, descriptors used up. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/resource.h>

#include "comm_harness.h"
#include "kernels/comm/store_wire.h"

static void store_ops_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_err e = {0};
    if (!s)
        return;
    char key[32], want[32];
    snprintf(key, sizeof key, "k/%d", rank);
    snprintf(want, sizeof want, "value of %d", rank);
    CHECK_OK(gk_store_set(s, key, want, strlen(want), &e), &e);
    int64_t v = 0;
    CHECK_OK(gk_store_add(s, "count", 1, &v, &e), &e);
    CHECK(v >= 1 && v <= world);
    if (rank == 1) { /* a large value, and one set late: rank 2's get waits for it */
        size_t n = 60 << 10;
        unsigned char *big = malloc(n);
        for (size_t i = 0; i < n; i++)
            big[i] = (unsigned char)(i * 7 + 3);
        CHECK_OK(gk_store_set(s, "big", big, n, &e), &e);
        free(big);
        sleep_ms(200);
        CHECK_OK(gk_store_set(s, "late", "", 0, &e), &e);
    }
    for (int r = 0; r < world; r++) {
        void *val = NULL;
        size_t n = 0;
        snprintf(key, sizeof key, "k/%d", r);
        snprintf(want, sizeof want, "value of %d", r);
        CHECK_OK(gk_store_get(s, key, &val, &n, &e), &e);
        CHECK(val && n == strlen(want) && strcmp(val, want) == 0);
        free(val);
    }
    if (rank == 2) {
        void *val = NULL;
        size_t n = 1;
        double t0 = now();
        CHECK_OK(gk_store_get(s, "late", &val, &n, &e), &e);
        CHECK(n == 0 && val && ((char *)val)[0] == 0);
        free(val);
        CHECK_OK(gk_store_get(s, "big", &val, &n, &e), &e);
        CHECK(n == 60 << 10);
        for (size_t i = 0; val && n == 60 << 10 && i < n; i += 409)
            CHECKF(((unsigned char *)val)[i] == (unsigned char)(i * 7 + 3), "byte %zu", i);
        free(val);
        CHECK(now() - t0 < 5);
    }
    sync_ranks(s, "added", rank, world);
    CHECK_OK(gk_store_add(s, "count", 0, &v, &e), &e);
    CHECK(v == world);
    void *val = NULL;
    size_t n = 0;
    CHECK_OK(gk_store_get(s, "count", &val, &n, &e), &e); /* kept as text */
    CHECK(val && strcmp(val, "3") == 0);
    free(val);
    CHECK(gk_store_check(s, "k/0", &e) == 1);
    CHECK(gk_store_check(s, "nothing", &e) == 0);
    CHECK(gk_store_add(s, "k/0", 1, &v, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "key 'k/0' is not an integer") != NULL, "%s", e.msg);
    int gone[4];
    CHECK(gk_store_gone(s, gone, 4, &e) == 0);
    CHECK(strcmp(gk_store_local_host(s), "127.0.0.1") == 0);
    sync_ranks(s, "checked", rank, world);
    if (rank == 1) { /* rank 0 is closing by now: its store still answers */
        sleep_ms(300);
        CHECK_OK(gk_store_set(s, "after", "x", 1, &e), &e);
    }
    double t0 = now();
    gk_store_close(s);
    if (rank == 0) /* it waited for rank 1 */
        CHECKF(now() - t0 > 0.25 && now() - t0 < 5, "close took %g s", now() - t0);
}

static void test_store_ops(void) { run_ranks(3, store_ops_rank); }

/* The server drops a connection that sends a frame too long, or a request before HELLO, and
 * serves on. */
static void send_junk(gk_store *s, const unsigned char *junk, size_t n)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(gk_store_port(s)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char c;
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(send(fd, junk, n, MSG_NOSIGNAL) == (ssize_t)n);
    struct pollfd pf = {fd, POLLIN, 0};
    CHECK(poll(&pf, 1, 2000) == 1 && recv(fd, &c, 1, 0) == 0);
    close(fd);
    gk_err e = {0};
    CHECK(gk_store_check(s, "here", &e) >= 0);
}

/* Rank 1's waits time out after 1 s (rank 0's store waits up to 10 s for it to close). */
static void store_timeout_rank(int rank, int world)
{
    gk_store *s = join(rank, world, rank == 0 ? 10 : 1);
    gk_err e = {0};
    if (s) /* rank 1 has connected before rank 0 closes (closing waits only for ranks it knows) */
        sync_ranks(s, "joined", rank, world);
    if (s && rank == 1) {
        char want[128];
        double t0 = now();
        void *val = (void *)1;
        size_t n = 1;
        CHECK(gk_store_get(s, "missing", &val, &n, &e) == GK_EIO);
        CHECK(val == NULL && n == 0);
        snprintf(want, sizeof want, "rendezvous at 127.0.0.1:%d: key 'missing' not set within 1 s",
                 gk_store_port(s));
        CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
        CHECKF(now() - t0 >= 0.9 && now() - t0 < 3, "took %g s", now() - t0);
        const char *keys[] = {"here", "absent"};
        CHECK_OK(gk_store_set(s, "here", "1", 1, &e), &e); /* the connection is still in step */
        CHECK(gk_store_wait(s, keys, 2, &e) == GK_EIO);
        CHECKF(strstr(e.msg, ": key 'absent' not set within 1 s") != NULL, "%s", e.msg);
        CHECK(gk_store_check(s, "here", &e) == 1);
    }
    if (s && rank == 0) {
        send_junk(s, (const unsigned char[]){0xff, 0xff, 0xff, 0xff}, 4);
        send_junk(s, (const unsigned char[]){5, 0, 0, 0, 2, 1, 0, 0, 0}, 9); /* SET, no HELLO */
    }
    gk_store_close(s);
}

static void test_store_timeout(void) { run_ranks(2, store_timeout_rank); }

static void test_store_no_server(void)
{
    int port = free_port();
    gk_store *s = (gk_store *)1;
    gk_err e = {0};
    char want[128];
    double t0 = now();
    CHECK(gk_store_open(&s, "127.0.0.1", port, 0, 1, 1, &e) == GK_EIO);
    CHECK(s == NULL);
    snprintf(want, sizeof want, "rendezvous at 127.0.0.1:%d: no store answered within 1 s "
             "(Connection refused)", port);
    CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
    CHECKF(now() - t0 >= 0.9 && now() - t0 < 3, "took %g s", now() - t0);
}

static void test_store_port_taken(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&a, len) && !listen(fd, 1) &&
          !getsockname(fd, (struct sockaddr *)&a, &len));
    gk_store *s = NULL;
    gk_err e = {0};
    char want[128];
    CHECK(gk_store_open(&s, "127.0.0.1", ntohs(a.sin_port), 1, 0, 1, &e) == GK_EIO);
    snprintf(want, sizeof want, "cannot listen on port %d: Address already in use",
             ntohs(a.sin_port));
    CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
    close(fd);
}

/* Rank 1 starts first and keeps trying until rank 0 serves, half a second later. */
static int late_port;

static void late_server_rank(int rank, int world)
{
    (void)world;
    gk_store *s = NULL;
    gk_err e = {0};
    if (rank == 0)
        sleep_ms(500);
    CHECK_OK(gk_store_open(&s, "localhost", late_port, rank == 0, rank, 5, &e), &e);
    if (!s)
        return;
    void *val = NULL;
    size_t n = 0;
    if (rank == 1)
        CHECK_OK(gk_store_set(s, "hi", "there", 5, &e), &e);
    else
        CHECK_OK(gk_store_get(s, "hi", &val, &n, &e), &e);
    CHECK(rank == 1 || (val && strcmp(val, "there") == 0));
    free(val);
    gk_store_close(s);
}

static void test_store_late_server(void)
{
    late_port = free_port();
    run_ranks(2, late_server_rank);
}

/* Rank 2 dies (exits without closing); the store then lists it, and only it, as gone. */
static void gone_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_err e = {0};
    if (!s)
        return;
    sync_ranks(s, "joined", rank, world);
    if (rank == 2)
        _exit(0);
    int gone[4] = {-1, -1, -1, -1}, n = 0;
    double t0 = now();
    while ((n = gk_store_gone(s, gone, 4, &e)) == 0 && now() - t0 < 5)
        sleep_ms(20);
    CHECKF(n == 1 && gone[0] == 2, "%d gone: %d %s", n, gone[0], n < 0 ? e.msg : "");
    sync_ranks(s, "seen", rank, 2);
    gk_store_close(s);
}

static void test_store_gone(void)
{
    int status[3];
    spawn(3, gone_rank, status);
    for (int r = 0; r < 3; r++)
        CHECKF(status[r] != -1 && WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
               "rank %d: status 0x%x", r, status[r]);
}

/* ---- what the store lets in ---- */

/* A raw connection to the store at port on loopback: the fd, or -1. */
static int raw_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Whether the peer closes fd within ms (reading and discarding what it sends). */
static int closed_within(int fd, int ms)
{
    char buf[256];
    double end = now() + ms * 1e-3;
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        int left = (int)((end - now()) * 1e3);
        if (left <= 0 || poll(&pf, 1, left) != 1)
            return 0;
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0)
            return 1;
    }
}

/* Appends a HELLO of rank with token (version 2, pid 1). */
static void hello_frame(gk_store_buf *b, int rank, const char *token)
{
    uint8_t r[8], v[8], pid[8];
    int fail = 0;
    gk_store_put_u64(r, (uint64_t)rank), gk_store_put_u64(v, VERSION), gk_store_put_u64(pid, 1);
    size_t at = gk_store_frame_begin(b, OP_HELLO, &fail);
    fail |= gk_store_buf_field(b, r, 8) | gk_store_buf_field(b, v, 8) |
            gk_store_buf_field(b, token, strlen(token)) | gk_store_buf_field(b, pid, 8);
    CHECK(!fail);
    gk_store_frame_end(b, at);
}

static gk_store *open_as(const char *host, int port, int rank, int world, const char *token,
                         gk_err *e)
{
    gk_store *s = NULL;
    gk_store_opts o = {.serve = port == 0, .world = world, .local = 1, .token = token,
                       .token_name = "GPT_DIST_TOKEN", .timeout_s = 5};
    memset(e, 0, sizeof *e);
    gk_store_open_opts(&s, host, port, rank, &o, e);
    return s;
}

/* A loopback job's store listens on 127.0.0.1 only: not on this machine's other addresses. */
static void test_store_bind_loopback(void)
{
    gk_err e;
    gk_store *s = open_as("127.0.0.1", 0, 0, 2, "t", &e);
    CHECK_OK(e.code, &e);
    if (!s)
        return;
    CHECKF(strcmp(gk_store_bound(s), "127.0.0.1") == 0, "bound to %s", gk_store_bound(s));
    struct ifaddrs *ifs = NULL, *i;
    char name[INET_ADDRSTRLEN] = "";
    getifaddrs(&ifs);
    for (i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK))
            break;
    if (i) {
        struct sockaddr_in a = *(struct sockaddr_in *)i->ifa_addr;
        a.sin_port = htons(gk_store_port(s));
        inet_ntop(AF_INET, &a.sin_addr, name, sizeof name);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECKF(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0 &&
               errno == ECONNREFUSED, "the store answered at %s", name);
        close(fd);
    }
    freeifaddrs(ifs);
    gk_store_close(s);
    /* a multi-node job whose host name maps to loopback here: every address */
    gk_store_opts o = {.serve = 1, .world = 2, .timeout_s = 5};
    CHECK_OK(gk_store_open_opts(&s, "127.0.0.1", 0, 0, &o, &e), &e);
    CHECKF(s && strcmp(gk_store_bound(s), "::") == 0, "bound to %s", s ? gk_store_bound(s) : "");
    gk_store_close(s);
    if (!i)
        SKIP("no non-loopback IPv4 address to try the loopback store at");
}

/* A client without the job's token is refused at HELLO and never reaches a key. */
static void test_store_token(void)
{
    gk_err e, e2;
    gk_store *s = open_as("127.0.0.1", 0, 0, 2, "s3cret", &e);
    CHECK_OK(e.code, &e);
    if (!s)
        return;
    int port = gk_store_port(s);
    char want[200];
    snprintf(want, sizeof want, "rendezvous at 127.0.0.1:%d: refused: wrong or missing job token "
             "(GPT_DIST_TOKEN)", port);
    const char *bad[] = {NULL, "", "s3cres", "s3cret2", "s3cre"};
    for (int k = 0; k < 5; k++) {
        CHECK(open_as("127.0.0.1", port, 1, 2, bad[k], &e2) == NULL);
        CHECKF(e2.code == GK_EUSAGE && strcmp(e2.msg, want) == 0, "%s", e2.msg);
    }
    /* a HELLO with a wrong token, then a SET: the connection closes and the key is not set */
    gk_store_buf b = {0};
    hello_frame(&b, 1, "s3creT");
    int fail = 0;
    size_t at = gk_store_frame_begin(&b, OP_SET, &fail);
    fail |= gk_store_buf_field(&b, "x", 1) | gk_store_buf_field(&b, "y", 1);
    gk_store_frame_end(&b, at);
    int fd = raw_connect(port);
    CHECK(!fail && fd >= 0 && send(fd, b.p, b.n, MSG_NOSIGNAL) == (ssize_t)b.n);
    free(b.p);
    CHECK(closed_within(fd, 2000));
    close(fd);
    CHECK(gk_store_check(s, "x", &e) == 0);
    gk_store *ok = open_as("127.0.0.1", port, 1, 2, "s3cret", &e2);
    CHECK_OK(e2.code, &e2);
    gk_store_close(ok);
    gk_store_close(s);
}
/* A second live rank 1 is refused, naming both; so is a rank outside the job. */
static void test_store_duplicate(void)
{
    gk_err e, e2;
    gk_store *s = open_as("127.0.0.1", 0, 0, 2, "t", &e);
    CHECK_OK(e.code, &e);
    if (!s)
        return;
    int port = gk_store_port(s);
    gk_store *one = open_as("127.0.0.1", port, 1, 2, "t", &e2);
    CHECK_OK(e2.code, &e2);
    CHECK(open_as("127.0.0.1", port, 1, 2, "t", &e2) == NULL);
    char want[200];
    snprintf(want, sizeof want, "rendezvous at 127.0.0.1:%d: refused: rank 1 is already connected "
             "from 127.0.0.1:", port);
    CHECKF(e2.code == GK_EUSAGE && starts(e2.msg, want), "%s", e2.msg);
    snprintf(want, sizeof want,
             " (pid %d); refusing a second rank 1 from 127.0.0.1:", (int)getpid());
    CHECKF(strstr(e2.msg, want) != NULL, "%s", e2.msg);
    snprintf(want, sizeof want, " (pid %d)", (int)getpid());
    CHECKF(strlen(e2.msg) > strlen(want) &&
           strcmp(e2.msg + strlen(e2.msg) - strlen(want), want) == 0, "%s", e2.msg);
    CHECK(open_as("127.0.0.1", port, 2, 3, "t", &e2) == NULL); /* the client thinks 3 ranks */
    CHECKF(strstr(e2.msg, "refused: rank 2 is not below the job's 2 ranks") != NULL, "%s", e2.msg);
    CHECK(gk_store_connected(s, &e) == 2);
    gk_store_close(one); /* then rank 1 may connect again */
    for (double t0 = now(); gk_store_connected(s, &e) != 1 && now() - t0 < 2;)
        sleep_ms(10);
    one = open_as("127.0.0.1", port, 1, 2, "t", &e2);
    CHECK_OK(e2.code, &e2);
    gk_store_close(one);
    gk_store_close(s);
}

/* A client sets values until the store refuses: it holds no more than a job of 2 may, and serves
 * on; a frame longer than the job's is dropped unread; so is a long frame before HELLO. */
static void test_store_flood_values(void)
{
    gk_err e;
    gk_store *s = open_as("127.0.0.1", 0, 0, 2, "t", &e);
    CHECK_OK(e.code, &e);
    if (!s)
        return;
    gk_store_limits lim;
    gk_store_limits_for(&lim, 2);
    size_t n = 60 << 10, sets = 0;
    char *val = calloc(1, lim.value + 1), key[32];
    CHECK(gk_store_set(s, "big", val, lim.value + 1, &e) == GK_EUSAGE);
    CHECKF(strstr(e.msg, "key 'big': a value of ") && strstr(e.msg, " at most)"), "%s", e.msg);
    for (; sets < 1000; sets++) {
        snprintf(key, sizeof key, "v/%zu", sets);
        if (gk_store_set(s, key, val, n, &e))
            break;
    }
    CHECKF(sets * n <= lim.bytes && sets * n + 2 * n > lim.bytes, "%zu values of %zu", sets, n);
    CHECKF(e.code == GK_EFORMAT && strstr(e.msg, "bytes (this job's most: "), "%s", e.msg);
    for (sets = 0; sets < 1000; sets++) {
        snprintf(key, sizeof key, "k/%zu", sets);
        if (gk_store_set(s, key, "", 0, &e))
            break;
    }
    CHECKF(sets < lim.keys && strstr(e.msg, "keys, this job's most"), "%zu keys: %s", sets, e.msg);
    CHECK(gk_store_check(s, "v/0", &e) == 1);
    gk_store_buf b = {0};
    hello_frame(&b, 1, "t");
    uint8_t huge[5] = {0, 0, 0, 4, OP_SET}; /* 64 MiB declared */
    gk_store_buf_put(&b, huge, 5);
    int fd = raw_connect(gk_store_port(s));
    CHECK(fd >= 0 && send(fd, b.p, b.n, MSG_NOSIGNAL) == (ssize_t)b.n && closed_within(fd, 2000));
    close(fd);
    fd = raw_connect(gk_store_port(s)); /* before HELLO: 4 KiB is too long */
    CHECK(fd >= 0 && send(fd, (uint8_t[]){0, 16, 0, 0, OP_HELLO}, 5, MSG_NOSIGNAL) == 5 &&
          closed_within(fd, 2000));
    close(fd);
    free(b.p);
    free(val);
    gk_store_close(s);
}

/* 100 connections that never say HELLO: all but the job's few are refused at once, and a rank
 * still connects. */
static void test_store_flood_connections(void)
{
    gk_err e;
    gk_store *s = open_as("127.0.0.1", 0, 0, 2, "t", &e);
    CHECK_OK(e.code, &e);
    if (!s)
        return;
    gk_store_limits lim;
    gk_store_limits_for(&lim, 2);
    int fd[100], closed = 0;
    for (int i = 0; i < 100; i++)
        fd[i] = raw_connect(gk_store_port(s));
    for (int i = 0; i < 100; i++)
        closed += fd[i] >= 0 && closed_within(fd[i], i < 100 - lim.pending ? 2000 : 50);
    CHECKF(closed == 100 - lim.pending, "%d of 100 closed", closed);
    gk_store *one = open_as("127.0.0.1", gk_store_port(s), 1, 2, "t", &e);
    CHECK_OK(e.code, &e);
    gk_store_close(one);
    for (int i = 0; i < 100; i++)
        close(fd[i]);
    gk_store_close(s);
}

/* Rank 0's process has no descriptor left: its store does not spin (CPU time over a second),
 * and rank 1, waiting in the listen queue, connects once descriptors are freed. */
static void emfile_rank(int rank, int world)
{
    (void)world;
    gk_store *s = NULL;
    gk_err e = {0};
    int port = 0;
    if (rank == 1) {
        struct pollfd pf = {port_pipe[0], POLLIN, 0};
        CHECK(poll(&pf, 1, 10000) == 1 && read(port_pipe[0], &port, sizeof port) == sizeof port);
        CHECK_OK(gk_store_open(&s, "127.0.0.1", port, 0, 1, 10, &e), &e);
        CHECK_OK(gk_store_set(s, "hi", "1", 1, &e), &e);
        gk_store_close(s);
        return;
    }
    CHECK_OK(gk_store_open(&s, "127.0.0.1", 0, 1, 0, 10, &e), &e);
    if (!s)
        return;
    struct rlimit rl = {64, 64};
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    int held[64], nheld = 0;
    while (nheld < 64 && (held[nheld] = dup(0)) >= 0)
        nheld++;
    CHECK(errno == EMFILE);
    port = gk_store_port(s);
    CHECK(write(port_pipe[1], &port, sizeof port) == sizeof port);
    sleep_ms(200); /* rank 1 connects */
    struct rusage r0, r1;
    double t0 = now();
    getrusage(RUSAGE_SELF, &r0);
    sleep_ms(1000);
    getrusage(RUSAGE_SELF, &r1);
    double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec -
                          r0.ru_stime.tv_sec) +
                 (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
                          r0.ru_stime.tv_usec) * 1e-6;
    CHECKF(cpu < 0.2 * (now() - t0), "%.2f s of CPU in %.2f s", cpu, now() - t0);
    CHECK(gk_store_check(s, "hi", &e) == 0); /* served meanwhile */
    while (nheld > 0)
        close(held[--nheld]);
    void *v = NULL;
    size_t n;
    CHECK_OK(gk_store_get(s, "hi", &v, &n, &e), &e);
    free(v);
    gk_store_close(s);
}

static void test_store_emfile(void) { run_ranks(2, emfile_rank); }

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* the store must not need SIGPIPE ignored */
    RUN(test_store_ops);
    RUN(test_store_timeout);
    RUN(test_store_no_server);
    RUN(test_store_port_taken);
    RUN(test_store_late_server);
    RUN(test_store_gone);
    RUN(test_store_bind_loopback);
    RUN(test_store_token);
    RUN(test_store_duplicate);
    RUN(test_store_flood_values);
    RUN(test_store_flood_connections);
    RUN(test_store_emfile);
    return TEST_END();
}
