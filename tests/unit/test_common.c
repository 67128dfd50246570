/* test_common.c: number parsing, option tables, atomic output files, whole-file reads, growable
 * arrays. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/grow.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/io/outfile.h"
#include "common/io/readall.h"
#include "common/s3/s3.h"
#include "kernels/device_opt.h"
#include "test.h"

static void test_parse_i64_suffixes(void)
{
    gk_err e = {0};
    int64_t v = 0;
    CHECK_OK(gk_parse_i64("42", 0, 100, &v, "x", &e), &e);
    CHECK(v == 42);
    CHECK_OK(gk_parse_i64("100M", 0, INT64_MAX, &v, "x", &e), &e);
    CHECK(v == 100000000);
    CHECK_OK(gk_parse_i64("2Ki", 0, INT64_MAX, &v, "x", &e), &e);
    CHECK(v == 2048);
    CHECK_OK(gk_parse_i64("1e8", 0, INT64_MAX, &v, "x", &e), &e);
    CHECK(v == 100000000);
    CHECK_OK(gk_parse_i64("3g", 0, INT64_MAX, &v, "x", &e), &e);
    CHECK(v == 3000000000LL);
    CHECK_OK(gk_parse_i64("-5", -10, 10, &v, "x", &e), &e);
    CHECK(v == -5);
}

static void test_parse_i64_errors(void)
{
    gk_err e = {0};
    int64_t v = 7;
    CHECK(gk_parse_i64("", 0, 10, &v, "--n", &e) == GK_EUSAGE);
    CHECK(gk_parse_i64("12x", 0, 100, &v, "--n", &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "--n: '12x' is not an integer") == 0, "%s", e.msg);
    CHECK(gk_parse_i64("1 ", 0, 100, &v, "--n", &e) == GK_EUSAGE);
    CHECK(gk_parse_i64("11", 0, 10, &v, "--n", &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "--n: 11 is out of range [0, 10]") == 0, "%s", e.msg);
    CHECK(gk_parse_i64("99999999999999999999", 0, INT64_MAX, &v, "--n", &e) == GK_EUSAGE);
    CHECK(gk_parse_i64("9999999999T", 0, INT64_MAX, &v, "--n", &e) == GK_EUSAGE);
    CHECK(gk_parse_i64("5 K", 0, INT64_MAX, &v, "--n", &e) == GK_EUSAGE);
    CHECK(v == 7);
}

static void test_parse_double(void)
{
    gk_err e = {0};
    double d = 0;
    CHECK_OK(gk_parse_double("6e-4", 0, 1, &d, "lr", &e), &e);
    CHECK(d == 6e-4);
    CHECK(gk_parse_double("abc", 0, 1, &d, "lr", &e) == GK_EUSAGE);
    CHECK(gk_parse_double("nan", 0, 1, &d, "lr", &e) == GK_EUSAGE);
    CHECK(gk_parse_double("2", 0, 1, &d, "lr", &e) == GK_EUSAGE);
    CHECK(gk_parse_double("0.5x", 0, 1, &d, "lr", &e) == GK_EUSAGE);
}

static void test_opt_table(void)
{
    const char *out = NULL;
    int flag = 0, verbose = 0;
    int64_t n = 0;
    double f = 0;
    const gk_opt tab[] = {
        {'o', "output", GK_OPT_STR, &out, "FILE", "output", 0, 0},
        {0, "flag", GK_OPT_FLAG, &flag, NULL, "a flag", 0, 0},
        {'v', "verbose", GK_OPT_COUNT, &verbose, NULL, "more", 0, 0},
        {'n', "num", GK_OPT_INT, &n, "N", "a number", 1, 10000},
        {0, "frac", GK_OPT_DOUBLE, &f, "F", "a fraction", 0, 1},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    char *argv[] = {"prog", "-o", "x.bin", "--flag", "-vv", "--num=2K", "--frac", "0.25", "in1",
                    "in2", NULL};
    int first = 0;
    gk_err e = {0};
    CHECK_OK(gk_opt_parse(tab, 10, argv, &first, &e), &e);
    CHECK(out && strcmp(out, "x.bin") == 0);
    CHECK(flag == 1 && verbose == 2 && n == 2000 && f == 0.25);
    CHECK(first == 8 && strcmp(argv[first], "in1") == 0);

    char *bad[] = {"prog", "--num=50000", NULL};
    CHECK(gk_opt_parse(tab, 2, bad, &first, &e) == GK_EUSAGE);
    CHECKF(strstr(e.msg, "--num") != NULL, "%s", e.msg);
    char *unknown[] = {"prog", "--nope", NULL};
    CHECK(gk_opt_parse(tab, 2, unknown, &first, &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "unknown option --nope (see --help)") == 0, "%s", e.msg);
    char *missing[] = {"prog", "-o", NULL};
    CHECK(gk_opt_parse(tab, 2, missing, &first, &e) == GK_EUSAGE);
    char *help[] = {"prog", "--help", NULL};
    CHECK(gk_opt_parse(tab, 2, help, &first, &e) == GK_OPT_HELP);
}

/* GK_OPT_CALL and GK_OPT_KEYVAL: called in command-line order; --key=value pass-through. */
static int record(void *ctx, const char *arg, gk_err *e)
{
    char *log = ctx;
    if (strcmp(arg, "--bad=1") == 0)
        return gk_errf(e, GK_EUSAGE, "%s: refused", arg);
    strcat(log, arg);
    strcat(log, ";");
    return 0;
}

static void test_opt_callbacks(void)
{
    char log[256] = "";
    int quiet = 0;
    gk_opt_call call = {record, log};
    const gk_opt tab[] = {
        {'c', "config", GK_OPT_CALL, &call, "FILE", "a file", 0, 0},
        {0, "KEY=VALUE", GK_OPT_KEYVAL, &call, NULL, "a setting", 0, 0},
        {'q', "quiet", GK_OPT_FLAG, &quiet, NULL, "quiet", 0, 0},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    char *argv[] = {"prog", "--n_layer=2", "-c", "a.conf", "-q", "--config=b.conf", "--lr=1e-3",
                    "x", NULL};
    int first = 0;
    gk_err e = {0};
    CHECK_OK(gk_opt_parse(tab, 8, argv, &first, &e), &e);
    CHECKF(strcmp(log, "--n_layer=2;a.conf;b.conf;--lr=1e-3;") == 0, "%s", log);
    CHECK(quiet == 1 && first == 7);
    char *bad[] = {"prog", "--bad=1", NULL};
    CHECK(gk_opt_parse(tab, 2, bad, &first, &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "--bad=1: refused") == 0, "%s", e.msg);
    log[0] = '\0';
    char *noeq[] = {"prog", "--n_layer", "-x", NULL}; /* the callback says what a key needs */
    CHECK(gk_opt_parse(tab, 3, noeq, &first, &e) == GK_EUSAGE);
    CHECKF(strcmp(log, "--n_layer;") == 0, "%s", log);
    CHECKF(strcmp(e.msg, "unknown option -x (see --help)") == 0, "%s", e.msg);
    char *flagval[] = {"prog", "--quiet=1", NULL};
    CHECK(gk_opt_parse(tab, 2, flagval, &first, &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "option --quiet takes no value") == 0, "%s", e.msg);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gk_opt_help(f, "prog", tab, NULL);
    fclose(f);
    CHECKF(buf && strstr(buf, "\n      --KEY=VALUE              a setting\n"), "%s", buf);
    free(buf);
}

/* A message may be added to: e->msg as an argument of gk_errf (vsnprintf into its own argument
 * is undefined; ASan and glibc's fortify catch it). */
/* gk_env: TMPDIR (else /tmp), the settings gpt-train reads once, GPT_S3_PART_SIZE checked by
 * gk_env_s3_conf, and the getenv handed down. */
static void test_env(void)
{
    gk_env env;
    gk_err e = {0};
    unsetenv("TMPDIR");
    setenv("GPT_GRAD_OVERLAP", "0", 1);
    setenv("GPT_S3_PART_SIZE", "4096", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
    gk_env_read(&env);
    CHECKF(strcmp(env.tmpdir, "/tmp") == 0, "%s", env.tmpdir);
    CHECK(env.no_grad_overlap == 1 && env.getenv_fn == gk_env_getenv);
    const char *v = env.getenv_fn("GPT_GRAD_OVERLAP", NULL);
    CHECK(v && strcmp(v, "0") == 0);
    gk_s3_conf conf;
    CHECK(gk_env_s3_conf(&env, &conf, &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "GPT_S3_PART_SIZE=4096: not a part size in bytes from 5 MiB (5242880) to "
                  "5 GiB") == 0, "%s", e.msg);
    setenv("GPT_S3_PART_SIZE", "5242880", 1);
    setenv("TMPDIR", "", 1); /* empty: unset */
    unsetenv("GPT_GRAD_OVERLAP");
    gk_env_read(&env);
    CHECK_OK(gk_env_s3_conf(&env, &conf, &e), &e);
    CHECK(conf.part_size == 5242880 && strcmp(env.tmpdir, "/tmp") == 0 && env.no_grad_overlap == 0);
    setenv("TMPDIR", "/var/tmp", 1);
    gk_env_read(&env);
    CHECK(strcmp(env.tmpdir, "/var/tmp") == 0);
    unsetenv("TMPDIR");
    unsetenv("GPT_S3_PART_SIZE");
}

/* The device options' one fragment: parsed into gk_device_args, the help listing the attention
 * paths the backend takes (GK_ATTENTION_CHOICES), and the backend's options from them and the
 * environment's CUDA settings. */
static void test_device_opts(void)
{
    gk_device_args dev = {0};
    const gk_opt tab[] = {GK_DEVICE_OPTS(dev, "weights"), {0, NULL, 0, NULL, NULL, NULL, 0, 0}};
    char *argv[] = {"prog", "--device", "cpu", "--attention=fa2", "--dtype", "bf16", NULL};
    int first = 0;
    gk_err e = {0};
    CHECK_OK(gk_opt_parse(tab, 6, argv, &first, &e), &e);
    CHECK(strcmp(dev.device, "cpu") == 0 && strcmp(dev.attention, "fa2") == 0 &&
          strcmp(dev.dtype, "bf16") == 0);
    char *help = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&help, &n);
    gk_opt_help(f, "prog", tab, NULL);
    fclose(f);
    CHECKF(strstr(help, "--attention PATH") && strstr(help, "auto|cudnn|flash|fa2|plain") &&
           !strstr(help, "cuDNN where"), "%s", help);
    free(help);
    gk_env env = {.cuda_sync = 1, .cuda_no_graphs = 1, .cuda_fused_grads = 1, .cuda_lib = "x.so"};
    gk_backend_opts bo;
    CHECK_OK(gk_device_backend_opts(&bo, dev.device, dev.attention, "--attention", 1, &env, &e),
             &e);
    CHECK(strcmp(bo.device, "cpu") == 0 && bo.attention == GK_ATTN_FA2 && bo.bf16 == 1);
    CHECK(bo.cuda_sync && bo.cuda_no_graphs && bo.cuda_fused_grads &&
          strcmp(bo.cuda_lib, "x.so") == 0 && bo.threads == 0 && bo.gpu == 0);
    CHECK_OK(gk_device_backend_opts(&bo, NULL, NULL, "--attention", -1, &env, &e), &e);
    CHECK(strcmp(bo.device, "auto") == 0 && bo.attention == GK_ATTN_AUTO && bo.bf16 == -1);
    CHECK(gk_device_backend_opts(&bo, NULL, "cudn", "--attention", -1, &env, &e) == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "--attention: 'cudn' is not one of auto, cudnn, flash, fa2, plain") == 0,
           "%s", e.msg);
}

static void test_errf_adds_to_message(void)
{
    gk_err e = {0};
    gk_errf(&e, GK_EIO, "disk full");
    CHECK(gk_errf(&e, GK_EUSAGE, "%s (writing %s)", e.msg, "x.bin") == GK_EUSAGE);
    CHECKF(strcmp(e.msg, "disk full (writing x.bin)") == 0, "got '%s'", e.msg);
    CHECK(e.code == GK_EUSAGE);
    gk_errf(&e, GK_EIO, "%s: %s", "train_data", e.msg);
    CHECKF(strcmp(e.msg, "train_data: disk full (writing x.bin)") == 0, "got '%s'", e.msg);
}

static void test_outfile_commit_and_abort(void)
{
    char dir[] = "/tmp/gk_test_outfile_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    gk_err e = {0};
    gk_outfile o;
    CHECK_OK(gk_outfile_open(&o, path, &e), &e);
    CHECK(access(path, F_OK) != 0); /* nothing under the final name before commit */
    CHECK_OK(gk_outfile_write(&o, "hello", 5, &e), &e);
    CHECK_OK(gk_outfile_pwrite(&o, "J", 1, 0, &e), &e);
    CHECK_OK(gk_outfile_commit(&o, &e), &e);
    FILE *f = fopen(path, "rb");
    char buf[8] = {0};
    CHECK(f && fread(buf, 1, 8, f) == 5 && memcmp(buf, "Jello", 5) == 0);
    if (f)
        fclose(f);
    CHECK_OK(gk_outfile_open(&o, path, &e), &e);
    CHECK_OK(gk_outfile_write(&o, "xx", 2, &e), &e);
    gk_outfile_abort(&o);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 5); /* the old file is untouched */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls %s | wc -l | grep -qx 1", dir); /* no temp file left */
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    CHECK(gk_outfile_open(&o, "/nonexistent-dir/x.bin", &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "/nonexistent-dir/x.bin") != NULL, "%s", e.msg);
}

/* A file past the first buffer's 64 KiB, read whole; the size bound at the byte; the messages name
 * the file. */
static void test_read_file(void)
{
    char dir[] = "/tmp/gk_test_readall_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/in.txt", dir);
    size_t n = 200001;
    char *want = malloc(n), *got = NULL;
    for (size_t i = 0; i < n; i++) want[i] = (char)('a' + i * 7 % 26);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(want, 1, n, f) == n);
    if (f) fclose(f);
    gk_err e = {0};
    size_t len = 0;
    CHECK_OK(gk_read_file(path, GK_READALL_NO_LIMIT, &got, &len, &e), &e);
    CHECK(got && len == n && memcmp(got, want, n) == 0 && got[n] == '\0');
    free(got);
    got = NULL;
    CHECK_OK(gk_read_file(path, n, &got, &len, &e), &e); /* exactly the bound */
    CHECK(got && len == n);
    free(got);
    got = NULL;
    CHECK(gk_read_file(path, n - 1, &got, &len, &e) == GK_EFORMAT && !got);
    CHECKF(strstr(e.msg, path) && strstr(e.msg, "larger than 200000 bytes"), "%s", e.msg);
    /* a directory */
    CHECK(gk_read_file(dir, GK_READALL_NO_LIMIT, &got, &len, &e) == GK_EIO && !got);
    CHECKF(strstr(e.msg, dir) != NULL, "%s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    CHECK(gk_read_file(path, GK_READALL_NO_LIMIT, &got, &len, &e) == GK_ENOTFOUND && !got);
    CHECKF(strstr(e.msg, path) != NULL, "%s", e.msg);
    free(want);
}

/* Doubling from the first size, contents kept, and an overflowing request refused with the array
 * untouched. */
static void test_grow(void)
{
    int *a = NULL;
    size_t cap = 0, c = 0;
    CHECK(gk_grow(&a, &cap, 0, sizeof *a, 4) == 0 && a && cap == 4); /* NULL: allocated */
    for (int i = 0; i < 4; i++) a[i] = i;
    CHECK(gk_grow(&a, &cap, 4, sizeof *a, 4) == 0 && cap == 4);
    CHECK(gk_grow(&a, &cap, 5, sizeof *a, 4) == 0 && cap == 8);
    CHECK(gk_grow(&a, &cap, 33, sizeof *a, 4) == 0 && cap == 64);
    CHECK(a[0] == 0 && a[3] == 3);
    int *before = a;
    CHECK(gk_grow(&a, &cap, SIZE_MAX / 2, sizeof *a, 4) == GK_ENOMEM && a == before && cap == 64);
    CHECK(gk_grow(&a, &cap, SIZE_MAX, 1, 4) == GK_ENOMEM && a == before && cap == 64);
    free(a);
    CHECK(gk_grow_cap(0, 100, 8, 16, &c) == 0 && c == 128);
    CHECK(gk_grow_cap(3, 7, 1, 16, &c) == 0 && c == 12);
    CHECK(gk_grow_cap(0, SIZE_MAX / 4 + 1, 8, 16, &c) == GK_ENOMEM);
}

int main(void)
{
    RUN(test_parse_i64_suffixes);
    RUN(test_parse_i64_errors);
    RUN(test_parse_double);
    RUN(test_opt_table);
    RUN(test_opt_callbacks);
    RUN(test_outfile_commit_and_abort);
    RUN(test_errf_adds_to_message);
    RUN(test_read_file);
    RUN(test_grow);
    RUN(test_env);
    RUN(test_device_opts);
    return TEST_END();
}
