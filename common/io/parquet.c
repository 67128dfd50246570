/* parquet.c: a Parquet file, its chosen string column and the walk over its row groups (see
 * parquet.h). The footer is read once; each row group's chunk of the column is pread whole
 * (bounded by the chunk limit) and handed to parquet_page.c. Errors name the file and, past
 * the footer, the row group. */
#include "common/io/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/parquet_int.h"

#define MAX_FOOTER ((size_t)256 << 20)

struct gk_parquet {
    int fd;
    char *path, *column;
    long long size, footer_at; /* footer_at: where the footer starts */
    pq_meta meta;
    int leaf, max_def;
    pq_chunk *rgs;
    int nrg;
    long long rows;
    int rg, in_chunk, broken;  /* rg: the row group being read, or next */
    long long nulls, position, chunk_at;
    uint8_t *buf;
    size_t buf_cap, max_chunk;
    pq_cursor cur;
};

int gk_parquet_magic(const void *head, size_t n)
{
    return n >= 4 && memcmp(head, "PAR1", 4) == 0;
}

static int read_at(gk_parquet *p, void *dst, size_t n, long long off, gk_err *e)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(p->fd, (char *)dst + done, n - done, (off_t)(off + (long long)done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return gk_errf(e, GK_EIO, "read at byte %lld: %s", off + (long long)done,
                           strerror(errno));
        if (r == 0)
            return gk_errf(e, GK_EFORMAT, "truncated: the file ended at byte %lld",
                           off + (long long)done);
        done += (size_t)r;
    }
    return 0;
}

/* ---- the footer ---- */

static int read_footer(gk_parquet *p, gk_err *e)
{
    uint8_t tail[8], head[4];
    if (p->size < 12)
        return gk_errf(e, GK_EFORMAT, "%s: not a Parquet file (%lld bytes, too short)", p->path,
                       p->size);
    gk_err sub = {0};
    int rc = read_at(p, head, 4, 0, &sub);
    if (rc || (rc = read_at(p, tail, 8, p->size - 8, &sub)))
        return gk_errf(e, rc, "%s: %s", p->path, sub.msg);
    if (!gk_parquet_magic(head, 4))
        return gk_errf(e, GK_EFORMAT, "%s: not a Parquet file (no PAR1 at its start)", p->path);
    if (memcmp(tail + 4, "PAR1", 4) != 0) {
        if (memcmp(tail + 4, "PARE", 4) == 0)
            return gk_errf(e, GK_EFORMAT, "%s: an encrypted Parquet file: not supported", p->path);
        return gk_errf(e, GK_EFORMAT, "%s: no PAR1 at the end: truncated, or still being written",
                       p->path);
    }
    uint32_t len = (uint32_t)tail[0] | tail[1] << 8 | tail[2] << 16 | (uint32_t)tail[3] << 24;
    if (len == 0 || len > (unsigned long long)(p->size - 12) || len > MAX_FOOTER)
        return gk_errf(e, GK_EFORMAT,
                       "%s: footer of %u bytes in a file of %lld (damaged or truncated)", p->path,
                       len, p->size);
    p->footer_at = p->size - 8 - len;
    uint8_t *buf = malloc(len);
    if (!buf)
        return gk_errf(e, GK_ENOMEM, "%s: out of memory for a footer of %u bytes", p->path, len);
    if ((rc = read_at(p, buf, len, p->footer_at, &sub)) != 0 ||
        (rc = pq_read_meta(buf, len, &p->meta, &sub)) != 0)
        gk_errf(e, rc, "%s: %s", p->path, sub.msg);
    if (rc == 0 && !(p->rgs = calloc((size_t)p->meta.nrg + 1, sizeof *p->rgs)))
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", p->path);
    /* kept: the row groups are decoded from it once the column is chosen */
    p->buf = buf, p->buf_cap = len;
    return rc;
}

/* ---- the column ---- */

static int is_string(const pq_leaf *l)
{
    return l->type == PQ_BYTE_ARRAY && l->converted != 5 /* DECIMAL */ &&
           l->converted != 20 /* BSON */;
}

/* "a (INT64), text (BYTE_ARRAY), ..." into buf. */
static void list_columns(const pq_meta *m, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < m->nleaves && at + 32 < cap; i++) {
        const pq_leaf *l = &m->leaves[i];
        int n = snprintf(buf + at, cap - at, "%s%s (%s%s)", i ? ", " : "", l->path,
                         pq_type_name(l->type), l->max_rep ? ", repeated" : "");
        if (n < 0 || (size_t)n >= cap - at - 8) {
            snprintf(buf + at, cap - at, "%s...", i ? ", " : "");
            return;
        }
        at += (size_t)n;
    }
}

/* Chooses the column. Every way the file fails to offer the column asked for (none of that
 * name, several, not a string, a list; no string column or several when none is named) is
 * GK_EFORMAT: the file does not fit the request, as a JSON line without the field does. */
static int choose(gk_parquet *p, const char *column, gk_err *e)
{
    const pq_meta *m = &p->meta;
    char cols[600];
    int found = -1, count = 0;
    const char *want = column ? column : "text";
    for (int i = 0; i < m->nleaves; i++)
        if (strcmp(m->leaves[i].path, want) == 0) found = found < 0 ? i : found, count++;
    if (count > 1) {
        list_columns(m, cols, sizeof cols);
        return gk_errf(e, GK_EFORMAT,
                       "%s: column name '%s' is ambiguous (%d columns have it); its columns: %s",
                       p->path, want, count, cols);
    }
    if (count == 0 && column) {
        list_columns(m, cols, sizeof cols);
        return gk_errf(e, GK_EFORMAT, "%s: no column '%s'; its columns: %s", p->path, column, cols);
    }
    if (count == 0) { /* no "text": the only string column */
        for (int i = 0; i < m->nleaves; i++)
            if (is_string(&m->leaves[i]) && !m->leaves[i].max_rep)
                found = found < 0 ? i : found, count++;
        if (count != 1) {
            list_columns(m, cols, sizeof cols);
            if (count == 0)
                return gk_errf(e, GK_EFORMAT, "%s: no string column; its columns: %s", p->path,
                               cols);
            return gk_errf(e, GK_EFORMAT,
                           "%s: no column 'text' and %d string columns: "
                           "choose one by name; its columns: %s",
                           p->path, count, cols);
        }
    }
    const pq_leaf *l = &m->leaves[found];
    if (!is_string(l))
        return gk_errf(e, GK_EFORMAT, "%s: column '%s' is %s, not a string column", p->path,
                       l->path, pq_type_name(l->type));
    if (l->max_rep)
        return gk_errf(e, GK_EFORMAT,
                       "%s: column '%s' is repeated (a list): not "
                       "supported, only a column of one string a row",
                       p->path, l->path);
    p->leaf = found, p->max_def = l->max_def;
    if (!(p->column = strdup(l->path))) return gk_errf(e, GK_ENOMEM, "out of memory");
    return 0;
}

/* Where a chunk starts: at its dictionary page when it has one (some writers put 0 for none). */
static long long chunk_start(const pq_chunk *c)
{
    return c->dict_off > 0 && (c->dict_off < c->data_off || c->data_off == 0) ? c->dict_off
                                                                              : c->data_off;
}

/* The row groups' chunks of the column, each checked against the file. */
static int row_groups(gk_parquet *p, gk_err *e)
{
    gk_err sub = {0};
    int rc = pq_read_row_groups(&p->meta, p->leaf, p->rgs, &sub);
    if (rc) return gk_errf(e, rc, "%s: %s", p->path, sub.msg);
    long long rows = 0;
    for (int i = 0; i < p->meta.nrg; i++) {
        const pq_chunk *c = &p->rgs[i];
        const char *bad = NULL;
        if (c->has_file_path) bad = "the column chunk is in another file: not supported";
        else if (c->type != PQ_BYTE_ARRAY) bad = "the column chunk's type is not the schema's";
        else if (c->num_values != c->num_rows)
            bad = "the column chunk's value count is not the row group's row count";
        else if (c->num_values == 0) continue; /* never read (pyarrow's empty
                                                * row group has no data page) */
        else if (c->data_off < 4 || c->data_off >= p->footer_at || chunk_start(c) < 4 ||
                 c->compressed_size > p->footer_at - chunk_start(c))
            bad = "the column chunk lies outside the file's data";
        if (bad)
            return gk_errf(e, GK_EFORMAT, "%s: row group %d of %d: %s", p->path, i + 1, p->meta.nrg,
                           bad);
        if (c->num_rows > INT64_MAX - rows)
            return gk_errf(e, GK_EFORMAT, "%s: footer: row counts overflow", p->path);
        rows += c->num_rows;
    }
    if (rows != p->meta.num_rows)
        return gk_errf(e, GK_EFORMAT,
                       "%s: footer: the row groups hold %lld rows, the file says %lld", p->path,
                       rows, p->meta.num_rows);
    return 0;
}

int gk_parquet_open(gk_parquet **out, const char *path, const char *column, gk_err *e)
{
    *out = NULL;
    gk_parquet *p = calloc(1, sizeof *p);
    if (!p || !(p->path = strdup(path))) {
        free(p);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    p->max_chunk = GK_PARQUET_MAX_CHUNK;
    struct stat st;
    int rc = 0;
    if ((p->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(p->fd, &st) != 0) {
        rc = gk_errno(e, path);
    } else if (!S_ISREG(st.st_mode)) {
        rc = gk_errf(e, GK_EUSAGE, "%s: not a regular file (a Parquet file is read at offsets)",
                     path);
    } else {
        p->size = (long long)st.st_size;
        if (!(rc = read_footer(p, e)) && !(rc = choose(p, column, e))) rc = row_groups(p, e);
    }
    if (rc) {
        gk_parquet_close(p);
        return rc;
    }
    p->rows = p->meta.num_rows, p->nrg = p->meta.nrg;
    pq_meta_free(&p->meta); /* the column and its chunks are all that is needed now */
    p->position = 4;
    *out = p;
    return 0;
}

/* ---- rows ---- */

static int open_chunk(gk_parquet *p, gk_err *e)
{
    const pq_chunk *c = &p->rgs[p->rg];
    long long start = chunk_start(c), size = c->compressed_size;
    if ((unsigned long long)size > p->max_chunk)
        return gk_errf(e, GK_EFORMAT, "the column chunk is %lld bytes, over the limit of %zu", size,
                       p->max_chunk);
    if (p->buf_cap < (size_t)size || !p->buf) {
        uint8_t *nb = realloc(p->buf, size ? (size_t)size : 1);
        if (!nb)
            return gk_errf(e, GK_ENOMEM, "out of memory for a column chunk of %lld bytes", size);
        p->buf = nb, p->buf_cap = size ? (size_t)size : 1;
    }
    int rc = read_at(p, p->buf, (size_t)size, start, e);
    if (rc) return rc;
    pq_cursor_begin(&p->cur, p->buf, (size_t)size, c->codec, p->max_def, p->max_chunk,
                    c->num_values);
    p->chunk_at = start;
    p->in_chunk = 1;
    return 0;
}

/* One step: a value (*got = 1) or the end of a chunk. */
static int step(gk_parquet *p, const char **text, size_t *len, int *got, gk_err *e)
{
    const pq_chunk *c = &p->rgs[p->rg];
    *got = 0;
    if (!p->in_chunk && c->num_values == 0) {
        p->rg++;
        return 0;
    }
    if (!p->in_chunk) {
        int rc = open_chunk(p, e);
        if (rc) return rc;
    }
    int what;
    const uint8_t *s = NULL;
    int rc = pq_cursor_next(&p->cur, &s, len, &what, e);
    if (rc) return rc;
    /* chunks out of file order: never back */
    if (p->chunk_at + (long long)p->cur.pos > p->position)
        p->position = p->chunk_at + (long long)p->cur.pos;
    if (what == PQ_VALUE) {
        *text = (const char *)s, *got = 1;
    } else {
        p->nulls += p->cur.nulls;
        p->cur.nulls = 0;
        if (p->cur.values != c->num_values)
            return gk_errf(e, GK_EFORMAT, "the pages hold %lld values, the footer says %lld",
                           p->cur.values, c->num_values);
        p->in_chunk = 0;
        p->rg++;
    }
    return 0;
}

int gk_parquet_next(gk_parquet *p, const char **text, size_t *len, int *more, gk_err *e)
{
    *more = 0;
    if (p->broken) return gk_errf(e, p->broken, "%s: reading stopped at an earlier error", p->path);
    while (p->rg < p->nrg) {
        gk_err sub = {0};
        int got, rc = step(p, text, len, &got, &sub);
        if (rc) {
            p->broken = rc;
            gk_errf(e, rc, "%s: row group %d of %d: %s", p->path, p->rg + 1, p->nrg, sub.msg);
            return rc;
        }
        if (got) {
            *more = 1;
            return 0;
        }
    }
    p->position = p->size;
    return 0;
}

long long gk_parquet_rows(const gk_parquet *p) { return p->rows; }
long long gk_parquet_nulls(const gk_parquet *p)
{
    return p->nulls + (p->in_chunk ? p->cur.nulls : 0);
}
long long gk_parquet_position(const gk_parquet *p) { return p->position; }
long long gk_parquet_file_size(const gk_parquet *p) { return p->size; }
int gk_parquet_row_groups(const gk_parquet *p) { return p->nrg; }
const char *gk_parquet_column(const gk_parquet *p) { return p->column; }

void gk_parquet_set_max_chunk(gk_parquet *p, size_t bytes)
{
    p->max_chunk = bytes ? bytes : GK_PARQUET_MAX_CHUNK;
}

void gk_parquet_close(gk_parquet *p)
{
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    pq_meta_free(&p->meta);
    pq_cursor_free(&p->cur);
    free(p->rgs);
    free(p->buf);
    free(p->column);
    free(p->path);
    free(p);
}
