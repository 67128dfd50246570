/* parquet_int.h: what the Parquet reader's three files share (not installed, not for callers).
 * parquet_thrift.c decodes the footer and page headers (Thrift compact protocol), parquet_page.c
 * walks the pages of one column chunk in memory (codecs, levels, encodings), parquet.c owns the
 * file, the column choice and the row groups. Errors from the first two carry no file name:
 * parquet.c prefixes the file and the row group. */
#ifndef GK_PARQUET_INT_H
#define GK_PARQUET_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Physical types, codecs, page types and encodings: parquet.thrift's numbers. */
enum { PQ_BOOLEAN, PQ_INT32, PQ_INT64, PQ_INT96, PQ_FLOAT, PQ_DOUBLE, PQ_BYTE_ARRAY, PQ_FIXED };
enum { PQ_UNCOMPRESSED, PQ_SNAPPY, PQ_GZIP, PQ_LZO, PQ_BROTLI, PQ_LZ4, PQ_ZSTD, PQ_LZ4_RAW };
enum { PQ_DATA_PAGE, PQ_INDEX_PAGE, PQ_DICTIONARY_PAGE, PQ_DATA_PAGE_V2 };
enum {
    PQ_PLAIN = 0,
    PQ_PLAIN_DICTIONARY = 2,
    PQ_RLE = 3,
    PQ_BIT_PACKED = 4,
    PQ_DELTA_LENGTH_BYTE_ARRAY = 6,
    PQ_DELTA_BYTE_ARRAY = 7,
    PQ_RLE_DICTIONARY = 8
};
enum { PQ_REQUIRED, PQ_OPTIONAL, PQ_REPEATED };

const char *pq_type_name(int type);
const char *pq_codec_name(int codec);
const char *pq_encoding_name(int encoding);

/* ---- the footer ---- */
typedef struct pq_schema {
    char *name;
    int type;          /* -1: a group */
    int repetition;    /* -1: unset (the root) */
    int num_children;  /* 0: a leaf */
    int converted;     /* ConvertedType, -1: none */
} pq_schema;

typedef struct pq_leaf {
    char *path;        /* dotted, from below the root */
    int type, converted;
    int max_def, max_rep;
} pq_leaf;

/* One row group's chunk of the chosen column (pq_read_row_groups). */
typedef struct pq_chunk {
    long long num_rows;                       /* the row group's */
    int type, codec, has_meta, has_file_path;
    long long num_values, compressed_size, data_off, dict_off; /* dict_off -1: none */
} pq_chunk;

typedef struct pq_meta {
    long long num_rows;
    pq_schema *schema;
    int nschema;
    pq_leaf *leaves;
    int nleaves;
    const uint8_t *rg_at, *end; /* the row_groups list's elements, within the footer buffer */
    int nrg;
} pq_meta;

/* Decodes FileMetaData from buf[0..n) (kept: m->rg_at points into it) and derives the leaves. */
int pq_read_meta(const uint8_t *buf, size_t n, pq_meta *m, gk_err *e);
/* Fills chunks[0..m->nrg) with each row group's chunk of leaf `leaf`. */
int pq_read_row_groups(const pq_meta *m, int leaf, pq_chunk *chunks, gk_err *e);
void pq_meta_free(pq_meta *m);

/* ---- pages ---- */
typedef struct pq_page_header {
    int type;
    long long uncompressed, compressed;
    long long num_values;                     /* data pages (levels) and dictionary pages */
    int encoding, def_encoding, rep_encoding; /* v1 (encoding: also v2 and dictionary) */
    long long def_len, rep_len;               /* v2 */
    int is_compressed;                        /* v2 */
    int have_data, have_dict, have_v2;        /* which of the three sub-headers came */
    int have_crc;
    uint32_t crc;                             /* CRC-32 of the page's bytes on disk */
} pq_page_header;

/* Decodes a PageHeader from p[0..n); *used = its length. */
int pq_read_page_header(const uint8_t *p, size_t n, pq_page_header *h, size_t *used, gk_err *e);

/* The RLE/bit-packed hybrid, one value at a time. */
typedef struct pq_rle {
    const uint8_t *p, *end;
    int width;
    uint64_t rle_left, packed_left, bit;
    uint32_t value;
    const uint8_t *packed;
} pq_rle;

void pq_rle_init(pq_rle *r, const uint8_t *p, size_t n, int width);
int pq_rle_next(pq_rle *r, uint32_t *v); /* 0, or -1 when the data runs out */

/* DELTA_BINARY_PACKED, one value at a time (parquet_delta.c). */
typedef struct pq_delta {
    const uint8_t *p, *end;             /* the next block header or miniblock */
    uint64_t per_mini, nmini, mini, in_mini, left;
    int64_t value, min_delta;
    const uint8_t *widths, *mini_p;
    uint64_t mini_bytes;
    int width, first;
} pq_delta;

/* Reads the stream's header from p[0..n): -1 if bad or over max_values values. */
int pq_delta_init(pq_delta *d, const uint8_t *p, size_t n, long long max_values);
/* 0, or -1 when the stream runs out or past its bytes */
int pq_delta_next(pq_delta *d, int64_t *v);
/* Where the stream ends (after its last value's miniblock), NULL if it runs past its bytes. */
const uint8_t *pq_delta_end(const pq_delta *d);

typedef struct pq_str { uint32_t off, len; } pq_str;

/* One column chunk in memory, page by page. */
typedef struct pq_cursor {
    const uint8_t *chunk;
    size_t len, pos;           /* pos: the next page header */
    int codec, max_def;
    size_t max_page;           /* limit on a decompressed page */
    uint8_t *page, *dict_buf;  /* decompressed data page, dictionary page (owned, reused) */
    size_t page_cap, dict_cap;
    pq_str *dict;              /* offsets into dict_src: dict_buf, or the chunk if not compressed */
    const uint8_t *dict_src;
    long long ndict, dict_entries_cap;
    int have_dict, seen_data;
    long long values, expect;  /* levels in the data pages so far; the footer's count */
    long long nulls;           /* null rows skipped in this chunk */
    /* the current data page */
    long long left;
    pq_rle def, idx;
    int encoding;              /* PQ_PLAIN, PQ_RLE_DICTIONARY (for both), or a DELTA_* */
    pq_delta lens, prefixes;   /* DELTA_* pages */
    uint8_t *prev;             /* DELTA_BYTE_ARRAY's current value */
    size_t prev_len, prev_cap;
    const uint8_t *vp, *vend;
    void *zstd;                /* ZSTD_DCtx, made on first use */
} pq_cursor;

/* src[0..n) compressed by c->codec into exactly dst[0..want). */
int pq_decompress(pq_cursor *c, const uint8_t *src, size_t n, uint8_t *dst, size_t want, gk_err *e);

enum { PQ_VALUE, PQ_END };
/* Starts on chunk[0..len) (not owned) of `expect` values; keeps an earlier chunk's buffers. */
void pq_cursor_begin(pq_cursor *c, const uint8_t *chunk, size_t len, int codec, int max_def,
                     size_t max_page, long long expect);
/* The next non-null value of the chunk: *what = PQ_VALUE (*s, *len set) or PQ_END; the nulls
 * skipped on the way are counted in c->nulls. */
int pq_cursor_next(pq_cursor *c, const uint8_t **s, size_t *len, int *what, gk_err *e);
void pq_cursor_free(pq_cursor *c);

#endif
