/* test_parquet.c: the Parquet reader against pyarrow's reading of tests/fixtures/parquet (made by
 * tests/ref/parquet_fixtures.py: every codec, pages v1 and v2, dictionary and PLAIN, nulls, row
 * groups, nested and list columns, numbers, damaged pages), the column choice and its messages,
 * the RLE/bit-packed hybrid by hand, and damaged copies (every truncation, every byte of the
 * footer and of the pages flipped): one error naming the file, never a crash. */
#include <fcntl.h>
#include <sys/mman.h>
#include <jansson.h>
#include <lz4.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/parquet.h"
#include "common/io/parquet_int.h"
#include "tests/unit/test.h"

#define DIR "tests/fixtures/parquet/"

static json_t *expected(void)
{
    json_error_t je;
    json_t *j = json_load_file(DIR "expected.json", JSON_ALLOW_NUL, &je);
    if (!j) fprintf(stderr, "expected.json: %s\n", je.text);
    return j;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

/* The damaged copies live in one memory file (/proc/self/fd/N), rewritten for each. */
static int memfd = -1;
static char mempath[64];

static void spit(const void *b, size_t n)
{
    CHECK(ftruncate(memfd, 0) == 0 && pwrite(memfd, b, n, 0) == (ssize_t)n);
}

/* Opens and reads every row; returns the first error's code (e holds it) and the row count. */
static int read_all(const char *path, const char *column, long long *rows, gk_err *e)
{
    gk_parquet *p;
    *rows = 0;
    int rc = gk_parquet_open(&p, path, column, e);
    if (rc) return rc;
    const char *s;
    size_t len;
    int more = 1;
    while (more && (rc = gk_parquet_next(p, &s, &len, &more, e)) == 0)
        if (more) (*rows)++;
    gk_parquet_close(p);
    return rc;
}

static void check_rows(const char *name, json_t *want, json_t *all)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", name);
    gk_err e = {0};
    gk_parquet *p;
    int rc = gk_parquet_open(&p, path, NULL, &e);
    CHECKF(rc == 0, "%s: %s", name, e.msg);
    if (rc) return;
    CHECKF(strcmp(gk_parquet_column(p), json_string_value(json_object_get(want, "column"))) == 0,
           "%s: chose %s", name, gk_parquet_column(p));
    CHECK(gk_parquet_rows(p) == json_integer_value(json_object_get(want, "rows_in_file")));
    json_t *rows = json_object_get(want, "rows"), *of = json_object_get(want, "rows_of");
    if (of) rows = json_object_get(json_object_get(all, json_string_value(of)), "rows");
    CHECKF(json_is_array(rows), "%s: no rows in expected.json", name);
    size_t i = 0, len;
    const char *s;
    int more = 1;
    while (more) {
        rc = gk_parquet_next(p, &s, &len, &more, &e);
        CHECKF(rc == 0, "%s: %s", name, e.msg);
        if (rc || !more) break;
        json_t *w = json_array_get(rows, i);
        CHECKF(w && json_string_length(w) == len && memcmp(json_string_value(w), s, len) == 0,
               "%s: row %zu is '%.*s', pyarrow read '%s'", name, i, (int)len, s,
               w ? json_string_value(w) : "(none)");
        i++;
    }
    CHECKF(i == json_array_size(rows), "%s: %zu rows, pyarrow %zu", name, i, json_array_size(rows));
    CHECKF(gk_parquet_nulls(p) == json_integer_value(json_object_get(want, "nulls")),
           "%s: %lld nulls", name, gk_parquet_nulls(p));
    CHECK(gk_parquet_position(p) == gk_parquet_file_size(p));
    more = 1;
    CHECK(gk_parquet_next(p, &s, &len, &more, &e) == 0 && more == 0); /* the end stays the end */
    gk_parquet_close(p);
}

static void check_error(const char *name, const char *piece)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", name);
    gk_err e = {0};
    long long rows;
    int rc = read_all(path, NULL, &rows, &e);
    CHECKF(rc != 0, "%s: read %lld rows, no error", name, rows);
    CHECKF(strstr(e.msg, piece) && strncmp(e.msg, path, strlen(path)) == 0, "%s: '%s' lacks '%s'",
           name, e.msg, piece);
}

/* Every fixture, as pyarrow read it (or with the error it must give). */
static void test_fixtures(void)
{
    json_t *j = expected();
    if (!j) SKIP("no tests/fixtures/parquet/expected.json (run from the source tree)");
    const char *name;
    json_t *want;
    int files = 0;
    json_object_foreach(j, name, want) {
        json_t *err = json_object_get(want, "error");
        if (err) check_error(name, json_string_value(err));
        else check_rows(name, want, j);
        files++;
    }
    CHECK(files >= 20);
    json_decref(j);
}

static void expect_msg(const char *file, const char *column, int code, const char *piece)
{
    gk_err e = {0};
    gk_parquet *p = NULL;
    int rc = gk_parquet_open(&p, file, column, &e);
    CHECKF(rc == code && strstr(e.msg, piece) && strstr(e.msg, file),
           "%s [%s]: %d '%s', want %d '%s'", file, column ? column : "default", rc, e.msg, code,
           piece);
    gk_parquet_close(p);
}

static void test_column_choice(void)
{
    expect_msg(DIR "none_v1_dict.parquet", "id", GK_EFORMAT,
               "column 'id' is INT64, not a string column");
    expect_msg(DIR "none_v1_dict.parquet", "txt", GK_EFORMAT,
               "no column 'txt'; its columns: id (INT64), text (BYTE_ARRAY)");
    expect_msg(DIR "nested.parquet", "tags.list.element", GK_EFORMAT,
               "'tags.list.element' is repeated");
    expect_msg(DIR "nested.parquet", "meta.n", GK_EFORMAT, "'meta.n' is INT32");
    expect_msg(DIR "nested.parquet", "meta", GK_EFORMAT, "meta.text (BYTE_ARRAY), meta.n (INT32), "
               "tags.list.element (BYTE_ARRAY, repeated), score (DOUBLE)");
    expect_msg(DIR "ambiguous.parquet", "a.b", GK_EFORMAT,
               "column name 'a.b' is ambiguous (2 columns have it); its columns: a.b (BYTE_ARRAY), "
               "a.b (BYTE_ARRAY), text (BYTE_ARRAY)");
    expect_msg(DIR "two_strings.parquet", NULL, GK_EFORMAT,
               "no column 'text' and 2 string columns");
    expect_msg(DIR "numbers.parquet", NULL, GK_EFORMAT,
               "no string column; its columns: n (INT64), x (DOUBLE)");
    expect_msg(DIR "text_int.parquet", NULL, GK_EFORMAT, "column 'text' is INT32");
    expect_msg(DIR "missing.parquet", NULL, GK_ENOTFOUND, "missing.parquet");
    expect_msg(DIR "expected.json", NULL, GK_EFORMAT, "not a Parquet file");
    /* a name picks any string column; both of two_strings' read all 8 rows */
    gk_err e = {0};
    long long rows;
    CHECK_OK(read_all(DIR "two_strings.parquet", "body", &rows, &e), &e);
    CHECK(rows == 8);
    CHECK_OK(read_all(DIR "text_int.parquet", "s", &rows, &e), &e);
    CHECK(rows == 4);
    CHECK(gk_parquet_magic("PAR1xx", 6) && !gk_parquet_magic("PAR", 3) &&
          !gk_parquet_magic("PAR2", 4));
}

/* The hybrid by hand (parquet-format's Encodings.md): 0..7 bit-packed at width 3, then a run
 * of five 7s; a run past the bytes is an error. */
static void test_rle_hybrid(void)
{
    const uint8_t b[] = {0x03, 0x88, 0xc6, 0xfa, 0x0a, 0x07};
    pq_rle r;
    pq_rle_init(&r, b, sizeof b, 3);
    uint32_t v;
    for (uint32_t i = 0; i < 8; i++) CHECK(pq_rle_next(&r, &v) == 0 && v == i);
    for (int i = 0; i < 5; i++) CHECK(pq_rle_next(&r, &v) == 0 && v == 7);
    CHECK(pq_rle_next(&r, &v) == -1);
    /* width 16: one 0x1234; 2 groups of 8 in 1 byte */
    const uint8_t w[] = {0x02, 0x34, 0x12, 0x05, 0xff};
    pq_rle_init(&r, w, sizeof w, 16);
    CHECK(pq_rle_next(&r, &v) == 0 && v == 0x1234);
    CHECK(pq_rle_next(&r, &v) == -1);
}

/* LZ4 as Hadoop frames it (two blocks, each after its big-endian sizes), and the bare block
 * early parquet-cpp wrote under the same codec number; a wrong size is an error. */
static void test_lz4_hadoop(void)
{
    enum { N = 6000 };
    char text[N], framed[2 * N], out[N];
    for (int i = 0; i < N; i++) text[i] = "parquet lz4 hadoop "[i % 19] + (char)(i / 1000);
    size_t at = 0;
    for (int half = 0; half < 2; half++) {
        int len = LZ4_compress_default(text + half * (N / 2), framed + at + 8, N / 2, N);
        CHECK(len > 0);
        uint32_t sizes[2] = {N / 2, (uint32_t)len};
        for (int k = 0; k < 8; k++) framed[at + k] = (char)(sizes[k / 4] >> (8 * (3 - k % 4)));
        at += 8 + (size_t)len;
    }
    pq_cursor c = {.codec = PQ_LZ4};
    gk_err e = {0};
    memset(out, 0, N);
    CHECK_OK(pq_decompress(&c, (uint8_t *)framed, at, (uint8_t *)out, N, &e), &e);
    CHECK(memcmp(out, text, N) == 0);
    int bare = LZ4_compress_default(text, framed, N, 2 * N);
    memset(out, 0, N);
    CHECK_OK(pq_decompress(&c, (uint8_t *)framed, (size_t)bare, (uint8_t *)out, N, &e), &e);
    CHECK(memcmp(out, text, N) == 0);
    CHECK(pq_decompress(&c, (uint8_t *)framed, (size_t)bare, (uint8_t *)out, N - 1, &e) ==
          GK_EFORMAT);
    CHECKF(strstr(e.msg, "LZ4 page does not uncompress to its 5999 bytes"), "%s", e.msg);
    pq_cursor_free(&c);
}

static void test_chunk_limit(void)
{
    gk_err e = {0};
    gk_parquet *p;
    CHECK_OK(gk_parquet_open(&p, DIR "zstd_v1_dict.parquet", NULL, &e), &e);
    if (!p) return;
    gk_parquet_set_max_chunk(p, 100);
    const char *s;
    size_t len;
    int more;
    CHECK(gk_parquet_next(p, &s, &len, &more, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "row group 1 of 3: the column chunk is") &&
               strstr(e.msg, "over the limit of 100"),
           "%s", e.msg);
    CHECK(gk_parquet_next(p, &s, &len, &more, &e) != 0 && more == 0);
    gk_parquet_close(p);
}

/* Every truncation of a file is an error naming the file. */
static void truncations(const char *name)
{
    size_t n;
    char src[256];
    const char *dst = mempath;
    snprintf(src, sizeof src, DIR "%s", name);
    unsigned char *b = slurp(src, &n);
    if (!b) return;
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        spit(b, len);
        gk_err e = {0};
        long long rows;
        int rc = read_all(dst, NULL, &rows, &e);
        if (rc == 0 || strncmp(e.msg, dst, strlen(dst)) != 0) {
            if (!bad++) CHECKF(0, "%s cut at %zu: rc %d '%s'", name, len, rc, e.msg);
        }
    }
    free(b);
}

/* Each byte from `from` on, flipped (two ways): an error naming the file, or rows; no crash. */
static void flips(const char *name, int footer_only)
{
    size_t n;
    char src[256];
    const char *dst = mempath;
    snprintf(src, sizeof src, DIR "%s", name);
    unsigned char *b = slurp(src, &n);
    if (!b) return;
    size_t flen = (size_t)b[n - 8] | b[n - 7] << 8 | b[n - 6] << 16 | (size_t)b[n - 5] << 24;
    size_t from = footer_only ? n - 8 - flen : 0;
    int bad = 0, errors = 0;
    for (size_t i = from; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            unsigned char keep = b[i];
            b[i] ^= k ? 0xff : 0x01;
            spit(b, n);
            b[i] = keep;
            gk_err e = {0};
            long long rows;
            int rc = read_all(dst, NULL, &rows, &e);
            errors += rc != 0;
            if (rc && strncmp(e.msg, dst, strlen(dst)) != 0 && !bad++)
                CHECKF(0, "%s byte %zu: '%s' does not name the file", name, i, e.msg);
        }
    }
    CHECKF(errors > (int)(n - from) / 2, "%s: only %d of %zu flips found", name, errors,
           2 * (n - from));
    free(b);
}

static void test_damaged(void)
{
    if ((memfd = memfd_create("gk_test_parquet", 0)) < 0) SKIP("no memfd_create");
    snprintf(mempath, sizeof mempath, "/proc/self/fd/%d", memfd);
    truncations("zstd_v1_dict.parquet");
    truncations("nulls_v2.parquet");
    flips("none_v1_dict.parquet", 1);
    flips("nested.parquet", 1);
    flips("snappy_v2_plain.parquet", 0);
    flips("nulls_v1.parquet", 0);
    flips("dict_fallback.parquet", 0);
    close(memfd);
}

int main(void)
{
    RUN(test_fixtures);
    RUN(test_column_choice);
    RUN(test_rle_hybrid);
    RUN(test_lz4_hadoop);
    RUN(test_chunk_limit);
    RUN(test_damaged);
    return TEST_END();
}
