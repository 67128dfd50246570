/* test_nccl_emu.c: the CUDA backend's NCCL collectives (kernels/cuda/comm_nccl.cu, the comm_open
 * slot) on the emulator's NCCL (kernels/emu/emu_nccl.cpp), with 2 and 3 ranks as processes
 * forked before anything is opened. Rank 0 hosts the rendezvous store and hands its port to the
 * others through pipes; every rank opens device $GPT_TEST_CUDA (default cuda-emu) and its comm
 * through the store (gk_comm_open, as gpt-train does: the communicator's id travels there) and
 * moves data only through the ops interface. With GPT_TEST_CUDA=cuda (a real GPU, and real NCCL)
 * only the one-rank cases run: the lent machines have one GPU, and NCCL takes one rank per GPU.
 * Sums (one at a time, and started then waited for) are compared bit for bit with the sum in rank
 * order (the emulator's order).
 * Failures: a rank SIGKILLed before a collective, a rank that stops calling (the timeout), a rank
 * that never joins, ranks that disagree on a collective: the others get GK_EIO in bounded time.
 * A child's exit status carries its checks (0 passed, 1 failed, 77 no backend library: skip). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "kernels/comm/comm.h"
#include "kernels/comm/store.h"
#include "test.h"

#define MAX_RANKS 3
#define NO_LIBRARY 77

static const char *device = "cuda-emu"; /* $GPT_TEST_CUDA */
static int emulated = 1;                 /* device is cuda-emu: any number of ranks */

typedef struct rank_ctx {
    int rank, world;
    gk_backend *be;
    gk_store *store; /* rank 0 hosts it on loopback */
} rank_ctx;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pause_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- ranks as processes ---- */

static int open_comm(rank_ctx *r, double timeout_s, gk_comm **c, gk_err *e)
{
    return gk_comm_open(r->be, r->store, r->rank, r->world, timeout_s, NULL, c, e);
}

/* One rank: opens the device and the store (rank 0 serves it on a free port and writes the port
 * to the others' pipes), runs fn; exits with its checks. */
static void rank_main(int rank, int world, int fds[][2], void (*fn)(rank_ctx *))
{
    signal(SIGPIPE, SIG_IGN);
    t_cur_failed = 0;
    rank_ctx r = {rank, world, NULL, NULL};
    gk_err e = {0};
    gk_backend_opts o = {.device = device, .threads = 1, .bf16 = 0, .attention = GK_ATTN_AUTO};
    if (gk_backend_open(&r.be, &o, &e)) {
        fprintf(stderr, "note: %s\n", e.msg);
        exit(NO_LIBRARY);
    }
    int port = 0;
    if (rank == 0) {
        CHECK_OK(gk_store_open(&r.store, "127.0.0.1", 0, 1, 0, 20, &e), &e);
        port = r.store ? gk_store_port(r.store) : -1;
        for (int q = 1; q < world; q++)
            CHECK(write(fds[q][1], &port, sizeof port) == sizeof port);
    } else {
        CHECKF(read(fds[rank][0], &port, sizeof port) == sizeof port && port > 0,
               "rank %d got no port", rank);
        if (port > 0) CHECK_OK(gk_store_open(&r.store, "127.0.0.1", port, 0, rank, 20, &e), &e);
    }
    for (int q = 1; q < world; q++)
        close(fds[q][0]), close(fds[q][1]);
    if (!t_cur_failed) fn(&r);
    gk_backend_free(r.be);
    if (r.store) gk_store_close(r.store);
    exit(t_cur_failed ? 1 : 0);
}

/* Forks world ranks running fn and waits (at most 30 s) for them; status[r] as waitpid's, or -1
 * for a rank that had to be killed. Returns 1 if a rank found no library (skip). */
static int run_ranks(int world, void (*fn)(rank_ctx *), int *status)
{
    int fds[MAX_RANKS][2];
    pid_t pid[MAX_RANKS];
    for (int q = 1; q < world; q++)
        if (pipe(fds[q])) abort();
    fflush(NULL);
    for (int q = 0; q < world; q++) {
        pid[q] = fork();
        if (pid[q] == 0) rank_main(q, world, fds, fn);
    }
    for (int q = 1; q < world; q++)
        close(fds[q][0]), close(fds[q][1]);
    int skip = 0, left = world;
    double deadline = now_s() + 30;
    for (int q = 0; q < world; q++) status[q] = -1;
    while (left > 0 && now_s() < deadline) {
        for (int q = 0; q < world; q++)
            if (pid[q] > 0 && waitpid(pid[q], &status[q], WNOHANG) == pid[q]) {
                pid[q] = 0, left--;
                skip |= WIFEXITED(status[q]) && WEXITSTATUS(status[q]) == NO_LIBRARY;
            }
        pause_s(0.01);
    }
    for (int q = 0; q < world; q++)
        if (pid[q] > 0) {
            kill(pid[q], SIGKILL), waitpid(pid[q], NULL, 0);
            status[q] = -1;
        }
    return skip;
}

#define CHECK_EXITED_OK(st, q) \
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d: status %d", q, st)

/* ---- the collectives ---- */

static float value(int rank, size_t i, int salt)
{
    return sinf((float)i * 0.37f + (float)rank * 1.3f + (float)salt) * (float)(1 + rank) +
           1e-3f * (float)i;
}

/* dev (n floats) = host x */
static float *to_dev(rank_ctx *r, const float *x, size_t n)
{
    float *d = r->be->ops->alloc(r->be, n * sizeof(float));
    r->be->ops->to_device(r->be, d, x, n * sizeof(float));
    return d;
}

static void check_allreduce(rank_ctx *r, gk_comm *c)
{
    gk_err e = {0};
    size_t n = 1003;
    float x[1003], want[1003], got[1003];
    for (size_t i = 0; i < n; i++) {
        x[i] = value(r->rank, i, 0);
        want[i] = value(0, i, 0);
        for (int q = 1; q < r->world; q++) want[i] += value(q, i, 0);
    }
    float *d = to_dev(r, x, n);
    CHECK_OK(c->ops->allreduce(c, d, n, &e), &e);
    r->be->ops->to_host(r->be, got, d, sizeof got);
    CHECKF(memcmp(got, want, sizeof got) == 0, "rank %d: %g vs %g", r->rank, got[5], want[5]);
    r->be->ops->free(r->be, d);

    double v[3] = {r->rank + 0.25, 1e15 * (r->rank + 1), -r->rank}, w = r->world;
    CHECK_OK(c->ops->allreduce_host(c, v, 3, &e), &e);
    CHECKF(v[0] == w * (w - 1) / 2 + 0.25 * w && v[1] == 1e15 * w * (w + 1) / 2 &&
               v[2] == -w * (w - 1) / 2,
           "rank %d: %g %g %g", r->rank, v[0], v[1], v[2]);
}

/* Sums started one after another (allreduce_start), then one wait; a wait with none started. */
static void check_started(rank_ctx *r, gk_comm *c)
{
    gk_err e = {0};
    enum { N0 = 1003, N1 = 5 };
    float x[N0 + N1], want[N0 + N1], got[N0 + N1];
    for (size_t i = 0; i < N0 + N1; i++) {
        x[i] = value(r->rank, i, 3);
        want[i] = value(0, i, 3);
        for (int q = 1; q < r->world; q++) want[i] += value(q, i, 3);
    }
    float *d = to_dev(r, x, N0 + N1);
    CHECK_OK(c->ops->allreduce_wait(c, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, d + N0, N1, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, d, N0, &e), &e);
    CHECK_OK(c->ops->allreduce_wait(c, &e), &e);
    r->be->ops->to_host(r->be, got, d, sizeof got);
    CHECKF(memcmp(got, want, sizeof got) == 0, "rank %d: %g vs %g", r->rank, got[N0], want[N0]);
    r->be->ops->free(r->be, d);
}

static void check_reduce_scatter(rank_ctx *r, gk_comm *c)
{
    gk_err e = {0};
    enum { COUNT = 257 };
    float in[MAX_RANKS * COUNT], want[COUNT], got[COUNT];
    size_t all = (size_t)r->world * COUNT;
    for (size_t i = 0; i < all; i++) in[i] = value(r->rank, i, 1);
    for (size_t i = 0; i < COUNT; i++) {
        size_t at = (size_t)r->rank * COUNT + i;
        want[i] = value(0, at, 1);
        for (int q = 1; q < r->world; q++) want[i] += value(q, at, 1);
    }
    float *d_in = to_dev(r, in, all), *d_out = r->be->ops->alloc(r->be, sizeof got);
    CHECK_OK(c->ops->reduce_scatter(c, d_in, d_out, COUNT, &e), &e);
    r->be->ops->to_host(r->be, got, d_out, sizeof got);
    CHECKF(memcmp(got, want, sizeof got) == 0, "rank %d: %g vs %g", r->rank, got[3], want[3]);
    /* started in place before a sum, then waited for alone (keep 1): the same sums */
    float *mine = d_in + (size_t)r->rank * COUNT;
    CHECK_OK(c->ops->reduce_scatter_start(c, d_in, mine, COUNT, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, d_out, COUNT, &e), &e);
    CHECK_OK(c->ops->started_wait(c, 1, &e), &e);
    r->be->ops->to_host(r->be, got, mine, sizeof got);
    CHECKF(memcmp(got, want, sizeof got) == 0, "rank %d started: %g vs %g", r->rank, got[3],
           want[3]);
    CHECK_OK(c->ops->started_wait(c, 0, &e), &e);
    r->be->ops->free(r->be, d_in), r->be->ops->free(r->be, d_out);
}

/* Out of place, then in place (in = out + rank * count). */
static void check_all_gather(rank_ctx *r, gk_comm *c)
{
    gk_err e = {0};
    enum { COUNT = 129 };
    float in[COUNT], want[MAX_RANKS * COUNT], got[MAX_RANKS * COUNT];
    size_t all = (size_t)r->world * COUNT;
    for (size_t i = 0; i < COUNT; i++) in[i] = value(r->rank, i, 2);
    for (int q = 0; q < r->world; q++)
        for (size_t i = 0; i < COUNT; i++) want[(size_t)q * COUNT + i] = value(q, i, 2);
    float *d_in = to_dev(r, in, COUNT), *d_out = r->be->ops->alloc(r->be, all * sizeof(float));
    CHECK_OK(c->ops->all_gather(c, d_in, d_out, COUNT, &e), &e);
    r->be->ops->to_host(r->be, got, d_out, all * sizeof(float));
    CHECK(memcmp(got, want, all * sizeof(float)) == 0);
    r->be->ops->zero(r->be, d_out, all * sizeof(float));
    float *mine = d_out + (size_t)r->rank * COUNT;
    r->be->ops->to_device(r->be, mine, in, sizeof in);
    CHECK_OK(c->ops->all_gather(c, mine, d_out, COUNT, &e), &e);
    r->be->ops->to_host(r->be, got, d_out, all * sizeof(float));
    CHECK(memcmp(got, want, all * sizeof(float)) == 0);
    /* started (ZeRO-3's prefetch) after a sum, the sum waited for alone (keep 1), then it */
    float *d_sum = r->be->ops->alloc(r->be, sizeof in);
    r->be->ops->to_device(r->be, d_sum, in, sizeof in);
    r->be->ops->zero(r->be, d_out, all * sizeof(float));
    CHECK_OK(c->ops->allreduce_start(c, d_sum, COUNT, &e), &e);
    CHECK_OK(c->ops->all_gather_start(c, d_in, d_out, COUNT, &e), &e);
    CHECK_OK(c->ops->started_wait(c, 1, &e), &e);
    CHECK_OK(c->ops->started_wait(c, 0, &e), &e);
    r->be->ops->to_host(r->be, got, d_out, all * sizeof(float));
    CHECK(memcmp(got, want, all * sizeof(float)) == 0);
    r->be->ops->free(r->be, d_sum);
    r->be->ops->free(r->be, d_in), r->be->ops->free(r->be, d_out);
}

static void check_broadcast(rank_ctx *r, gk_comm *c)
{
    gk_err e = {0};
    unsigned char buf[37], want[37];
    int root = r->world - 1;
    for (int i = 0; i < 37; i++)
        want[i] = (unsigned char)(i * 11 + 3), buf[i] = r->rank == root ? want[i] : 0;
    unsigned char *d = r->be->ops->alloc(r->be, sizeof buf);
    r->be->ops->to_device(r->be, d, buf, sizeof buf);
    CHECK_OK(c->ops->broadcast(c, d, sizeof buf, root, &e), &e);
    r->be->ops->to_host(r->be, buf, d, sizeof buf);
    CHECK(memcmp(buf, want, sizeof buf) == 0);
    CHECK(c->ops->broadcast(c, d, sizeof buf, r->world, &e) == GK_EUSAGE);
    r->be->ops->free(r->be, d);
}

/* bf16 sums (sum_type GK_BF16): each rank's floats rounded, added in rank order with each partial
 * sum rounded (256 + 1 stays 256: 8 significant bits); a larger sum started after a smaller one
 * (the bf16 buffer grows while a sum runs); a reduce-scatter. Then float32 sums again. */
static float bf16_round(float x) { return gk_bf16f(gk_f2bf16(x)); }

static void check_bf16(rank_ctx *r, gk_comm *c)
{
    gk_err e = {0};
    enum { N0 = 5, N1 = 1003, N = N0 + N1 };
    float x[N], want[N], got[N], hand = r->rank ? 1.0f : 256.0f;
    for (size_t i = 0; i < N; i++) {
        x[i] = value(r->rank, i, 4);
        want[i] = bf16_round(value(0, i, 4));
        for (int q = 1; q < r->world; q++)
            want[i] = bf16_round(want[i] + bf16_round(value(q, i, 4)));
    }
    c->sum_type = GK_BF16;
    float *d = to_dev(r, x, N), *h = to_dev(r, &hand, 1);
    CHECK_OK(c->ops->allreduce_start(c, d, N0, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, d + N0, N1, &e), &e);
    CHECK_OK(c->ops->allreduce_wait(c, &e), &e);
    CHECK_OK(c->ops->allreduce(c, h, 1, &e), &e);
    r->be->ops->to_host(r->be, got, d, sizeof got);
    r->be->ops->to_host(r->be, &hand, h, sizeof hand);
    CHECKF(memcmp(got, want, sizeof got) == 0 && hand == 256.0f, "rank %d: %g vs %g, %g", r->rank,
           got[7], want[7], hand);
    float *d_in = to_dev(r, x, (size_t)r->world * 7),
          *d_out = r->be->ops->alloc(r->be, 7 * sizeof(float));
    CHECK_OK(c->ops->reduce_scatter(c, d_in, d_out, 7, &e), &e);
    r->be->ops->to_host(r->be, got, d_out, 7 * sizeof(float));
    CHECK(memcmp(got, want + (size_t)r->rank * 7, 7 * sizeof(float)) == 0);
    c->sum_type = GK_F32;
    r->be->ops->free(r->be, d), r->be->ops->free(r->be, h);
    r->be->ops->free(r->be, d_in), r->be->ops->free(r->be, d_out);
    check_allreduce(r, c);
}

static void collectives(rank_ctx *r)
{
    gk_err e = {0};
    gk_comm *c = NULL;
    CHECK_OK(open_comm(r, 10, &c, &e), &e);
    if (!c) return;
    CHECK(strcmp(c->ops->name, "nccl") == 0 && c->rank == r->rank && c->world == r->world);
    check_allreduce(r, c);
    check_started(r, c);
    check_reduce_scatter(r, c);
    check_all_gather(r, c);
    check_broadcast(r, c);
    check_bf16(r, c);
    CHECK_OK(c->ops->barrier(c, &e), &e);
    gk_comm_close(c);
}

/* Groups (gk_comm_open_group) of a run of 3 over one store: "g1" {2} opened first, then "g0"
 * {0, 1} (whose rank 0 would take g1's id, were the keys not the group's): each sums its own
 * members' values only (10^rank). */
static void groups(rank_ctx *r)
{
    gk_err e = {0};
    gk_comm *c = NULL;
    int two = r->rank < 2;
    void *val = NULL;
    size_t n = 0;
    if (two) CHECK_OK(gk_store_get(r->store, "test/g1", &val, &n, &e), &e); /* (g1 first) */
    free(val);
    CHECK_OK(gk_comm_open_group(r->be, r->store, two ? "g0" : "g1", two ? r->rank : 0, two ? 2 : 1,
                                10, NULL, &c, &e),
             &e);
    if (!two) CHECK_OK(gk_store_set(r->store, "test/g1", "", 0, &e), &e);
    if (!c) return;
    float v = r->rank == 0 ? 1.0f : r->rank == 1 ? 10.0f : 100.0f, got = 0;
    float *d = r->be->ops->alloc(r->be, sizeof v);
    r->be->ops->to_device(r->be, d, &v, sizeof v);
    CHECK_OK(c->ops->allreduce(c, d, 1, &e), &e);
    r->be->ops->to_host(r->be, &got, d, sizeof got);
    CHECKF(got == (two ? 11.0f : 100.0f), "rank %d: %g", r->rank, got);
    r->be->ops->free(r->be, d);
    gk_comm_close(c);
}

static void test_groups(void)
{
    int st[MAX_RANKS];
    if (!emulated) SKIP("3 ranks need the emulator");
    if (run_ranks(3, groups, st)) SKIP("no cuda-emu library");
    for (int q = 0; q < 3; q++) CHECK_EXITED_OK(st[q], q);
}

static void test_collectives(void)
{
    int st[MAX_RANKS];
    for (int world = 1; world <= (emulated ? 3 : 1); world++) {
        if (run_ranks(world, collectives, st)) SKIP("no backend library");
        for (int q = 0; q < world; q++) CHECK_EXITED_OK(st[q], q);
    }
}

/* ---- failures ---- */

/* Rank 1 dies after a barrier: ranks 0 and 2 fail their next collective at once, and every later
 * call fails with the first error. */
static void killed(rank_ctx *r)
{
    gk_err e = {0};
    gk_comm *c = NULL;
    CHECK_OK(open_comm(r, 20, &c, &e), &e);
    if (!c) return;
    CHECK_OK(c->ops->barrier(c, &e), &e);
    if (r->rank == 1) raise(SIGKILL);
    float *d = r->be->ops->alloc(r->be, 64 * sizeof(float));
    double t0 = now_s();
    CHECK(c->ops->allreduce(c, d, 64, &e) == GK_EIO);
    CHECKF(now_s() - t0 < 10, "%.1f s", now_s() - t0);
    CHECKF(strstr(e.msg,
                  "nccl allreduce: remote process exited or there was a network error: rank ") ==
               e.msg,
           "%s", e.msg);
    CHECKF(strstr(e.msg,
                  r->rank == 0 ? "rank 1 closed its connection" : "rank 0 closed its connection"),
           "%s", e.msg);
    CHECK(c->ops->barrier(c, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "nccl barrier: the communicator failed earlier: nccl allreduce: "), "%s",
           e.msg);
    CHECK(c->ops->allreduce_start(c, d, 64, &e) == GK_EIO);
    CHECK(c->ops->allreduce_wait(c, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "nccl allreduce: remote process exited") == e.msg, "%s", e.msg);
    r->be->ops->free(r->be, d);
    gk_comm_close(c);
}

static void test_killed_rank(void)
{
    int st[MAX_RANKS];
    if (!emulated) SKIP("needs 3 ranks: emulator only");
    if (run_ranks(3, killed, st)) SKIP("no cuda-emu library");
    CHECKF(WIFSIGNALED(st[1]) && WTERMSIG(st[1]) == SIGKILL, "rank 1: status %d", st[1]);
    CHECK_EXITED_OK(st[0], 0);
    CHECK_EXITED_OK(st[2], 2);
}

/* Rank 1 stops calling for 2.5 s: rank 0 gives up after its timeout (1 s), and rank 1 then finds
 * the communicator closed. */
static void silent(rank_ctx *r)
{
    gk_err e = {0};
    gk_comm *c = NULL;
    CHECK_OK(open_comm(r, 1, &c, &e), &e);
    if (!c) return;
    if (r->rank == 1) {
        pause_s(2.5);
        CHECK(c->ops->barrier(c, &e) == GK_EIO);
        CHECKF(strstr(e.msg, "nccl barrier: remote process exited or there was a network error"),
               "%s", e.msg);
    } else {
        double t0 = now_s();
        CHECK(c->ops->allreduce_host(c, (double[]){1}, 1, &e) == GK_EIO);
        double t = now_s() - t0;
        CHECKF(t >= 1 && t < 2.4, "%.2f s", t);
        CHECKF(strcmp(e.msg,
                      "nccl allreduce_host: not done within 1 s (a "
                      "rank died or stopped calling collectives)") == 0,
               "%s", e.msg);
    }
    gk_comm_close(c);
}

/* Rank 1 never opens the communicator: rank 0's open times out. */
static void absent(rank_ctx *r)
{
    gk_err e = {0};
    gk_comm *c = NULL;
    if (r->rank == 1) {
        pause_s(1.5);
        return;
    }
    double t0 = now_s();
    CHECK(open_comm(r, 0.5, &c, &e) == GK_EIO);
    CHECK(c == NULL);
    CHECKF(now_s() - t0 < 1.4, "%.2f s", now_s() - t0);
    CHECKF(strcmp(e.msg, "nccl init: rank 0 of 2: not every rank joined within 0.5 s") == 0, "%s",
           e.msg);
}

/* The ranks call allreduce with different counts. */
static void mismatch(rank_ctx *r)
{
    gk_err e = {0};
    gk_comm *c = NULL;
    CHECK_OK(open_comm(r, 10, &c, &e), &e);
    if (!c) return;
    float *d = r->be->ops->alloc(r->be, 16 * sizeof(float));
    CHECK(c->ops->allreduce(c, d, r->rank ? 12 : 10, &e) == GK_EIO);
    if (r->rank == 0)
        CHECKF(strstr(e.msg, "nccl allreduce: invalid usage") == e.msg &&
                   strstr(e.msg,
                          "rank 1 called allreduce of 12 (type 7, root 0), rank 0 allreduce of 10"),
               "%s", e.msg);
    else
        CHECKF(strstr(e.msg, "rank 0 closed its connection"), "%s", e.msg);
    r->be->ops->free(r->be, d);
    gk_comm_close(c);
}

static void test_failures(void)
{
    int st[MAX_RANKS];
    if (!emulated) SKIP("needs 2 ranks: emulator only");
    if (run_ranks(2, silent, st)) SKIP("no cuda-emu library");
    CHECK_EXITED_OK(st[0], 0);
    CHECK_EXITED_OK(st[1], 1);
    run_ranks(2, absent, st);
    CHECK_EXITED_OK(st[0], 0);
    CHECK_EXITED_OK(st[1], 1);
    run_ranks(2, mismatch, st);
    CHECK_EXITED_OK(st[0], 0);
    CHECK_EXITED_OK(st[1], 1);
}

/* ---- the backend's side: the ops slots and the gpu ordinal ---- */

static void ordinal(rank_ctx *r)
{
    gk_err e = {0};
    gk_backend *be = NULL;
    char what[128];
    CHECK(r->be->ops->comm_open != NULL && r->be->ops->comm_open != gk_comm_gloo_open);
    gk_backend_opts o = {.device = "cuda-emu",
                         .threads = 1,
                         .bf16 = 0,
                         .gpu = 2,
                         .attention = GK_ATTN_AUTO};
    CHECK_OK(gk_backend_open(&be, &o, &e), &e);
    CHECKF(be && strstr(gk_backend_describe(be, what, sizeof what), "cuda-emu (GPU 2: "), "%s",
           what);
    gk_backend_free(be);
    o.gpu = -1;
    CHECK(gk_backend_open(&be, &o, &e) == GK_ENOTFOUND);
    CHECKF(strcmp(e.msg, "cuda-emu: no GPU -1 (this machine has 1)") == 0, "%s", e.msg);
    o.device = "cpu";
    o.gpu = 0;
    CHECK_OK(gk_backend_open(&be, &o, &e), &e);
    CHECK(be && be->ops->comm_open == gk_comm_gloo_open); /* cpu ranks: Gloo */
    gk_backend_free(be);
    gk_comm *c = NULL;
    CHECK(gk_comm_open(r->be, r->store, 1, 1, 1, NULL, &c, &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "nccl init: rank 1 of 1") == 0, "%s", e.msg);
    CHECK(gk_comm_open(r->be, NULL, 0, 1, 1, NULL, &c, &e) == GK_EUSAGE);
    /* an id of the wrong size in the store: rank 1's first open reads nccl/1/id */
    unsigned char bad[100] = {0};
    CHECK_OK(gk_store_set(r->store, "nccl/1/id", bad, sizeof bad, &e), &e);
    CHECK(gk_comm_open(r->be, r->store, 1, 2, 1, NULL, &c, &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "nccl init: the id at nccl/1/id has 100 bytes, not 128") == 0, "%s",
           e.msg);
    CHECK(c == NULL);
}

static void test_backend_side(void)
{
    int st[1];
    if (!emulated) SKIP("the emulator's GPU count: emulator only");
    if (run_ranks(1, ordinal, st)) SKIP("no cuda-emu library");
    CHECK_EXITED_OK(st[0], 0);
}

int main(void)
{
    const char *d = getenv("GPT_TEST_CUDA");
    if (d && *d) device = d, emulated = strcmp(d, "cuda-emu") == 0;
    RUN(test_collectives);
    RUN(test_groups);
    RUN(test_killed_rank);
    RUN(test_failures);
    RUN(test_backend_side);
    return TEST_END();
}
