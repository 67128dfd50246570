/* shard.c: token shards: the one header parser, the stream and mapped readers, the writers
 * (format in shard.h). */
#include "common/io/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/le.h"
#include "common/text/utf8.h"

/* ---------------------------------------------------------------- the header: one parser */

/* Text or binary, from the first bytes: text has no NUL and (nearly) valid UTF-8; a sequence cut
 * by the end of the sample is not counted. Raw uint16 tokens hold NULs (every token below 256). */
static int looks_like_text(const unsigned char *b, size_t n)
{
    if (n == 0 || memchr(b, 0, n))
        return 0;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = gk_utf8_next(b + i, n - i, &cp);
        if (cp == GK_UTF8_INVALID && i + 4 < n)
            bad++;
        i += k;
    }
    return bad * 16 <= n;
}

/* A header that is ours but for a damaged magic: a known version and either a magic a few bits
 * off or the rest of the header as a writer leaves it (count >= -1, ints 5..255 zero). */
static int near_miss(const unsigned char *b)
{
    uint32_t magic = gk_le32(b), version = gk_le32(b + 4);
    if (version != 1 && version != 2)
        return 0;
    if (__builtin_popcount(magic ^ GK_SHARD_MAGIC) <= 4)
        return 1;
    if ((int32_t)gk_le32(b + 8) < -1)
        return 0;
    for (size_t i = 20; i < GK_SHARD_HEADER_BYTES; i++)
        if (b[i])
            return 0;
    return 1;
}

static int parse_header(const unsigned char *b, size_t n, int64_t size, const char *name,
                        gk_shard_header *h, gk_err *e)
{
    if (n < GK_SHARD_HEADER_BYTES)
        return gk_errf(e, GK_EFORMAT, "%s: truncated shard header (%zu of 1024 bytes)", name, n);
    int32_t version = (int32_t)gk_le32(b + 4), count = (int32_t)gk_le32(b + 8);
    if (version != 1 && version != 2)
        return gk_errf(e, GK_EFORMAT, "%s: unsupported shard version %d (expected 1 or 2)", name,
                       version);
    if (count < -1)
        return gk_errf(e, GK_EFORMAT, "%s: bad token count %d in header", name, count);
    h->version = version;
    h->width = version == 1 ? 2 : 4;
    h->count = h->tokens = count;
    h->vocab_size = gk_le32(b + 12);
    h->fingerprint = gk_le32(b + 16);
    if (size < 0)
        return 0;
    int64_t body = size - GK_SHARD_HEADER_BYTES;
    if (count >= 0 && body != (int64_t)count * h->width)
        return gk_errf(e, GK_EFORMAT,
                       "%s: header says %d tokens (%lld bytes) but "
                       "the file has %lld bytes after the header%s",
                       name, count, (long long)count * h->width, (long long)body,
                       body < (int64_t)count * h->width ? " (truncated?)" : "");
    if (body % h->width)
        return gk_errf(e, GK_EFORMAT, "%s: file ends in the middle of a token", name);
    h->tokens = body / h->width;
    return 0;
}

int gk_shard_parse(const unsigned char *b, size_t n, int64_t size, const char *name,
                   gk_shard_kind *kind, gk_shard_header *h, gk_err *e)
{
    memset(h, 0, sizeof *h);
    if (n >= 4 && gk_le32(b) == GK_SHARD_MAGIC) {
        *kind = GK_SHARD_HEADER;
        return parse_header(b, n, size, name, h, e);
    }
    if (n >= GK_SHARD_HEADER_BYTES && near_miss(b))
        return gk_errf(e, GK_EFORMAT, "%s: damaged shard header (magic %u, expected %u)", name,
                       gk_le32(b), (unsigned)GK_SHARD_MAGIC);
    *kind = looks_like_text(b, n) ? GK_SHARD_TEXT : GK_SHARD_RAW;
    h->version = 1;
    h->width = 2;
    h->count = -1;
    h->tokens = size >= 0 ? size / 2 : -1;
    return 0;
}

size_t gk_shard_decode(const unsigned char *p, size_t n, int width, uint32_t limit, uint32_t *out)
{
    for (size_t i = 0; i < n; i++, p += width) {
        uint32_t v = width == 2 ? gk_le16(p) : gk_le32(p);
        if (limit && v >= limit)
            return i;
        out[i] = v;
    }
    return n;
}

/* ---------------------------------------------------------------- reader */

static int64_t file_size(FILE *fp)
{
    struct stat st;
    return fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

int gk_shard_open(gk_shard_reader *r, const char *path, gk_err *e)
{
    memset(r, 0, sizeof *r);
    int is_stdin = !path || strcmp(path, "-") == 0;
    r->name = strdup(is_stdin ? "stdin" : path);
    if (!r->name)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    r->fp = is_stdin ? stdin : fopen(path, "rb");
    if (!r->fp) {
        int rc = gk_errno(e, path);
        free(r->name);
        r->name = NULL;
        return rc;
    }
    size_t n = fread(r->sniff, 1, sizeof r->sniff, r->fp);
    if (ferror(r->fp)) {
        int rc = gk_errno(e, r->name);
        gk_shard_close(r);
        return rc;
    }
    gk_shard_kind kind;
    gk_shard_header h;
    int rc = gk_shard_parse(r->sniff, n, file_size(r->fp), r->name, &kind, &h, e);
    if (rc == 0 && kind == GK_SHARD_TEXT)
        rc = gk_errf(e, GK_EFORMAT, "%s: not a token shard (no shard header, and it reads as text)",
                     r->name);
    if (rc) {
        gk_shard_close(r);
        return rc;
    }
    r->version = h.version;
    r->count = h.count;
    r->vocab_size = h.vocab_size;
    r->fingerprint = h.fingerprint;
    r->raw = kind == GK_SHARD_RAW;
    if (r->raw) /* nanoGPT raw uint16: the sniffed bytes are tokens */
        r->sniff_len = n;
    return 0;
}

int gk_shard_check_raw(gk_shard_reader *r, uint32_t vocab_size, gk_err *e)
{
    if (!r->raw)
        return 0;
    r->vocab_size = vocab_size;
    size_t k = r->sniff_len / 2;
    uint32_t ids[GK_SHARD_HEADER_BYTES / 2];
    size_t ok = gk_shard_decode(r->sniff, k, 2, vocab_size, ids);
    if (ok < k)
        return gk_errf(e, GK_EFORMAT,
                       "%s: not a token shard (no shard header, and read as raw uint16 tokens it "
                       "holds %u at position %zu, outside the %u-token vocabulary)",
                       r->name, gk_le16(r->sniff + 2 * ok), ok, vocab_size);
    return 0;
}

static size_t read_bytes(gk_shard_reader *r, unsigned char *dst, size_t n)
{
    size_t from_sniff = r->sniff_len - r->sniff_pos;
    if (from_sniff > n)
        from_sniff = n;
    memcpy(dst, r->sniff + r->sniff_pos, from_sniff);
    r->sniff_pos += from_sniff;
    return from_sniff + fread(dst + from_sniff, 1, n - from_sniff, r->fp);
}

int gk_shard_read(gk_shard_reader *r, uint32_t *out, size_t max, size_t *got, gk_err *e)
{
    int width = r->version == 1 ? 2 : 4;
    *got = 0;
    if (r->count >= 0 && (int64_t)max > r->count - r->delivered)
        max = (size_t)(r->count - r->delivered);
    if (max == 0)
        return 0;
    /* Decode in place: read into the tail of out, expand forwards (token i is read before
     * out[i] is written, and out[i] never reaches the bytes of a later token). */
    unsigned char *bytes = (unsigned char *)out + max * (size_t)(4 - width);
    size_t n = read_bytes(r, bytes, max * (size_t)width);
    if (ferror(r->fp))
        return gk_errno(e, r->name);
    if (n % (size_t)width)
        return gk_errf(e, GK_EFORMAT, "%s: file ends in the middle of a token", r->name);
    size_t k = n / (size_t)width, ok = gk_shard_decode(bytes, k, width, r->vocab_size, out);
    if (ok < k)
        return gk_errf(e, GK_EFORMAT,
                       "%s: token %u at position %lld is outside the vocabulary (%u)", r->name,
                       width == 2 ? gk_le16(bytes + 2 * ok) : gk_le32(bytes + 4 * ok),
                       (long long)(r->delivered + (int64_t)ok), r->vocab_size);
    r->delivered += (int64_t)k;
    if (k == 0 && r->count >= 0 && r->delivered < r->count)
        return gk_errf(e, GK_EFORMAT, "%s: truncated: header says %lld tokens, found %lld", r->name,
                       (long long)r->count, (long long)r->delivered);
    *got = k;
    return 0;
}

void gk_shard_close(gk_shard_reader *r)
{
    if (!r)
        return;
    if (r->fp && r->fp != stdin)
        fclose(r->fp);
    free(r->name);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- mapped shards */

static int map_header(gk_shard_map *m, gk_err *e)
{
    const unsigned char *b = m->base;
    size_t n = m->size < GK_SHARD_HEADER_BYTES ? m->size : GK_SHARD_HEADER_BYTES;
    gk_shard_kind kind;
    gk_shard_header h;
    int rc = gk_shard_parse(b, n, (int64_t)m->size, m->name, &kind, &h, e);
    if (rc)
        return rc;
    if (kind == GK_SHARD_TEXT)
        return gk_errf(e, GK_EFORMAT,
                       "%s: not a token shard (no shard header, and it reads as text)", m->name);
    m->raw = kind == GK_SHARD_RAW;
    if (m->raw && m->size % 2)
        return gk_errf(e, GK_EFORMAT, "%s: file ends in the middle of a token", m->name);
    m->width = h.width;
    m->tokens = b + (m->raw ? 0 : GK_SHARD_HEADER_BYTES);
    m->count = h.tokens;
    m->vocab_size = h.vocab_size;
    m->fingerprint = h.fingerprint;
    return 0;
}

int gk_shard_map_open(gk_shard_map *m, const char *path, gk_err *e)
{
    memset(m, 0, sizeof *m);
    if (!(m->name = strdup(path)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int fd = open(path, O_RDONLY), rc = 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        rc = gk_errno(e, path);
    else if (!S_ISREG(st.st_mode))
        rc = gk_errf(e, GK_EFORMAT, "%s: not a regular file", path);
    else if ((m->size = (size_t)st.st_size) > 0 &&
             (m->base = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        m->base = NULL;
        rc = gk_errno(e, path);
    }
    if (fd >= 0)
        close(fd);
    if (rc == 0 && m->size > 0)
        rc = map_header(m, e);
    else if (rc == 0)
        m->raw = 1, m->width = 2; /* empty: a raw file of no tokens */
    if (rc)
        gk_shard_map_close(m);
    return rc;
}

int gk_shard_map_get(const gk_shard_map *m, int64_t start, size_t n, uint32_t vocab_limit,
                     uint32_t *out, gk_err *e)
{
    if (start < 0 || start + (int64_t)n > m->count)
        return gk_errf(e, GK_EFORMAT, "%s: tokens [%lld, %lld) are past its end (%lld)", m->name,
                       (long long)start, (long long)(start + (int64_t)n), (long long)m->count);
    if (n == 0)
        return 0; /* an empty shard maps nothing: no pointer to offset */
    const unsigned char *p = m->tokens + (size_t)start * (size_t)m->width;
    size_t ok = gk_shard_decode(p, n, m->width, vocab_limit, out);
    if (ok < n)
        return gk_errf(e, GK_EFORMAT,
                       "%s: token %u at position %lld is outside the vocabulary (%u)", m->name,
                       m->width == 2 ? gk_le16(p + 2 * ok) : gk_le32(p + 4 * ok),
                       (long long)(start + (int64_t)ok), vocab_limit);
    return 0;
}

void gk_shard_map_close(gk_shard_map *m)
{
    if (!m)
        return;
    if (m->base)
        munmap(m->base, m->size);
    free(m->name);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- writer */

static void make_header(unsigned char *h, int version, int64_t count, uint32_t vocab, uint32_t fp)
{
    memset(h, 0, GK_SHARD_HEADER_BYTES);
    gk_put_le32(h, GK_SHARD_MAGIC);
    gk_put_le32(h + 4, (uint32_t)version);
    gk_put_le32(h + 8, (uint32_t)(int32_t)count);
    gk_put_le32(h + 12, vocab);
    gk_put_le32(h + 16, fp);
}

int gk_shard_writer_open(gk_shard_writer *w, const char *path, uint32_t vocab_size,
                         uint32_t fingerprint, gk_err *e)
{
    memset(w, 0, sizeof *w);
    w->version = vocab_size == 0 || vocab_size > 65536 ? 2 : 1;
    w->vocab_size = vocab_size;
    w->fingerprint = fingerprint;
    int rc = gk_outfile_open(&w->out, path, e);
    if (rc)
        return rc;
    unsigned char h[GK_SHARD_HEADER_BYTES];
    make_header(h, w->version, -1, vocab_size, fingerprint);
    rc = gk_outfile_write(&w->out, h, sizeof h, e);
    if (rc)
        gk_shard_writer_abort(w);
    return rc;
}

int gk_shard_writer_write(gk_shard_writer *w, const uint32_t *ids, size_t n, gk_err *e)
{
    if (w->count + (int64_t)n > GK_SHARD_MAX_TOKENS)
        return gk_errf(e, GK_EUSAGE,
                       "%s: more than 2^31-1 tokens in one shard; use "
                       "numbered shards (-o PREFIX --shard-tokens N)",
                       gk_outfile_name(&w->out));
    size_t width = w->version == 1 ? 2 : 4, need = n * width;
    if (need > w->buf_cap) {
        unsigned char *nb = realloc(w->buf, need);
        if (!nb)
            return gk_errf(e, GK_ENOMEM, "out of memory writing %s", gk_outfile_name(&w->out));
        w->buf = nb;
        w->buf_cap = need;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = w->buf + i * width;
        if (width == 2)
            gk_put_le16(p, (uint16_t)ids[i]);
        else
            gk_put_le32(p, ids[i]);
    }
    w->count += (int64_t)n;
    return gk_outfile_write(&w->out, w->buf, need, e);
}

int gk_shard_writer_finish(gk_shard_writer *w, gk_err *e)
{
    int rc = 0;
    if (w->out.seekable) {
        unsigned char c[4];
        gk_put_le32(c, (uint32_t)(int32_t)w->count);
        rc = gk_outfile_pwrite(&w->out, c, 4, 8, e);
    }
    if (rc == 0)
        rc = gk_outfile_commit(&w->out, e);
    else
        gk_outfile_abort(&w->out);
    free(w->buf);
    w->buf = NULL;
    return rc;
}

void gk_shard_writer_abort(gk_shard_writer *w)
{
    if (!w)
        return;
    gk_outfile_abort(&w->out);
    free(w->buf);
    w->buf = NULL;
}

/* ---------------------------------------------------------------- numbered shards */

static char *series_path(const gk_shard_series *s, int index)
{
    size_t n = strlen(s->prefix) + 32;
    char *path = malloc(n);
    if (path)
        snprintf(path, n, "%s_%06d.bin", s->prefix, index);
    return path;
}

int gk_shard_series_init(gk_shard_series *s, const char *prefix, int64_t max_tokens,
                         uint32_t vocab_size, uint32_t fingerprint, gk_err *e)
{
    memset(s, 0, sizeof *s);
    if (max_tokens < 1 || max_tokens > GK_SHARD_MAX_TOKENS)
        return gk_errf(e, GK_EUSAGE, "--shard-tokens must be between 1 and 2147483647");
    s->prefix = strdup(prefix);
    char *first = s->prefix ? series_path(s, 0) : NULL;
    int rc = first ? gk_outfile_check(first, e) : gk_errf(e, GK_ENOMEM, "out of memory");
    free(first);
    if (rc) { /* the shards are opened as they fill: say now that they cannot be */
        free(s->prefix);
        s->prefix = NULL;
        return rc;
    }
    s->max_tokens = max_tokens;
    s->vocab_size = vocab_size;
    s->fingerprint = fingerprint;
    return 0;
}

static int series_open_next(gk_shard_series *s, gk_err *e)
{
    char *path = series_path(s, s->index);
    if (!path)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int rc = gk_shard_writer_open(&s->w, path, s->vocab_size, s->fingerprint, e);
    free(path);
    if (rc == 0) {
        s->open = 1;
        s->index++;
    }
    return rc;
}

int gk_shard_series_write(gk_shard_series *s, const uint32_t *ids, size_t n, gk_err *e)
{
    while (n > 0) {
        int rc = 0;
        if (s->open && s->w.count == s->max_tokens) {
            s->open = 0;
            rc = gk_shard_writer_finish(&s->w, e);
        }
        if (rc == 0 && !s->open)
            rc = series_open_next(s, e);
        if (rc)
            return rc;
        size_t room = (size_t)(s->max_tokens - s->w.count), k = n < room ? n : room;
        rc = gk_shard_writer_write(&s->w, ids, k, e);
        if (rc)
            return rc;
        ids += k;
        n -= k;
    }
    return 0;
}

int gk_shard_series_finish(gk_shard_series *s, gk_err *e)
{
    int rc = 0;
    if (!s->open && s->index == 0) /* no tokens at all: still write one (empty) shard */
        rc = series_open_next(s, e);
    if (rc == 0 && s->open) {
        s->open = 0;
        rc = gk_shard_writer_finish(&s->w, e);
    }
    free(s->prefix);
    s->prefix = NULL;
    return rc;
}

void gk_shard_series_abort(gk_shard_series *s)
{
    if (!s)
        return;
    if (s->open)
        gk_shard_writer_abort(&s->w);
    s->open = 0;
    free(s->prefix);
    s->prefix = NULL;
}
