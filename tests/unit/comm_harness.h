/* comm_harness.h: the ranks of a multi-process unit test (test_store.c, test_comm.c): each case
 * forks its ranks (before any store or Gloo thread exists in them); rank 0 opens the store on a
 * free port and passes the port to the others through a pipe; a rank's failed CHECKs become its
 * exit status, which the parent checks, killing every rank that outlives the case's limit. */
#ifndef GK_TEST_COMM_HARNESS_H
#define GK_TEST_COMM_HARNESS_H

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/comm/comm.h"
#include "kernels/comm/store.h"
#include "test.h"

#define MAX_WORLD 4
#define LIMIT_S 30.0 /* a case that runs longer has hung */

static int port_pipe[2] = {-1, -1};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) { poll(NULL, 0, ms); }

static inline int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A port no one listens on now, drawn at random below the kernel's ephemeral range so that no
 * outgoing connection is given it before the test listens there; -1 when none was found. */
static inline int free_port(void)
{
    int low = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f && fscanf(f, "%d", &low) != 1)
        low = 32768;
    if (f)
        fclose(f);
    if (low <= 10001)
        low = 10001;
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (int tries = 0; tries < 100; tries++) {
        int port = 10000 + (int)(rand_r(&seed) % (unsigned)(low - 10000));
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_ANY)};
        int fd = socket(AF_INET, SOCK_STREAM, 0),
            ok = fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a);
        if (fd >= 0)
            close(fd);
        if (ok)
            return port;
    }
    return -1;
}

typedef void (*rank_fn)(int rank, int world);

/* Runs fn(rank, world) in world processes; status[r] gets waitpid's status (-1: killed by us
 * after LIMIT_S). */
static void spawn(int world, rank_fn fn, int *status)
{
    pid_t pid[MAX_WORLD] = {0};
    if (pipe(port_pipe)) {
        CHECK(!"pipe");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        status[r] = -1;
        if ((pid[r] = fork()) == 0) {
            t_cur_failed = 0;
            fn(r, world);
            exit(t_cur_failed);
        }
        CHECK(pid[r] > 0);
    }
    close(port_pipe[0]);
    close(port_pipe[1]);
    double deadline = now() + LIMIT_S;
    for (int left = world; left > 0;) {
        for (int r = 0; r < world; r++)
            if (pid[r] > 0 && waitpid(pid[r], &status[r], WNOHANG) == pid[r])
                pid[r] = 0, left--;
        if (left > 0 && now() > deadline) {
            for (int r = 0; r < world; r++)
                if (pid[r] > 0) {
                    kill(pid[r], SIGKILL);
                    waitpid(pid[r], NULL, 0);
                    status[r] = -1;
                    CHECKF(0, "rank %d still ran after %g s", r, LIMIT_S);
                }
            break;
        }
        sleep_ms(10);
    }
}

/* Runs fn in world processes and checks that each exited 0. */
static void run_ranks(int world, rank_fn fn)
{
    int status[MAX_WORLD];
    spawn(world, fn, status);
    for (int r = 0; r < world; r++)
        CHECKF(status[r] != -1 && WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
               "rank %d: status 0x%x", r, status[r]);
}

/* Opens the store on loopback: rank 0 serves on a free port and tells the others. */
static gk_store *join(int rank, int world, double timeout_s)
{
    gk_store *s = NULL;
    gk_err e = {0};
    int port = 0;
    if (rank == 0) {
        CHECK_OK(gk_store_open(&s, "127.0.0.1", 0, 1, 0, timeout_s, &e), &e);
        port = s ? gk_store_port(s) : -1;
        for (int r = 1; r < world; r++)
            CHECK(write(port_pipe[1], &port, sizeof port) == sizeof port);
        return s;
    }
    struct pollfd pf = {port_pipe[0], POLLIN, 0};
    CHECK(poll(&pf, 1, 10000) == 1 && read(port_pipe[0], &port, sizeof port) == sizeof port);
    if (port > 0)
        CHECK_OK(gk_store_open(&s, "127.0.0.1", port, 0, rank, timeout_s, &e), &e);
    return s;
}

/* Waits until every rank has set "sync/NAME/r". */
static inline void sync_ranks(gk_store *s, const char *name, int rank, int world)
{
    char key[MAX_WORLD][64];
    const char *keys[MAX_WORLD];
    gk_err e = {0};
    for (int r = 0; r < world; r++)
        snprintf(key[r], sizeof key[r], "sync/%s/%d", name, r), keys[r] = key[r];
    CHECK_OK(gk_store_set(s, key[rank], "", 0, &e), &e);
    CHECK_OK(gk_store_wait(s, keys, world, &e), &e);
}

#endif
