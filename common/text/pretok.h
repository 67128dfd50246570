/* pretok.h: GPT-2 pre-tokenization: cutting text into the pieces BPE merges within.
 * Owns: gk_pretok, one compiled PCRE2 regex (JIT) with its match data and JIT stack; created by
 * gk_pretok_create, freed by gk_pretok_free. Use one per thread (match data is scratch).
 *
 * The pieces are the matches of GPT-2's regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * as tiktoken (Rust regex) finds them: \s is the Unicode White_Space property (U+0009-000D,
 * U+0020, U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000). PCRE2's
 * own \s differs (10.42 also matches U+180E), so the compiled pattern spells that class out. */
#ifndef GK_PRETOK_H
#define GK_PRETOK_H

#include <stddef.h>

#include "common/err.h"

typedef struct gk_pretok gk_pretok;

int gk_pretok_create(gk_pretok **out, gk_err *e);
void gk_pretok_free(gk_pretok *p); /* accepts NULL */

/* End of the piece that starts at s[i] (i < len; s[0..len) valid UTF-8, i on a character
 * boundary), found with the PCRE2 regex: the reference. Returns 0 on a matcher failure. */
size_t gk_pretok_regex(gk_pretok *p, const char *s, size_t len, size_t i, gk_err *e);

/* The same piece end, found by a hand-written scanner where the piece and the character after
 * it are ASCII, by the regex otherwise. Returns 0 on a matcher failure. */
size_t gk_pretok_next(gk_pretok *p, const char *s, size_t len, size_t i, gk_err *e);

#endif
