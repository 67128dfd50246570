/* s3_harness.h: what the S3 tests against moto share (test_s3_server.c, test_s3_faults.c): the
 * server (tests/cli/s3_server.py, started once per binary on 127.0.0.1: moto behind a proxy that
 * checks each body's x-amz-content-sha256, and a fault-injecting proxy beside it, which checks
 * too; its tests skip, saying why, when moto is not installed), clients of it or of the fault
 * proxy, the proxy's controls (faults, where the last request went), a fake environment for
 * gk_s3_conf_discover and a sink into memory. Header-only: each test binary is one translation
 * unit. Not thread-safe: call from main's thread. */
#ifndef GK_TEST_S3_HARNESS_H
#define GK_TEST_S3_HARNESS_H

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

static inline const char *env_of(const char *name, void *ud)
{
    fake_env *f = ud;
    for (int i = 0; f->kv[i]; i += 2)
        if (strcmp(f->kv[i], name) == 0)
            return f->kv[i + 1];
    return NULL;
}

static inline void write_file(const char *path, const char *text)
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
    int port, proxy; /* the server's (a proxy that checks
                      * x-amz-content-sha256), the fault proxy's */
    char key[128], secret[128], why[300];
    char tkey[128], tsecret[128], token[2048]; /* temporary credentials (an assumed role) */
} srv = {.fd = -1};

static inline int server_start(void)
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
            rc = fscanf(f, "%d %d %127s %127s %127s %127s %2047s", &srv.port, &srv.proxy, srv.key,
                        srv.secret, srv.tkey, srv.tsecret, srv.token) == 7
                     ? 0
                     : -1;
            fclose(f);
            break;
        }
        int st;
        if (waitpid(srv.pid, &st, WNOHANG) == srv.pid) {
            srv.pid = 0;
            snprintf(srv.why, sizeof srv.why,
                     WIFEXITED(st) && WEXITSTATUS(st) == 77
                         ? "moto is not installed (pip install 'moto[server]')"
                         : "tests/cli/s3_server.py failed");
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

static inline void server_stop(void)
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

/* A client of the server (proxy = 0: its checking proxy, in front of moto) or of the fault
 * proxy, with the server's key and secret; backoff_ms 5 and retry_ms 5 s, so that retries are
 * quick. */
static inline gk_s3 *client(int proxy, const char *secret, int attempts)
{
    gk_s3_conf c = {0};
    snprintf(c.endpoint, sizeof c.endpoint, "http://127.0.0.1:%d", proxy ? srv.proxy : srv.port);
    snprintf(c.key_id, sizeof c.key_id, "%s", srv.key);
    snprintf(c.secret, sizeof c.secret, "%s", secret ? secret : srv.secret);
    snprintf(c.source, sizeof c.source, "test");
    c.path_style = 1;
    c.max_attempts = attempts;
    c.backoff_ms = 5;
    c.retry_ms = 5000; /* a test that goes wrong fails in seconds, not in the default 10 minutes */
    c.part_size = (size_t)5 << 20;
    gk_s3 *s = NULL;
    gk_err e;
    if (gk_s3_open(&s, &c, &e))
        fprintf(stderr, "gk_s3_open: %s\n", e.msg);
    return s;
}

/* A client of the fault proxy that gives up after attempts tries in a row without progress
 * (0: no such limit) or retry_ms of failing and waiting. */
static inline gk_s3 *client_retrying(int attempts, long retry_ms)
{
    gk_s3 *s = client(1, NULL, attempts);
    if (!s)
        return NULL;
    gk_s3_conf c = *gk_s3_settings(s);
    gk_s3_close(s);
    c.max_attempts = attempts;
    c.retry_ms = retry_ms;
    gk_err e;
    if (gk_s3_open(&s, &c, &e))
        fprintf(stderr, "gk_s3_open: %s\n", e.msg);
    return s;
}

/* Sends the fault proxy POST /__fault?QUERY (tests/cli/s3_server.py says what it may hold). */
static inline int fault_q(const char *query)
{
    char url[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/__fault?%s", srv.proxy, query);
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

/* Tells the fault proxy to give the next n requests fault what. */
static inline int fault(const char *what, int n)
{
    char q[100];
    snprintf(q, sizeof q, "n=%d&what=%s", n, what);
    return fault_q(q);
}

/* ---------------------------------------------------------------- for the tests */

/* Skips a test when the server did not start (the reason: moto missing, or the script failed). */
#define NEED_SERVER()                    \
    do {                                 \
        if (srv.port <= 0)               \
            SKIP(srv.why);               \
    } while (0)

typedef struct membuf {
    char *p;
    size_t n, cap;
} membuf;

static inline int to_mem(const void *d, size_t n, void *ud)
{
    membuf *m = ud;
    if (m->n + n > m->cap)
        return -100;
    memcpy(m->p + m->n, d, n);
    m->n += n;
    return 0;
}

static inline void fill(char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (char)((seed = seed * 1103515245u + 12345u) >> 16);
}

/* A curl sink appending to a string of 256 bytes. */
static inline size_t to_str(char *p, size_t size, size_t n, void *ud)
{
    char *out = ud;
    size_t len = strlen(out), k = size * n;
    if (len + k < 256) {
        memcpy(out + len, p, k);
        out[len + k] = '\0';
    }
    return k;
}

/* The text of the proxy's control GET path (/__last, /__conns) into out. */
static inline void proxy_get(const char *path, char out[256])
{
    char url[100];
    out[0] = '\0';
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", srv.proxy, path);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_str);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_perform(c);
    curl_easy_cleanup(c);
}

static inline void last_request(char out[256])
{
    proxy_get("/__last", out);
}

/* The connections the proxy has accepted so far, this question's own included. */
static inline long proxy_connections(void)
{
    char out[256];
    proxy_get("/__conns", out);
    return atol(out);
}

#endif
