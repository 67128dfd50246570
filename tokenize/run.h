/* run.h: the reading side of gpt-tokenize: every input's documents (a text file or archive
 * member, cut further by --doc-sep; a JSON Lines line or an item of a JSON array, jsonl.h; a
 * Parquet row, common/io/parquet.h, also from a compressed file or a stream, copied into an
 * unlinked temporary file first, spill.h), handed to a document consumer
 * (the encoder, or the collector of collect.h), with a progress line across all inputs.
 * Owns: nothing past a call.
 * Not thread-safe. */
#ifndef TK_RUN_H
#define TK_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "input.h"

/* A consumer's call may return TK_STOP to end the reading early (--max-docs, --max-tokens):
 * tk_read_all then returns 0 with stats->stopped set. */
#define TK_STOP 1

typedef struct tk_consumer {
    int (*begin)(void *ctx, gk_err *e);
    int (*feed)(void *ctx, const char *text, size_t n, gk_err *e);
    int (*end)(void *ctx, gk_err *e);
    void *ctx;
} tk_consumer;

typedef struct tk_read_opts {
    char **inputs;       /* paths, "-" for stdin */
    int ninputs;
    const char *doc_sep; /* NULL: one document per input or archive member (text only) */
    const char *column;  /* Parquet: the column (NULL: "text", else the only string column) */
    const char *field;   /* JSON Lines: the field (NULL: "text"); given: detect by content alone */
    size_t max_line;     /* JSON Lines: longest line in bytes (0: the default) */
    int skip_bad;        /* JSON Lines: skip and count bad lines rather than fail */
    const int64_t *tokens; /* NULL, or the tokens written so far (for the progress line) */
    const long long *sizes; /* NULL, or each input's bytes (-1 unknown), for the progress line */
    /* NULL, or called before input i is read: its local path into path[0..cap) (a download) */
    int (*fetch)(void *ctx, int i, char *path, size_t cap, gk_err *e);
    /* NULL, or called after input i was read with result rc: rc, or a failure of its transfer */
    int (*done)(void *ctx, int i, int rc, gk_err *e);
    void *fetch_ctx;
    const char *tmpdir;  /* where a Parquet stream is copied to be read (spill.h) */
} tk_read_opts;

typedef struct tk_read_stats {
    int64_t skipped_binary;
    int64_t skipped_special[TK_SKIP_KINDS]; /* members that are not regular files, by kind */
    int64_t input_bytes; /* bytes read from the inputs as stored (compressed where they are) */
    int64_t docs;        /* documents handed on */
    int64_t bad_lines;   /* JSON Lines skipped with skip_bad */
    int64_t bad_items;   /* items of JSON arrays skipped with skip_bad */
    int64_t null_rows;   /* Parquet rows without a value, skipped */
    int parquet_files;
    char first_bad[1024]; /* the first one's message */
    int stopped;         /* a consumer returned TK_STOP */
} tk_read_stats;

/* Reads every input and passes its documents to c. */
int tk_read_all(const tk_read_opts *o, const tk_consumer *c, tk_read_stats *st, gk_err *e);

#endif
