/* shard.c: token shard reader and writers (format in shard.h). */
#include "common/io/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- little-endian helpers */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* ---------------------------------------------------------------- reader */

static int check_header(gk_shard_reader *r, const unsigned char *h, gk_err *e)
{
    int32_t version = (int32_t)le32(h + 4), count = (int32_t)le32(h + 8);
    if (version != 1 && version != 2)
        return gk_errf(e, GK_EFORMAT, "%s: unsupported shard version %d (expected 1 or 2)",
                       r->name, version);
    if (count < -1)
        return gk_errf(e, GK_EFORMAT, "%s: bad token count %d in header", r->name, count);
    r->version = version;
    r->count = count;
    r->vocab_size = le32(h + 12);
    r->fingerprint = le32(h + 16);
    struct stat st;
    if (count >= 0 && fstat(fileno(r->fp), &st) == 0 && S_ISREG(st.st_mode)) {
        int64_t want = GK_SHARD_HEADER_BYTES + (int64_t)count * (version == 1 ? 2 : 4);
        if (st.st_size != want)
            return gk_errf(e, GK_EFORMAT,
                           "%s: header says %d tokens (%lld bytes) but the file has %lld bytes%s",
                           r->name, count, (long long)want, (long long)st.st_size,
                           st.st_size < want ? " (truncated?)" : "");
    }
    return 0;
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
    int rc = 0;
    if (n >= 4 && le32(r->sniff) == GK_SHARD_MAGIC) {
        rc = n < sizeof r->sniff
                 ? gk_errf(e, GK_EFORMAT, "%s: truncated shard header (%zu of 1024 bytes)", r->name, n)
                 : check_header(r, r->sniff, e);
    } else { /* nanoGPT raw uint16: the sniffed bytes are tokens */
        r->raw = 1;
        r->version = 1;
        r->count = -1;
        r->sniff_len = n;
    }
    if (rc)
        gk_shard_close(r);
    return rc;
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
    size_t width = r->version == 1 ? 2 : 4;
    *got = 0;
    if (r->count >= 0 && (int64_t)max > r->count - r->delivered)
        max = (size_t)(r->count - r->delivered);
    if (max == 0)
        return 0;
    /* Decode in place: read into the tail of out, expand forwards. */
    unsigned char *bytes = (unsigned char *)out + max * (4 - width);
    size_t n = read_bytes(r, bytes, max * width);
    if (ferror(r->fp))
        return gk_errno(e, r->name);
    if (n % width)
        return gk_errf(e, GK_EFORMAT, "%s: file ends in the middle of a token", r->name);
    size_t k = n / width;
    for (size_t i = 0; i < k; i++) {
        const unsigned char *p = bytes + i * width;
        uint32_t v = width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : le32(p);
        if (r->vocab_size && v >= r->vocab_size)
            return gk_errf(e, GK_EFORMAT, "%s: token %u at position %lld is outside the vocabulary (%u)",
                           r->name, v, (long long)(r->delivered + (int64_t)i), r->vocab_size);
        out[i] = v;
    }
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
    const unsigned char *h = m->base;
    if (m->size >= 4 && le32(h) == GK_SHARD_MAGIC) {
        if (m->size < GK_SHARD_HEADER_BYTES)
            return gk_errf(e, GK_EFORMAT, "%s: truncated shard header (%zu of 1024 bytes)", m->name, m->size);
        int32_t version = (int32_t)le32(h + 4), count = (int32_t)le32(h + 8);
        if (version != 1 && version != 2)
            return gk_errf(e, GK_EFORMAT, "%s: unsupported shard version %d (expected 1 or 2)",
                           m->name, version);
        m->width = version == 1 ? 2 : 4;
        m->vocab_size = le32(h + 12);
        m->fingerprint = le32(h + 16);
        m->tokens = h + GK_SHARD_HEADER_BYTES;
        size_t body = m->size - GK_SHARD_HEADER_BYTES;
        if (body % (size_t)m->width)
            return gk_errf(e, GK_EFORMAT, "%s: file ends in the middle of a token", m->name);
        m->count = (int64_t)(body / (size_t)m->width);
        if (count >= 0 && count != m->count)
            return gk_errf(e, GK_EFORMAT, "%s: header says %d tokens but the file holds %lld%s",
                           m->name, count, (long long)m->count, count > m->count ? " (truncated?)" : "");
        return 0;
    }
    m->raw = 1;
    m->width = 2;
    m->tokens = m->base;
    if (m->size % 2)
        return gk_errf(e, GK_EFORMAT, "%s: file ends in the middle of a token", m->name);
    m->count = (int64_t)(m->size / 2);
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
    const unsigned char *p = m->tokens + (size_t)start * (size_t)m->width;
    for (size_t i = 0; i < n; i++, p += m->width) {
        uint32_t v = m->width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : le32(p);
        if (vocab_limit && v >= vocab_limit)
            return gk_errf(e, GK_EFORMAT, "%s: token %u at position %lld is outside the vocabulary (%u)",
                           m->name, v, (long long)(start + (int64_t)i), vocab_limit);
        out[i] = v;
    }
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
    put_le32(h, GK_SHARD_MAGIC);
    put_le32(h + 4, (uint32_t)version);
    put_le32(h + 8, (uint32_t)(int32_t)count);
    put_le32(h + 12, vocab);
    put_le32(h + 16, fp);
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
        return gk_errf(e, GK_EUSAGE, "%s: more than 2^31-1 tokens in one shard; use numbered shards "
                       "(-o PREFIX --shard-tokens N)", gk_outfile_name(&w->out));
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
        if (width == 2) {
            p[0] = (unsigned char)ids[i];
            p[1] = (unsigned char)(ids[i] >> 8);
        } else {
            put_le32(p, ids[i]);
        }
    }
    w->count += (int64_t)n;
    return gk_outfile_write(&w->out, w->buf, need, e);
}

int gk_shard_writer_finish(gk_shard_writer *w, gk_err *e)
{
    int rc = 0;
    if (w->out.seekable) {
        unsigned char c[4];
        put_le32(c, (uint32_t)(int32_t)w->count);
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

int gk_shard_series_init(gk_shard_series *s, const char *prefix, int64_t max_tokens,
                         uint32_t vocab_size, uint32_t fingerprint, gk_err *e)
{
    memset(s, 0, sizeof *s);
    if (max_tokens < 1 || max_tokens > GK_SHARD_MAX_TOKENS)
        return gk_errf(e, GK_EUSAGE, "--shard-tokens must be between 1 and 2147483647");
    s->prefix = strdup(prefix);
    if (!s->prefix)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    s->max_tokens = max_tokens;
    s->vocab_size = vocab_size;
    s->fingerprint = fingerprint;
    return 0;
}

static int series_open_next(gk_shard_series *s, gk_err *e)
{
    size_t n = strlen(s->prefix) + 32;
    char *path = malloc(n);
    if (!path)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    snprintf(path, n, "%s_%06d.bin", s->prefix, s->index);
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
