/* utf8.c: UTF-8 decoding and errors="replace" sanitizing (see utf8.h). */
#include "common/text/utf8.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

/* Allowed range of the second byte for a lead byte (Unicode Table 3-7); later bytes 80..BF. */
static int second_range(unsigned char lead, unsigned char *lo, unsigned char *hi, size_t *len)
{
    *lo = 0x80, *hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) *len = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        *len = 3;
        if (lead == 0xE0) *lo = 0xA0;
        if (lead == 0xED) *hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        *len = 4;
        if (lead == 0xF0) *lo = 0x90;
        if (lead == 0xF4) *hi = 0x8F;
    } else
        return 0;
    return 1;
}

size_t gk_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char lo, hi;
    size_t len;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    *cp = GK_UTF8_INVALID;
    if (!second_range(s[0], &lo, &hi, &len)) return 1;
    if (n < 2 || s[1] < lo || s[1] > hi) return 1;
    for (size_t k = 2; k < len; k++)
        if (k >= n || (s[k] & 0xC0) != 0x80) return k;
    uint32_t c = s[0] & (0x7F >> len);
    for (size_t k = 1; k < len; k++) c = c << 6 | (s[k] & 0x3F);
    *cp = c;
    return len;
}

size_t gk_utf8_put(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    out[0] = (unsigned char)(0xF0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t gk_utf8_complete_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = u[n - k];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? n - k : n;
    }
    return n;
}

size_t gk_utf8_valid_prefix(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, u + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = gk_utf8_next(u + i, n - i, &cp);
        if (cp == GK_UTF8_INVALID) return i;
        i += k;
    }
    return n;
}

size_t gk_utf8_sanitize(const char *in, size_t n, char **buf, size_t *cap, size_t *out_len)
{
    size_t ok = gk_utf8_valid_prefix(in, n);
    /* worst case: every byte becomes 3 bytes of U+FFFD */
    size_t need = ok == n ? n + 1 : ok + (n - ok) * 3 + 1;
    if (gk_grow(buf, cap, need, 1, 64)) return (size_t)-1;
    memcpy(*buf, in, ok);
    size_t o = ok, reps = 0, i = ok;
    const unsigned char *u = (const unsigned char *)in;
    while (i < n) {
        uint32_t cp;
        size_t k = gk_utf8_next(u + i, n - i, &cp);
        if (cp == GK_UTF8_INVALID) {
            memcpy(*buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            reps++;
        } else {
            memcpy(*buf + o, in + i, k);
            o += k;
        }
        i += k;
    }
    *out_len = o;
    return reps;
}
