/* run.c: reading inputs into documents (see run.h). */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/parquet.h"
#include "common/log.h"
#include "common/progress.h"
#include "input.h"
#include "jsonl.h"
#include "spill.h"

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

/* The state of one tk_read_all: where the documents go and what the progress line shows. */
typedef struct reader {
    const tk_read_opts *o;
    const tk_consumer *c;
    splitter *sp;
    tk_read_stats *st;
    gk_progress bar;
    int file;        /* the input being read, from 1 */
    int64_t total;   /* bytes of all inputs as stored; 0 when one is a pipe */
} reader;

static void progress(reader *r, int64_t pos)
{
    if (!r->bar.active || gk_now() - r->bar.last < 0.2) /* the bar redraws 5 times a second */
        return;
    char note[160];
    int n = snprintf(note, sizeof note, "file %d/%d, %lld docs", r->file, r->o->ninputs,
                     (long long)r->st->docs);
    double secs = gk_now() - r->bar.start;
    if (r->o->tokens && secs > 0 && n > 0)
        snprintf(note + n, sizeof note - (size_t)n, ", %lld tokens, %.2fM tokens/s",
                 (long long)*r->o->tokens, (double)*r->o->tokens / secs / 1e6);
    gk_progress_update(&r->bar, r->st->input_bytes + pos, note);
}

/* Feeds text[0, n) into the current document: through the splitter when there is one. */
static int feed_text(reader *r, const char *text, size_t n, gk_err *e)
{
    splitter *sp = r->sp;
    if (!sp)
        return n ? r->c->feed(r->c->ctx, text, n, e) : 0;
    memcpy(sp->work + sp->carry, text, n); /* n <= READ_BYTES */
    return split_feed(sp, n, 0, e);
}

/* One text document: head[0, nhead) (bytes already read), then the rest of the member. */
static int read_document(reader *r, tk_source *src, const char *head, size_t nhead, gk_err *e)
{
    r->st->docs++;
    int rc = r->sp ? 0 : r->c->begin(r->c->ctx, e);
    if (rc == 0 && nhead)
        rc = feed_text(r, head, nhead, e);
    char buf[READ_BYTES];
    for (size_t got = 1; rc == 0 && got > 0;) {
        if ((rc = tk_source_read(src, buf, sizeof buf, &got, e)) == 0 && got)
            rc = feed_text(r, buf, got, e);
        progress(r, tk_source_position(src));
    }
    if (rc == 0 && r->sp)
        rc = split_feed(r->sp, 0, 1, e);
    if (rc)
        return rc;
    return r->sp ? close_doc(r->sp, e) : r->c->end(r->c->ctx, e);
}

/* One document from a row's text (JSON Lines, Parquet): --doc-sep does not apply. */
static int read_row(reader *r, const char *text, size_t n, gk_err *e)
{
    r->st->docs++;
    int rc = r->c->begin(r->c->ctx, e);
    if (rc == 0 && n)
        rc = r->c->feed(r->c->ctx, text, n, e);
    return rc ? rc : r->c->end(r->c->ctx, e);
}

static int read_jsonl(reader *r, tk_source *src, const char *name, const char *head, size_t nhead,
                      int array, gk_err *e)
{
    tk_jsonl_opts jo = {r->o->field, r->o->max_line, r->o->skip_bad, array};
    tk_jsonl *j = NULL;
    int rc = tk_jsonl_open(&j, src, name, &jo, head, nhead, e), more = 1;
    while (rc == 0 && more) {
        const char *text;
        size_t len;
        if ((rc = tk_jsonl_next(j, &text, &len, &more, e)) == 0 && more)
            rc = read_row(r, text, len, e);
        progress(r, tk_source_position(src));
    }
    if (j && tk_jsonl_bad(j)) {
        if (!r->st->bad_lines && !r->st->bad_items)
            snprintf(r->st->first_bad, sizeof r->st->first_bad, "%s", tk_jsonl_first_bad(j));
        *(array ? &r->st->bad_items : &r->st->bad_lines) += tk_jsonl_bad(j);
    }
    tk_jsonl_close(j);
    return rc;
}

/* An error about a download's local path names the input instead. */
static void rename_input(gk_err *e, const char *local, const char *name)
{
    char *at = strstr(e->msg, local);
    if (!at || strcmp(local, name) == 0)
        return;
    char msg[sizeof e->msg];
    snprintf(msg, sizeof msg, "%.*s%s%s", (int)(at - e->msg), e->msg, name, at + strlen(local));
    snprintf(e->msg, sizeof e->msg, "%s", msg);
}

/* The Parquet file at path, named name in messages; counted: its bytes count as read (else the
 * stream it came from counts them). */
static int read_parquet(reader *r, const char *path, const char *name, int counted, gk_err *e)
{
    gk_parquet *p = NULL;
    int rc = gk_parquet_open(&p, path, r->o->column, e), more = 1;
    if (rc && strstr(e->msg, "its columns:") && !strstr(e->msg, "no string column")) {
        char msg[sizeof e->msg]; /* the column choice: say how to make it */
        snprintf(msg, sizeof msg, "%s", e->msg);
        gk_errf(e, rc, "%.900s (--column NAME)", msg);
    }
    while (rc == 0 && more) {
        const char *text;
        size_t len;
        if ((rc = gk_parquet_next(p, &text, &len, &more, e)) == 0 && more)
            rc = read_row(r, text, len, e);
        progress(r, gk_parquet_position(p));
    }
    if (rc == 0 || rc == TK_STOP) {
        r->st->null_rows += gk_parquet_nulls(p);
        r->st->parquet_files++;
        r->st->input_bytes += counted ? gk_parquet_file_size(p) : 0;
    }
    gk_parquet_close(p);
    if (rc && rc != TK_STOP)
        rename_input(e, path, name);
    return rc;
}

/* A Parquet file that comes as a stream (compressed, on stdin, through a pipe), head[0, nhead)
 * read already: copied into an unlinked temporary file in TMPDIR (disk, not memory, holds it),
 * which is then read as the file would be: Parquet is read from its end. */
static int read_parquet_stream(reader *r, tk_source *src, const char *name, const char *head,
                               size_t nhead, gk_err *e)
{
    tk_spill sp;
    int rc = tk_spill_open(&sp, r->o->tmpdir, "a Parquet file read from a stream", e);
    if (rc)
        return rc;
    rc = tk_spill_write(&sp, head, nhead, e);
    char buf[READ_BYTES], path[64];
    for (size_t got = 1; rc == 0 && got > 0;) {
        if ((rc = tk_source_read(src, buf, sizeof buf, &got, e)) == 0)
            rc = tk_spill_write(&sp, buf, got, e);
        progress(r, tk_source_position(src));
    }
    if (rc == 0)
        rc = tk_spill_rewind(&sp, e);
    snprintf(path, sizeof path, "/dev/fd/%d", fileno(sp.fp));
    if (rc == 0)
        rc = read_parquet(r, path, name, 0, e);
    tk_spill_close(&sp);
    return rc;
}

/* Whether path is a regular file that starts with Parquet's magic (a FIFO or device is not
 * opened here: reading it would take its bytes). */
static int is_parquet(const char *path)
{
    char head[4];
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    return n == (ssize_t)sizeof head && gk_parquet_magic(head, sizeof head);
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Reads the start of a plain (not archive) input into head: at least 4 bytes (Parquet's magic)
 * and its first non-blank byte past a byte order mark, where the input has them. */
static int peek(tk_source *src, char *head, size_t cap, size_t *n, gk_err *e)
{
    *n = 0;
    for (size_t got = 1; got > 0 && *n < cap;) {
        int rc = tk_source_read(src, head + *n, cap - *n, &got, e);
        if (rc)
            return rc;
        *n += got;
        size_t at = tk_json_bom(head, *n);
        while (at < *n && blank(head[at]))
            at++;
        if (at < *n && *n >= 4)
            return 0;
    }
    return 0;
}

/* "a JSON string" (...): what a .json input of TK_JSON_SCALAR holds, from its first byte. */
static const char *scalar_kind(const char *head, size_t n)
{
    size_t i = tk_json_bom(head, n);
    while (i < n && blank(head[i]))
        i++;
    char c = i < n ? head[i] : 0;
    return c == '"' ? "a JSON string" : c == 't' || c == 'f' ? "a JSON boolean"
           : c == 'n' ? "JSON null" : "a JSON number";
}

/* One plain (not archive) document whose first bytes are head[0, nhead): Parquet, JSON Lines, a
 * JSON array or text. */
static int read_plain(reader *r, tk_source *src, const char *name, int is_stdin, const char *head,
                      size_t nhead, gk_err *e)
{
    if (gk_parquet_magic(head, nhead))
        return read_parquet_stream(r, src, name, head, nhead, e);
    int kind = nhead ? tk_jsonl_detect(is_stdin ? NULL : name, head, nhead, r->o->field != NULL)
                     : TK_JSON_NONE;
    size_t bom = tk_json_bom(head, nhead);
    if (kind == TK_JSON_SCALAR)
        return gk_errf(e, GK_EFORMAT, "%s: %s: a .json input is read as JSON Lines (one object a "
                       "line) or as a JSON array of objects", name, scalar_kind(head, nhead));
    if (kind != TK_JSON_NONE)
        return read_jsonl(r, src, name, head + bom, nhead - bom, kind == TK_JSON_ARRAY, e);
    return read_document(r, src, head, nhead, e);
}

static void input_done(reader *r, tk_source *src, const char *name)
{
    r->st->skipped_binary += (int64_t)tk_source_skipped(src);
    for (int k = 0; k < TK_SKIP_KINDS; k++)
        r->st->skipped_special[k] += (int64_t)tk_source_skipped_special(src, k);
    if (tk_source_empty_archive(src)) {
        gk_progress_clear(&r->bar);
        gk_info("%s: %s: no documents", name, tk_source_empty_archive(src));
    }
    r->st->input_bytes += tk_source_position(src);
}

/* Reads the input at path, named name in messages (an s3:// input's URL for its /dev/fd/N). */
static int read_input(reader *r, const char *path, const char *name, gk_err *e)
{
    int is_stdin = strcmp(path, "-") == 0;
    if (is_stdin)
        name = "stdin";
    if (!is_stdin && is_parquet(path))
        return read_parquet(r, path, name, 1, e);
    tk_source *src = NULL;
    int rc = tk_source_open(&src, path, e), more = 1;
    while (rc == 0 && (rc = tk_source_next(src, &more, e)) == 0 && more) {
        char head[READ_BYTES];
        size_t nhead = 0;
        if (tk_source_is_archive(src))
            rc = read_document(r, src, head, 0, e);
        else if ((rc = peek(src, head, sizeof head, &nhead, e)) == 0)
            rc = read_plain(r, src, name, is_stdin, head, nhead, e);
    }
    if (rc == 0)
        input_done(r, src, name);
    tk_source_close(src);
    return rc;
}

static int64_t total_bytes(const tk_read_opts *o)
{
    int64_t total = 0;
    for (int i = 0; i < o->ninputs; i++) {
        struct stat st;
        if (o->sizes) {
            if (o->sizes[i] < 0)
                return 0;
            total += o->sizes[i];
            continue;
        }
        if (strcmp(o->inputs[i], "-") == 0 || stat(o->inputs[i], &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
        total += (int64_t)st.st_size;
    }
    return total;
}

int tk_read_all(const tk_read_opts *o, const tk_consumer *c, tk_read_stats *st, gk_err *e)
{
    splitter sp = {.c = c, .sep = o->doc_sep, .seplen = o->doc_sep ? strlen(o->doc_sep) : 0};
    if (o->doc_sep && !(sp.work = malloc(READ_BYTES + sp.seplen)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    reader r = {.o = o, .c = c, .sp = o->doc_sep ? &sp : NULL, .st = st, .total = total_bytes(o)};
    gk_progress_start(&r.bar, "reading", r.total);
    int rc = 0;
    for (int i = 0; rc == 0 && i < o->ninputs; i++) {
        char local[4096];
        const char *path = o->inputs[i];
        r.file = i + 1;
        if (o->fetch) {
            gk_progress_clear(&r.bar); /* a download draws its own */
            rc = o->fetch(o->fetch_ctx, i, local, sizeof local, e);
            path = local;
        }
        if (rc == 0 && (rc = read_input(&r, path, o->inputs[i], e)) && path == local)
            rename_input(e, local, o->inputs[i]);
        if (o->done)
            rc = o->done(o->fetch_ctx, i, rc, e);
    }
    gk_progress_end(&r.bar);
    free(sp.work);
    if (rc == TK_STOP) {
        st->stopped = 1;
        rc = 0;
    }
    return rc;
}
