/* input.h: gpt-evalppl's inputs as token streams. An input (file, or stdin read whole) is a
 * token shard when it starts with the shard magic (header checked against its size, tokens
 * against the model's vocabulary, fingerprint against the vocabulary's), header-less uint16
 * tokens with --raw (nanoGPT's .bin), and text when it reads as text (gk_shard_parse; binary
 * data or a damaged shard header is an error): sanitized UTF-8 encoded with the
 * vocabulary as gpt-tokenize does (BPE: one document, so <|endoftext|> first; ordinary encoding).
 * Owns: ep_stream's name and ids until ep_stream_free. One thread. */
#ifndef EP_INPUT_H
#define EP_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/s3/s3.h"
#include "common/text/vocab.h"

typedef struct ep_stream {
    char *name;      /* path or "stdin" */
    uint32_t *ids;
    size_t n;
    int64_t bytes;   /* UTF-8 bytes of a text input; -1 for tokens (shard, raw) */
} ep_stream;

/* Loads path ("-" = stdin). v may be NULL when no vocabulary was found: text is then an error.
 * vocab_limit: the model's vocab_size (every token must be below it). */
int ep_load(ep_stream *s, const char *path, const gk_vocab *v, int raw, uint32_t vocab_limit,
            gk_err *e);
void ep_stream_free(ep_stream *s);
/* The client for inputs s3://BUCKET/KEY (borrowed; NULL: refused): a shard's header checked by a
 * ranged GET (common/io/shard_s3.h, as gpt-train checks its shards), then the object read whole,
 * as a file is. */
void ep_input_s3(gk_s3 *s3);
/* Before anything is scored: the header of input path (a regular file; stdin, pipes and raw
 * inputs pass) when it is a shard, its fingerprint and vocab size checked as ep_load does, so
 * that a later input's mismatch stops the run before the first is scored. */
int ep_precheck(const char *path, const gk_vocab *v, int raw, uint32_t vocab_limit, gk_err *e);

#endif
