/* shard.h: token shards, the file format every tool reads and writes.
 *
 * Format (llm.c compatible), all little-endian:
 *   bytes 0..1023   header, 256 x int32:
 *                   [0] = 20240520 (magic)   [1] = version: 1 = uint16 tokens, 2 = uint32 tokens
 *                   [2] = token count, or -1 when written to a pipe (read to end of file)
 *                   [3] = vocabulary size (0 = unknown)
 *                   [4] = tokenizer fingerprint, CRC-32 of the vocabulary (0 = unknown)
 *                   [5..255] = 0
 *   bytes 1024..    the tokens, 2 or 4 bytes each.
 * A shard holds at most 2^31-1 tokens. Readers also accept nanoGPT's header-less files of raw
 * uint16 tokens (gk_shard_reader.raw is then set so the tool can say so), but not text, nor a
 * header damaged on disk (see gk_shard_parse).
 *
 * Owns: an open reader or writer and its buffers. Lifetime: open .. close/finish/abort.
 * Thread safety: one reader or writer per thread. */
#ifndef GK_SHARD_H
#define GK_SHARD_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/io/outfile.h"

#define GK_SHARD_MAGIC 20240520
#define GK_SHARD_HEADER_INTS 256
#define GK_SHARD_HEADER_BYTES 1024
#define GK_SHARD_MAX_TOKENS 2147483647LL

/* What the first bytes of an input are. */
typedef enum gk_shard_kind {
    GK_SHARD_HEADER, /* a shard with our header */
    GK_SHARD_RAW,    /* no header, binary: perhaps nanoGPT's raw uint16 tokens */
    GK_SHARD_TEXT,   /* no header, and it reads as text (no NUL, UTF-8 with few errors) */
} gk_shard_kind;

typedef struct gk_shard_header {
    int version, width;  /* 1: uint16 tokens (width 2), 2: uint32 (width 4); raw: 1, 2 */
    int64_t count;       /* the header's count; -1 when written to a pipe (and for raw files) */
    int64_t tokens;      /* tokens in the file when its size is known, else count */
    uint32_t vocab_size; /* 0 when unknown */
    uint32_t fingerprint;
} gk_shard_header;

/* The one parser of the shard header, for every reader. b[0..n): the first bytes of the input
 * called name (n >= 1024 unless the input is shorter); size: the whole input's size in bytes,
 * or -1 when unknown (a pipe). Sets *kind and h. Errors (GK_EFORMAT, naming the input): a
 * truncated header, an unknown version, a bad count, a size that disagrees with the count or
 * ends inside a token, and a damaged header (1024 bytes that are a shard header but for the
 * magic: a known version and a magic a few bits off, or the rest of the header as written). */
int gk_shard_parse(const unsigned char *b, size_t n, int64_t size, const char *name,
                   gk_shard_kind *kind, gk_shard_header *h, gk_err *e);
/* Decodes n little-endian tokens of width 2 or 4 from p into out. Returns n, or the index of
 * the first token >= limit (limit 0: no check). p and out may overlap when out starts at or
 * before p (decoding in place forwards). */
size_t gk_shard_decode(const unsigned char *p, size_t n, int width, uint32_t limit, uint32_t *out);

typedef struct gk_shard_reader {
    FILE *fp;
    char *name;          /* path, or "stdin" */
    int version;         /* 1 (uint16) or 2 (uint32) */
    int raw;             /* header-less nanoGPT uint16 file */
    int64_t count;       /* tokens per the header; -1 when unknown (pipe) */
    uint32_t vocab_size; /* 0 when unknown */
    uint32_t fingerprint;
    int64_t delivered;   /* tokens returned so far */
    unsigned char sniff[GK_SHARD_HEADER_BYTES]; /* raw files: bytes read while
                                                 * looking for a header */
    size_t sniff_len, sniff_pos;
} gk_shard_reader;

/* Opens a shard file, or stdin for "-"/NULL, and validates its header against the file size.
 * A header-less input is read as raw uint16 tokens (r->raw) unless it reads as text: that is
 * "not a token shard". */
int gk_shard_open(gk_shard_reader *r, const char *path, gk_err *e);
/* For a raw (header-less) input: checks the tokens read so far against vocab_size (a token
 * outside it: "not a token shard"), and has every later read check them. No-op otherwise. */
int gk_shard_check_raw(gk_shard_reader *r, uint32_t vocab_size, gk_err *e);
/* Reads up to max tokens into out; *got = 0 at the end. Checks every token against the vocab
 * size and the total against the header's count (a short file is an error, not an end). */
int gk_shard_read(gk_shard_reader *r, uint32_t *out, size_t max, size_t *got, gk_err *e);
void gk_shard_close(gk_shard_reader *r);

/* A whole shard mapped read-only, for random access (training and evaluation windows). */
typedef struct gk_shard_map {
    char *name;
    void *base;             /* the mapping (NULL for an empty file) */
    size_t size;
    const unsigned char *tokens;
    int width;              /* bytes per token: 2 or 4 */
    int raw;                /* header-less nanoGPT uint16 file */
    int64_t count;
    uint32_t vocab_size, fingerprint;
} gk_shard_map;

/* Maps path and validates the header against the file size (a pipe cannot be mapped). A
 * header-less file is raw uint16 tokens (m->raw), unless it reads as text: an error. */
int gk_shard_map_open(gk_shard_map *m, const char *path, gk_err *e);
/* Copies tokens [start, start + n) into out as uint32. The range must lie inside the shard;
 * a token outside [0, vocab_limit) is an error naming the shard and position (0 = no check). */
int gk_shard_map_get(const gk_shard_map *m, int64_t start, size_t n, uint32_t vocab_limit,
                     uint32_t *out, gk_err *e);
void gk_shard_map_close(gk_shard_map *m);

typedef struct gk_shard_writer {
    gk_outfile out;
    int version;
    int64_t count;
    uint32_t vocab_size, fingerprint;
    unsigned char *buf; /* encoding buffer */
    size_t buf_cap;
} gk_shard_writer;

/* Opens path ("-"/NULL: stdout) and writes the header. uint16 tokens when vocab_size <= 65536
 * (and known), else uint32. */
int gk_shard_writer_open(gk_shard_writer *w, const char *path, uint32_t vocab_size,
                         uint32_t fingerprint, gk_err *e);
int gk_shard_writer_write(gk_shard_writer *w, const uint32_t *ids, size_t n, gk_err *e);
/* Patches the count into the header when the output is seekable, then commits the file. */
int gk_shard_writer_finish(gk_shard_writer *w, gk_err *e);
/* Removes the half-written output (see gk_outfile_abort). NULL-safe. */
void gk_shard_writer_abort(gk_shard_writer *w);

/* Numbered shards PREFIX_000000.bin, PREFIX_000001.bin, ... of at most max_tokens each. Shards
 * are committed as they fill; abort removes only the one being written. */
typedef struct gk_shard_series {
    char *prefix;
    int64_t max_tokens;
    uint32_t vocab_size, fingerprint;
    int index, open;    /* next shard number; whether w is open */
    gk_shard_writer w;
} gk_shard_series;

int gk_shard_series_init(gk_shard_series *s, const char *prefix, int64_t max_tokens,
                         uint32_t vocab_size, uint32_t fingerprint, gk_err *e);
int gk_shard_series_write(gk_shard_series *s, const uint32_t *ids, size_t n, gk_err *e);
int gk_shard_series_finish(gk_shard_series *s, gk_err *e);
void gk_shard_series_abort(gk_shard_series *s);

#endif
