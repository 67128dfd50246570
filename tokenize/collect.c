/* collect.c: the char-level collector of gpt-tokenize (see collect.h). */
#include "collect.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/utf8.h"

#define NCP 0x110000
#define DOC_MARK UINT32_MAX
#define MAX_RECORD (1u << 30)

int tk_collector_init(tk_collector *c, const char *tmpdir, gk_err *e)
{
    memset(c, 0, sizeof *c);
    if (!(c->seen = calloc(NCP / 8, 1)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    return tk_spill_open(&c->text, tmpdir, "the text held for --char's vocabulary", e);
}

static int reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    char *nb = realloc(*buf, need);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = need;
    return 0;
}

/* Marks the code points of the pending bytes and text[0, n); final: nothing follows. */
static int mark(tk_collector *c, const char *text, size_t n, int final, gk_err *e)
{
    size_t len = c->npend + n, out = 0;
    if (reserve(&c->work, &c->work_cap, len + 1))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    memcpy(c->work, c->pend, c->npend);
    memcpy(c->work + c->npend, text, n);
    size_t done = final ? len : gk_utf8_complete_len(c->work, len);
    if (gk_utf8_sanitize(c->work, done, &c->clean, &c->clean_cap, &out) == (size_t)-1)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    for (size_t i = 0; i < out;) {
        uint32_t cp;
        i += gk_utf8_next((const unsigned char *)c->clean + i, out - i, &cp);
        c->seen[cp >> 3] |= (unsigned char)(1u << (cp & 7));
    }
    c->npend = len - done;
    memcpy(c->pend, c->work + done, c->npend);
    return 0;
}

static int collect_begin(void *ctx, gk_err *e)
{
    tk_collector *c = ctx;
    uint32_t m = DOC_MARK;
    return tk_spill_write(&c->text, &m, sizeof m, e);
}

static int collect_feed(void *ctx, const char *text, size_t n, gk_err *e)
{
    tk_collector *c = ctx;
    int rc = mark(c, text, n, 0, e);
    while (rc == 0 && n > 0) {
        uint32_t k = n < MAX_RECORD ? (uint32_t)n : MAX_RECORD;
        rc = tk_spill_write(&c->text, &k, sizeof k, e);
        if (rc == 0)
            rc = tk_spill_write(&c->text, text, k, e);
        if (k > c->max_record)
            c->max_record = k;
        text += k;
        n -= k;
    }
    return rc;
}

static int collect_end(void *ctx, gk_err *e)
{
    (void)ctx;
    (void)e;
    return 0;
}

tk_consumer tk_collector_consumer(tk_collector *c)
{
    return (tk_consumer){collect_begin, collect_feed, collect_end, c};
}

int tk_collector_replay(tk_collector *c, const tk_consumer *to, gk_err *e)
{
    char *buf = malloc(c->max_record ? c->max_record : 1);
    int rc = buf ? tk_spill_rewind(&c->text, e) : gk_errf(e, GK_ENOMEM, "out of memory");
    int open = 0;
    for (int64_t at = 0; rc == 0 && at < c->text.size;) {
        uint32_t k;
        rc = tk_spill_read(&c->text, &k, sizeof k, e);
        at += (int64_t)sizeof k;
        if (rc == 0 && k == DOC_MARK) {
            if (open)
                rc = to->end(to->ctx, e);
            if (rc == 0)
                rc = to->begin(to->ctx, e);
            open = 1;
        } else if (rc == 0) {
            rc = tk_spill_read(&c->text, buf, k, e);
            if (rc == 0)
                rc = to->feed(to->ctx, buf, k, e);
            at += k;
        }
    }
    if (rc == 0 && open)
        rc = to->end(to->ctx, e);
    free(buf);
    return rc;
}

int tk_collector_char_vocab(tk_collector *c, gk_vocab **out, gk_err *e)
{
    int rc = mark(c, "", 0, 1, e);
    size_t n = 0;
    for (uint32_t cp = 0; rc == 0 && cp < NCP; cp++)
        n += (c->seen[cp >> 3] >> (cp & 7)) & 1;
    uint32_t *cps = rc ? NULL : malloc((n ? n : 1) * sizeof *cps);
    if (rc == 0 && !cps)
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (uint32_t cp = 0, k = 0; rc == 0 && cp < NCP; cp++)
        if (c->seen[cp >> 3] & (1u << (cp & 7)))
            cps[k++] = cp;
    if (rc == 0)
        rc = gk_vocab_from_chars(out, cps, n, e);
    free(cps);
    return rc;
}

void tk_collector_free(tk_collector *c)
{
    tk_spill_close(&c->text);
    free(c->seen);
    free(c->work);
    free(c->clean);
    memset(c, 0, sizeof *c);
}
