/* encode.h: the encoding pipeline of gpt-tokenize: document text in, tokens to a sink.
 * Owns: the pending text (the end of one document and the small documents after it, batched
 * into blocks so that many small documents are encoded in parallel), one BPE worker state per
 * thread and the per-chunk outputs. Text is cut only at document ends and where
 * gk_bpe_split_point allows, so the tokens are the same for every thread count; chunks are
 * encoded by a pthread pool while the caller reads the next block, and written in order by the
 * caller (the sink's document marks with them).
 * Lifetime: create .. free. Call from one thread (it starts its own). */
#ifndef TK_ENCODE_H
#define TK_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/vocab.h"
#include "output.h"

typedef struct tk_encoder tk_encoder;

typedef struct tk_stats {
    int64_t docs, bytes, tokens, replaced; /* docs and bytes: as written (the text whose tokens
                                            * the sink took, not what was read past a stop);
                                            * replaced: invalid UTF-8 sequences -> U+FFFD */
} tk_stats;

int tk_encoder_create(tk_encoder **out, const gk_vocab *v, int allow_special, int threads,
                      tk_sink *sink, gk_err *e);
/* Starts a document: <|endoftext|> first for BPE vocabularies. */
int tk_encoder_begin(tk_encoder *enc, gk_err *e);
int tk_encoder_feed(tk_encoder *enc, const char *text, size_t n, gk_err *e);
/* Ends the document (its text may still be pending, with the next documents'). */
int tk_encoder_end(tk_encoder *enc, gk_err *e);
/* After the last document: encodes and writes everything pending. */
int tk_encoder_finish(tk_encoder *enc, gk_err *e);
const tk_stats *tk_encoder_stats(const tk_encoder *enc);
void tk_encoder_free(tk_encoder *enc);

#endif
