/* test_shard.c: shard writer and reader: header, count patching, pipes, raw nanoGPT files,
 * numbered shards, the one header parser, and every kind of bad file (damaged header, text). */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/shard.h"
#include "common/le.h"
#include "test.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static int write_shard(const char *path, const uint32_t *ids, size_t n, uint32_t vocab)
{
    gk_err e = {0};
    gk_shard_writer w;
    int rc = gk_shard_writer_open(&w, path, vocab, 0xabcd1234u, &e);
    if (!rc)
        rc = gk_shard_writer_write(&w, ids, n, &e);
    if (!rc)
        rc = gk_shard_writer_finish(&w, &e);
    return rc;
}

static size_t read_shard(const char *path, uint32_t *out, size_t cap, gk_shard_reader *info,
                         gk_err *e)
{
    gk_shard_reader r;
    if (gk_shard_open(&r, path, e))
        return (size_t)-1;
    size_t total = 0, got = 1;
    while (got > 0) {
        if (gk_shard_read(&r, out + total, cap - total > 3 ? 3 : cap - total, &got, e)) {
            gk_shard_close(&r);
            return (size_t)-1;
        }
        total += got;
    }
    *info = r;
    info->fp = NULL;
    info->name = NULL;
    gk_shard_close(&r);
    return total;
}

static void test_round_trip_uint16_and_uint32(void)
{
    uint32_t ids[] = {50256, 0, 1, 65535, 42, 7, 50000};
    uint32_t out[16];
    gk_shard_reader info;
    gk_err e = {0};
    CHECK(write_shard(tmp("a.bin"), ids, 7, 50257) == 0);
    CHECK(read_shard(tmp("a.bin"), out, 16, &info, &e) == (size_t)-1); /* 65535 >= vocab */
    CHECKF(strstr(e.msg, "outside the vocabulary") != NULL, "%s", e.msg);
    CHECK(write_shard(tmp("a.bin"), ids, 7, 65536) == 0);
    CHECK(read_shard(tmp("a.bin"), out, 16, &info, &e) == 7);
    CHECK(memcmp(out, ids, sizeof ids) == 0);
    CHECK(info.version == 1 && info.count == 7 && info.vocab_size == 65536 &&
          info.fingerprint == 0xabcd1234u);
    struct stat st;
    CHECK(stat(tmp("a.bin"), &st) == 0 && st.st_size == 1024 + 14);
    uint32_t big[] = {100000, 3, 70000};
    CHECK(write_shard(tmp("b.bin"), big, 3, 100001) == 0);
    CHECK(read_shard(tmp("b.bin"), out, 16, &info, &e) == 3);
    CHECK(info.version == 2 && out[0] == 100000 && out[2] == 70000);
}

static void test_header_bytes_are_llmc(void)
{
    uint32_t ids[] = {1, 2, 3};
    CHECK(write_shard(tmp("h.bin"), ids, 3, 50257) == 0);
    FILE *f = fopen(tmp("h.bin"), "rb");
    int32_t h[256];
    CHECK(f && fread(h, 4, 256, f) == 256);
    CHECK(h[0] == 20240520 && h[1] == 1 && h[2] == 3 && h[3] == 50257 &&
          (uint32_t)h[4] == 0xabcd1234u);
    for (int i = 5; i < 256; i++)
        CHECK(h[i] == 0);
    uint16_t t[3];
    CHECK(f && fread(t, 2, 3, f) == 3 && t[0] == 1 && t[2] == 3);
    if (f)
        fclose(f);
}

static void test_pipe_count_minus_one(void)
{
    /* A writer on a pipe cannot patch: count stays -1 and readers read to the end. */
    int32_t h[256] = {20240520, 1, -1};
    uint16_t toks[2] = {5, 6};
    FILE *f = fopen(tmp("p.bin"), "wb");
    CHECK(f && fwrite(h, 4, 256, f) == 256 && fwrite(toks, 2, 2, f) == 2);
    if (f)
        fclose(f);
    uint32_t out[8];
    gk_shard_reader info;
    gk_err e = {0};
    CHECK(read_shard(tmp("p.bin"), out, 8, &info, &e) == 2);
    CHECK(info.count == -1 && out[0] == 5 && out[1] == 6);
}

static void test_raw_nanogpt_file(void)
{
    uint16_t raw[5] = {10, 20, 30, 40, 50};
    FILE *f = fopen(tmp("raw.bin"), "wb");
    CHECK(f && fwrite(raw, 2, 5, f) == 5);
    if (f)
        fclose(f);
    uint32_t out[8];
    gk_shard_reader info;
    gk_err e = {0};
    CHECK(read_shard(tmp("raw.bin"), out, 8, &info, &e) == 5);
    CHECK(info.raw == 1 && out[0] == 10 && out[4] == 50);
    f = fopen(tmp("odd.bin"), "wb");
    CHECK(f && fwrite(raw, 1, 5, f) == 5);
    if (f)
        fclose(f);
    CHECK(read_shard(tmp("odd.bin"), out, 8, &info, &e) == (size_t)-1);
    CHECKF(strstr(e.msg, "middle of a token") != NULL, "%s", e.msg);
}

static void test_bad_files(void)
{
    uint32_t ids[] = {1, 2, 3, 4};
    uint32_t out[8];
    gk_shard_reader info;
    gk_err e = {0};
    CHECK(write_shard(tmp("t.bin"), ids, 4, 100) == 0);
    CHECK(truncate(tmp("t.bin"), 1024 + 5) == 0);
    CHECK(read_shard(tmp("t.bin"), out, 8, &info, &e) == (size_t)-1);
    CHECKF(strstr(e.msg, "t.bin: header says 4 tokens") != NULL, "%s", e.msg);
    CHECK(truncate(tmp("t.bin"), 100) == 0);
    CHECK(read_shard(tmp("t.bin"), out, 8, &info, &e) == (size_t)-1);
    CHECKF(strstr(e.msg, "truncated shard header") != NULL, "%s", e.msg);
    FILE *f = fopen(tmp("v.bin"), "wb");
    int32_t h[256] = {20240520, 7, 0};
    CHECK(f && fwrite(h, 4, 256, f) == 256);
    if (f)
        fclose(f);
    CHECK(read_shard(tmp("v.bin"), out, 8, &info, &e) == (size_t)-1);
    CHECKF(strstr(e.msg, "unsupported shard version 7") != NULL, "%s", e.msg);
    CHECK(read_shard(tmp("missing.bin"), out, 8, &info, &e) == (size_t)-1);
    CHECK(e.code == GK_ENOTFOUND && strstr(e.msg, "missing.bin") != NULL);
}

static void test_numbered_series(void)
{
    gk_err e = {0};
    gk_shard_series s;
    uint32_t ids[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/ser", dir);
    CHECK_OK(gk_shard_series_init(&s, prefix, 4, 50257, 0, &e), &e);
    CHECK_OK(gk_shard_series_write(&s, ids, 3, &e), &e);
    CHECK_OK(gk_shard_series_write(&s, ids + 3, 7, &e), &e);
    CHECK_OK(gk_shard_series_finish(&s, &e), &e);
    uint32_t out[8];
    gk_shard_reader info;
    CHECK(read_shard(tmp("ser_000000.bin"), out, 8, &info, &e) == 4 && out[0] == 0 && out[3] == 3);
    CHECK(read_shard(tmp("ser_000001.bin"), out, 8, &info, &e) == 4 && out[0] == 4);
    CHECK(read_shard(tmp("ser_000002.bin"), out, 8, &info, &e) == 2 && out[1] == 9);
    CHECK(access(tmp("ser_000003.bin"), F_OK) != 0);
}

static void test_map(void)
{
    uint32_t ids[] = {7, 8, 9, 10, 11};
    CHECK(write_shard(tmp("m.bin"), ids, 5, 50257) == 0);
    gk_shard_map m;
    gk_err e = {0};
    CHECK_OK(gk_shard_map_open(&m, tmp("m.bin"), &e), &e);
    uint32_t out[3];
    CHECK(m.count == 5 && m.width == 2 && m.vocab_size == 50257);
    CHECK_OK(gk_shard_map_get(&m, 2, 3, 50257, out, &e), &e);
    CHECK(out[0] == 9 && out[2] == 11);
    CHECK(gk_shard_map_get(&m, 3, 3, 0, out, &e) == GK_EFORMAT);
    CHECK(gk_shard_map_get(&m, 0, 3, 8, out, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "token 8 at position 1") != NULL, "%s", e.msg);
    gk_shard_map_close(&m);
    CHECK(truncate(tmp("m.bin"), 1024 + 6) == 0);
    CHECK(gk_shard_map_open(&m, tmp("m.bin"), &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "header says 5 tokens (10 bytes) but the file has "
                         "6 bytes after the header (truncated?)") != NULL,
           "%s", e.msg);
}

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    if (f)
        fclose(f);
}

/* A header with a damaged magic is said to be one, by the stream and the mapped reader alike
 * (before: read as raw tokens, then "vocab_size not set" in gpt-train). */
static void test_damaged_header(void)
{
    uint32_t ids[] = {1, 2, 3, 4}, out[8];
    unsigned char b[1024 + 8];
    gk_shard_reader info;
    gk_shard_map m;
    gk_err e = {0};
    CHECK(write_shard(tmp("d.bin"), ids, 4, 50257) == 0);
    FILE *f = fopen(tmp("d.bin"), "rb");
    CHECK(f && fread(b, 1, sizeof b, f) == sizeof b);
    if (f)
        fclose(f);
    unsigned char flips[][2] = {{0, 0x01}, {2, 0x10}, {3, 0x80}};
    for (size_t i = 0; i < 3; i++) { /* one bit off */
        b[flips[i][0]] ^= flips[i][1];
        write_bytes(tmp("d.bin"), b, sizeof b);
        b[flips[i][0]] ^= flips[i][1];
        CHECK(read_shard(tmp("d.bin"), out, 8, &info, &e) == (size_t)-1);
        CHECKF(strstr(e.msg, "d.bin: damaged shard header") != NULL, "%s", e.msg);
        CHECK(gk_shard_map_open(&m, tmp("d.bin"), &e) == GK_EFORMAT);
        CHECKF(strstr(e.msg, "d.bin: damaged shard header") != NULL, "%s", e.msg);
    }
    memset(b, 0, 4); /* magic wiped, the rest as written */
    write_bytes(tmp("d.bin"), b, sizeof b);
    CHECK(gk_shard_map_open(&m, tmp("d.bin"), &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "damaged shard header (magic 0, expected 20240520)") != NULL, "%s", e.msg);
    /* raw tokens whose first two look like version 1 and a count are still raw */
    uint16_t raw[600] = {0x1234, 0, 1, 0, 5, 0, 77};
    for (int i = 7; i < 600; i++)
        raw[i] = (uint16_t)(i * 7);
    write_bytes(tmp("d.bin"), raw, sizeof raw);
    CHECK_OK(gk_shard_map_open(&m, tmp("d.bin"), &e), &e);
    CHECK(m.raw && m.count == 600);
    gk_shard_map_close(&m);
}

/* Text is not a token shard (before: read as raw uint16 tokens). */
static void test_text_is_not_a_shard(void)
{
    const char *text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
                       "caf\xc3\xa9 \xe2\x80\x94 na\xefve\n"; /* one Latin-1 byte among UTF-8 */
    write_bytes(tmp("t.txt"), text, strlen(text));
    uint32_t out[64];
    gk_shard_reader info;
    gk_shard_map m;
    gk_err e = {0};
    CHECK(read_shard(tmp("t.txt"), out, 64, &info, &e) == (size_t)-1);
    CHECKF(strstr(e.msg, "t.txt: not a token shard (no shard header, and it reads as text)") !=
               NULL,
           "%s", e.msg);
    CHECK(gk_shard_map_open(&m, tmp("t.txt"), &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "t.txt: not a token shard") != NULL, "%s", e.msg);
}

/* The parser's verdicts on buffers; sizes known and unknown. */
static void test_parse(void)
{
    unsigned char b[1024] = {0};
    gk_shard_kind kind;
    gk_shard_header h;
    gk_err e = {0};
    gk_put_le32(b, GK_SHARD_MAGIC);
    gk_put_le32(b + 4, 2);
    gk_put_le32(b + 8, (uint32_t)-1);
    gk_put_le32(b + 12, 100000);
    CHECK_OK(gk_shard_parse(b, 1024, 1024 + 12, "x", &kind, &h, &e), &e);
    CHECK(kind == GK_SHARD_HEADER && h.width == 4 && h.count == -1 && h.tokens == 3 &&
          h.vocab_size == 100000);
    CHECK_OK(gk_shard_parse(b, 1024, -1, "x", &kind, &h, &e), &e);
    CHECK(h.count == -1 && h.tokens == -1);
    CHECK(gk_shard_parse(b, 1024, 1024 + 13, "x", &kind, &h, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "x: file ends in the middle of a token") != NULL, "%s", e.msg);
    CHECK(gk_shard_parse(b, 1000, 1000, "x", &kind, &h, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "truncated shard header (1000 of 1024 bytes)") != NULL, "%s", e.msg);
    CHECK_OK(gk_shard_parse((const unsigned char *)"hello\n", 6, 6, "x", &kind, &h, &e), &e);
    CHECK(kind == GK_SHARD_TEXT);
    CHECK_OK(gk_shard_parse((const unsigned char *)"h\0e\0", 4, 4, "x", &kind, &h, &e), &e);
    CHECK(kind == GK_SHARD_RAW && h.width == 2 && h.tokens == 2);
    unsigned char junk[64];
    for (int i = 0; i < 64; i++)
        junk[i] = (unsigned char)(0x80 + i * 37 % 120 + 1);
    CHECK_OK(gk_shard_parse(junk, 64, 64, "x", &kind, &h, &e), &e);
    CHECK(kind == GK_SHARD_RAW);
    uint32_t out[3];
    const unsigned char t[] = {1, 0, 0xff, 0xff, 2, 0};
    CHECK(gk_shard_decode(t, 3, 2, 0, out) == 3 && out[1] == 65535 && out[2] == 2);
    CHECK(gk_shard_decode(t, 3, 2, 50257, out) == 1);
}

/* Raw input checked against a vocabulary: a miss in the first bytes is "not a token shard";
 * later ones are caught as they are read. */
static void test_check_raw(void)
{
    uint16_t raw[1000];
    for (int i = 0; i < 1000; i++)
        raw[i] = (uint16_t)(i % 60);
    raw[900] = 64;
    write_bytes(tmp("r.bin"), raw, sizeof raw);
    gk_shard_reader r;
    gk_err e = {0};
    uint32_t out[1000];
    size_t got = 0;
    CHECK_OK(gk_shard_open(&r, tmp("r.bin"), &e), &e);
    CHECK_OK(gk_shard_check_raw(&r, 65, &e), &e);
    CHECK_OK(gk_shard_read(&r, out, 1000, &got, &e), &e);
    CHECK(got == 1000 && out[900] == 64);
    gk_shard_close(&r);
    CHECK_OK(gk_shard_open(&r, tmp("r.bin"), &e), &e);
    CHECK_OK(gk_shard_check_raw(&r, 64, &e), &e); /* token 900 is past the first 1024 bytes */
    CHECK(gk_shard_read(&r, out, 1000, &got, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "token 64 at position 900 is outside the vocabulary (64)") != NULL, "%s",
           e.msg);
    gk_shard_close(&r);
    raw[3] = 70;
    write_bytes(tmp("r.bin"), raw, sizeof raw);
    CHECK_OK(gk_shard_open(&r, tmp("r.bin"), &e), &e);
    CHECK(gk_shard_check_raw(&r, 65, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "r.bin: not a token shard (no shard header, and read as raw uint16 tokens "
                         "it holds 70 at position 3, outside the 65-token vocabulary)") != NULL,
           "%s", e.msg);
    gk_shard_close(&r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_shard_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN(test_round_trip_uint16_and_uint32);
    RUN(test_header_bytes_are_llmc);
    RUN(test_pipe_count_minus_one);
    RUN(test_raw_nanogpt_file);
    RUN(test_bad_files);
    RUN(test_numbered_series);
    RUN(test_map);
    RUN(test_damaged_header);
    RUN(test_text_is_not_a_shard);
    RUN(test_parse);
    RUN(test_check_raw);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return TEST_END();
}
