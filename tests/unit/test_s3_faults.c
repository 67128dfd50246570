/* test_s3_faults.c: common/s3's retries against moto's server through the fault proxy of
 * tests/cli/s3_server.py (tests/unit/s3_harness.h; skipped without moto): 503 SlowDown, a 500,
 * connections dropped mid-body or reset, a stalled transfer, each retried and counted, the bytes
 * whole; retries running out; a wrong region named; connections kept open between requests
 * (the client's pool of handles) and a new one after a network error. */
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
    CHECKF(st.size == (int64_t)n && gk_s3_retries(s) == 4, "%lld bytes, %ld retries", (long long)st.size,
           gk_s3_retries(s));
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
    /* retries run out: the last answer's error, the tries counted */
    s = client(1, NULL, 3);
    CHECK(fault("503", 10) == 0);
    CHECK(gk_s3_put(s, "gk-test", "faults/never", "x", 1, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "s3://gk-test/faults/never") && strstr(e.msg, "503"), "%s", e.msg);
    CHECK(gk_s3_retries(s) == 2);
    CHECK(fault("503", 0) == 0);
    /* a wrong region is named */
    CHECK(fault("region", 1) == 0);
    CHECK(gk_s3_get_range(s, "gk-test", "faults/obj", 0, 10, back, &got, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "bucket gk-test is in region eu-west-1, not us-east-1 (set AWS_REGION=eu-west-1)"), "%s",
           e.msg);
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

int main(void)
{
    if (server_start())
        srv.port = 0;
    RUN(test_faults);
    RUN(test_connections_kept);
    server_stop();
    return TEST_END();
}
