/* test_comm.c: the Gloo comm across processes on loopback (the ranks: comm_harness.h; the store
 * it bootstraps from: test_store.c), and opening it through the cpu and ref backends' comm_open
 * slot (gk_comm_open; cuda's: test_nccl_emu.c). */
#include "comm_harness.h"
#include "kernels/bf16.h"

#include <pthread.h>

/* ---- the Gloo comm ---- */

static gk_comm *open_comm(gk_store *s, int rank, int world, double timeout_s)
{
    gk_comm *c = NULL;
    gk_err e = {0};
    if (s)
        CHECK_OK(gk_comm_open_gloo(&c, s, rank, world, timeout_s, NULL, &e), &e);
    CHECK(!c || (c->rank == rank && c->world == world && strcmp(c->ops->name, "gloo") == 0));
    return c;
}

/* Sums of values that are exact in float (multiples of 1/4 below 2^20): the same bits on every
 * rank, equal to the sum by hand. n above a megabyte crosses Gloo's segments. */
static void check_allreduce(gk_comm *c, size_t n)
{
    int rank = c->rank, world = c->world;
    float *buf = malloc(n * sizeof *buf);
    gk_err e = {0};
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(rank + 1) * (float)(i % 1021) * 0.25f - (float)rank;
    CHECK_OK(c->ops->allreduce(c, buf, n, &e), &e);
    float tri = (float)(world * (world + 1) / 2), ranks = (float)(world * (world - 1) / 2);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += buf[i] != tri * (float)(i % 1021) * 0.25f - ranks;
    CHECKF(bad == 0, "%zu of %zu floats differ", bad, n);
    free(buf);
}

/* Each rank's in is world parts of count floats; out (in place: part `rank` of in, as ZeRO-1
 * does) gets the sum of part `rank` (whole numbers: exact in any order). */
static void check_reduce_scatter(gk_comm *c, size_t count, int in_place)
{
    int rank = c->rank, world = c->world;
    gk_err e = {0};
    float *in = malloc((world + 1) * count * sizeof *in);
    float *out = in_place ? in + rank * count : in + world * count;
    for (size_t j = 0; j < world * count; j++)
        in[j] = (float)(rank * 1000) + (float)(j % 4099);
    CHECK_OK(c->ops->reduce_scatter(c, in, out, count, &e), &e);
    float ranks = (float)(world * (world - 1) / 2);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += out[i] != 1000 * ranks + (float)world * (float)((rank * count + i) % 4099);
    CHECKF(bad == 0, "%zu of %zu floats differ", bad, count);
    free(in);
}

static void check_collectives(gk_comm *c)
{
    int rank = c->rank, world = c->world;
    gk_err e = {0};
    check_allreduce(c, 1);
    check_allreduce(c, 1000);
    check_allreduce(c, 600000);
    double d[3] = {rank, 1.5, -0.5 * rank};
    CHECK_OK(c->ops->allreduce_host(c, d, 3, &e), &e);
    double ranks = world * (world - 1) / 2.0;
    CHECK(d[0] == ranks && d[1] == 1.5 * world && d[2] == -0.5 * ranks);

    check_reduce_scatter(c, 5, 0);
    check_reduce_scatter(c, 100003, 1);

    enum { COUNT = 5 };
    float in[MAX_WORLD * COUNT], out[MAX_WORLD * COUNT];
    for (int i = 0; i < COUNT; i++)
        in[i] = (float)(rank * 100 + i);
    CHECK_OK(c->ops->all_gather(c, in, out, COUNT, &e), &e);
    for (int j = 0; j < world * COUNT; j++)
        CHECKF(out[j] == (float)(j / COUNT * 100 + j % COUNT), "out[%d] %g", j, out[j]);
    memset(out, 0, sizeof out);
    for (int i = 0; i < COUNT; i++) /* in place: in is this rank's part of out */
        out[rank * COUNT + i] = (float)(rank * 10 - i);
    CHECK_OK(c->ops->all_gather(c, out + rank * COUNT, out, COUNT, &e), &e);
    for (int j = 0; j < world * COUNT; j++)
        CHECKF(out[j] == (float)(j / COUNT * 10 - j % COUNT), "in place: out[%d] %g", j, out[j]);

    char msg[40] = {0};
    if (rank == world - 1)
        snprintf(msg, sizeof msg, "from the last rank, %d", rank);
    CHECK_OK(c->ops->broadcast(c, msg, sizeof msg, world - 1, &e), &e);
    char want[40];
    snprintf(want, sizeof want, "from the last rank, %d", world - 1);
    CHECKF(strcmp(msg, want) == 0, "'%s'", msg);
    CHECK(c->ops->broadcast(c, msg, sizeof msg, world, &e) == GK_EUSAGE);

    if (rank == 0)
        sleep_ms(300);
    double t0 = now();
    CHECK_OK(c->ops->barrier(c, &e), &e);
    CHECKF(rank == 0 || now() - t0 > 0.2, "rank %d left the barrier after %g s", rank, now() - t0);
}

static void collectives_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = open_comm(s, rank, world, 10);
    if (c)
        check_collectives(c);
    gk_comm_close(c);
    c = open_comm(s, rank, world, 10); /* a second comm on the same store */
    if (c)
        check_allreduce(c, 100);
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_two_ranks(void) { run_ranks(2, collectives_rank); }

static void test_gloo_three_ranks(void) { run_ranks(3, collectives_rank); }

/* gk_comm_open through the backend: rank 0 on cpu, the others on ref (host memory both), each
 * gets Gloo from its backend's slot; a backend without the slot is refused. */
static void backend_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_backend *be = NULL;
    gk_comm *c = NULL;
    gk_err e = {0};
    gk_backend_opts o = {.device = rank == 0 ? "cpu" : "ref", .threads = 1};
    CHECK_OK(gk_backend_open(&be, &o, &e), &e);
    if (s && be) {
        CHECK(be->ops->comm_open == gk_comm_gloo_open);
        CHECK_OK(gk_comm_open(be, s, rank, world, 10, NULL, &c, &e), &e);
    }
    CHECK(c && c->rank == rank && c->world == world && strcmp(c->ops->name, "gloo") == 0);
    if (c)
        check_allreduce(c, 1000);
    gk_comm_close(c);
    gk_ops none = {.name = "none"};
    gk_backend bare = {.ops = &none};
    c = (gk_comm *)&e; /* set to NULL on failure */
    CHECK(gk_comm_open(&bare, s, rank, world, 10, NULL, &c, &e) == GK_EUSAGE && c == NULL);
    CHECKF(strcmp(e.msg, "none: this backend has no collectives across processes") == 0, "%s",
           e.msg);
    gk_backend_free(be);
    gk_store_close(s);
}

static void test_gloo_through_backend(void) { run_ranks(2, backend_rank); }

/* The collective that meets a missing rank in the failure cases below: an allreduce (Gloo's
 * ring), or a reduce-scatter (ours) when scatter_fails is set. Returns its name. */
static int scatter_fails;

static const char *failing_call(gk_comm *c, float *buf, gk_err *e)
{
    if (!scatter_fails) {
        CHECK(c->ops->allreduce(c, buf, 64, e) == GK_EIO);
        return "allreduce";
    }
    CHECK(c->ops->reduce_scatter(c, buf, buf + 16 * c->rank, 16, e) == GK_EIO);
    return "reduce_scatter";
}

/* Rank 1 is killed after the first allreduce: the others' next collective fails at once (well
 * within the timeout) naming it, and the comm fails every later call. */
static void killed_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = open_comm(s, rank, world, 5);
    gk_err e = {0};
    float buf[64] = {0};
    if (!c)
        return;
    CHECK_OK(c->ops->allreduce(c, buf, 64, &e), &e);
    if (rank == 1)
        raise(SIGKILL);
    double t0 = now();
    const char *call = failing_call(c, buf, &e);
    char gone[64], later[128];
    snprintf(gone, sizeof gone, "%s: rank 1 is gone", call);
    snprintf(later, sizeof later, "barrier: the comm failed earlier: %s", gone);
    /* rank 1 first; the other survivor may have left too by the time the store is asked */
    CHECKF(starts(e.msg, gone) &&
               (e.msg[strlen(gone)] == ':' || starts(e.msg + strlen(gone), " (then ")),
           "%s", e.msg);
    CHECKF(now() - t0 < 5, "took %g s", now() - t0);
    CHECK(c->ops->barrier(c, &e) == GK_EIO);
    CHECKF(starts(e.msg, later), "%s", e.msg);
    gk_comm_close(c);
    gk_store_close(s);
}

/* 3 ranks of fn: rank 1 ends killed by SIGKILL, ranks 0 and 2 exit 0. */
static void run_rank1_killed(rank_fn fn)
{
    int status[3];
    spawn(3, fn, status);
    CHECKF(status[1] != -1 && WIFSIGNALED(status[1]) && WTERMSIG(status[1]) == SIGKILL,
           "rank 1: status 0x%x", status[1]);
    for (int r = 0; r < 3; r += 2)
        CHECKF(status[r] != -1 && WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
               "rank %d: status 0x%x", r, status[r]);
}

/* run_rank1_killed(fn) with an allreduce failing, then with a reduce-scatter. */
static void run_rank1_killed_both(rank_fn fn)
{
    for (scatter_fails = 0; scatter_fails < 2; scatter_fails++)
        run_rank1_killed(fn);
}

static void test_gloo_rank_killed(void) { run_rank1_killed_both(killed_rank); }

/* ---- started sums (allreduce_start .. allreduce_wait) ---- */

/* Sums started one after another (sizes across Gloo's segments, as check_allreduce's values)
 * equal the sums by hand after one wait, and a reduce-scatter started before a sum after a wait
 * for all but the last; collectives before and after keep working. */
static void started_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = open_comm(s, rank, world, 10);
    gk_err e = {0};
    if (!c)
        return;
    CHECK_OK(c->ops->allreduce_wait(c, &e), &e); /* none started */
    static const size_t n[] = {1, 1000, 600000, 3};
    float *buf[4];
    for (int k = 0; k < 4; k++) {
        buf[k] = malloc(n[k] * sizeof(float));
        for (size_t i = 0; i < n[k]; i++)
            buf[k][i] = (float)(rank + 1) * (float)((i + (size_t)k) % 1021) * 0.25f;
        CHECK_OK(c->ops->allreduce_start(c, buf[k], n[k], &e), &e);
    }
    CHECK_OK(c->ops->allreduce_wait(c, &e), &e);
    float tri = (float)(world * (world + 1) / 2);
    for (int k = 0; k < 4; k++) {
        size_t bad = 0;
        for (size_t i = 0; i < n[k]; i++)
            bad += buf[k][i] != tri * (float)((i + (size_t)k) % 1021) * 0.25f;
        CHECKF(bad == 0, "sum %d: %zu of %zu floats differ", k, bad, n[k]);
        free(buf[k]);
    }
    /* a reduce-scatter started before a sum (in place, as ZeRO-2's backward does; parts of 2^20
     * + 3 floats: two rings, the second of 3): waited for alone (keep 1), then the sum */
    size_t cnt = ((size_t)1 << 20) + 3, bad = 0;
    float *in = malloc((size_t)world * cnt * sizeof *in), few[5];
    for (size_t i = 0; i < (size_t)world * cnt; i++)
        in[i] = (float)(rank + 1) * (float)(i % 1021) * 0.25f;
    for (int i = 0; i < 5; i++) few[i] = (float)(rank + 1);
    CHECK_OK(c->ops->reduce_scatter_start(c, in, in + (size_t)rank * cnt, cnt, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, few, 5, &e), &e);
    CHECK_OK(c->ops->started_wait(c, 1, &e), &e);
    for (size_t i = (size_t)rank * cnt; i < (size_t)(rank + 1) * cnt; i++)
        bad += in[i] != tri * (float)(i % 1021) * 0.25f;
    CHECK_OK(c->ops->started_wait(c, 0, &e), &e);
    CHECKF(bad == 0 && few[0] == tri && few[4] == tri, "%zu of %zu scattered floats differ; %g",
           bad, cnt, few[0]);
    /* an all-gather started after a sum (ZeRO-3's prefetch while the backward's sums run):
     * waited for with it, every rank's part in place */
    for (size_t i = 0; i < (size_t)world * cnt; i++) in[i] = -1.0f;
    float *part = malloc(cnt * sizeof *part);
    for (size_t i = 0; i < cnt; i++) part[i] = (float)rank * 1000.0f + (float)(i % 997);
    CHECK_OK(c->ops->allreduce_start(c, few, 5, &e), &e);
    CHECK_OK(c->ops->all_gather_start(c, part, in, cnt, &e), &e);
    CHECK_OK(c->ops->started_wait(c, 0, &e), &e);
    bad = 0;
    for (size_t i = 0; i < (size_t)world * cnt; i++)
        bad += in[i] != (float)(i / cnt) * 1000.0f + (float)(i % cnt % 997);
    CHECKF(bad == 0 && few[0] == tri * (float)world, "%zu of %zu gathered floats differ; %g", bad,
           (size_t)world * cnt, few[0]);
    free(part);
    free(in);
    check_allreduce(c, 1000);
    float last[8] = {(float)rank};
    CHECK_OK(c->ops->allreduce_start(c, last, 8, &e), &e); /* closed before its wait */
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_started_sums(void) { run_ranks(3, started_rank); }

/* ---- bf16 sums (sum_type GK_BF16) ---- */

static float bf16_round(float x) { return gk_bf16f(gk_f2bf16(x)); }
static float bf16_value(int rank, size_t i)
{
    return sinf((float)i * 0.37f + (float)rank) * (float)(rank + 1);
}

/* Two ranks: a sum is the bf16 rounding of the two roundings' sum, by hand and over 600000 floats
 * (a sum, sums started in two parts, a reduce-scatter); float32 sums again after. */
static void bf16_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = open_comm(s, rank, world, 10);
    gk_err e = {0};
    if (!c)
        return;
    c->sum_type = GK_BF16;
    /* 256 + 1 is 256 in bf16's 8 significant bits (257 in float32); 1 + 2^-9 is 1 in bf16 */
    float hand[3] = {rank ? 1.0f : 256.0f, 1.0f + 0x1p-9f, -3.0f};
    CHECK_OK(c->ops->allreduce(c, hand, 3, &e), &e);
    CHECKF(hand[0] == 256.0f && hand[1] == 2.0f && hand[2] == -6.0f, "%g %g %g", hand[0], hand[1],
           hand[2]);
    size_t n = 600000, bad = 0, bad_started = 0, bad_scatter = 0;
    float *sum = malloc(n * sizeof *sum), *started = malloc(n * sizeof *started), in[10], part[5];
    for (size_t i = 0; i < n; i++)
        sum[i] = started[i] = bf16_value(rank, i);
    for (size_t i = 0; i < 10; i++)
        in[i] = bf16_value(rank, i);
    CHECK_OK(c->ops->allreduce(c, sum, n, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, started + 1000, n - 1000, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, started, 1000, &e), &e);
    CHECK_OK(c->ops->allreduce_wait(c, &e), &e);
    CHECK_OK(c->ops->reduce_scatter(c, in, part, 5, &e), &e);
    for (size_t i = 0; i < n; i++) {
        float want = bf16_round(bf16_round(bf16_value(0, i)) + bf16_round(bf16_value(1, i)));
        bad += sum[i] != want, bad_started += started[i] != want;
        if (i < 5) /* this rank's part of in */
            bad_scatter += part[i] != sum[(size_t)rank * 5 + i];
    }
    CHECKF(bad == 0 && bad_started == 0 && bad_scatter == 0,
           "%zu, %zu started, %zu scattered differ", bad, bad_started, bad_scatter);
    c->sum_type = GK_F32;
    check_allreduce(c, 1000);
    free(sum), free(started);
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_bf16_sums(void) { run_ranks(2, bf16_rank); }

/* Rank 1 is killed while the others' started sums run: their wait fails naming it, well within
 * the timeout, and the comm fails every later call. */
static void started_killed_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = open_comm(s, rank, world, 5);
    gk_err e = {0};
    float a[64] = {0}, b[4096] = {0};
    if (!c)
        return;
    CHECK_OK(c->ops->allreduce(c, a, 64, &e), &e);
    if (rank == 1)
        raise(SIGKILL);
    double t0 = now();
    CHECK_OK(c->ops->allreduce_start(c, a, 64, &e), &e);
    CHECK_OK(c->ops->allreduce_start(c, b, 4096, &e), &e);
    CHECK(c->ops->allreduce_wait(c, &e) == GK_EIO);
    CHECKF(starts(e.msg, "allreduce: rank 1 is gone"), "%s", e.msg);
    CHECKF(now() - t0 < 5, "took %g s", now() - t0);
    CHECK(c->ops->allreduce_wait(c, &e) == GK_EIO);
    CHECKF(starts(e.msg, "allreduce: the comm failed earlier: allreduce: rank 1 is gone"), "%s",
           e.msg);
    CHECK(c->ops->allreduce(c, a, 64, &e) == GK_EIO);
    CHECKF(starts(e.msg, "allreduce: the comm failed earlier: allreduce: rank 1 is gone"), "%s",
           e.msg);
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_started_rank_killed(void) { run_rank1_killed(started_killed_rank); }

/* Rank 1 stops (SIGSTOP) after the first allreduce: the others' next one times out after the
 * comm's 1 s and names it as not responding; then rank 0 kills it. */
static void stopped_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = open_comm(s, rank, world, 1);
    gk_err e = {0};
    float buf[64] = {0};
    if (!c)
        return;
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (rank == 1)
        CHECK_OK(gk_store_set(s, "pid", pid, strlen(pid), &e), &e);
    CHECK_OK(c->ops->allreduce(c, buf, 64, &e), &e);
    if (rank == 1)
        raise(SIGSTOP);
    double t0 = now();
    const char *call = failing_call(c, buf, &e);
    char stuck[80];
    snprintf(stuck, sizeof stuck, "%s: rank 1 is not responding: Timed out", call);
    CHECKF(starts(e.msg, stuck), "%s", e.msg);
    CHECKF(now() - t0 > 0.9 && now() - t0 < 5, "took %g s", now() - t0);
    sync_ranks(s, "failed", rank / 2, 2); /* ranks 0 and 2 */
    void *val = NULL;
    size_t n = 0;
    if (rank == 0) {
        CHECK_OK(gk_store_get(s, "pid", &val, &n, &e), &e);
        CHECK(val && kill(atoi(val), SIGKILL) == 0);
        free(val);
    }
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_rank_stopped(void) { run_rank1_killed_both(stopped_rank); }

/* Rank 0, which hosts the store, is killed: rank 1 says so. */
static void store_killed_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = open_comm(s, rank, world, 5);
    gk_err e = {0};
    float buf[64] = {0};
    if (!c)
        return;
    CHECK_OK(c->ops->allreduce(c, buf, 64, &e), &e);
    if (rank == 0)
        raise(SIGKILL);
    char want[128];
    snprintf(want, sizeof want, "allreduce: rank 0 (the store at %s) is gone: ",
             gk_store_address(s));
    CHECK(c->ops->allreduce(c, buf, 64, &e) == GK_EIO);
    CHECKF(starts(e.msg, want), "%s", e.msg);
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_store_killed(void)
{
    int status[2];
    spawn(2, store_killed_rank, status);
    CHECKF(status[0] != -1 && WIFSIGNALED(status[0]), "rank 0: status 0x%x", status[0]);
    CHECKF(status[1] != -1 && WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 0,
           "rank 1: status 0x%x", status[1]);
}

/* Rank 1 broadcasts 32 MB to rank 0, which has posted its receive and then stopped (SIGSTOP), so
 * that the data waits in Gloo's send queue; then rank 0 is killed. Rank 1's broadcast fails
 * within 3 s of the kill, naming rank 0 (Gloo fails the pair but not a send it had queued: the
 * send used to wait for the whole timeout, 15 s here). */
static double killed_at;

static void *stop_self(void *arg)
{
    (void)arg;
    sleep_ms(150);
    raise(SIGSTOP);
    return NULL;
}

static void *kill_rank0(void *arg)
{
    sleep_ms(400);
    killed_at = now();
    kill((pid_t)(intptr_t)arg, SIGKILL);
    return NULL;
}

static void queued_send_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 20);
    gk_comm *c = open_comm(s, rank, world, 15);
    gk_err e = {0};
    size_t n = (size_t)32 << 20;
    char *buf = calloc(n, 1), pid[32];
    void *val = NULL;
    size_t len = 0;
    pthread_t helper;
    if (!c || !buf)
        return;
    if (rank == 0) {
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        CHECK_OK(gk_store_set(s, "pid", pid, strlen(pid), &e), &e);
        CHECK(pthread_create(&helper, NULL, stop_self, NULL) == 0);
        c->ops->broadcast(c, buf, n, 1, &e); /* stopped, then killed, in it */
        CHECK(!"rank 0 outlived its broadcast");
        return;
    }
    CHECK_OK(gk_store_get(s, "pid", &val, &len, &e), &e);
    CHECK(val && atoi(val) > 0);
    sleep_ms(400); /* rank 0 is in its broadcast, stopped */
    CHECK(pthread_create(&helper, NULL, kill_rank0, (void *)(intptr_t)atoi(val)) == 0);
    free(val);
    CHECK(c->ops->broadcast(c, buf, n, 1, &e) == GK_EIO);
    pthread_join(helper, NULL);
    char want[128];
    snprintf(want, sizeof want,
             "broadcast: rank 0 (the store at %s) is gone: ", gk_store_address(s));
    CHECKF(starts(e.msg, want), "%s", e.msg);
    CHECKF(now() - killed_at < 3, "ended %g s after the kill", now() - killed_at);
    free(buf);
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_queued_send_peer_killed(void)
{
    int status[2];
    spawn(2, queued_send_rank, status);
    CHECKF(status[0] != -1 && WIFSIGNALED(status[0]) && WTERMSIG(status[0]) == SIGKILL,
           "rank 0: status 0x%x", status[0]);
    CHECKF(status[1] != -1 && WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 0,
           "rank 1: status 0x%x", status[1]);
}

/* A stop flag (set by the tool's SIGTERM handler) leaves a collective that progresses alone, and
 * fails one that has waited 0.5 s on rank 1 (sleeping 3 s), well within the 10 s timeout. */
static volatile sig_atomic_t stop_flag;

static void stop_flag_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 20);
    gk_comm *c = open_comm(s, rank, world, 10);
    gk_err e = {0};
    float buf[64] = {0};
    if (!c)
        return;
    if (rank == 0) {
        CHECK_OK(gk_comm_stop_on(c, &stop_flag, 0.5, &e), &e);
        __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
    }
    check_allreduce(c, 600000);
    if (rank == 1)
        sleep_ms(3000);
    double t0 = now();
    int rc = c->ops->allreduce(c, buf, 64, &e);
    CHECK(rc == GK_EIO);
    if (rank == 0) {
        CHECKF(strcmp(e.msg, "allreduce: stopped by a signal: rank 1 made no progress for 0.5 s") ==
                   0,
               "%s", e.msg);
        CHECKF(now() - t0 > 0.4 && now() - t0 < 2, "took %g s", now() - t0);
    }
    gk_comm_close(c);
    gk_store_close(s);
}

static void test_gloo_stop_flag(void) { run_ranks(2, stop_flag_rank); }

/* Rank 1 never opens its comm: rank 0's open gives up after the timeout, naming the key. */
static void absent_rank(int rank, int world)
{
    gk_store *s = join(rank, world, rank == 0 ? 1 : 10);
    gk_comm *c = NULL;
    gk_err e = {0};
    if (s && rank == 0) {
        double t0 = now();
        CHECK(gk_comm_open_gloo(&c, s, 0, 2, 1, NULL, &e) == GK_EIO && c == NULL);
        char want[128];
        snprintf(want, sizeof want, "rendezvous at %s: key 'gloo/1/1' not set within 1 s",
                 gk_store_address(s));
        CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
        CHECKF(now() - t0 < 4, "took %g s", now() - t0);
        CHECK_OK(gk_store_set(s, "gave up", "", 0, &e), &e);
    } else if (s) {
        void *val = NULL;
        size_t n = 0;
        CHECK_OK(gk_store_get(s, "gave up", &val, &n, &e), &e);
        free(val);
    }
    gk_store_close(s);
}

static void test_gloo_rendezvous_timeout(void) { run_ranks(2, absent_rank); }

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* the store must not need SIGPIPE ignored */
    RUN(test_gloo_two_ranks);
    RUN(test_gloo_three_ranks);
    RUN(test_gloo_through_backend);
    RUN(test_gloo_rank_killed);
    RUN(test_gloo_rank_stopped);
    RUN(test_gloo_started_sums);
    RUN(test_gloo_started_rank_killed);
    RUN(test_gloo_bf16_sums);
    RUN(test_gloo_store_killed);
    RUN(test_gloo_queued_send_peer_killed);
    RUN(test_gloo_stop_flag);
    RUN(test_gloo_rendezvous_timeout);
    return TEST_END();
}
