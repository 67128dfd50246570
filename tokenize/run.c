/* run.c: reading inputs into documents (see run.h). */
#include "run.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/progress.h"
#include "input.h"

#define READ_BYTES (1 << 16)

/* ---------------------------------------------------------------- --doc-sep splitting */

typedef struct splitter {
    const tk_consumer *c;
    const char *sep;
    size_t seplen;
    int open;          /* a document has begun */
    char *work;        /* carried tail + new bytes */
    size_t carry;      /* bytes held back: they may start a separator */
} splitter;

static int piece(splitter *s, const char *p, size_t n, gk_err *e)
{
    if (n == 0)
        return 0;
    if (!s->open) {
        int rc = s->c->begin(s->c->ctx, e);
        if (rc)
            return rc;
        s->open = 1;
    }
    return s->c->feed(s->c->ctx, p, n, e);
}

static int close_doc(splitter *s, gk_err *e)
{
    if (!s->open)
        return 0;
    s->open = 0;
    return s->c->end(s->c->ctx, e);
}

/* Feeds n new bytes (already appended at s->work + s->carry). final: the document ends here. */
static int split_feed(splitter *s, size_t n, int final, gk_err *e)
{
    size_t len = s->carry + n, pos = 0;
    const char *hit;
    while ((hit = memmem(s->work + pos, len - pos, s->sep, s->seplen))) {
        size_t at = (size_t)(hit - s->work);
        int rc = piece(s, s->work + pos, at - pos, e);
        if (!rc)
            rc = close_doc(s, e);
        if (rc)
            return rc;
        pos = at + s->seplen;
    }
    size_t keep = final ? 0 : s->seplen - 1;
    if (len - pos < keep)
        keep = len - pos;
    int rc = piece(s, s->work + pos, len - pos - keep, e);
    memmove(s->work, s->work + len - keep, keep);
    s->carry = keep;
    return rc;
}

/* ---------------------------------------------------------------- reading */

static int read_document(tk_source *src, const tk_consumer *c, splitter *sp, gk_err *e)
{
    int rc = sp ? 0 : c->begin(c->ctx, e);
    size_t got = 1;
    while (rc == 0 && got > 0) {
        if (sp) {
            rc = tk_source_read(src, sp->work + sp->carry, READ_BYTES, &got, e);
            if (rc == 0)
                rc = split_feed(sp, got, got == 0, e);
        } else {
            char buf[READ_BYTES];
            rc = tk_source_read(src, buf, sizeof buf, &got, e);
            if (rc == 0 && got > 0)
                rc = c->feed(c->ctx, buf, got, e);
        }
    }
    if (rc)
        return rc;
    return sp ? close_doc(sp, e) : c->end(c->ctx, e);
}

static int read_input(const char *path, const tk_consumer *c, splitter *sp, tk_read_stats *st,
                      gk_progress *bar, gk_err *e)
{
    tk_source *src = NULL;
    int rc = tk_source_open(&src, path, e), more = 1;
    while (rc == 0 && (rc = tk_source_next(src, &more, e)) == 0 && more) {
        rc = read_document(src, c, sp, e);
        gk_progress_update(bar, st->input_bytes + tk_source_position(src), "");
    }
    if (rc == 0) {
        st->skipped_binary += (int64_t)tk_source_skipped(src);
        for (int k = 0; k < TK_SKIP_KINDS; k++)
            st->skipped_special[k] += (int64_t)tk_source_skipped_special(src, k);
        if (tk_source_empty_archive(src)) {
            gk_progress_clear(bar);
            gk_info("%s: %s: no documents", strcmp(path, "-") ? path : "stdin",
                    tk_source_empty_archive(src));
        }
        st->input_bytes += tk_source_position(src);
    }
    tk_source_close(src);
    return rc;
}

int tk_read_all(const tk_read_opts *o, const tk_consumer *c, tk_read_stats *st, gk_err *e)
{
    splitter sp = {.c = c, .sep = o->doc_sep, .seplen = o->doc_sep ? strlen(o->doc_sep) : 0};
    if (o->doc_sep && !(sp.work = malloc(READ_BYTES + sp.seplen)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    gk_progress bar;
    gk_progress_start(&bar, "reading", 0);
    int rc = 0;
    for (int i = 0; rc == 0 && i < o->ninputs; i++)
        rc = read_input(o->inputs[i], c, o->doc_sep ? &sp : NULL, st, &bar, e);
    gk_progress_end(&bar);
    free(sp.work);
    return rc;
}
