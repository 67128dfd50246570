/* decode.h: gpt-tokenize -d: shards back to text on stdout.
 * The inputs are read as one token stream; a leading <|endoftext|> (the one every encoded
 * document starts with) is dropped, every later one prints as the text "<|endoftext|>", so
 * decoding the shard of a single text gives the text back byte for byte.
 * Owns nothing past the call. Not thread-safe. */
#ifndef TK_DECODE_H
#define TK_DECODE_H

#include "common/err.h"
#include "common/s3/s3.h"

/* Decodes inputs (paths, "-" = stdin) with the vocabulary vocab_opt (-V; NULL: the default
 * lookup). Every input is opened and checked before anything is written: its header (a damaged
 * one, text or garbage is "not a token shard"), its vocabulary (fingerprint and size against
 * the loaded one; without -V, a shard of another vocabulary says that -V is needed). Sets
 * *raw_inputs to the count of header-less (nanoGPT) inputs, for the caller to mention.
 * An input s3://BUCKET/KEY is read in place with s3 (common/io/shard_s3.h: its header by a ranged
 * GET, then its tokens by ranges), as gpt-train reads its shards. */
int tk_decode(const char *vocab_opt, gk_s3 *s3, char **inputs, int ninputs, int *raw_inputs,
              gk_err *e);

#endif
