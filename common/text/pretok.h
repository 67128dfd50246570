/* pretok.h: byte-level BPE pre-tokenization: cutting text into the pieces BPE merges within.
 * Owns: gk_pretok, one compiled PCRE2 regex (JIT) with its match data and JIT stack; created by
 * gk_pretok_create, freed by gk_pretok_free. Use one per thread (match data is scratch).
 *
 * The pieces are the matches of one of two regexes, as tiktoken (Rust regex) finds them:
 * - GK_PATTERN_GPT2, GPT-2's:
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * - GK_PATTERN_GPT4, GPT-4's (tiktoken's cl100k_base):
 *     '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|
 *     \s*[\r\n]|\s+(?!\S)|\s+
 * \s is the Unicode White_Space property (U+0009-000D, U+0020, U+0085, U+00A0, U+1680,
 * U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000). PCRE2's own \s differs (10.42 also
 * matches U+180E), so the compiled patterns spell that class out. */
#ifndef GK_PRETOK_H
#define GK_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct gk_pretok gk_pretok;

enum { GK_PATTERN_GPT2 = 0, GK_PATTERN_GPT4 = 1, GK_PATTERNS = 2 };

/* The pattern's name ("gpt2", "gpt4"), and the pattern of a name (-1 for none). */
const char *gk_pattern_name(int pattern);
int gk_pattern_of(const char *name);

/* The pattern as tiktoken and HuggingFace tokenizers' Split spell it (with \s), for
 * tokenizer.json. */
const char *gk_pattern_regex(int pattern);

/* Whether code point c is White_Space (the \s above). */
int gk_pretok_space(uint32_t c);

/* A matcher of pattern (GK_PATTERN_*). */
int gk_pretok_create(gk_pretok **out, int pattern, gk_err *e);
void gk_pretok_free(gk_pretok *p); /* accepts NULL */

/* End of the piece that starts at s[i] (i < len; s[0..len) valid UTF-8, i on a character
 * boundary), found with the PCRE2 regex: the reference. Returns 0 on a matcher failure. */
size_t gk_pretok_regex(gk_pretok *p, const char *s, size_t len, size_t i, gk_err *e);

/* The same piece end, found by a hand-written scanner where the piece and the character after
 * it are ASCII (GPT-2's pattern), by the regex otherwise. Returns 0 on a matcher failure. */
size_t gk_pretok_next(gk_pretok *p, const char *s, size_t len, size_t i, gk_err *e);

#endif
