/* test_s3_server.c: common/s3's requests against a real S3 server: moto's, started by
 * tests/cli/s3_server.py on 127.0.0.1 with signatures enforced (skipped, saying why, when moto is
 * not installed): put/get/range/head, streaming get, listing in pages, multipart upload of a file
 * over the part size and an abort, conditional put, delete, a client made from a profile,
 * temporary credentials with a session token, a wrong secret or token (403 names the key id,
 * never the secret), anonymous requests, a missing key (404 names
 * it), no server; and through the server's fault proxy: 503s, a 500, connections dropped
 * mid-body or reset, a stalled transfer, all retried and counted; retries running out, a wrong
 * region named. */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/s3/s3.h"
#include "common/s3/s3_int.h"
#include "tests/unit/test.h"

typedef struct fake_env {
    const char *kv[8]; /* name, value, ..., NULL */
} fake_env;

static const char *env_of(const char *name, void *ud)
{
    fake_env *f = ud;
    for (int i = 0; f->kv[i]; i += 2)
        if (strcmp(f->kv[i], name) == 0)
            return f->kv[i + 1];
    return NULL;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* ---------------------------------------------------------------- the server */

static struct {
    pid_t pid;
    int fd;          /* the server's stdin: closing it stops the server */
    int port, proxy; /* moto's, the fault proxy's */
    char key[128], secret[128], why[300];
    char tkey[128], tsecret[128], token[2048]; /* temporary credentials (an assumed role) */
} srv = {.fd = -1};

static int server_start(void)
{
    char dir[] = "/tmp/gk_s3_srv.XXXXXX", ready[300], script[600];
    const char *top = getenv("TOP");
    snprintf(script, sizeof script, "%s/tests/cli/s3_server.py", top && *top ? top : ".");
    if (!mkdtemp(dir))
        return snprintf(srv.why, sizeof srv.why, "mkdtemp failed"), -1;
    snprintf(ready, sizeof ready, "%s/ready", dir);
    int p[2];
    if (pipe(p))
        return -1;
    srv.pid = fork();
    if (srv.pid == 0) {
        dup2(p[0], 0);
        close(p[0]);
        close(p[1]);
        execlp("python3", "python3", script, ready, (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    srv.fd = p[1];
    int rc = -1;
    for (int i = 0; i < 600; i++) { /* moto takes a few seconds to import */
        FILE *f = fopen(ready, "r");
        if (f) {
            rc = fscanf(f, "%d %d %127s %127s %127s %127s %2047s", &srv.port, &srv.proxy, srv.key, srv.secret,
                        srv.tkey, srv.tsecret, srv.token) == 7 ? 0 : -1;
            fclose(f);
            break;
        }
        int st;
        if (waitpid(srv.pid, &st, WNOHANG) == srv.pid) {
            srv.pid = 0;
            snprintf(srv.why, sizeof srv.why, WIFEXITED(st) && WEXITSTATUS(st) == 77
                         ? "moto is not installed (pip install 'moto[server]')" : "tests/cli/s3_server.py failed");
            break;
        }
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    unlink(ready);
    rmdir(dir);
    if (rc && !srv.why[0])
        snprintf(srv.why, sizeof srv.why, "the S3 server did not start");
    return rc;
}

static void server_stop(void)
{
    if (srv.fd >= 0)
        close(srv.fd);
    if (srv.pid > 0) {
        for (int i = 0; i < 100 && waitpid(srv.pid, NULL, WNOHANG) == 0; i++) {
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
        }
        if (waitpid(srv.pid, NULL, WNOHANG) == 0) {
            kill(srv.pid, SIGTERM);
            waitpid(srv.pid, NULL, 0);
        }
    }
}

/* A client of moto (proxy = 0) or of the fault proxy, with the server's key and secret. */
static gk_s3 *client(int proxy, const char *secret, int attempts)
{
    gk_s3_conf c = {0};
    snprintf(c.endpoint, sizeof c.endpoint, "http://127.0.0.1:%d", proxy ? srv.proxy : srv.port);
    snprintf(c.key_id, sizeof c.key_id, "%s", srv.key);
    snprintf(c.secret, sizeof c.secret, "%s", secret ? secret : srv.secret);
    snprintf(c.source, sizeof c.source, "test");
    c.path_style = 1;
    c.max_attempts = attempts;
    c.backoff_ms = 5;
    c.part_size = (size_t)5 << 20;
    gk_s3 *s = NULL;
    gk_err e;
    if (gk_s3_open(&s, &c, &e))
        fprintf(stderr, "gk_s3_open: %s\n", e.msg);
    return s;
}

/* Tells the fault proxy to give the next n requests fault what. */
static int fault(const char *what, int n)
{
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/__fault?n=%d&what=%s", srv.proxy, n, what);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fwrite);
    FILE *null = fopen("/dev/null", "w");
    curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    fclose(null);
    return rc == CURLE_OK ? 0 : -1;
}

/* ---------------------------------------------------------------- server tests */

#define NEED_SERVER()                    \
    do {                                 \
        if (srv.port <= 0)               \
            SKIP(srv.why);               \
    } while (0)

typedef struct membuf {
    char *p;
    size_t n, cap;
} membuf;

static int to_mem(const void *d, size_t n, void *ud)
{
    membuf *m = ud;
    if (m->n + n > m->cap)
        return -100;
    memcpy(m->p + m->n, d, n);
    m->n += n;
    return 0;
}

static void fill(char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (char)((seed = seed * 1103515245u + 12345u) >> 16);
}

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
    CHECKF(strcmp(st.etag, "cdae5a006da7601f4ecb89d98b19b881") == 0, "%s", st.etag); /* MD5 of the bytes (md5sum) */
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
    CHECK(gk_s3_head(s, "gk-test", "no/such.bin", &st, &e) == GK_ENOTFOUND && strstr(e.msg, "s3://gk-test/no/such.bin"));
    CHECK(gk_s3_get(s, "gk-nobucket", "k", to_mem, &m, &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "s3://gk-nobucket: no such bucket"), "%s", e.msg);
    /* delete, then it is gone; deleting again is no error */
    CHECK_OK(gk_s3_delete(s, "gk-test", "dir/a b_c.txt", &e), &e);
    CHECK(gk_s3_head(s, "gk-test", "dir/a b_c.txt", &st, &e) == GK_ENOTFOUND);
    CHECK_OK(gk_s3_delete(s, "gk-test", "dir/a b_c.txt", &e), &e);
    CHECK(gk_s3_retries(s) == 0);
    gk_s3_close(s);
}

/* Virtual-hosted addressing: BUCKET.localhost (curl resolves *.localhost to the loopback). */
static void test_virtual_host(void)
{
    NEED_SERVER();
    gk_s3 *s = client(0, NULL, 5);
    gk_s3_conf c = *gk_s3_settings(s);
    gk_s3_close(s);
    snprintf(c.endpoint, sizeof c.endpoint, "http://localhost:%d", srv.port);
    c.path_style = 0;
    gk_err e;
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    CHECK_OK(gk_s3_put(s, "gk-other", "vhost/k", "virtual", 7, &e), &e);
    char buf[16];
    size_t got = 0;
    CHECK_OK(gk_s3_get_range(s, "gk-other", "vhost/k", 0, sizeof buf, buf, &got, &e), &e);
    CHECK(got == 7 && memcmp(buf, "virtual", 7) == 0);
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
        CHECKF(w.n == 23 && w.bad_order == 0 && w.bytes == want, "page %d: %d keys, %lld bytes", page, w.n,
               (long long)w.bytes);
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
    CHECK(left.n == 2 && strcmp(left.keys[a], "mpu-a") == 0 && strcmp(left.keys[1 - a], "mpu-b") == 0);
    CHECK(u1 && u2 && strcmp(left.ids[1 - a], gk_s3_mpu_id(u1)) == 0 && strcmp(left.ids[a], gk_s3_mpu_id(u2)) == 0);
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
           strstr(e.msg, "secret access key does not match") && !strstr(e.msg, "not-the-secret"), "%s", e.msg);
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
    snprintf(text, sizeof text, "[moto]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.key, srv.secret);
    write_file(p, text);
    snprintf(p, sizeof p, "%s/.aws/config", home);
    snprintf(text, sizeof text, "[profile moto]\nregion = us-east-1\nendpoint_url = http://127.0.0.1:%d\n", srv.port);
    write_file(p, text);
    fake_env env = {{"HOME", home, "AWS_PROFILE", "moto", NULL}};
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
    fake_env anon = {{"HOME", "/nonexistent", "AWS_ENDPOINT_URL", text, NULL}};
    snprintf(text, sizeof text, "http://127.0.0.1:%d", srv.port);
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &anon, &e), &e);
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    if (s) {
        gk_s3_stat st;
        CHECK(gk_s3_head(s, "gk-other", "from/profile", &st, &e) == GK_EIO);
        CHECKF(strstr(e.msg, "access denied to bucket gk-other for anonymous requests"), "%s", e.msg);
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
    CHECKF(strstr(e.msg, "access denied to bucket gk-test") && strstr(e.msg, srv.tkey), "%s", e.msg);
    gk_s3_close(s);
}

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
    /* a connection reset before any answer; a transfer that stalls past stall_timeout_s */
    CHECK(fault("reset", 2) == 0);
    CHECK_OK(gk_s3_head(s, "gk-test", "faults/obj", &st, &e), &e);
    CHECK(st.size == (int64_t)n && gk_s3_retries(s) == 9);
    gk_s3_close(s);
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
    RUN(test_faults);
    server_stop();
    return TEST_END();
}
