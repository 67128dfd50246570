/* parquet.h: rows of one string column of a Parquet file, streamed row group by row group.
 * Owns: gk_parquet, an open file and its chosen column; one column chunk (pread, at most the
 * chunk limit, default GK_PARQUET_MAX_CHUNK) and one decompressed page in memory at a time.
 * Lifetimes: a row's bytes live until the next gk_parquet_next or close. Thread safety: one
 * gk_parquet per thread; different ones are independent.
 *
 * The format (apache/parquet-format): "PAR1", column chunks, a footer (FileMetaData, Thrift
 * compact protocol), its 4-byte little-endian length, "PAR1". The footer's schema is a tree
 * flattened depth first; its leaves are the columns (named here by their dotted path). Each row
 * group holds one chunk per leaf: an optional dictionary page, then data pages, each after a
 * Thrift PageHeader. Supported, as text datasets use them:
 *   - leaves of type BYTE_ARRAY (UTF8/STRING or plain binary), required or optional, at any
 *     depth of non-repeated groups (a null row, or a null group above it, is skipped and
 *     counted); a repeated leaf (a list) is refused;
 *   - data pages v1 (repetition and definition levels RLE with their 4-byte length, inside the
 *     compressed body) and v2 (levels uncompressed before the values, is_compressed honoured);
 *   - values PLAIN (4-byte length + bytes), dictionary indices (PLAIN_DICTIONARY or
 *     RLE_DICTIONARY: a bit width byte, then the RLE/bit-packed hybrid) into a PLAIN dictionary
 *     page, DELTA_LENGTH_BYTE_ARRAY or DELTA_BYTE_ARRAY (lengths DELTA_BINARY_PACKED); a chunk
 *     may mix them (a dictionary that fell back to PLAIN);
 *   - codecs UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4_RAW and LZ4 (Hadoop's framing, else a bare
 *     block); BROTLI and LZO are refused by name, as are other value encodings;
 *   - a page's CRC-32, where the writer gave one, is checked.
 * Every length, offset and count is checked against the file, the chunk and the page; an error
 * names the file and the row group. Other columns are never read. Levels and indices are
 * decoded one at a time (a run of nulls at once), so memory is the chunk, one page and the
 * dictionary, whatever counts a file declares. */
#ifndef GK_PARQUET_H
#define GK_PARQUET_H

#include <stddef.h>

#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default limit on one column chunk's bytes on disk and on one page decompressed. */
#define GK_PARQUET_MAX_CHUNK ((size_t)1 << 30)

typedef struct gk_parquet gk_parquet;

/* Nonzero when the n bytes at head start a Parquet file ("PAR1"). */
int gk_parquet_magic(const void *head, size_t n);
/* Opens path and chooses the column: `column` by name (dotted path for a nested leaf is fine),
 * or when column is NULL, "text" if present, else the only BYTE_ARRAY/UTF8 string column; a
 * wrong or ambiguous name is an error listing the columns; a non-string column is an error
 * naming its type. Reads and checks the footer only. */
int gk_parquet_open(gk_parquet **out, const char *path, const char *column, gk_err *e);
/* Next non-null row of the column in file order: *text and *len valid until the next call (not
 * NUL-terminated; may contain NULs). *more = 0 at the end. Null rows are skipped and counted. */
int gk_parquet_next(gk_parquet *p, const char **text, size_t *len, int *more, gk_err *e);
long long gk_parquet_rows(const gk_parquet *p);      /* rows in the file (footer) */
long long gk_parquet_nulls(const gk_parquet *p);     /* null rows skipped so far */
long long gk_parquet_position(const gk_parquet *p);  /* file bytes consumed so far (progress) */
const char *gk_parquet_column(const gk_parquet *p);  /* the chosen column's name */
/* Sets the limit on a column chunk's size and on a page's decompressed size (before the first
 * gk_parquet_next; 0: the default). A larger one is an error saying so. */
void gk_parquet_set_max_chunk(gk_parquet *p, size_t bytes);
long long gk_parquet_file_size(const gk_parquet *p); /* the file's size in bytes */
int gk_parquet_row_groups(const gk_parquet *p);      /* row groups in the file */
void gk_parquet_close(gk_parquet *p);                /* accepts NULL */

#ifdef __cplusplus
}
#endif

#endif
