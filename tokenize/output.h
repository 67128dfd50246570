/* output.h: where gpt-tokenize's tokens go: one shard (a file or stdout), numbered shards, and
 * optionally a validation shard holding either the last fraction of documents (of tokens when
 * there is only one document), as nanoGPT's prepare.py splits, or the first documents (val_docs)
 * or first tokens (val_tokens), as llm.c's fineweb.py makes its first shard the validation split.
 * With --val-fraction every token is held in a temporary file (spill.h) until the end, since the
 * split point is known only then; the first-documents splits hold nothing. max_tokens caps the
 * tokens written (the rest dropped; tk_sink_full says when the cap is reached).
 * An output may be s3://BUCKET/KEY (or PREFIX): written locally, then uploaded (stage.h).
 * Numbered shards of -o PREFIX are PREFIX_000000.bin, ..., a .bin ending PREFIX dropped first
 * (-o train.bin: train_000000.bin); onto /dev/null they are discarded (no file is made), onto
 * another device or a FIFO refused (GK_EUSAGE): no file is ever made beside a device.
 * Owns: the open shard writers and those files. Lifetime: open .. finish/abort. Not thread-safe. */
#ifndef TK_OUTPUT_H
#define TK_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/s3/s3.h"

typedef struct tk_sink_opts {
    const char *output;     /* file, "-"/NULL for stdout, or PREFIX when shard_tokens > 0 */
    int64_t shard_tokens;   /* > 0: numbered shards of this many tokens */
    double val_fraction;    /* > 0: the last fraction of documents to val_output */
    int64_t val_docs;       /* > 0: the first val_docs documents to val_output */
    int64_t val_tokens;     /* > 0: the first val_tokens tokens to val_output */
    const char *val_output; /* the validation shard's file (with one of the three) */
    int64_t max_tokens;     /* > 0: write no more tokens than this */
    uint32_t vocab_size, fingerprint;
    gk_s3 *s3;              /* for s3:// outputs (stage.h), NULL: refused */
    const char *tmpdir;     /* where s3:// outputs are staged */
} tk_sink_opts;

typedef struct tk_sink tk_sink;

/* What an output path names: a file (or nothing yet, stdout, s3://), /dev/null (or another
 * name of it), or another device or a FIFO. */
enum { TK_OUT_FILE, TK_OUT_NULL, TK_OUT_DEVICE };
int tk_output_special(const char *path);
/* The length of out without a trailing ".bin" (kept when nothing would be left of the name). */
size_t tk_output_prefix_len(const char *out);

int tk_sink_open(tk_sink **out, const tk_sink_opts *o, gk_err *e);
/* Marks the start of a document (for the validation split). */
int tk_sink_doc(tk_sink *s, gk_err *e);
int tk_sink_write(tk_sink *s, const uint32_t *ids, size_t n, gk_err *e);
/* Writes what was held back, commits every file and frees the sink. */
int tk_sink_finish(tk_sink *s, gk_err *e);
/* Removes every half-written output and frees the sink. NULL-safe. */
void tk_sink_abort(tk_sink *s);
/* Tokens written so far (train + validation). */
int64_t tk_sink_tokens(const tk_sink *s);
/* Whether max_tokens tokens have been written. */
int tk_sink_full(const tk_sink *s);
/* Documents begun, and of those, the ones whose first token went to validation. */
int64_t tk_sink_docs(const tk_sink *s);
int64_t tk_sink_val_docs(const tk_sink *s);
/* With val_docs or val_tokens: the tokens sent to validation. */
int64_t tk_sink_val_tokens(const tk_sink *s);

#endif
