/* bpe.h: byte-level BPE encoding, token for token equal to tiktoken's "gpt2" encoding (and to
 * tiktoken's and HuggingFace tokenizers' encoders with a learned vocabulary and its pattern).
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

/* Creates an encoder over v (a GK_VOCAB_BPE vocab, else GK_EUSAGE), pre-tokenizing with v's
 * pattern (gk_vocab_pattern). About 1 MB of cache. */
int gk_bpe_create(gk_bpe **out, const gk_vocab *v, gk_err *e);
void gk_bpe_free(gk_bpe *b); /* accepts NULL */

/* Pieces longer than this many bytes are merged window by window (bpe.c): the memory and time
 * one piece takes are bounded whatever its length. */
#define GK_BPE_LONG_WIN (8u << 10)
/* gk_bpe_encode_part leaves at most this many bytes of its text unencoded. */
#define GK_BPE_PART_KEEP (GK_BPE_LONG_WIN + 64)

/* Encodes text[0..len) (valid UTF-8: sanitize first) and appends the ids to the growable array
 * *ids (length *n, capacity *cap; realloc'd as needed). allow_special = 0 is tiktoken's
 * encode_ordinary (a literal "<|endoftext|>" is plain text); 1 turns each literal
 * "<|endoftext|>" into the eot id. On error (GK_ENOMEM, or GK_EFORMAT from the regex engine)
 * *n holds the ids of the pieces encoded so far. Memory: about 60 bytes per byte of the longest
 * piece, at most GK_BPE_LONG_WIN of it, besides *ids. */
int gk_bpe_encode(gk_bpe *b, const char *text, size_t len, int allow_special, uint32_t **ids,
                  size_t *n, size_t *cap, gk_err *e);

/* The same for a text that arrives in parts. With final = 0, text[0..len) is the start of a
 * longer text (len on a character boundary): encodes the start text[0..*used) that what follows
 * cannot change, so that the ids of text[0..*used) followed by those of the rest (with more text,
 * by another call) are those of the whole; leaves len - *used <= GK_BPE_PART_KEEP, except with
 * GPT-4's pattern where the text ends in White_Space with a newline followed by more than that:
 * that run is held until it ends ("\s*[\r\n]" cuts it after its last newline). final = 1 is
 * gk_bpe_encode (*used = len). */
int gk_bpe_encode_part(gk_bpe *b, const char *text, size_t len, int final, int allow_special,
                       uint32_t **ids, size_t *n, size_t *cap, size_t *used, gk_err *e);

/* First position p with from <= p < len where text can be cut so that
 * encode(text[0:p]) ++ encode(text[p:]) == encode(text) with the pattern (GK_PATTERN_*), or len
 * if there is none. p is safe when it is a piece boundary of the whole text and text[p-1] is not
 * whitespace: a piece ending at p is then matched the same in text[0:p] (the regex looks at most
 * one character past a piece, and up to three from its start for a contraction, none of which
 * can start a match that fails in the whole text but succeeds in the shorter one; only the
 * whitespace alternatives could, on a whitespace run reaching p), and matching text[p:] from p
 * is the same as in the whole (no look-behind). The rules, on ASCII bytes only (so that invalid
 * UTF-8 is replaced the same on either side):
 * - text[p-1] and text[p] are of different classes among letter, digit, other (not White_Space)
 *   and White_Space, text[p-1] is not White_Space and not an apostrophe (which may start a
 *   contraction), and p is not inside a literal "<|endoftext|>"; with GPT-4's pattern not an
 *   other before a letter (the letters' one-character prefix) nor before '\r' or '\n' (which
 *   join the others before them);
 * - text[p-1] == '\n' and text[p-2], text[p] are printable non-space ASCII: the '\n' is a piece
 *   of its own (GPT-2: "\s+" on one character followed by \S, and "\s+(?!\S)" at the end of
 *   text[0:p]; GPT-4: "\s*[\r\n]"), or the end of "[^\s\p{L}\p{N}]++[\r\n]*" after an other. */
size_t gk_bpe_split_point(const char *text, size_t len, size_t from, int pattern);

/* For tests: pieces of at least this many bytes are merged with the heap (O(n log n)) instead
 * of the quadratic scan (default and maximum 64; at least 2). Output does not depend on it. */
void gk_bpe_set_heap_min(gk_bpe *b, size_t bytes);
/* For tests: the window of long pieces, 1024 to GK_BPE_LONG_WIN (the default) bytes. */
void gk_bpe_set_window(gk_bpe *b, size_t bytes);

#endif
