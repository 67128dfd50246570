/* test_s3_server.c: common/s3's requests against a real S3 server (moto's, behind a proxy that
 * refuses a body whose x-amz-content-sha256 is not its hash, as S3 does: tests/unit/s3_harness.h;
 * skipped, saying why, when moto is not installed): put/get/range/head, streaming get,
 * virtual-hosted and path-style addressing, listing in pages, multipart upload of a file over the
 * part size, an abort, and the cleanup of uploads left in progress, conditional put, delete, a
 * client made from a profile, temporary credentials with a session token, a wrong secret or token
 * (403 names the key id, never the secret), anonymous requests, a missing key (404 names it), no
 * server. The faults: test_s3_faults.c. */
#include "tests/unit/s3_harness.h"

static void test_put_get(void)
{
    NEED_SERVER();
    gk_s3 *s = client(0, NULL, 5);
    gk_err e;
    const char *text = "hello, bucket";
    CHECK_OK(gk_s3_put(s, "gk-test", "dir/a b_c.txt", text, strlen(text), &e), &e);
    gk_s3_stat st;
    CHECK_OK(gk_s3_head(s, "gk-test", "dir/a b_c.txt", &st, &e), &e);
    CHECK(st.size == (int64_t)strlen(text));
    /* MD5 of the bytes (md5sum) */
    CHECKF(strcmp(st.etag, "cdae5a006da7601f4ecb89d98b19b881") == 0, "%s", st.etag);
    char buf[64] = "";
    size_t got = 0;
    CHECK_OK(gk_s3_get_range(s, "gk-test", "dir/a b_c.txt", 7, 6, buf, &got, &e), &e);
    CHECK(got == 6 && memcmp(buf, "bucket", 6) == 0);
    CHECK_OK(gk_s3_get_range(s, "gk-test", "dir/a b_c.txt", 10, 50, buf, &got, &e), &e);
    CHECK(got == 3 && memcmp(buf, "ket", 3) == 0);
    CHECK_OK(gk_s3_get_range(s, "gk-test", "dir/a b_c.txt", 13, 5, buf, &got, &e), &e);
    CHECK(got == 0);
    membuf m = {buf, 0, sizeof buf};
    CHECK_OK(gk_s3_get(s, "gk-test", "dir/a b_c.txt", to_mem, &m, &e), &e);
    CHECK(m.n == strlen(text) && memcmp(buf, text, m.n) == 0);
    CHECK_OK(gk_s3_put(s, "gk-test", "empty", "", 0, &e), &e);
    CHECK_OK(gk_s3_head(s, "gk-test", "empty", &st, &e), &e);
    CHECK(st.size == 0);
    /* 404 names the key; HEAD (no body) says it may be the bucket */
    CHECK(gk_s3_get(s, "gk-test", "no/such.bin", to_mem, &m, &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "s3://gk-test/no/such.bin: no such key"), "%s", e.msg);
    CHECK(gk_s3_head(s, "gk-test", "no/such.bin", &st, &e) == GK_ENOTFOUND &&
          strstr(e.msg, "s3://gk-test/no/such.bin"));
    CHECK(gk_s3_get(s, "gk-nobucket", "k", to_mem, &m, &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "s3://gk-nobucket: no such bucket"), "%s", e.msg);
    /* delete, then it is gone; deleting again is no error */
    CHECK_OK(gk_s3_delete(s, "gk-test", "dir/a b_c.txt", &e), &e);
    CHECK(gk_s3_head(s, "gk-test", "dir/a b_c.txt", &st, &e) == GK_ENOTFOUND);
    CHECK_OK(gk_s3_delete(s, "gk-test", "dir/a b_c.txt", &e), &e);
    CHECK(gk_s3_retries(s) == 0);
    gk_s3_close(s);
}

/* Virtual-hosted addressing: BUCKET.localhost (curl resolves *.localhost to the loopback), through
 * the proxy, which tells where each request went; a bucket that is no host name goes path-style. */
static void test_virtual_host(void)
{
    NEED_SERVER();
    gk_s3 *s = client(1, NULL, 5);
    gk_s3_conf c = *gk_s3_settings(s);
    gk_s3_close(s);
    snprintf(c.endpoint, sizeof c.endpoint, "http://localhost:%d", srv.proxy);
    c.path_style = 0;
    gk_err e;
    char last[256], want[256];
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    CHECK_OK(gk_s3_put(s, "gk-other", "vhost/k", "virtual", 7, &e), &e);
    last_request(last);
    snprintf(want, sizeof want, "gk-other.localhost:%d /vhost/k", srv.proxy);
    CHECKF(strcmp(last, want) == 0, "%s", last);
    char buf[16];
    size_t got = 0;
    CHECK_OK(gk_s3_get_range(s, "gk-other", "vhost/k", 0, sizeof buf, buf, &got, &e), &e);
    CHECK(got == 7 && memcmp(buf, "virtual", 7) == 0);
    CHECK(gk_s3_put(s, "Bad_Name", "k", "x", 1, &e) == GK_ENOTFOUND); /* moto has no such bucket */
    last_request(last);
    snprintf(want, sizeof want, "localhost:%d /Bad_Name/k", srv.proxy);
    CHECKF(strcmp(last, want) == 0, "%s", last);
    gk_s3_close(s);
    s = client(0, NULL, 5); /* the same object, path-style */
    CHECK_OK(gk_s3_get_range(s, "gk-other", "vhost/k", 0, sizeof buf, buf, &got, &e), &e);
    CHECK(got == 7 && memcmp(buf, "virtual", 7) == 0);
    gk_s3_close(s);
}

static void test_put_new(void)
{
    NEED_SERVER();
    gk_s3 *s = client(0, NULL, 5);
    gk_err e;
    CHECK(gk_s3_put_new(s, "gk-test", "out/lock", "pid 1", 5, &e) == 0);
    CHECK(gk_s3_put_new(s, "gk-test", "out/lock", "pid 2", 5, &e) == 1);
    char buf[8];
    size_t got = 0;
    CHECK_OK(gk_s3_get_range(s, "gk-test", "out/lock", 0, sizeof buf, buf, &got, &e), &e);
    CHECK(got == 5 && memcmp(buf, "pid 1", 5) == 0);
    gk_s3_close(s);
}

typedef struct seen {
    int n, bad_order;
    char last[64];
    int64_t bytes;
} seen;

static int on_entry(const gk_s3_entry *ent, void *ud)
{
    seen *w = ud;
    if (strcmp(ent->key, w->last) <= 0)
        w->bad_order++;
    snprintf(w->last, sizeof w->last, "%s", ent->key);
    w->n++;
    w->bytes += ent->size;
    return 0;
}

static int stop_at_3(const gk_s3_entry *ent, void *ud)
{
    (void)ent;
    return ++*(int *)ud == 3 ? 42 : 0;
}

static void test_list(void)
{
    NEED_SERVER();
    gk_s3 *s = client(0, NULL, 5);
    gk_err e;
    char key[64], body[32];
    for (int i = 0; i < 23; i++) {
        snprintf(key, sizeof key, "list-k%03d", 22 - i);
        snprintf(body, sizeof body, "%d", i * 7);
        CHECK_OK(gk_s3_put(s, "gk-test", key, body, strlen(body), &e), &e);
    }
    CHECK_OK(gk_s3_put(s, "gk-test", "listx", "x", 1, &e), &e);
    int64_t want = 0;
    for (int i = 0; i < 23; i++) want += snprintf(body, sizeof body, "%d", i * 7);
    static const int pages[] = {0, 1, 5, 22, 23};
    for (int i = 0; i < 5; i++) {
        int page = pages[i];
        seen w = {0};
        CHECK_OK(gk_s3_list(s, "gk-test", "list-", page, on_entry, &w, &e), &e);
        CHECKF(w.n == 23 && w.bad_order == 0 && w.bytes == want, "page %d: %d keys, %lld bytes",
               page, w.n, (long long)w.bytes);
        CHECK(strcmp(w.last, "list-k022") == 0);
    }
    int count = 0;
    CHECK(gk_s3_list(s, "gk-test", "list-", 2, stop_at_3, &count, &e) == 42 && count == 3);
    seen none = {0};
    CHECK_OK(gk_s3_list(s, "gk-test", "nothing-", 0, on_entry, &none, &e), &e);
    CHECK(none.n == 0);
    gk_s3_close(s);
}

typedef struct uploads {
    int n;
    char keys[4][64], ids[4][1024];
} uploads;

static int on_upload(const char *key, const char *id, void *ud)
{
    uploads *u = ud;
    if (u->n < 4) {
        snprintf(u->keys[u->n], sizeof u->keys[0], "%s", key);
        snprintf(u->ids[u->n], sizeof u->ids[0], "%s", id);
    }
    u->n++;
    return 0;
}

/* Whether the bucket lists upload id in progress (-1: the listing failed). */
static int has_upload(gk_s3 *s, const char *id)
{
    uploads u = {0};
    gk_err e;
    if (gk_s3_list_uploads(s, "gk-test", "", on_upload, &u, &e))
        return -1;
    for (int i = 0; i < u.n && i < 4; i++)
        if (strcmp(u.ids[i], id) == 0)
            return 1;
    return 0;
}

static void test_multipart(void)
{
    NEED_SERVER();
    gk_s3 *s = client(0, NULL, 5);
    gk_err e;
    size_t n = ((size_t)11 << 20) + 3; /* 3 parts of 5 MiB, the last 1 MiB + 3 */
    char *data = malloc(n), *back = malloc(n);
    fill(data, n, 7);
    char path[] = "/tmp/gk_s3_mpu.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, data, n) == (ssize_t)n);
    close(fd);
    CHECK_OK(gk_s3_put_file(s, "gk-test", "big/file.bin", path, &e), &e);
    gk_s3_stat st;
    CHECK_OK(gk_s3_head(s, "gk-test", "big/file.bin", &st, &e), &e);
    CHECK(st.size == (int64_t)n);
    CHECKF(strstr(st.etag, "-3") != NULL, "ETag %s: not of a 3-part upload", st.etag);
    membuf m = {back, 0, n};
    CHECK_OK(gk_s3_get(s, "gk-test", "big/file.bin", to_mem, &m, &e), &e);
    CHECK(m.n == n && memcmp(data, back, n) == 0);
    /* exactly the part size: one PUT */
    truncate(path, (off_t)5 << 20);
    CHECK_OK(gk_s3_put_file(s, "gk-test", "big/one.bin", path, &e), &e);
    CHECK_OK(gk_s3_head(s, "gk-test", "big/one.bin", &st, &e), &e);
    CHECK(st.size == (int64_t)5 << 20 && strchr(st.etag, '-') == NULL);
    unlink(path);
    /* abort: the upload is gone, no object appears */
    gk_s3_upload *u = NULL;
    CHECK_OK(gk_s3_mpu_create(s, "gk-test", "big/aborted.bin", &u, &e), &e);
    if (u) {
        char id[1024];
        snprintf(id, sizeof id, "%s", gk_s3_mpu_id(u));
        CHECK_OK(gk_s3_mpu_part(u, data, (size_t)5 << 20, &e), &e);
        CHECK(has_upload(s, id) == 1);
        CHECK_OK(gk_s3_mpu_abort(u, &e), &e);
        CHECK(has_upload(s, id) == 0);
        CHECK(gk_s3_head(s, "gk-test", "big/aborted.bin", &st, &e) == GK_ENOTFOUND);
    }
    /* what a killed writer leaves: found by prefix, aborted by id */
    gk_s3_upload *u1 = NULL, *u2 = NULL;
    CHECK_OK(gk_s3_mpu_create(s, "gk-test", "mpu-b", &u1, &e), &e);
    CHECK_OK(gk_s3_mpu_create(s, "gk-test", "mpu-a", &u2, &e), &e);
    uploads left = {0};
    CHECK_OK(gk_s3_list_uploads(s, "gk-test", "mpu-", on_upload, &left, &e), &e);
    int a = strcmp(left.keys[0], "mpu-a") == 0 ? 0 : 1; /* AWS lists by key, moto by creation */
    CHECK(left.n == 2 && strcmp(left.keys[a], "mpu-a") == 0 &&
          strcmp(left.keys[1 - a], "mpu-b") == 0);
    CHECK(u1 && u2 && strcmp(left.ids[1 - a], gk_s3_mpu_id(u1)) == 0 &&
          strcmp(left.ids[a], gk_s3_mpu_id(u2)) == 0);
    for (int i = 0; i < left.n && i < 2; i++)
        CHECK_OK(gk_s3_abort_upload(s, "gk-test", left.keys[i], left.ids[i], &e), &e);
    uploads none = {0};
    CHECK_OK(gk_s3_list_uploads(s, "gk-test", "mpu-", on_upload, &none, &e), &e);
    CHECK(none.n == 0);
    CHECK_OK(gk_s3_abort_upload(s, "gk-test", "mpu-a", left.ids[a], &e), &e); /* gone: no error */
    if (u1 && u2) { /* their handles: aborting again is no error */
        CHECK_OK(gk_s3_mpu_abort(u1, &e), &e);
        CHECK_OK(gk_s3_mpu_abort(u2, &e), &e);
    }
    free(data);
    free(back);
    gk_s3_close(s);
}

static void test_denied(void)
{
    NEED_SERVER();
    gk_s3 *s = client(0, "not-the-secret", 5);
    gk_err e;
    CHECK(gk_s3_put(s, "gk-test", "x", "x", 1, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "access denied to bucket gk-test") && strstr(e.msg, srv.key) &&
               strstr(e.msg, "secret access key does not match") &&
               !strstr(e.msg, "not-the-secret"),
           "%s", e.msg);
    CHECK(gk_s3_retries(s) == 0);
    gk_s3_close(s);
    /* no server: one line, at once */
    gk_s3_conf c = {0};
    snprintf(c.endpoint, sizeof c.endpoint, "http://127.0.0.1:1");
    c.path_style = 1;
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    time_t t0 = time(NULL);
    gk_s3_stat st;
    CHECK(gk_s3_head(s, "b", "k", &st, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "cannot reach http://127.0.0.1:1") && !strchr(e.msg, '\n'), "%s", e.msg);
    CHECK(time(NULL) - t0 < 5);
    gk_s3_close(s);
    c.endpoint[0] = '\0';
    snprintf(c.endpoint, sizeof c.endpoint, "ftp://x");
    CHECK(gk_s3_open(&s, &c, &e) == GK_EUSAGE && strstr(e.msg, "ftp://x"));
}

/* The client a tool makes: discovery from a temp HOME's profile (endpoint, region, keys in
 * ~/.aws/config and ~/.aws/credentials), then requests signed with them; anonymous: refused. */
static void test_profile_client(void)
{
    NEED_SERVER();
    char home[] = "/tmp/gk_s3_prof.XXXXXX", p[300], text[600];
    if (!mkdtemp(home))
        SKIP("mkdtemp failed");
    snprintf(p, sizeof p, "%s/.aws", home);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/.aws/credentials", home);
    snprintf(text, sizeof text, "[moto]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
             srv.key, srv.secret);
    write_file(p, text);
    snprintf(p, sizeof p, "%s/.aws/config", home);
    snprintf(text, sizeof text,
             "[profile moto]\nregion = us-east-1\nendpoint_url = http://127.0.0.1:%d\n", srv.port);
    write_file(p, text);
    fake_env env = {{"HOME", home, "AWS_PROFILE", "moto", "GPT_S3_RETRY_SECONDS", "5", NULL}};
    gk_s3_conf c;
    gk_err e;
    gk_s3 *s = NULL;
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &env, &e), &e);
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    if (s) {
        CHECK_OK(gk_s3_put(s, "gk-other", "from/profile", "p", 1, &e), &e);
        gk_s3_stat st;
        CHECK_OK(gk_s3_head(s, "gk-other", "from/profile", &st, &e), &e);
        CHECK(st.size == 1);
        gk_s3_close(s);
    }
    fake_env anon = {
        {"HOME", "/nonexistent", "AWS_ENDPOINT_URL", text, "GPT_S3_RETRY_SECONDS", "5", NULL}};
    snprintf(text, sizeof text, "http://127.0.0.1:%d", srv.port);
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &anon, &e), &e);
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    if (s) {
        gk_s3_stat st;
        CHECK(gk_s3_head(s, "gk-other", "from/profile", &st, &e) == GK_EIO);
        CHECKF(strstr(e.msg, "access denied to bucket gk-other for anonymous requests"), "%s",
               e.msg);
        gk_s3_close(s);
    }
    snprintf(p, sizeof p, "rm -rf '%s'", home);
    CHECK(system(p) == 0);
}

/* Temporary credentials: the session token travels (x-amz-security-token, signed); a wrong
 * token or none is refused, naming the key id. */
static void test_session_token(void)
{
    NEED_SERVER();
    gk_s3 *s = client(0, NULL, 5);
    gk_s3_conf c = *gk_s3_settings(s);
    gk_s3_close(s);
    snprintf(c.key_id, sizeof c.key_id, "%s", srv.tkey);
    snprintf(c.secret, sizeof c.secret, "%s", srv.tsecret);
    snprintf(c.token, sizeof c.token, "%s", srv.token);
    gk_err e;
    gk_s3_stat st;
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    CHECK_OK(gk_s3_put(s, "gk-test", "temp/k", "tmp", 3, &e), &e);
    CHECK_OK(gk_s3_head(s, "gk-test", "temp/k", &st, &e), &e);
    CHECK(st.size == 3);
    gk_s3_close(s);
    snprintf(c.token, sizeof c.token, "not-the-token");
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    CHECK(gk_s3_put(s, "gk-test", "temp/k2", "tmp", 3, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "s3://gk-test/temp/k2: the session token was refused (InvalidToken: ") &&
           strstr(e.msg, srv.tkey) && !strstr(e.msg, srv.tsecret), "%s", e.msg);
    gk_s3_close(s);
    c.token[0] = '\0'; /* a temporary key without its token */
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    CHECK(gk_s3_put(s, "gk-test", "temp/k3", "tmp", 3, &e) == GK_EIO);
    CHECKF(strstr(e.msg, "access denied to bucket gk-test") && strstr(e.msg, srv.tkey), "%s",
           e.msg);
    gk_s3_close(s);
}

int main(void)
{
    if (server_start())
        srv.port = 0;
    RUN(test_put_get);
    RUN(test_virtual_host);
    RUN(test_put_new);
    RUN(test_list);
    RUN(test_multipart);
    RUN(test_denied);
    RUN(test_profile_client);
    RUN(test_session_token);
    server_stop();
    return TEST_END();
}
