/* test_store.c: the rendezvous store (kernels/comm/store.h) across processes on loopback (the
 * ranks: comm_harness.h): its operations, timeouts, junk on the wire, a taken port, a late
 * server, and ranks that are gone. */
#include "comm_harness.h"

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
        size_t n = 3 << 20;
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
        CHECK(n == 3 << 20);
        for (size_t i = 0; val && n == 3 << 20 && i < n; i += 4099)
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

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* the store must not need SIGPIPE ignored */
    RUN(test_store_ops);
    RUN(test_store_timeout);
    RUN(test_store_no_server);
    RUN(test_store_port_taken);
    RUN(test_store_late_server);
    RUN(test_store_gone);
    return TEST_END();
}
