/* run.h: the reading side of gpt-tokenize: every input's documents, cut further by --doc-sep,
 * handed to a document consumer (the encoder, or the collector of collect.h).
 * Owns: nothing past a call.
 * Not thread-safe. */
#ifndef TK_RUN_H
#define TK_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "input.h"

typedef struct tk_consumer {
    int (*begin)(void *ctx, gk_err *e);
    int (*feed)(void *ctx, const char *text, size_t n, gk_err *e);
    int (*end)(void *ctx, gk_err *e);
    void *ctx;
} tk_consumer;

typedef struct tk_read_opts {
    char **inputs;       /* paths, "-" for stdin */
    int ninputs;
    const char *doc_sep; /* NULL: one document per input or archive member */
} tk_read_opts;

typedef struct tk_read_stats {
    int64_t skipped_binary;
    int64_t skipped_special[TK_SKIP_KINDS]; /* members that are not regular files, by kind */
    int64_t input_bytes; /* bytes read from the inputs as stored (compressed where they are) */
} tk_read_stats;

/* Reads every input and passes its documents to c. */
int tk_read_all(const tk_read_opts *o, const tk_consumer *c, tk_read_stats *st, gk_err *e);

#endif
