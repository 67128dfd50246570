/* fuzz_parquet.c: the Parquet reader (footer, column choice, row groups, page headers, codecs,
 * levels, dictionaries) on arbitrary bytes, with the chunk limit at 1 MB so that no input asks
 * for more. Properties: whatever reads to its end returns, with the nulls, exactly the footer's
 * row count and ends at the file's size; progress never goes back or past the file; an error
 * names the file. The default column and "text" are both tried; a read stops after 2^20 rows
 * (a few bytes of dictionary indices can stand for billions). */
#include <string.h>

#include "common/io/parquet.h"
#include "tests/fuzz/fuzz.h"

static void read_column(const char *path, const char *column)
{
    gk_err e = {0};
    gk_parquet *p;
    if (gk_parquet_open(&p, path, column, &e)) {
        FZ_ASSERT(strstr(e.msg, path) != NULL, "open error does not name the file: %s", e.msg);
        return;
    }
    gk_parquet_set_max_chunk(p, 1 << 20);
    long long rows = 0, last = 0, size = gk_parquet_file_size(p);
    const char *s;
    size_t len;
    int more = 1, rc = 0;
    while (more && rows < (1 << 20) && (rc = gk_parquet_next(p, &s, &len, &more, &e)) == 0) {
        long long at = gk_parquet_position(p);
        FZ_ASSERT(at >= last && at <= size, "position %lld after %lld, file of %lld", at, last,
                  size);
        last = at;
        if (more) {
            FZ_ASSERT(len <= (1 << 20), "a row of %zu bytes from pages of at most 1 MB", len);
            /* ASan checks both */
            volatile char first = len ? s[0] : 0, last_byte = len ? s[len - 1] : 0;
            (void)first, (void)last_byte;
            rows++;
        }
    }
    if (rc == 0 && !more) {
        FZ_ASSERT(rows + gk_parquet_nulls(p) == gk_parquet_rows(p),
                  "%lld rows and %lld nulls, footer says %lld", rows, gk_parquet_nulls(p),
                  gk_parquet_rows(p));
        FZ_ASSERT(gk_parquet_position(p) == size, "ended at %lld of %lld", gk_parquet_position(p),
                  size);
    } else {
        FZ_ASSERT(strstr(e.msg, path) != NULL, "error does not name the file: %s", e.msg);
    }
    gk_parquet_close(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file(0, data, size);
    if (!path)
        return 0;
    FZ_ASSERT(gk_parquet_magic(data, size) == (size >= 4 && memcmp(data, "PAR1", 4) == 0), "magic");
    read_column(path, NULL);
    read_column(path, "text");
    return 0;
}
