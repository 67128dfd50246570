/* test_s3_faults.c: common/s3's retries against moto's server through the fault proxy of
 * tests/cli/s3_server.py (tests/unit/s3_harness.h; skipped without moto): 503 SlowDown, a 500,
 * connections dropped mid-body or reset, a stalled transfer, each retried and counted, the bytes
 * whole; retries running out (count and time limits, the error naming the tries and the time);
 * half the requests answered 503; a storm longer than five tries last, ridden out; a download
 * cut short again and again while it advances; a cancel flag; a wrong region named;
 * connections kept open between requests (the client's pool of handles) and a new one after a
 * network error. Backoff 5 ms and small time limits keep each test to a few seconds. */
#include <pthread.h>

#include "tests/unit/s3_harness.h"

static void test_faults(void)
{
    NEED_SERVER();
    gk_s3 *s = client(1, NULL, 5);
    gk_err e;
    size_t n = (size_t)3 << 20;
    char *data = malloc(n), *back = malloc(n);
    fill(data, n, 3);
    CHECK(fault("503", 3) == 0);
    CHECK_OK(gk_s3_put(s, "gk-test", "faults/obj", data, n, &e), &e);
    CHECK(gk_s3_retries(s) == 3);
    CHECK(fault("500", 1) == 0);
    gk_s3_stat st;
    CHECK_OK(gk_s3_head(s, "gk-test", "faults/obj", &st, &e), &e);
    CHECKF(st.size == (int64_t)n && gk_s3_retries(s) == 4, "%lld bytes, %ld retries",
           (long long)st.size, gk_s3_retries(s));
    /* dropped mid-body: resumed from the bytes had, the sink sees each byte once */
    CHECK(fault("drop", 2) == 0);
    membuf m = {back, 0, n};
    CHECK_OK(gk_s3_get(s, "gk-test", "faults/obj", to_mem, &m, &e), &e);
    CHECK(m.n == n && memcmp(data, back, n) == 0);
    CHECK(gk_s3_retries(s) == 6);
    CHECK(fault("drop", 1) == 0);
    size_t got = 0;
    CHECK_OK(gk_s3_get_range(s, "gk-test", "faults/obj", 1000, 100000, back, &got, &e), &e);
    CHECK(got == 100000 && memcmp(back, data + 1000, got) == 0 && gk_s3_retries(s) == 7);
    /* a connection reset before any answer, on a new client: a reset on a kept connection is
     * taken for one the server closed while idle, and libcurl itself tries once more */
    gk_s3_close(s);
    s = client(1, NULL, 5);
    CHECK(fault("reset", 2) == 0);
    CHECK_OK(gk_s3_head(s, "gk-test", "faults/obj", &st, &e), &e);
    CHECKF(st.size == (int64_t)n && gk_s3_retries(s) == 2, "%ld retries", gk_s3_retries(s));
    gk_s3_close(s);
    /* a transfer that stalls past stall_timeout_s */
    s = client(1, NULL, 5);
    gk_s3_conf c = *gk_s3_settings(s);
    gk_s3_close(s);
    c.stall_timeout_s = 1;
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    CHECK(fault("stall", 1) == 0);
    m.n = 0;
    memset(back, 0, n);
    CHECK_OK(gk_s3_get(s, "gk-test", "faults/obj", to_mem, &m, &e), &e);
    CHECK(m.n == n && memcmp(data, back, n) == 0 && gk_s3_retries(s) == 1);
    gk_s3_close(s);
    /* retries run out (3 tries without progress): the last answer's error, the tries said */
    s = client(1, NULL, 3);
    CHECK(fault("503", 10) == 0);
    CHECK(gk_s3_put(s, "gk-test", "faults/never", "x", 1, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "s3://gk-test/faults/never") &&
               strstr(e.msg, "HTTP 503: injected (gave up after 3 tries and ") &&
               strstr(e.msg, " s of retrying, the limit: AWS_MAX_ATTEMPTS=3)"),
           "%s", e.msg);
    CHECK(gk_s3_retries(s) == 2);
    CHECK(fault("503", 0) == 0);
    /* a wrong region is named */
    CHECK(fault("region", 1) == 0);
    CHECK(gk_s3_get_range(s, "gk-test", "faults/obj", 0, 10, back, &got, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "bucket gk-test is in region eu-west-1, "
                         "not us-east-1 (set AWS_REGION=eu-west-1)"),
           "%s", e.msg);
    gk_s3_close(s);
    free(data);
    free(back);
}

/* One connection for many requests one after another (no TCP or TLS set-up a request), and a new
 * one after a connection was dropped, the retry on it. Each count of the proxy's opens one more. */
static void test_connections_kept(void)
{
    NEED_SERVER();
    gk_s3 *s = client(1, NULL, 3);
    gk_err e;
    CHECK_OK(gk_s3_put(s, "gk-test", "conns/obj", "0123456789", 10, &e), &e);
    long before = proxy_connections();
    gk_s3_stat st;
    for (int i = 0; i < 20; i++) CHECK_OK(gk_s3_head(s, "gk-test", "conns/obj", &st, &e), &e);
    long after = proxy_connections();
    CHECKF(after - before <= 2, "%ld connections for 20 requests", after - before - 1);
    CHECK(fault("drop", 1) == 0);
    char back[10];
    size_t got = 0;
    before = proxy_connections();
    CHECK_OK(gk_s3_get_range(s, "gk-test", "conns/obj", 0, 10, back, &got, &e), &e);
    after = proxy_connections();
    CHECK(got == 10 && memcmp(back, "0123456789", 10) == 0 && gk_s3_retries(s) == 1);
    CHECKF(after - before >= 2 && after - before <= 3, "%ld connections", after - before - 1);
    gk_s3_close(s);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Half the requests answered 503 (at random, seeded: the same draws every run), over 80
 * requests one after another: every one succeeds, however many 503s in a row it meets (two
 * meet five or more in these draws: five tries in all gave up on them before). */
static void test_half_503(void)
{
    NEED_SERVER();
    gk_s3 *s = client_retrying(0, 5000);
    gk_err e;
    CHECK_OK(gk_s3_put(s, "gk-test", "half/obj", "0123456789", 10, &e), &e);
    CHECK(fault_q("what=503&n=1000&p=0.5&seed=11") == 0);
    int ok = 0;
    gk_s3_stat st;
    for (int i = 0; i < 80; i++) {
        int rc = gk_s3_head(s, "gk-test", "half/obj", &st, &e);
        ok += rc == 0 && st.size == 10;
        if (rc)
            fprintf(stderr, "request %d: %s\n", i, e.msg);
    }
    CHECK(fault("503", 0) == 0);
    CHECKF(ok == 80 && gk_s3_retries(s) > 40, "%d of 80, %ld retries", ok, gk_s3_retries(s));
    gk_s3_close(s);
}

/* A storm of 503s for 0.5 s, longer than five tries at this backoff (5 ms, 10 ms, ... at most
 * 75 ms of waits) last, within the time limit (2 s): the request rides it out. */
static void test_storm(void)
{
    NEED_SERVER();
    gk_s3 *s = client_retrying(0, 2000);
    gk_err e;
    CHECK(fault_q("what=503&secs=0.5") == 0);
    double t0 = seconds();
    CHECK_OK(gk_s3_put(s, "gk-test", "storm/obj", "after the storm", 15, &e), &e);
    double took = seconds() - t0;
    CHECKF(took >= 0.5 && took < 2.5 && gk_s3_retries(s) >= 5, "%.2f s, %ld retries", took,
           gk_s3_retries(s));
    gk_s3_close(s);
}

/* A storm longer than the time limit (0.3 s): the request ends near the limit, the error naming
 * the tries, the time and the setting; nothing written. */
static void test_storm_past_limit(void)
{
    NEED_SERVER();
    gk_s3 *s = client_retrying(0, 300);
    gk_err e;
    CHECK(fault_q("what=503&secs=5") == 0);
    double t0 = seconds();
    CHECK(gk_s3_put(s, "gk-test", "storm/never", "x", 1, &e) == GK_EIO);
    double took = seconds() - t0, said = -1;
    int tries = 0;
    const char *p = strstr(e.msg, "HTTP 503: injected (gave up after ");
    CHECKF(p &&
               sscanf(p, "HTTP 503: injected (gave up after %d tries and %lf s of retrying", &tries,
                      &said) == 2 &&
               strstr(e.msg, " s of retrying, the limit: GPT_S3_RETRY_SECONDS=0.3)"),
           "%s", e.msg);
    CHECKF(tries >= 2 && said >= 0.3 && said < 0.5 && took < 1,
           "%d tries, %.2f s said, %.2f s taken", tries, said, took);
    CHECK(gk_s3_retries(s) == tries - 1);
    CHECK(fault("503", 0) == 0); /* the storm over */
    gk_s3_stat st;
    CHECK(gk_s3_head(s, "gk-test", "storm/never", &st, &e) == GK_ENOTFOUND);
    gk_s3_close(s);
}

/* A download cut short 8 times, each cut after some new bytes (the proxy gives half of what
 * is asked), with at most 3 tries in a row without progress: it completes, the bytes whole. */
static void test_cut_advancing(void)
{
    NEED_SERVER();
    gk_s3 *s = client_retrying(3, 60000);
    gk_err e;
    size_t n = (size_t)1 << 20;
    char *data = malloc(n), *back = malloc(n);
    fill(data, n, 5);
    CHECK_OK(gk_s3_put(s, "gk-test", "cut/obj", data, n, &e), &e);
    CHECK(fault("drop", 8) == 0);
    membuf m = {back, 0, n};
    CHECK_OK(gk_s3_get(s, "gk-test", "cut/obj", to_mem, &m, &e), &e);
    CHECK(m.n == n && memcmp(data, back, n) == 0);
    CHECKF(gk_s3_retries(s) == 8, "%ld retries", gk_s3_retries(s));
    /* the same with no progress at all (HEAD has no body): 3 tries */
    CHECK(fault("reset", 10) == 0);
    gk_s3_stat st;
    CHECK(gk_s3_head(s, "gk-test", "cut/obj", &st, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "(gave up after 3 tries and "), "%s", e.msg);
    CHECK(fault("reset", 0) == 0);
    free(data);
    free(back);
    gk_s3_close(s);
}

typedef struct canceller {
    atomic_int flag;
} canceller;

static void *cancel_later(void *ud)
{
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    atomic_store(&((canceller *)ud)->flag, 1);
    return NULL;
}

/* A cancel flag set while a request waits out a storm ends it at once (GK_EINTR). */
static void test_cancel(void)
{
    NEED_SERVER();
    gk_s3 *s = client_retrying(0, 60000);
    gk_err e;
    canceller c;
    atomic_init(&c.flag, 0);
    CHECK(fault_q("what=503&secs=5") == 0);
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, &c);
    s3_req r;
    s3_req_init(&r, "PUT", "gk-test", "storm/cancelled");
    r.body = "x";
    r.body_len = 1;
    r.cancel = &c.flag;
    double t0 = seconds();
    int rc = s3_do(s, &r, NULL, &e);
    double took = seconds() - t0;
    s3_req_free(&r);
    pthread_join(th, NULL);
    CHECKF(rc == GK_EINTR && took < 1, "rc %d after %.2f s: %s", rc, took, e.msg);
    CHECK(fault("503", 0) == 0);
    gk_s3_close(s);
}

int main(void)
{
    if (server_start())
        srv.port = 0;
    RUN(test_faults);
    RUN(test_connections_kept);
    RUN(test_half_503);
    RUN(test_storm);
    RUN(test_storm_past_limit);
    RUN(test_cut_advancing);
    RUN(test_cancel);
    server_stop();
    return TEST_END();
}
