/* textout.c: UTF-8-safe streaming of token bytes (see textout.h). */
#include "common/text/textout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/utf8.h"

void gk_textout_init(gk_textout *t, FILE *fp)
{
    memset(t, 0, sizeof *t);
    t->fp = fp;
}

void gk_textout_free(gk_textout *t)
{
    free(t->out);
    free(t->tmp);
    memset(t, 0, sizeof *t);
}

size_t gk_utf8_tail(const unsigned char *s, size_t n)
{
    // the last lead byte within 3 bytes of the end, then: does it need more bytes than follow?
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = s[n - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need <= k || c > 0xF4 || c < 0xC2) return 0;
        uint32_t cp;
        // a valid prefix: its maximal subpart is all k bytes (gk_utf8_next stops at an invalid one)
        return gk_utf8_next(s + n - k, k, &cp) == k ? k : 0;
    }
    return 0;
}

static int emit(gk_textout *t, const char *s, size_t n)
{
    t->out_len = 0;
    if (!n) return 0;
    if (gk_utf8_sanitize(s, n, &t->out, &t->out_cap, &t->out_len) == (size_t)-1) {
        errno = ENOMEM;
        return -1;
    }
    if (t->fp && fwrite(t->out, 1, t->out_len, t->fp) != t->out_len) return -1;
    return 0;
}

int gk_textout_push(gk_textout *t, const void *bytes, size_t n)
{
    size_t len = t->nhold + n;
    if (len > t->tmp_cap) {
        char *p = realloc(t->tmp, len * 2);
        if (!p) {
            errno = ENOMEM;
            return -1;
        }
        t->tmp = p;
        t->tmp_cap = len * 2;
    }
    memcpy(t->tmp, t->hold, t->nhold);
    if (n) memcpy(t->tmp + t->nhold, bytes, n);
    size_t tail = gk_utf8_tail((const unsigned char *)t->tmp, len);
    t->nhold = tail;
    memcpy(t->hold, t->tmp + len - tail, tail);
    return emit(t, t->tmp, len - tail);
}

int gk_textout_finish(gk_textout *t)
{
    size_t n = t->nhold;
    t->nhold = 0;
    return emit(t, (const char *)t->hold, n);
}
