/* encode_int.h: the blocks and chunks of gpt-tokenize's encoder (encode.c), and where a block
 * is cut into chunks (encode_plan.c). Not part of the encoder's API. Owns nothing; the caller
 * (the encoder's calling thread) plans a block before any worker sees its chunks. */
#ifndef TK_ENCODE_INT_H
#define TK_ENCODE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CHUNK_BYTES (256 << 10) /* target size of one parallel work item */

/* One work item: a byte range of a block, encoded by whichever thread claims it. The documents
 * that start in it (small ones: many to a chunk) are encoded apart, each after <|endoftext|>. */
typedef struct chunk {
    const char *text;    /* the block's text; the range is [begin, end) */
    size_t begin, end;
    const size_t *starts; /* the block's document starts that fall in this chunk */
    size_t nstarts;
    size_t *dtok, dcap;  /* after encoding: where each of those documents' tokens begin in ids */
    uint32_t *ids;
    size_t n, cap;
    char *clean;         /* the range with invalid UTF-8 replaced */
    size_t clean_cap;
    size_t replaced;
    int done;            /* under the lock: encoded, ready to write */
    int rc;
    gk_err err;
} chunk;

/* Text read so far, cut into chunks once it is submitted; reused after all chunks are written.
 * It holds the end of one document and any number of whole ones after it: starts[] are where
 * documents begin (offsets into text, ascending; text before the first continues a document
 * begun in an earlier block). */
typedef struct block {
    char *text;
    size_t len, cap;
    size_t *starts, nstarts, scap;
    chunk *chunks;       /* max_chunks */
    size_t nchunks;
} block;

/* Cuts b->text[0, b->len) into at most max_chunks chunks (b->chunks) at document ends and safe
 * points (BPE's of pattern bpe >= 0 (GK_PATTERN_*), else character boundaries); returns how
 * many, and in *consumed where the last ends. Starts at or past that stay for the next block.
 * final: nothing follows
 * (everything is planned); else the last document may go on, and a chunk ends only where what
 * follows cannot change its tokens (0 chunks: there is no such cut). */
size_t tk_plan_chunks(block *b, int bpe, size_t max_chunks, int final, size_t *consumed);

#endif
