/* pretok.c: pre-tokenization: the PCRE2 regexes and GPT-2's ASCII fast path (see pretok.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "common/text/pretok.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#define WS     \
    "\\t-\\r " \
    "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char *const patterns[GK_PATTERNS] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
    "|[" WS "]+(?![^" WS "])|[" WS "]+",
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}{1,3}"
    "| ?[^" WS "\\p{L}\\p{N}]++[\\r\\n]*|[" WS "]*[\\r\\n]|[" WS "]+(?![^" WS "])|[" WS "]+",
};
static const char *const names[GK_PATTERNS] = {"gpt2", "gpt4"};
static const char *const spelled[GK_PATTERNS] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
};

const char *gk_pattern_regex(int pattern)
{
    return pattern >= 0 && pattern < GK_PATTERNS ? spelled[pattern] : "";
}

const char *gk_pattern_name(int pattern)
{
    return pattern >= 0 && pattern < GK_PATTERNS ? names[pattern] : "?";
}

int gk_pattern_of(const char *name)
{
    for (int i = 0; i < GK_PATTERNS; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

int gk_pretok_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

struct gk_pretok {
    pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *stack;
    int jit, pattern;
};

int gk_pretok_create(gk_pretok **out, int pattern, gk_err *e)
{
    int ec;
    PCRE2_SIZE eo;
    *out = NULL;
    if (pattern < 0 || pattern >= GK_PATTERNS)
        return gk_errf(e, GK_EUSAGE, "pre-tokenizer: no pattern %d", pattern);
    gk_pretok *p = calloc(1, sizeof *p);
    if (!p) return gk_errf(e, GK_ENOMEM, "pre-tokenizer: out of memory");
    p->pattern = pattern;
    p->code = pcre2_compile((PCRE2_SPTR)patterns[pattern], PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!p->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        gk_pretok_free(p);
        return gk_errf(e, GK_EFORMAT, "pre-tokenizer regex at %zu: %s", (size_t)eo, (char *)msg);
    }
    p->jit = pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE) == 0;
    p->md = pcre2_match_data_create(1, NULL);
    p->mctx = pcre2_match_context_create(NULL);
    if (p->jit) p->stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
    if (!p->md || !p->mctx || (p->jit && !p->stack)) {
        gk_pretok_free(p);
        return gk_errf(e, GK_ENOMEM, "pre-tokenizer: out of memory");
    }
    if (p->jit) pcre2_jit_stack_assign(p->mctx, NULL, p->stack);
    *out = p;
    return 0;
}

void gk_pretok_free(gk_pretok *p)
{
    if (!p) return;
    pcre2_jit_stack_free(p->stack);
    pcre2_match_context_free(p->mctx);
    pcre2_match_data_free(p->md);
    pcre2_code_free(p->code);
    free(p);
}

size_t gk_pretok_regex(gk_pretok *p, const char *s, size_t len, size_t i, gk_err *e)
{
    int rc =
        p->jit ? pcre2_jit_match(p->code, (PCRE2_SPTR)s, len, i, PCRE2_NO_UTF_CHECK, p->md, p->mctx)
               : pcre2_match(p->code, (PCRE2_SPTR)s, len, i, PCRE2_NO_UTF_CHECK, p->md, p->mctx);
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
    if (rc < 0 || ov[0] != i || ov[1] <= i) {
        PCRE2_UCHAR msg[256] = "no match at the position";
        if (rc < 0) pcre2_get_error_message(rc, msg, sizeof msg);
        gk_errf(e, GK_EFORMAT, "pre-tokenizer: at byte %zu: %s", i, (char *)msg);
        return 0;
    }
    return ov[1];
}

/* ---------------------------------------------------------------- ASCII fast path */

enum { X = 0, L = 1, N = 2, S = 3, O = 4 }; /* X: non-ASCII byte */

/* Class of each byte: letters, digits, White_Space (9-13, 32), other ASCII, non-ASCII. */
static const unsigned char cls[256] = {
    O, O, O, O, O, O, O, O, O, S, S, S, S, S, O, O, /* 0x00 */
    O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, /* 0x10: FS..US are not White_Space */
    S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, /* 0x20 */
    N, N, N, N, N, N, N, N, N, N, O, O, O, O, O, O, /* 0x30 */
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, /* 0x40 */
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O, /* 0x50 */
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, /* 0x60 */
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O, /* 0x70 */
};

/* End of the run of class c starting at i, or 0 if the byte ending it is non-ASCII (that
 * character might continue the run: let the regex decide). */
static inline size_t run(const unsigned char *u, size_t len, size_t i, unsigned char c)
{
    while (i < len && cls[u[i]] == c) i++;
    return i < len && cls[u[i]] == X ? 0 : i;
}

/* Piece end by the rules of the regex for ASCII, or 0 to fall back to the regex. */
static size_t ascii_piece(const unsigned char *u, size_t len, size_t i)
{
    unsigned char c = cls[u[i]], c2 = i + 1 < len ? cls[u[i + 1]] : S;
    if (c == L || c == N) return run(u, len, i + 1, c);
    if (c == O) {
        if (u[i] == '\'' && i + 1 < len) { /* 's 't 're 've 'm 'll 'd come first */
            unsigned char a = u[i + 1], b = i + 2 < len ? u[i + 2] : 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return i + 3;
        }
        return run(u, len, i + 1, O);
    }
    if (c == X) return 0;
    if (u[i] == ' ' && c2 != S) /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" */
        return c2 == X ? 0 : run(u, len, i + 2, c2);
    /* Whitespace run [i, j): "\s+(?!\S)" takes it all at the end of the text, else backs off
     * one character so the last one can join the next piece; a lone character is "\s+". */
    size_t j = run(u, len, i + 1, S);
    if (j == 0) return 0;
    return j == len || j - i == 1 ? j : j - 1;
}

size_t gk_pretok_next(gk_pretok *p, const char *s, size_t len, size_t i, gk_err *e)
{
    size_t j = p->pattern == GK_PATTERN_GPT2 ? ascii_piece((const unsigned char *)s, len, i) : 0;
    return j ? j : gk_pretok_regex(p, s, len, i, e);
}
