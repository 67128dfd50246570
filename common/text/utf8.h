/* utf8.h: UTF-8 decoding and sanitizing (Python's errors="replace" semantics).
 * Owns: nothing; gk_utf8_sanitize grows a caller-owned buffer (caller frees it with free()).
 * Thread safety: all functions are pure or touch only their arguments; safe from any thread. */
#ifndef GK_UTF8_H
#define GK_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define GK_UTF8_INVALID 0xFFFFFFFFu

/* Decodes the code point at s[0..n) (n >= 1). Returns the bytes consumed (1..4) and sets *cp.
 * On an invalid sequence sets *cp = GK_UTF8_INVALID and returns the length of its maximal
 * subpart (a valid prefix of some sequence, at least 1 byte), which is what one U+FFFD replaces:
 * surrogates D800-DFFF, overlongs and values above U+10FFFF are invalid. */
size_t gk_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* Writes the UTF-8 form of cp (<= 0x10FFFF, not a surrogate) to out[0..4); returns its length
 * (0 if cp is not encodable). */
size_t gk_utf8_put(uint32_t cp, unsigned char out[4]);

/* Length of the longest valid UTF-8 prefix of s[0..n). Equals n when s is valid. */
size_t gk_utf8_valid_prefix(const char *s, size_t n);

/* Where an incomplete UTF-8 sequence begins at the end of s[0..n) (n if none): the text before
 * it decodes the same whatever bytes follow (a stream cut there splits no character). */
size_t gk_utf8_complete_len(const char *s, size_t n);

/* Copies in[0..n) into *buf (grown with realloc, capacity *cap; *buf may start NULL), replacing
 * each invalid sequence (maximal subpart) with U+FFFD as bytes.decode('utf-8', 'replace') does;
 * *out_len is the bytes written. Returns the number of U+FFFD inserted, or (size_t)-1 when an
 * allocation failed (*buf then still owns the old buffer). */
size_t gk_utf8_sanitize(const char *in, size_t n, char **buf, size_t *cap, size_t *out_len);

#endif
