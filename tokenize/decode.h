/* decode.h: gpt-tokenize -d: shards back to text on stdout.
 * The inputs are read as one token stream; a leading <|endoftext|> (the one every encoded
 * document starts with) is dropped, every later one prints as the text "<|endoftext|>", so
 * decoding the shard of a single text gives the text back byte for byte.
 * Owns nothing past the call. Not thread-safe. */
#ifndef TK_DECODE_H
#define TK_DECODE_H

#include "common/err.h"
#include "common/text/vocab.h"

/* Decodes inputs (paths, "-" = stdin) with vocabulary v. Refuses a shard whose header names a
 * different vocabulary (fingerprint or size). Sets *raw_inputs to the count of header-less
 * (nanoGPT) inputs, for the caller to mention. */
int tk_decode(const gk_vocab *v, char **inputs, int ninputs, int *raw_inputs, gk_err *e);

#endif
