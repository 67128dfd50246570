/* test_s3.c: common/s3 (s3.h) by hand-checked values: s3:// URL parsing and key encoding, AWS's
 * INI files, the discovery of credentials, region, endpoint and retry settings from an
 * environment and profile files (a temp HOME), the XML reader, the adaptive mode's limiter. The
 * requests themselves: test_s3_server.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/s3/s3.h"
#include "common/s3/s3_int.h"
#include "tests/unit/test.h"

/* ---------------------------------------------------------------- pure functions */

static void test_url(void)
{
    char b[64], k[64];
    gk_err e;
    CHECK_OK(gk_s3_parse_url("s3://corpus/fw/train_*.bin", b, sizeof b, k, sizeof k, &e), &e);
    CHECK(strcmp(b, "corpus") == 0 && strcmp(k, "fw/train_*.bin") == 0);
    CHECK_OK(gk_s3_parse_url("s3://My_Bucket.1", b, sizeof b, k, sizeof k, &e), &e);
    CHECK(strcmp(b, "My_Bucket.1") == 0 && k[0] == '\0');
    CHECK_OK(gk_s3_parse_url("s3://runs/", b, sizeof b, k, sizeof k, &e), &e);
    CHECK(strcmp(b, "runs") == 0 && k[0] == '\0');
    CHECK_OK(gk_s3_parse_url("s3://runs/a//b c", b, sizeof b, k, sizeof k, &e), &e);
    CHECK(strcmp(k, "a//b c") == 0);
    CHECK(gk_s3_parse_url("s3:///key", b, sizeof b, k, sizeof k, &e) == GK_EUSAGE &&
          strstr(e.msg, "no bucket"));
    CHECK(gk_s3_parse_url("s3://bad bucket/k", b, sizeof b, k, sizeof k, &e) == GK_EUSAGE &&
          strstr(e.msg, "bad bucket name: ' '"));
    CHECK(gk_s3_parse_url("s3://../k", b, sizeof b, k, sizeof k, &e) == GK_EUSAGE);
    CHECK(gk_s3_parse_url("gs://b/k", b, sizeof b, k, sizeof k, &e) == GK_EUSAGE &&
          strstr(e.msg, "gs://b/k"));
    CHECK(gk_s3_parse_url("s3://b/0123456789", b, sizeof b, k, 5, &e) == GK_EUSAGE &&
          strstr(e.msg, "too long"));
    CHECK(gk_s3_is_url("s3://x") && !gk_s3_is_url("s3:/x") && !gk_s3_is_url(NULL));
    char enc[64];
    CHECK(s3_encode("a b/ü~+", 1, enc, sizeof enc) == 16 && strcmp(enc, "a%20b/%C3%BC~%2B") == 0);
    CHECK(s3_encode("a/b=", 0, enc, sizeof enc) > 0 && strcmp(enc, "a%2Fb%3D") == 0);
    CHECK(s3_encode("abcdef", 0, enc, 6) == -1);
}

static const char *INI = "# comment\n"
                         "[default]\n"
                         "aws_access_key_id = AKDEFAULT\n"
                         "aws_secret_access_key=secret=with=equals \n"
                         "; other comment\n"
                         "  [ profile work ]  \r\n"
                         "region = eu-central-1\r\n"
                         "s3 =\n"
                         "    addressing_style = path\n"
                         "[empty]\n"
                         "key =\n";

static void test_ini(void)
{
    char v[64];
    CHECK(gk_s3_ini_get(INI, "default", "aws_access_key_id", v, sizeof v) &&
          strcmp(v, "AKDEFAULT") == 0);
    CHECK(gk_s3_ini_get(INI, "default", "aws_secret_access_key", v, sizeof v) &&
          strcmp(v, "secret=with=equals") == 0);
    CHECK(gk_s3_ini_get(INI, "profile work", "region", v, sizeof v) &&
          strcmp(v, "eu-central-1") == 0);
    CHECK(gk_s3_ini_get(INI, "profile work", "addressing_style", v, sizeof v) &&
          strcmp(v, "path") == 0);
    CHECK(!gk_s3_ini_get(INI, "profile work", "aws_access_key_id", v, sizeof v) && v[0] == '\0');
    CHECK(!gk_s3_ini_get(INI, "work", "region", v, sizeof v));
    CHECK(gk_s3_ini_get(INI, "empty", "key", v, sizeof v) && v[0] == '\0');
    CHECK(gk_s3_ini_get(INI, "default", "aws_access_key_id", v, 5) && strcmp(v, "AKDE") == 0);
    CHECK(gk_s3_ini_has(INI, "profile work") && gk_s3_ini_has(INI, "empty") &&
          !gk_s3_ini_has(INI, "profile"));
    CHECK(!gk_s3_ini_get(NULL, "default", "x", v, sizeof v) && !gk_s3_ini_has(NULL, "default"));
}

static void test_xml(void)
{
    const char *x = "<?xml?><R><Code>Slow&amp;Down</Code><Contents><Key>a&lt;b</Key></Contents>"
                    "<Contents ><Key>c</Key></Contents><Prefix/><Codex>no</Codex></R>";
    char v[32];
    size_t from = 0;
    CHECK(s3_xml_get(x, strlen(x), NULL, "Code", v, sizeof v) && strcmp(v, "Slow&Down") == 0);
    CHECK(s3_xml_get(x, strlen(x), &from, "Key", v, sizeof v) && strcmp(v, "a<b") == 0);
    CHECK(s3_xml_get(x, strlen(x), &from, "Key", v, sizeof v) && strcmp(v, "c") == 0);
    CHECK(!s3_xml_get(x, strlen(x), &from, "Key", v, sizeof v));
    CHECK(s3_xml_get(x, strlen(x), NULL, "Prefix", v, sizeof v) && v[0] == '\0');
    CHECK(!s3_xml_get(x, 20, NULL, "Contents", v, sizeof v)); /* cut before the element ends */
    CHECK(!s3_xml_get("<Code>open", 10, NULL, "Code", v, sizeof v));
}

/* ---------------------------------------------------------------- discovery */

typedef struct fake_env {
    const char *kv[24]; /* name, value, ..., NULL */
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

static void test_discover(void)
{
    gk_s3_conf c;
    gk_err e;
    fake_env env = {{"AWS_ACCESS_KEY_ID", "AKENV", "AWS_SECRET_ACCESS_KEY", "sEnv",
                     "AWS_SESSION_TOKEN", "tok", "AWS_DEFAULT_REGION", "ap-south-1", "HOME",
                     "/nonexistent", NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &env, &e), &e);
    CHECK(strcmp(c.key_id, "AKENV") == 0 && strcmp(c.secret, "sEnv") == 0 &&
          strcmp(c.token, "tok") == 0);
    CHECK(strcmp(c.region, "ap-south-1") == 0 && c.endpoint[0] == '\0' && c.path_style == 0);
    CHECK(strstr(c.source, "environment") != NULL);

    char home[] = "/tmp/gk_s3_home.XXXXXX", p[300];
    if (!mkdtemp(home))
        SKIP("mkdtemp failed");
    snprintf(p, sizeof p, "%s/.aws", home);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/.aws/credentials", home);
    write_file(p, "[default]\naws_access_key_id = AKFILE\naws_secret_access_key = sFile\n"
                  "[work]\naws_access_key_id = AKWORK\naws_secret_access_key = "
                  "sWork\naws_session_token = tWork\n");
    snprintf(p, sizeof p, "%s/.aws/config", home);
    write_file(p, "[default]\nregion = eu-west-3\n"
                  "[profile work]\nregion = us-west-2\nendpoint_url = "
                  "https://ns.compat.objectstorage.x.oci.com\n"
                  "[profile cfgonly]\naws_access_key_id = AKCFG\naws_secret_access_key = sCfg\n"
                  "s3 =\n  addressing_style = virtual\nendpoint_url = http://127.0.0.1:9000\n");
    fake_env d = {{"HOME", home, NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &d, &e), &e);
    CHECK(strcmp(c.key_id, "AKFILE") == 0 && strcmp(c.secret, "sFile") == 0 && c.token[0] == '\0');
    CHECK(strcmp(c.region, "eu-west-3") == 0 && c.endpoint[0] == '\0' && !c.path_style);
    CHECKF(strstr(c.source, "profile default in") && strstr(c.source, ".aws/credentials"), "%s",
           c.source);

    fake_env w = {{"HOME", home, "AWS_PROFILE", "work", NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &w, &e), &e);
    CHECK(strcmp(c.key_id, "AKWORK") == 0 && strcmp(c.token, "tWork") == 0 &&
          strcmp(c.region, "us-west-2") == 0);
    CHECK(strcmp(c.endpoint, "https://ns.compat.objectstorage.x.oci.com") == 0 &&
          c.path_style == 1);

    fake_env g = {{"HOME", home, "AWS_PROFILE", "cfgonly", "AWS_REGION", "auto", "AWS_ENDPOINT_URL",
                   "https://storage.googleapis.com", NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &g, &e), &e);
    CHECK(strcmp(c.key_id, "AKCFG") == 0 && strstr(c.source, "profile cfgonly") &&
          strstr(c.source, ".aws/config"));
    CHECK(strcmp(c.region, "auto") == 0 &&
          strcmp(c.endpoint, "https://storage.googleapis.com") == 0);
    CHECK(c.path_style == 0); /* addressing_style = virtual wins over the own endpoint */

    fake_env s3ep = {
        {"HOME", home, "AWS_ENDPOINT_URL", "http://a", "AWS_ENDPOINT_URL_S3", "http://b", NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &s3ep, &e), &e);
    CHECK(strcmp(c.endpoint, "http://b") == 0 && c.path_style == 1);

    fake_env bad = {{"HOME", home, "AWS_PROFILE", "nope", NULL}};
    CHECK(gk_s3_conf_discover(&c, env_of, &bad, &e) == GK_EUSAGE &&
          strstr(e.msg, "'nope' not found"));

    fake_env none = {{"HOME", "/nonexistent", NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &none, &e), &e);
    CHECK(c.key_id[0] == '\0' && strstr(c.source, "anonymous") &&
          strcmp(c.region, "us-east-1") == 0);

    fake_env files = {
        {"AWS_SHARED_CREDENTIALS_FILE", p, "AWS_CONFIG_FILE", "/nonexistent/c", NULL}};
    /* the config file read as credentials */
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &files, &e), &e);
    CHECK(c.key_id[0] == '\0');
    snprintf(p, sizeof p, "rm -rf '%s'", home);
    CHECK(system(p) == 0);
}

/* The retry settings: AWS's variables over the profile's keys, GPT_S3_RETRY_SECONDS; none set:
 * no count limit, standard mode, and gk_s3_open's 10 minutes; bad values name the setting. */
static void test_discover_retries(void)
{
    gk_s3_conf c;
    gk_err e;
    gk_s3 *s = NULL;
    fake_env none = {{"HOME", "/nonexistent", NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &none, &e), &e);
    CHECK(c.max_attempts == 0 && c.retry_mode == GK_S3_RETRY_STANDARD && c.retry_ms == 0);
    CHECK_OK(gk_s3_open(&s, &c, &e), &e);
    if (s) {
        const gk_s3_conf *u = gk_s3_settings(s);
        CHECKF(u->max_attempts == 0 && u->retry_ms == 600000 && u->backoff_ms == 200,
               "%d tries, %ld ms", u->max_attempts, u->retry_ms);
        gk_s3_close(s);
    }
    char home[] = "/tmp/gk_s3_retry.XXXXXX", p[300];
    if (!mkdtemp(home))
        SKIP("mkdtemp failed");
    snprintf(p, sizeof p, "%s/config", home);
    write_file(p, "[default]\nmax_attempts = 7\nretry_mode = "
                  "adaptive\n[profile bad]\nmax_attempts = many\n");
    fake_env prof = {{"HOME", "/nonexistent", "AWS_CONFIG_FILE", p, NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &prof, &e), &e);
    CHECK(c.max_attempts == 7 && c.retry_mode == GK_S3_RETRY_ADAPTIVE);
    fake_env vars = {{"HOME", "/nonexistent", "AWS_CONFIG_FILE", p, "AWS_MAX_ATTEMPTS", "3",
                      "AWS_RETRY_MODE", "legacy", "GPT_S3_RETRY_SECONDS", "2.5", NULL}};
    CHECK_OK(gk_s3_conf_discover(&c, env_of, &vars, &e), &e);
    CHECK(c.max_attempts == 3 && c.retry_mode == GK_S3_RETRY_STANDARD && c.retry_ms == 2500);
    fake_env bad1 = {{"HOME", "/nonexistent", "AWS_MAX_ATTEMPTS", "0", NULL}};
    CHECK(gk_s3_conf_discover(&c, env_of, &bad1, &e) == GK_EUSAGE);
    CHECKF(strstr(e.msg, "AWS_MAX_ATTEMPTS=0: not a number of tries"), "%s", e.msg);
    fake_env bad2 = {{"HOME", "/nonexistent", "AWS_CONFIG_FILE", p, "AWS_PROFILE", "bad", NULL}};
    CHECK(gk_s3_conf_discover(&c, env_of, &bad2, &e) == GK_EUSAGE);
    CHECKF(strstr(e.msg, "max_attempts = many in [profile bad] of ") && strstr(e.msg, home), "%s",
           e.msg);
    fake_env bad3 = {{"HOME", "/nonexistent", "AWS_RETRY_MODE", "fast", NULL}};
    CHECK(gk_s3_conf_discover(&c, env_of, &bad3, &e) == GK_EUSAGE);
    CHECKF(strstr(e.msg, "AWS_RETRY_MODE=fast: not a retry mode"), "%s", e.msg);
    fake_env bad4 = {{"HOME", "/nonexistent", "GPT_S3_RETRY_SECONDS", "10m", NULL}};
    CHECK(gk_s3_conf_discover(&c, env_of, &bad4, &e) == GK_EUSAGE);
    CHECKF(strstr(e.msg, "GPT_S3_RETRY_SECONDS=10m: not a time in seconds"), "%s", e.msg);
    snprintf(p, sizeof p, "rm -rf '%s'", home);
    CHECK(system(p) == 0);
}

/* The adaptive mode's limiter, by hand-checked values: no gap until a throttling answer; then
 * the starts spaced by the gap, doubling with each throttling answer up to 5 s, shrinking with
 * the others until it is gone. */
static void test_throttle(void)
{
    s3_throttle t = {.gap_us = 0};
    pthread_mutex_init(&t.mu, NULL);
    CHECK(s3_throttle_take(&t, 1000) == 0 && s3_throttle_take(&t, 1000) == 0);
    s3_throttle_note(&t, 1, 200000);
    CHECK(t.gap_us == 200000);
    s3_throttle_note(&t, 1, 200000);
    CHECK(t.gap_us == 400000);
    CHECK(s3_throttle_take(&t, 1000000) == 0);       /* the first goes at once ... */
    CHECK(s3_throttle_take(&t, 1000000) == 400000);  /* ... the next ones a gap apart */
    CHECK(s3_throttle_take(&t, 1100000) == 700000);
    CHECK(s3_throttle_take(&t, 9000000) == 0);       /* after a pause: at once */
    for (int i = 0; i < 20; i++) s3_throttle_note(&t, 1, 200000);
    CHECK(t.gap_us == S3_THROTTLE_MAX_US);
    int n = 0;
    while (t.gap_us > 0 && n < 1000) s3_throttle_note(&t, 0, 200000), n++;
    CHECKF(n > 16 && n < 200 && s3_throttle_take(&t, 20000000) == 0, "%d answers", n);
    pthread_mutex_destroy(&t.mu);
}

int main(void)
{
    RUN(test_url);
    RUN(test_ini);
    RUN(test_xml);
    RUN(test_discover);
    RUN(test_discover_retries);
    RUN(test_throttle);
    return TEST_END();
}
