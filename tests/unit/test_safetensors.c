/* test_safetensors.c: the safetensors reader/writer against the reference library's fixture,
 * every kind of corrupt file, atomic writes (incl. a full disk), and fp16/bf16 conversion.
 * GPT_ST_VERIFY_OUT=FILE also writes the reference tensors with the C writer to FILE, for
 * `python3 tests/ref/safetensors_fixture.py --verify FILE`. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/safetensors.h"
#include "tests/unit/test.h"

#define REF "tests/fixtures/st_ref.safetensors"

static char tmpdir[] = "/tmp/gk_test_st_XXXXXX";

static const char *tmp(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

/* Number of entries in tmpdir (to see that no temp file is left behind). */
static int count_files(void)
{
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static long read_all(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    long n = (long)fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* ---- the reference tensors (as in tests/ref/safetensors_fixture.py) -------------------- */

static const float ref_f32[6] = { 0.0f, 1.0f, -2.5f, 3.25f, 1e-8f, -65504.0f };
static const float ref_f16[6] = { 1.0f, -2.0f, 65504.0f, 0x1p-14f, 0x1p-24f, INFINITY };
static const float ref_bf16_src[4] = { 1.0f, 3.14159265358979f, -1.00390625f, 1.01171875f };
static const float ref_bf16[4] = { 1.0f, 3.140625f, -1.0f, 1.015625f };
static const int64_t ref_i64[3] = { -1, 1LL << 40, INT64_MAX };

static void check_ref_contents(const gk_st_file *f)
{
    static const char *order[] = { "i64", "f32", "scalar", "bf16", "f16", "u8" };
    CHECK(gk_st_count(f) == 6);
    for (size_t i = 0; i < 6 && i < gk_st_count(f); i++)
        CHECKF(strcmp(gk_st_at(f, i)->name, order[i]) == 0, "%zu: %s", i, gk_st_at(f, i)->name);
    const gk_st_tensor *t = gk_st_find(f, "f32");
    CHECK(t && t->dtype == GK_DT_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
    CHECK(t && t->numel == 6 && t->nbytes == 24 && memcmp(t->data, ref_f32, 24) == 0);
    t = gk_st_find(f, "f16");
    CHECK(t && t->dtype == GK_DT_F16 && t->ndim == 1 && t->shape[0] == 6);
    for (int i = 0; t && i < 6; i++)
        CHECKF(gk_f16_to_f32(((const uint16_t *)t->data)[i]) == ref_f16[i], "f16[%d]", i);
    t = gk_st_find(f, "bf16");
    CHECK(t && t->dtype == GK_DT_BF16 && t->ndim == 2 && t->numel == 4);
    for (int i = 0; t && i < 4; i++) {
        uint16_t h = ((const uint16_t *)t->data)[i];
        CHECKF(gk_bf16_to_f32(h) == ref_bf16[i], "bf16[%d]", i);
        CHECKF(gk_f32_to_bf16(ref_bf16_src[i]) == h, "bf16 rounding of %g", ref_bf16_src[i]);
    }
    t = gk_st_find(f, "i64");
    CHECK(t && t->dtype == GK_DT_I64 && memcmp(t->data, ref_i64, 24) == 0);
    t = gk_st_find(f, "u8");
    CHECK(t && t->dtype == GK_DT_U8 && t->nbytes == 5 && memcmp(t->data, "hello", 5) == 0);
    t = gk_st_find(f, "scalar");
    CHECK(t && t->dtype == GK_DT_I32 && t->ndim == 0 && t->numel == 1 &&
          *(const int32_t *)t->data == 42);
    CHECK(gk_st_find(f, "nope") == NULL && gk_st_find(f, "") == NULL);
    /* ours add it */
    CHECK(gk_st_meta_count(f) == 2 + (gk_st_meta(f, GK_ST_CHECKSUMS_KEY) != NULL));
    CHECK(gk_st_meta(f, "format") && strcmp(gk_st_meta(f, "format"), "pt") == 0);
    CHECK(gk_st_meta(f, "gptkit.test") &&
          strcmp(gk_st_meta(f, "gptkit.test"), "caf\xc3\xa9 \"q\"") == 0);
    CHECK(gk_st_meta(f, "nope") == NULL);
    for (size_t i = 0; i < gk_st_count(f); i++) /* the aligned-data promise */
        CHECK((uintptr_t)gk_st_at(f, i)->data % gk_dtype_size(gk_st_at(f, i)->dtype) == 0);
}

/* The reference tensors through the C writer, in the order the Rust library writes them. */
static int write_ref(const char *path, gk_err *err)
{
    gk_st_writer *w = NULL;
    int rc = gk_st_writer_create(&w, err);
    if (rc)
        return rc;
    uint16_t f16[6], bf16[4];
    gk_f32_to_f16_n(f16, ref_f16, 6);
    gk_f32_to_bf16_n(bf16, ref_bf16_src, 4);
    int32_t scalar = 42;
    int64_t s3 = 3, s6 = 6, s5 = 5, s23[2] = { 2, 3 }, s22[2] = { 2, 2 };
    if (!rc) rc = gk_st_writer_meta(w, "format", "pt", err);
    if (!rc) rc = gk_st_writer_meta(w, "gptkit.test", "caf\xc3\xa9 \"q\"", err);
    if (!rc) rc = gk_st_writer_add(w, "u8", GK_DT_U8, 1, &s5, "hello", err); /* sorted to the end */
    if (!rc) rc = gk_st_writer_add(w, "i64", GK_DT_I64, 1, &s3, ref_i64, err);
    if (!rc) rc = gk_st_writer_add(w, "f32", GK_DT_F32, 2, s23, ref_f32, err);
    if (!rc) rc = gk_st_writer_add(w, "scalar", GK_DT_I32, 0, NULL, &scalar, err);
    if (!rc) rc = gk_st_writer_add(w, "bf16", GK_DT_BF16, 2, s22, bf16, err);
    if (!rc) rc = gk_st_writer_add(w, "f16", GK_DT_F16, 1, &s6, f16, err);
    if (!rc) rc = gk_st_writer_write(w, path, err);
    gk_st_writer_free(w);
    return rc;
}

static void test_read_reference(void)
{
    gk_st_file *f = NULL;
    gk_err err = { 0 };
    CHECK_OK(gk_st_open(&f, REF, &err), &err);
    if (f)
        check_ref_contents(f);
    CHECK(f && strcmp(gk_st_path(f), REF) == 0);
    gk_st_close(f);
    gk_st_close(NULL);
}

static void test_write_matches_reference(void)
{
    gk_err err = { 0 };
    const char *p = tmp("mine.safetensors");
    CHECK_OK(write_ref(p, &err), &err);
    gk_st_file *f = NULL;
    CHECK_OK(gk_st_open(&f, p, &err), &err);
    if (f)
        check_ref_contents(f);
    gk_st_close(f);
    static unsigned char a[8192], b[8192];
    long na = read_all(p, a, sizeof a), nb = read_all(REF, b, sizeof b);
    /* the same data section as the Rust library's file; the header differs by our checksums */
    long ha = na > 8 ? 8 + (long)a[0] + 256 * (long)a[1] : 0,
         hb = nb > 8 ? 8 + (long)b[0] + 256 * (long)b[1] : 0;
    CHECKF(na > 0 && na - ha == nb - hb && memcmp(a + ha, b + hb, (size_t)(na - ha)) == 0,
           "data not byte-identical to %s", REF);
    CHECK(strstr((const char *)a + 8, "\"gptkit.checksums\":\"{\\\"i64\\\":\\\"") != NULL);
    CHECK(count_files() == 1);
    const char *out = getenv("GPT_ST_VERIFY_OUT");
    if (out && *out) {
        CHECK_OK(write_ref(out, &err), &err);
        fprintf(stderr, "wrote %s for safetensors_fixture.py --verify\n", out);
    }
    unlink(p);
}

/* ---- writer: alignment, fill callbacks, edge cases, errors ----------------------------- */

typedef struct conv_ctx { const float *src; int fail_at; } conv_ctx;

static int fill_bf16(void *ctx, uint64_t off, void *buf, size_t n, gk_err *err)
{
    conv_ctx *c = ctx;
    if (c->fail_at >= 0 && off >= (uint64_t)c->fail_at)
        return gk_errf(err, GK_EIO, "fill failed at %llu", (unsigned long long)off);
    gk_f32_to_bf16_n(buf, c->src + off / 2, n / 2);
    return 0;
}

static void test_write_fill_and_alignment(void)
{
    enum { N = 700001 }; /* > 1 MiB of bf16: several fill chunks */
    float *src = malloc(N * sizeof *src);
    for (int i = 0; i < N; i++)
        src[i] = (float)i * 0.37f - 1000.0f;
    gk_st_writer *w = NULL;
    gk_err err = { 0 };
    CHECK_OK(gk_st_writer_create(&w, &err), &err);
    conv_ctx c = { src, -1 };
    int64_t n = N, three = 3, zero[2] = { 4, 0 };
    CHECK_OK(gk_st_writer_add(w, "odd", GK_DT_U8, 1, &three, "abc", &err), &err);
    CHECK_OK(gk_st_writer_add_fill(w, "big", GK_DT_BF16, 1, &n, fill_bf16, &c, &err), &err);
    CHECK_OK(gk_st_writer_add(w, "f", GK_DT_F32, 1, &three, src, &err), &err);
    CHECK_OK(gk_st_writer_add(w, "empty", GK_DT_F64, 2, zero, NULL, &err), &err);
    CHECK_OK(gk_st_writer_write(w, tmp("fill.safetensors"), &err), &err);
    gk_st_file *f = NULL;
    CHECK_OK(gk_st_open(&f, tmp("fill.safetensors"), &err), &err);
    const gk_st_tensor *t = f ? gk_st_find(f, "big") : NULL;
    CHECK(t && t->numel == N && t->nbytes == 2 * (size_t)N);
    int bad = 0;
    for (int i = 0; t && i < N; i++)
        bad += ((const uint16_t *)t->data)[i] != gk_f32_to_bf16(src[i]);
    CHECK(bad == 0);
    t = f ? gk_st_find(f, "empty") : NULL;
    CHECK(t && t->numel == 0 && t->nbytes == 0 && t->ndim == 2);
    CHECK(f && gk_st_count(f) == 4 && gk_st_meta_count(f) == 1 &&
          gk_st_meta(f, GK_ST_CHECKSUMS_KEY));
    for (size_t i = 0; f && i < gk_st_count(f); i++)
        CHECK(gk_st_at(f, i)->offset % gk_dtype_size(gk_st_at(f, i)->dtype) == 0);
    gk_st_close(f);
    /* a failing fill leaves nothing behind and keeps the old file */
    c.fail_at = 1 << 20;
    CHECK(gk_st_writer_write(w, tmp("fill.safetensors"), &err) == GK_EIO);
    CHECKF(strcmp(err.msg, "fill failed at 1048576") == 0, "%s", err.msg);
    CHECK(count_files() == 1);
    CHECK_OK(gk_st_open(&f, tmp("fill.safetensors"), &err), &err);
    gk_st_close(f);
    unlink(tmp("fill.safetensors"));
    gk_st_writer_free(w);
    free(src);
}

static void test_write_empty(void)
{
    gk_st_writer *w = NULL;
    gk_err err = { 0 };
    CHECK_OK(gk_st_writer_create(&w, &err), &err);
    CHECK_OK(gk_st_writer_write(w, tmp("empty.safetensors"), &err), &err);
    unsigned char buf[64];
    CHECK(read_all(tmp("empty.safetensors"), buf, sizeof buf) == 16);
    CHECK(memcmp(buf, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    gk_st_file *f = NULL;
    CHECK_OK(gk_st_open(&f, tmp("empty.safetensors"), &err), &err);
    CHECK(f && gk_st_count(f) == 0 && gk_st_at(f, 0) == NULL);
    gk_st_close(f);
    unlink(tmp("empty.safetensors"));
    gk_st_writer_free(w);
}

static void test_writer_errors(void)
{
    gk_st_writer *w = NULL;
    gk_err err = { 0 };
    CHECK_OK(gk_st_writer_create(&w, &err), &err);
    int64_t two = 2, neg = -1;
    float x[2] = { 1, 2 };
    CHECK_OK(gk_st_writer_add(w, "a", GK_DT_F32, 1, &two, x, &err), &err);
    CHECK(gk_st_writer_add(w, "a", GK_DT_F32, 1, &two, x, &err) == GK_EUSAGE);
    CHECKF(strcmp(err.msg, "safetensors writer: tensor 'a' added twice") == 0, "%s", err.msg);
    CHECK(gk_st_writer_add(w, "__metadata__", GK_DT_F32, 1, &two, x, &err) == GK_EUSAGE);
    CHECK(gk_st_writer_add(w, "", GK_DT_F32, 1, &two, x, &err) == GK_EUSAGE);
    CHECK(gk_st_writer_add(w, "b", GK_DT_F32, 1, &neg, x, &err) == GK_EUSAGE);
    CHECK(gk_st_writer_add(w, "b", GK_DT_F32, 9, &two, x, &err) == GK_EUSAGE);
    CHECK(gk_st_writer_add(w, "b", (enum gk_dtype)99, 1, &two, x, &err) == GK_EUSAGE);
    CHECK(gk_st_writer_meta(w, "k", "\xff", &err) == GK_EUSAGE);
    CHECK(gk_st_writer_add(w, "bad\xff", GK_DT_F32, 1, &two, x, &err) == 0);
    CHECK(gk_st_writer_write(w, tmp("x.safetensors"), &err) == GK_EUSAGE);
    CHECKF(strstr(err.msg, "cannot encode") != NULL, "%s", err.msg);
    gk_st_writer_free(w);
    CHECK_OK(gk_st_writer_create(&w, &err), &err);
    CHECK(gk_st_writer_write(w, tmp("nodir/x.safetensors"), &err) == GK_ENOTFOUND);
    CHECKF(strstr(err.msg, "nodir") != NULL, "%s", err.msg); /* names the missing directory */
    CHECK(count_files() == 0);
    gk_st_writer_free(w);
}

/* A full disk, simulated by a file size limit: the error names the file, no temp file remains,
 * and the previous checkpoint under that name is untouched. */
static void test_disk_full(void)
{
    gk_err err = { 0 };
    const char *p = tmp("full.safetensors");
    CHECK_OK(write_ref(p, &err), &err);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 100000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
        SKIP("cannot set RLIMIT_FSIZE");
    enum { N = 100000 };
    float *big = calloc(N, sizeof *big);
    gk_st_writer *w = NULL;
    int64_t n = N;
    CHECK_OK(gk_st_writer_create(&w, &err), &err);
    CHECK_OK(gk_st_writer_add(w, "w", GK_DT_F32, 1, &n, big, &err), &err);
    int rc = gk_st_writer_write(w, p, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(rc == GK_EIO);
    char want[600];
    snprintf(want, sizeof want, "%s: File too large", p);
    CHECKF(strcmp(err.msg, want) == 0, "%s", err.msg);
    CHECK(count_files() == 1);
    gk_st_file *f = NULL;
    CHECK_OK(gk_st_open(&f, p, &err), &err);
    if (f)
        check_ref_contents(f);
    gk_st_close(f);
    gk_st_writer_free(w);
    free(big);
    unlink(p);
}

/* ---- corrupt files ---------------------------------------------------------------------- */

/* Writes 8-byte length hlen (or strlen(header) when hlen < 0), header, then ndata zero bytes. */
static const char *raw_file(const char *header, long long hlen, size_t ndata)
{
    const char *p = tmp("bad.safetensors");
    FILE *f = fopen(p, "wb");
    uint64_t n = hlen < 0 ? strlen(header) : (uint64_t)hlen;
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < ndata; i++)
        fputc(0, f);
    fclose(f);
    return p;
}

static void expect_bad(const char *path, int code, const char *msg)
{
    gk_st_file *f = (gk_st_file *)1;
    gk_err err = { 0 };
    int rc = gk_st_open(&f, path, &err);
    char want[1024];
    snprintf(want, sizeof want, "%s: %s", path, msg);
    CHECKF(rc == code && f == NULL, "rc %d for %s", rc, msg);
    CHECKF(strcmp(err.msg, want) == 0, "\n got  '%s'\n want '%s'", err.msg, want);
}

#define T1(dt, shape, b, e) \
    "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}}"

static void test_corrupt_headers(void)
{
    expect_bad(raw_file("", 0, 0), GK_EFORMAT,
               "not a safetensors file (header does not start with '{')");
    expect_bad(raw_file("{}", 9999999, 1224), GK_EFORMAT,
               "header length 9999999 exceeds file size "
               "1234 (truncated or not a safetensors file)");
    expect_bad(raw_file("{\"t\": {\"dtype\": ", -1, 0), GK_EFORMAT,
               "not a safetensors file (bad JSON header at "
               "byte 24: unexpected token near end of file)");
    expect_bad(raw_file("[1, 2]", -1, 0), GK_EFORMAT,
               "not a safetensors file (header does not start with '{')");
    expect_bad(raw_file("{} x", -1, 0), GK_EFORMAT,
               "not a safetensors file (bad JSON header at "
               "byte 12: end of file expected near 'x')");
    expect_bad(raw_file(T1("F32", "[25]", 0, 100), -1, 64), GK_EFORMAT,
               "tensor 't': data_offsets [0, 100] exceed data size 64");
    expect_bad(raw_file(T1("F32", "[2,3]", 0, 20), -1, 20), GK_EFORMAT,
               "tensor 't': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20");
    expect_bad(raw_file(T1("Q8", "[4]", 0, 4), -1, 4), GK_EFORMAT,
               "tensor 't': unknown dtype 'Q8'");
    expect_bad(raw_file(T1("F32", "[-1]", 0, 4), -1, 4), GK_EFORMAT,
               "tensor 't': shape holds a value that is not a size");
    expect_bad(raw_file(T1("F32", "[1,1,1,1,1,1,1,1,1]", 0, 4), -1, 4), GK_EFORMAT,
               "tensor 't': more than 8 dimensions");
    expect_bad(raw_file(T1("F32", "[4611686018427387904,4]", 0, 4), -1, 4), GK_EFORMAT,
               "tensor 't': shape too large");
    expect_bad(raw_file(T1("F32", "[1]", 4, 0), -1, 4), GK_EFORMAT,
               "tensor 't': 'data_offsets' is not [begin, end] with begin <= end");
    expect_bad(raw_file("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4), GK_EFORMAT,
               "tensor 't': missing or non-string 'dtype'");
    expect_bad(raw_file("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", -1, 4), GK_EFORMAT,
               "tensor 't': missing or non-array 'shape'");
    expect_bad(raw_file("{\"t\":[]}", -1, 0), GK_EFORMAT, "tensor 't': entry is not a JSON object");
    expect_bad(raw_file("{\"__metadata__\":{\"a\":1}}", -1, 0), GK_EFORMAT,
               "__metadata__ value 'a': not a string");
    expect_bad(raw_file("{\"__metadata__\":[]}", -1, 0), GK_EFORMAT,
               "__metadata__ is not a JSON object");
    expect_bad(raw_file("{\"a\":{},\"a\":{}}", -1, 0), GK_EFORMAT,
               "not a safetensors file (bad JSON header at "
               "byte 19: duplicate object key near '\"a\"')");
}

/* gptkit's and llm.c's other .bin files, told by their first int32 (the low half of a header
 * length too large for the file), named with what reads them; a near miss keeps the usual line. */
static void test_other_formats(void)
{
    expect_bad(raw_file("", 20240520LL + (1LL << 32), 1016), GK_EFORMAT, "a token shard, not a "
               "checkpoint (gpt-tokenize -d decodes it; gpt-evalppl scores a checkpoint on it; "
               "gpt-train trains on it)");
    const char *p = raw_file("", 20240326LL + (3LL << 32), 1016);
    char want[600];
    snprintf(want, sizeof want, "an llm.c checkpoint, not a safetensors one: convert it with "
             "gpt-ckpt import %s", p);
    expect_bad(p, GK_EFORMAT, want);
    expect_bad(raw_file("", 20240527LL + (1LL << 32), 1016), GK_EFORMAT, "llm.c's training "
               "state (optimizer moments), not a model: gpt-ckpt import reads llm.c's model file "
               "(model_NNNNNNNN.bin, gpt2_124M.bin)");
    expect_bad(raw_file("", 20240521LL + (1LL << 32), 1016), GK_EFORMAT, "header length "
               "4315207817 exceeds file size 1024 (truncated or not a safetensors file)");
}

static void test_corrupt_layout(void)
{
    const char *two = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%d,%d]}}";
    char h[256];
    snprintf(h, sizeof h, two, 4, 12);
    expect_bad(raw_file(h, -1, 12), GK_EFORMAT, "tensors 'a' and 'b' overlap");
    snprintf(h, sizeof h, two, 12, 20);
    expect_bad(raw_file(h, -1, 20), GK_EFORMAT,
               "bytes [8, 12) of the data section belong to no tensor");
    snprintf(h, sizeof h, two, 8, 16);
    expect_bad(raw_file(h, -1, 20), GK_EFORMAT, "data section has 20 bytes but tensors cover 16");
    /* a header past the reference library's 100 MB limit (sparse file: nothing is read) */
    const char *p = raw_file("{}", 100000001, 0);
    CHECK(truncate(p, 8 + 100000001) == 0);
    expect_bad(p, GK_EFORMAT, "header length 100000001 exceeds the limit of 100000000");
    expect_bad(tmpdir, GK_EFORMAT, "not a regular file");
    /* a FIFO without a writer: refused at once, not waited on */
    CHECK(mkfifo(tmp("fifo.safetensors"), 0600) == 0);
    expect_bad(tmp("fifo.safetensors"), GK_EFORMAT, "not a regular file");
    unlink(tmp("fifo.safetensors"));
    gk_st_file *f = NULL;
    gk_err err = { 0 };
    CHECK(gk_st_open(&f, tmp("missing.safetensors"), &err) == GK_ENOTFOUND);
    unlink(tmp("bad.safetensors"));
}

/* A foreign file whose layout misaligns F32 data (header length 37, not a multiple of 8). */
static void test_unaligned_foreign_file(void)
{
    const char *h = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    const char *p = raw_file(h, -1, 0);
    FILE *fp = fopen(p, "ab");
    float v[2] = { 1.5f, -2.0f };
    fwrite(v, sizeof v, 1, fp);
    fclose(fp);
    gk_st_file *f = NULL;
    gk_err err = { 0 };
    CHECK((8 + strlen(h)) % 4 != 0);
    CHECK_OK(gk_st_open(&f, p, &err), &err);
    const gk_st_tensor *t = f ? gk_st_find(f, "t") : NULL;
    CHECK(t && (uintptr_t)t->data % 4 == 0 && memcmp(t->data, v, 8) == 0);
    gk_st_close(f);
    unlink(p);
}

/* Every truncation and every single-byte change of the reference file: refused or read, never
 * a crash (this test earns its keep under AddressSanitizer). */
static void test_truncations_and_flips(void)
{
    static unsigned char ref[8192];
    long n = read_all(REF, ref, sizeof ref);
    CHECK(n > 100);
    const char *p = tmp("mut.safetensors");
    int refused = 0, bad_code = 0;
    for (long len = 0; len < n; len++) {
        FILE *f = fopen(p, "wb");
        fwrite(ref, 1, (size_t)len, f);
        fclose(f);
        gk_st_file *st = NULL;
        gk_err err = { 0 };
        int rc = gk_st_open(&st, p, &err);
        refused += rc != 0;
        bad_code += rc != 0 && rc != GK_EFORMAT;
        gk_st_close(st);
    }
    CHECKF(refused == n, "%d of %ld truncations refused", refused, n);
    CHECK(bad_code == 0);
    for (long i = 0; i < n; i++) {
        ref[i] ^= 0x5a;
        FILE *f = fopen(p, "wb");
        fwrite(ref, 1, (size_t)n, f);
        fclose(f);
        ref[i] ^= 0x5a;
        gk_st_file *st = NULL;
        gk_err err = { 0 };
        int rc = gk_st_open(&st, p, &err);
        CHECKF(rc == 0 || rc == GK_EFORMAT, "byte %ld: rc %d", i, rc);
        gk_st_close(st);
    }
    unlink(p);
}

/* ---- dtypes and conversions -------------------------------------------------------------- */

static void test_dtypes(void)
{
    enum gk_dtype dt;
    for (int i = 0; i < GK_DT_COUNT; i++)
        CHECK(gk_dtype_parse(gk_dtype_name((enum gk_dtype)i), &dt) == 0 && dt == (enum gk_dtype)i);
    CHECK(gk_dtype_parse("f32", &dt) == -1 && gk_dtype_name(GK_DT_COUNT) == NULL);
    CHECK(gk_dtype_size(GK_DT_BF16) == 2 && gk_dtype_size(GK_DT_I64) == 8 &&
          gk_dtype_size(GK_DT_BOOL) == 1);
}

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_bf16(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every bf16 survives the round trip */
        float f = gk_bf16_to_f32((uint16_t)h);
        bad += isnan(f) ? !isnan(gk_bf16_to_f32(gk_f32_to_bf16(f))) : gk_f32_to_bf16(f) != h;
    }
    CHECK(bad == 0);
    CHECK(gk_f32_to_bf16(from_bits(0x3f808000)) == 0x3f80); /* tie, even below */
    CHECK(gk_f32_to_bf16(from_bits(0x3f818000)) == 0x3f82); /* tie, even above */
    CHECK(gk_f32_to_bf16(from_bits(0x3f808001)) == 0x3f81);
    CHECK(gk_f32_to_bf16(from_bits(0x7f7fffff)) == 0x7f80); /* FLT_MAX rounds to inf */
    CHECK(gk_f32_to_bf16(-INFINITY) == 0xff80);
    CHECK(gk_f32_to_bf16(from_bits(0x7f800001)) == 0x7fc0); /* signalling NaN -> quiet, not inf */
    CHECK(gk_f32_to_bf16(from_bits(0x00000001)) == 0x0000);
}

static void test_f16(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every f16 survives the round trip */
        float f = gk_f16_to_f32((uint16_t)h);
        bad += isnan(f) ? !isnan(gk_f16_to_f32(gk_f32_to_f16(f))) : gk_f32_to_f16(f) != h;
    }
    CHECK(bad == 0);
    CHECK(gk_f16_to_f32(0x0001) == 0x1p-24f && gk_f16_to_f32(0x03ff) == 0x3ffp-24f);
    CHECK(gk_f16_to_f32(0x7bff) == 65504.0f && gk_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(gk_f32_to_f16(65519.0f) == 0x7bff && gk_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(gk_f32_to_f16(0x1p-25f) == 0x0000);             /* tie to even zero */
    CHECK(gk_f32_to_f16(from_bits(0x33000001)) == 0x0001); /* just above the tie */
    CHECK(gk_f32_to_f16(0x3p-25f) == 0x0002);             /* 1.5 units: tie to even 2 */
    CHECK(gk_f32_to_f16(-0x1p-14f) == 0x8400);
    CHECK(gk_f32_to_f16(0x3ffp-24f + 0x1p-25f) == 0x0400); /* rounds up into the normals */
    CHECK(gk_f32_to_f16(from_bits(0x7f800001)) == 0x7e00);
    CHECK(gk_f32_to_f16(-0.0f) == 0x8000 && gk_f32_to_f16(1e-30f) == 0);
#ifdef __FLT16_MAX__
    /* the compiler's conversion (IEEE, round to nearest even) on pseudo-random bit patterns */
    uint64_t s = 88172645463325252ULL;
    int diff = 0;
    for (int i = 0; i < 2000000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float f = from_bits((uint32_t)s);
        if (i & 1) /* also concentrate on the f16 range */
            f = from_bits((bits(f) & 0x807fffffu) | ((uint32_t)(100 + (s >> 40) % 45) << 23));
        _Float16 h = (_Float16)f;
        uint16_t want;
        memcpy(&want, &h, 2);
        diff += isnan(f) ? (gk_f32_to_f16(f) & 0x7e00) != 0x7e00 : gk_f32_to_f16(f) != want;
    }
    CHECKF(diff == 0, "%d conversions differ from _Float16", diff);
#endif
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_dtypes);
    RUN(test_bf16);
    RUN(test_f16);
    RUN(test_read_reference);
    RUN(test_write_matches_reference);
    RUN(test_write_fill_and_alignment);
    RUN(test_write_empty);
    RUN(test_writer_errors);
    RUN(test_disk_full);
    RUN(test_corrupt_headers);
    RUN(test_other_formats);
    RUN(test_corrupt_layout);
    RUN(test_unaligned_foreign_file);
    RUN(test_truncations_and_flips);
    if (rmdir(tmpdir) != 0)
        fprintf(stderr, "could not remove %s (left-over files?)\n", tmpdir);
    return TEST_END();
}
