/* bpe.h: GPT-2 byte-level BPE encoding, token for token equal to tiktoken's "gpt2" encoding.
 * Owns: gk_bpe, one thread's encoder state (pre-tokenizer regex and match data, a bounded cache
 * of frequent pieces, merge scratch) over a shared read-only gk_vocab that must outlive it.
 * Thread safety: one gk_bpe per thread; any number of them may share one gk_vocab. */
#ifndef GK_BPE_H
#define GK_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/vocab.h"

typedef struct gk_bpe gk_bpe;

/* Creates an encoder over v (a GK_VOCAB_BPE vocab, else GK_EUSAGE). About 1 MB of cache. */
int gk_bpe_create(gk_bpe **out, const gk_vocab *v, gk_err *e);
void gk_bpe_free(gk_bpe *b); /* accepts NULL */

/* Encodes text[0..len) (valid UTF-8: sanitize first) and appends the ids to the growable array
 * *ids (length *n, capacity *cap; realloc'd as needed). allow_special = 0 is tiktoken's
 * encode_ordinary (a literal "<|endoftext|>" is plain text); 1 turns each literal
 * "<|endoftext|>" into the eot id. On error (GK_ENOMEM, or GK_EFORMAT from the regex engine)
 * *n holds the ids of the pieces encoded so far. */
int gk_bpe_encode(gk_bpe *b, const char *text, size_t len, int allow_special, uint32_t **ids,
                  size_t *n, size_t *cap, gk_err *e);

/* First position p with from <= p < len where text can be cut so that
 * encode(text[0:p]) ++ encode(text[p:]) == encode(text), or len if there is none. The rule:
 * text[p-1] == '\n' and text[p-2], text[p] are printable non-space ASCII (0x21..0x7E). Why it
 * is safe: the '\n' is then a whitespace run of one character between two non-whitespace
 * characters, so in the whole text it is a piece of its own ("\s+(?!\S)" fails on one character
 * followed by \S; "\s+" takes it), no earlier piece can reach it (letter, digit, other and
 * contraction pieces stop at whitespace; " ?" only takes a space) and the piece after it starts
 * at p. In text[0:p] the final "\n" is the same piece ("\s+(?!\S)" at the end of the text), and
 * in text[p:] matching starts at p exactly as before (the regex has no look-behind). The ASCII
 * requirement keeps multi-byte White_Space (U+0085, U+00A0...) out of both neighbours, and a
 * literal "<|endoftext|>" cannot straddle a newline. */
size_t gk_bpe_split_point(const char *text, size_t len, size_t from);

/* For tests: pieces of at least this many bytes are merged with the heap (O(n log n)) instead
 * of the quadratic scan (default and maximum 64; at least 2). Output does not depend on it. */
void gk_bpe_set_heap_min(gk_bpe *b, size_t bytes);

#endif
