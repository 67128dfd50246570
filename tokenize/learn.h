/* learn.h: gpt-tokenize --learn: a byte-level BPE vocabulary learned from the inputs (as
 * HuggingFace tokenizers' BpeTrainer learns one: common/text/bpe_learn.h), written as a
 * vocabulary directory every tool reads with -V: encoder.json and vocab.bpe as GPT-2 ships them,
 * and tokenizer.json as HuggingFace's tokenizers library writes it.
 * Owns: nothing past a call. Not thread-safe. */
#ifndef TK_LEARN_H
#define TK_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "run.h"

typedef struct tk_learn_opts {
    int64_t vocab_size;    /* N: the 256 bytes and the special tokens included */
    int pattern;           /* the pre-tokenizer's, GK_PATTERN_* (common/text/pretok.h) */
    const char *out_dir;   /* --vocab-out DIR: made whole or not at all */
    size_t memory;         /* the pre-token counts' bound in bytes */
    int threads;           /* counting threads (-j) */
    int64_t max_docs;      /* 0: all */
    volatile int *stop;    /* set by a signal: the learning stops, nothing is written */
    const char *const *specials; /* more special tokens, after <|endoftext|> (printable ASCII) */
    int nspecials;
} tk_learn_opts;

#define TK_LEARN_SPECIALS 64 /* --special's most */

/* Reads the documents ro names, counts their pre-tokens (o->pattern's), learns the merges
 * and writes o->out_dir (atomically: a temporary directory beside it, renamed; an existing empty
 * directory is replaced, any other existing path refused). The summary and warnings on the
 * log. */
int tk_learn(const tk_learn_opts *o, const tk_read_opts *ro, gk_err *e);

#endif
