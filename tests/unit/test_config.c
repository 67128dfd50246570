/* test_config.c: the typed config table: defaults, files, includes, overrides, errors, JSON. */
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "tests/unit/test.h"

typedef struct tcfg {
    int64_t batch_size, max_iters;
    double learning_rate, dropout;
    bool bias, decay_lr;
    const char *out_dir, *device;
} tcfg;

static const gk_config_key table[] = {
    GK_CK_INT_R(tcfg, batch_size, "12", 1, 1e9, "sequences per micro-batch"),
    GK_CK_INT(tcfg, max_iters, "5000", "optimizer steps"),
    GK_CK_DOUBLE_R(tcfg, learning_rate, "6e-4", 0, 10, "peak learning rate"),
    GK_CK_DOUBLE_R(tcfg, dropout, "0.0", 0, 1, "dropout probability"),
    GK_CK_BOOL(tcfg, bias, "true", "biases in linear layers and layernorms"),
    GK_CK_BOOL(tcfg, decay_lr, "true", "cosine learning-rate decay"),
    GK_CK_STR(tcfg, out_dir, "out", "checkpoint directory"),
    GK_CK_CHOICE(tcfg, device, "cpu", "cpu|cuda", "compute device"),
    GK_CK_END,
};

static char tmpdir[] = "/tmp/gk_test_config_XXXXXX";

/* Writes text to tmpdir/name and returns the path (static buffer rotation of 4). */
static const char *write_file(const char *name, const char *text)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

static gk_config *make(tcfg *c)
{
    gk_config *cfg = NULL;
    gk_err err = { 0 };
    memset(c, 0, sizeof *c);
    CHECK_OK(gk_config_create(&cfg, table, c, &err), &err);
    return cfg;
}

/* Loads text as a file and expects failure with exactly msg (after the tmpdir prefix). */
static void expect_file_error(const char *text, int code, const char *msg)
{
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    const char *p = write_file("bad.conf", text);
    int rc = gk_config_load_file(cfg, p, &err);
    char want[1024];
    char fmt[1024];
    snprintf(fmt, sizeof fmt, "%%s/%s", msg);
    snprintf(want, sizeof want, fmt, tmpdir, tmpdir);
    CHECKF(rc == code, "rc %d for %s", rc, text);
    CHECKF(strcmp(err.msg, want) == 0, "got '%s', want '%s'", err.msg, want);
    gk_config_free(cfg);
}

static void test_defaults(void)
{
    tcfg c;
    gk_config *cfg = make(&c);
    CHECK(c.batch_size == 12 && c.max_iters == 5000);
    CHECK(c.learning_rate == 6e-4 && c.dropout == 0.0);
    CHECK(c.bias && c.decay_lr);
    CHECK(strcmp(c.out_dir, "out") == 0 && strcmp(c.device, "cpu") == 0);
    CHECK(gk_config_origin(cfg, "batch_size") == NULL);
    CHECK(gk_config_find(cfg, "dropout") == &table[3]);
    CHECK(gk_config_find(cfg, "nope") == NULL);
    gk_config_free(cfg);
    gk_config_free(NULL);
}

static void test_bad_default(void)
{
    static const gk_config_key bad[] = { GK_CK_INT(tcfg, batch_size, "twelve", "x"), GK_CK_END };
    tcfg c;
    gk_config *cfg = (gk_config *)1;
    gk_err err = { 0 };
    CHECK(gk_config_create(&cfg, bad, &c, &err) == GK_EUSAGE);
    CHECK(cfg == NULL);
    CHECKF(strcmp(err.msg, "default of batch_size: batch_size: 'twelve' is not an integer") == 0,
           "%s", err.msg);
}

static void test_file_parse(void)
{
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    const char *p = write_file("a.conf",
        "# a comment\n"
        "\n"
        "  batch_size = 64   # trailing comment\n"
        "learning_rate=1e-3\n"
        "dropout = 0.25\r\n"
        "bias = False\n"
        "decay_lr = off\n"
        "out_dir = \"out dir/#1\"  # quoted keeps '#'\n"
        "device = 'cuda'\n"
        "max_iters = 2K\n");
    CHECK_OK(gk_config_load_file(cfg, p, &err), &err);
    CHECK(c.batch_size == 64 && c.max_iters == 2000);
    CHECK(c.learning_rate == 1e-3 && c.dropout == 0.25);
    CHECK(!c.bias && !c.decay_lr);
    CHECKF(strcmp(c.out_dir, "out dir/#1") == 0, "%s", c.out_dir);
    CHECK(strcmp(c.device, "cuda") == 0);
    char want[600];
    snprintf(want, sizeof want, "%s:3", p);
    CHECKF(gk_config_origin(cfg, "batch_size") &&
               strcmp(gk_config_origin(cfg, "batch_size"), want) == 0,
           "%s", gk_config_origin(cfg, "batch_size"));
    gk_config_free(cfg);
}

static void test_values(void)
{
    static const struct { const char *key, *text; int ok; } cases[] = {
        { "bias", "TRUE", 1 }, { "bias", "yes", 1 }, { "bias", "On", 1 }, { "bias", "1", 1 },
        { "bias", "no", 1 }, { "bias", "0", 1 }, { "bias", "maybe", 0 }, { "bias", "", 0 },
        { "max_iters", "1M", 1 }, { "max_iters", "1Ki", 1 }, { "max_iters", "1e4", 1 },
        { "max_iters", "-3", 1 }, { "max_iters", "12abc", 0 }, { "max_iters", "1.5", 0 },
        { "max_iters", "99999999999999999999", 0 }, { "max_iters", "10000000T", 0 },
        { "learning_rate", "6e-4", 1 }, { "learning_rate", "1e-3x", 0 },
        { "learning_rate", "nan", 0 }, { "learning_rate", "inf", 0 }, { "learning_rate", " ", 0 },
        { "device", "cpu", 1 }, { "device", "gpu", 0 }, { "out_dir", "", 1 },
    };
    tcfg c;
    gk_config *cfg = make(&c);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gk_err err = { 0 };
        int rc = gk_config_set(cfg, cases[i].key, cases[i].text, NULL, &err);
        CHECKF((rc == 0) == cases[i].ok, "%s=%s: rc %d %s", cases[i].key, cases[i].text, rc,
               err.msg);
        if (!cases[i].ok)
            CHECK(rc == GK_EUSAGE);
    }
    gk_err err = { 0 };
    CHECK_OK(gk_config_set(cfg, "max_iters", "1Ki", NULL, &err), &err);
    CHECK(c.max_iters == 1024);
    CHECK_OK(gk_config_set(cfg, "max_iters", "2G", NULL, &err), &err);
    CHECK(c.max_iters == 2000000000LL);
    gk_config_free(cfg);
}

static void test_include(void)
{
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    mkdir(sub, 0700);
    write_file("sub/base.conf", "batch_size = 8\ndropout = 0.1\n");
    const char *p = write_file("sub/top.conf", "include = base.conf\ndropout = 0.2\n");
    CHECK_OK(gk_config_load_file(cfg, p, &err), &err);
    CHECK(c.batch_size == 8 && c.dropout == 0.2);
    /* include cycle: a -> b -> a */
    write_file("cyc_b.conf", "include = cyc_a.conf\n");
    p = write_file("cyc_a.conf", "batch_size = 3\ninclude = cyc_b.conf\n");
    int rc = gk_config_load_file(cfg, p, &err);
    char want[1400];
    snprintf(want, sizeof want,
             "%s/cyc_b.conf:1: include cycle: %s/cyc_a.conf -> %s/cyc_b.conf -> %s/cyc_a.conf",
             tmpdir, tmpdir, tmpdir, tmpdir);
    CHECK(rc == GK_EUSAGE);
    CHECKF(strcmp(err.msg, want) == 0, "got '%s'", err.msg);
    /* self include */
    p = write_file("self.conf", "include = self.conf\n");
    CHECK(gk_config_load_file(cfg, p, &err) == GK_EUSAGE);
    CHECKF(strstr(err.msg, "include cycle") != NULL, "%s", err.msg);
    gk_config_free(cfg);
    expect_file_error("\n\ninclude = missing.conf\n", GK_EUSAGE,
                      "bad.conf:3: include %s/missing.conf: No such file or directory");
}

static void test_include_depth(void)
{
    /* d0 -> d1 -> ... -> d20, no cycle: fails on depth */
    for (int i = 0; i < 20; i++) {
        char name[32], text[64];
        snprintf(name, sizeof name, "d%d.conf", i);
        snprintf(text, sizeof text, "include = d%d.conf\n", i + 1);
        write_file(name, text);
    }
    write_file("d20.conf", "batch_size = 1\n");
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    char p[600];
    snprintf(p, sizeof p, "%s/d0.conf", tmpdir);
    CHECK(gk_config_load_file(cfg, p, &err) == GK_EUSAGE);
    CHECKF(strstr(err.msg, "d15.conf:1: includes nested deeper than 16") != NULL, "%s", err.msg);
    gk_config_free(cfg);
}

static void test_file_errors(void)
{
    expect_file_error("batch_size = 4\nlerning_rate = 1e-3\n", GK_EUSAGE,
                      "bad.conf:2: unknown key 'lerning_rate' (did you mean 'learning_rate'?)");
    expect_file_error("wandb_log = True\n", GK_EUSAGE, "bad.conf:1: unknown key 'wandb_log'");
    expect_file_error("learning_rate = abc\n", GK_EUSAGE,
                      "bad.conf:1: learning_rate: 'abc' is not a number");
    expect_file_error("# x\nbatch_size = 0\n", GK_EUSAGE,
                      "bad.conf:2: batch_size: 0 is out of range [1, 1000000000]");
    expect_file_error("dropout = 1.5\n", GK_EUSAGE,
                      "bad.conf:1: dropout: 1.5 is out of range [0, 1]");
    expect_file_error("bias = maybe\n", GK_EUSAGE,
                      "bad.conf:1: bias: 'maybe' is not a boolean (true/false)");
    expect_file_error("device = gpu\n", GK_EUSAGE,
                      "bad.conf:1: device: 'gpu' is not one of cpu|cuda");
    expect_file_error("batch_size 12\n", GK_EUSAGE,
                      "bad.conf:1: expected 'key = value', got 'batch_size 12'");
    expect_file_error("out_dir = \"abc\n", GK_EUSAGE,
                      "bad.conf:1: out_dir: unterminated quoted value");
    expect_file_error("out_dir = \"a\" b\n", GK_EUSAGE,
                      "bad.conf:1: out_dir: unexpected 'b' after quoted value");
    expect_file_error("max_iters = 1e30\n", GK_EUSAGE,
                      "bad.conf:1: max_iters: '1e30' is not an integer");
    expect_file_error("batch_size = 12.5\n", GK_EUSAGE,
                      "bad.conf:1: batch_size: '12.5' is not an integer");
    expect_file_error("= 3\n", GK_EUSAGE, "bad.conf:1: expected 'key = value', got '= 3'");
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    CHECK(gk_config_load_file(cfg, "/nonexistent/x.conf", &err) == GK_EUSAGE); /* exit 2 */
    CHECKF(strcmp(err.msg, "/nonexistent/x.conf: No such file or directory") == 0, "%s", err.msg);
    gk_config_free(cfg);
}

static void test_duplicates(void)
{
    expect_file_error("batch_size = 4\n# again:\nbatch_size = 8\n", GK_EUSAGE,
                      "bad.conf:3: duplicate key 'batch_size' (first set at %s/bad.conf:1)");
    /* a file may override what it included, and include several files setting one key */
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    write_file("dup_base.conf", "batch_size = 8\ndropout = 0.1\n");
    write_file("dup_more.conf", "batch_size = 16\n");
    const char *p = write_file("dup_top.conf", "include = dup_base.conf\ninclude = dup_more.conf\n"
                                               "include = dup_base.conf\nbatch_size = 32\n");
    CHECK_OK(gk_config_load_file(cfg, p, &err), &err);
    CHECK(c.batch_size == 32 && c.dropout == 0.1);
    gk_config_free(cfg);
}

static void test_overrides(void)
{
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    CHECK_OK(gk_config_set_arg(cfg, "--learning_rate=3e-4", &err), &err);
    CHECK(c.learning_rate == 3e-4);
    CHECK(strcmp(gk_config_origin(cfg, "learning_rate"), "--learning_rate") == 0);
    CHECK(gk_config_set_arg(cfg, "--lerning_rate=1", &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg,
                  "--lerning_rate: unknown key 'lerning_rate' (did you mean 'learning_rate'?)") ==
               0,
           "%s", err.msg);
    CHECK(gk_config_set_arg(cfg, "--learning_rate=abc", &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "--learning_rate: learning_rate: 'abc' is not a number") == 0, "%s",
           err.msg);
    CHECK(gk_config_set_arg(cfg, "--bias", &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "--bias: expected --bias=VALUE") == 0, "%s", err.msg);
    CHECK(gk_config_set_arg(cfg, "--bais", &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "--bais: unknown key 'bais' (did you mean 'bias'?)") == 0, "%s",
           err.msg);
    CHECK(gk_config_set_arg(cfg, "--=3", &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "--=3: expected --key=value") == 0, "%s", err.msg);
    CHECK(gk_config_set(cfg, "batch_sise", "3", NULL, &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "--batch_sise: unknown key 'batch_sise' (did you mean 'batch_size'?)") ==
               0,
           "%s", err.msg);
    CHECK_OK(gk_config_set_arg(cfg, "--out_dir=a=b", &err), &err);
    CHECK(strcmp(c.out_dir, "a=b") == 0);
    CHECK(c.learning_rate == 3e-4); /* failed sets leave the value alone */
    gk_config_free(cfg);
}

static void test_print(void)
{
    tcfg c;
    gk_config *cfg = make(&c);
    gk_err err = { 0 };
    CHECK_OK(gk_config_set(cfg, "dropout", "0.1", "x.conf:4", &err), &err);
    CHECK_OK(gk_config_set(cfg, "out_dir", "my out # 1", NULL, &err), &err);
    CHECK_OK(gk_config_set(cfg, "batch_size", "12", "x.conf:5", &err), &err); /* = default */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gk_config_print(cfg, f);
    fclose(f);
    const char *want = "batch_size = 12\n"
                       "max_iters = 5000\n"
                       "learning_rate = 0.0006\n"
                       "dropout = 0.1  # x.conf:4\n"
                       "bias = true\n"
                       "decay_lr = true\n"
                       "out_dir = \"my out # 1\"  # --out_dir\n"
                       "device = cpu\n";
    CHECKF(buf && strcmp(buf, want) == 0, "got:\n%s", buf);
    /* the printed config reads back as the same values */
    tcfg c2;
    gk_config *cfg2 = make(&c2);
    CHECK_OK(gk_config_load_file(cfg2, write_file("printed.conf", buf), &err), &err);
    CHECK(c2.dropout == 0.1 && strcmp(c2.out_dir, "my out # 1") == 0);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    gk_config_help(table, f);
    fclose(f);
    CHECKF(strstr(buf, "  --device=cpu|cuda                compute device (default: cpu)\n") !=
               NULL,
           "%s", buf);
    CHECKF(strstr(buf, "--learning_rate=X") != NULL, "%s", buf);
    free(buf);
    gk_config_free(cfg2);
    gk_config_free(cfg);
}

static void test_json_round_trip(void)
{
    tcfg a, b;
    gk_config *ca = make(&a), *cb = make(&b);
    gk_err err = { 0 };
    CHECK_OK(gk_config_set(ca, "learning_rate", "0.1", NULL, &err), &err);
    CHECK_OK(gk_config_set(ca, "max_iters", "-7", NULL, &err), &err);
    CHECK_OK(gk_config_set(ca, "bias", "false", NULL, &err), &err);
    CHECK_OK(gk_config_set(ca, "out_dir", "d\xc3\xa9j\xc3\xa0 \"q\"", NULL, &err), &err);
    char *js = gk_config_to_json(ca, &err);
    CHECKF(js != NULL, "%s", err.msg);
    if (!js)
        return;
    CHECKF(strncmp(js, "{\"batch_size\":12,\"max_iters\":-7,\"learning_rate\":0.10000000000000001,",
                   68) == 0,
           "%s", js);
    CHECK_OK(gk_config_from_json(cb, js, "ckpt:gptkit.train", &err), &err);
    CHECK(memcmp(&a, &b, offsetof(tcfg, out_dir)) == 0);
    CHECK(b.learning_rate == 0.1 && b.max_iters == -7 && !b.bias);
    CHECK(strcmp(a.out_dir, b.out_dir) == 0 && strcmp(b.device, "cpu") == 0);
    free(js);
    CHECK(gk_config_from_json(cb, "{\"batch_size\": \"x\"}", "ck", &err) == GK_EFORMAT);
    CHECKF(strcmp(err.msg, "ck: batch_size: expected an integer") == 0, "%s", err.msg);
    CHECK(gk_config_from_json(cb, "{\"n_layr\": 3}", "ck", &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "ck: unknown key 'n_layr'") == 0, "%s", err.msg);
    CHECK(gk_config_from_json(cb, "{\"dropout\": 2.0}", "ck", &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "ck: dropout: 2 is out of range [0, 1]") == 0, "%s", err.msg);
    CHECK(gk_config_from_json(cb, "[1", "ck", &err) == GK_EFORMAT);
    CHECKF(strncmp(err.msg, "ck: bad config JSON at byte", 27) == 0, "%s", err.msg);
    CHECK_OK(gk_config_from_json(cb, "{\"max_iters\": 3.0, \"learning_rate\": 1}", "ck", &err),
             &err);
    CHECK(b.max_iters == 3 && b.learning_rate == 1.0);
    gk_config_free(ca);
    gk_config_free(cb);
}

static void test_resolve_path(void)
{
    char out[600], dir[600];
    gk_err err = { 0 };
    snprintf(dir, sizeof dir, "%s/presets", tmpdir);
    mkdir(dir, 0700);
    write_file("presets/tiny.conf", "batch_size = 2\n");
    gk_config_set_dir(dir);
    CHECK_OK(gk_config_resolve_path("tiny.conf", out, sizeof out, &err), &err);
    char want[700];
    snprintf(want, sizeof want, "%s/tiny.conf", dir);
    CHECKF(strcmp(out, want) == 0, "%s", out);
    CHECK_OK(gk_config_resolve_path("tiny", out, sizeof out, &err), &err);
    CHECKF(strcmp(out, want) == 0, "%s", out);
    CHECK_OK(gk_config_resolve_path("Makefile", out, sizeof out, &err), &err); /* cwd first */
    CHECK(strcmp(out, "Makefile") == 0);
    CHECK(gk_config_resolve_path("./nope.conf", out, sizeof out, &err) == GK_EUSAGE);
    CHECK(gk_config_resolve_path("nope.conf", out, sizeof out, &err) == GK_EUSAGE);
    CHECKF(strstr(err.msg, "nope.conf: no such config (looked in ., ") == err.msg, "%s", err.msg);
    CHECK(gk_config_resolve_path("tiny.conf", out, 8, &err) == GK_EUSAGE);
    /* include falls back to presets */
    tcfg c;
    gk_config *cfg = make(&c);
    CHECK_OK(gk_config_load_file(cfg, write_file("inc_preset.conf", "include = tiny.conf\n"), &err),
             &err);
    CHECK(c.batch_size == 2);
    gk_config_free(cfg);
    gk_config_set_dir(NULL);
}

static void test_edit_distance(void)
{
    CHECK(gk_edit_distance("", "") == 0);
    CHECK(gk_edit_distance("abc", "") == 3);
    CHECK(gk_edit_distance("kitten", "sitting") == 3);
    CHECK(gk_edit_distance("lerning_rate", "learning_rate") == 1);
}

/* The multiples suggested when a value does not split: distinct, the lower only when above 0
 * (was: "2 does not split over 3 ranks: 3 or 3 would"). */
static void test_multiples(void)
{
    static const struct { int64_t v, m; const char *want; } cases[] = {
        {2, 3, "3"}, {1, 2, "2"}, {4, 3, "3 or 6"}, {5, 3, "3 or 6"}, {7, 8, "8"},
        {9, 8, "8 or 16"}, {100, 64, "64 or 128"}, {63, 64, "64"}, {6, 4, "4 or 8"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECKF(strcmp(gk_config_multiples(cases[i].v, cases[i].m, out, sizeof out),
                      cases[i].want) == 0,
               "%lld over %lld: '%s', want '%s'", (long long)cases[i].v, (long long)cases[i].m, out,
               cases[i].want);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_defaults);
    RUN(test_bad_default);
    RUN(test_file_parse);
    RUN(test_values);
    RUN(test_include);
    RUN(test_include_depth);
    RUN(test_file_errors);
    RUN(test_duplicates);
    RUN(test_overrides);
    RUN(test_print);
    RUN(test_json_round_trip);
    RUN(test_resolve_path);
    RUN(test_edit_distance);
    RUN(test_multiples);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_END();
}
