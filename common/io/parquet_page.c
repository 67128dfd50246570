/* parquet_page.c: the pages of one column chunk held in memory (see parquet_int.h): page
 * headers, the codecs (zstd, snappy, zlib, lz4 from Debian's libraries), definition levels and
 * dictionary indices in the RLE/bit-packed hybrid, PLAIN byte arrays. Levels are decoded one
 * at a time, never into arrays, so a page's memory is its bytes whatever counts it declares. */
#include <limits.h>
#include <lz4.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "common/io/parquet_int.h"

/* ---- the RLE/bit-packed hybrid ---- */

void pq_rle_init(pq_rle *r, const uint8_t *p, size_t n, int width)
{
    *r = (pq_rle){.p = p, .end = p + n, .width = width};
}

static int rle_run(pq_rle *r)
{
    uint64_t h = 0;
    for (int shift = 0;; shift += 7) {
        if (r->p >= r->end || shift > 28) return -1;
        uint8_t c = *r->p++;
        h |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) break;
    }
    if (h & 1) { /* bit-packed: (h >> 1) groups of 8 values; a short last run keeps what is there */
        uint64_t bytes = (h >> 1) * (uint64_t)r->width, left = (uint64_t)(r->end - r->p);
        r->packed = r->p;
        r->bit = 0;
        r->packed_left = (h >> 1) * 8;
        if (bytes > left) {
            bytes = left;
            r->packed_left = r->width ? left * 8 / (uint64_t)r->width : r->packed_left;
        }
        r->p += bytes;
    } else {
        int nbytes = (r->width + 7) / 8;
        if (r->end - r->p < nbytes) return -1;
        r->value = 0;
        for (int i = 0; i < nbytes; i++) r->value |= (uint32_t)r->p[i] << (8 * i);
        r->p += nbytes;
        r->rle_left = h >> 1;
    }
    return 0;
}

int pq_rle_next(pq_rle *r, uint32_t *v)
{
    while (!r->rle_left && !r->packed_left)
        if (rle_run(r)) return -1;
    if (r->rle_left) {
        r->rle_left--;
        *v = r->value;
        return 0;
    }
    uint64_t acc = 0, byte = r->bit >> 3;
    int shift = (int)(r->bit & 7), need = (shift + r->width + 7) / 8;
    for (int i = 0; i < need; i++) acc |= (uint64_t)r->packed[byte + i] << (8 * i);
    *v = (uint32_t)((acc >> shift) & ((1ull << r->width) - 1));
    r->bit += (uint64_t)r->width;
    r->packed_left--;
    return 0;
}

static int bit_width(long long max)
{
    int w = 0;
    while (max >> w) w++;
    return w;
}

/* ---- codecs ---- */

static int gunzip(const uint8_t *src, size_t n, uint8_t *dst, size_t want, gk_err *e)
{
    z_stream z = {0};
    if (inflateInit2(&z, 15 + 32) != Z_OK) return gk_errf(e, GK_ENOMEM, "zlib: cannot start");
    z.next_in = (Bytef *)src, z.avail_in = (uInt)n;
    z.next_out = dst, z.avail_out = (uInt)want;
    int rc;
    while ((rc = inflate(&z, Z_FINISH)) == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0)
        inflateReset(&z); /* concatenated gzip members */
    size_t got = want - z.avail_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || got != want || z.avail_in > 0)
        return gk_errf(e, GK_EFORMAT, "GZIP page does not inflate to its %zu bytes (%s)", want,
                       rc == Z_STREAM_END ? "size differs" : z.msg ? z.msg : "truncated or longer");
    return 0;
}

/* LZ4 as Hadoop frames it (big-endian uncompressed and compressed sizes before each block);
 * -1 when the data is not so framed. */
static int lz4_hadoop(const uint8_t *src, size_t n, uint8_t *dst, size_t want)
{
    size_t done = 0;
    while (n >= 8) {
        uint32_t ulen = (uint32_t)src[0] << 24 | src[1] << 16 | src[2] << 8 | src[3];
        uint32_t clen = (uint32_t)src[4] << 24 | src[5] << 16 | src[6] << 8 | src[7];
        if (clen > n - 8 || ulen > want - done || clen > INT_MAX || ulen > INT_MAX) return -1;
        if (LZ4_decompress_safe((const char *)src + 8, (char *)dst + done, (int)clen, (int)ulen) !=
            (int)ulen)
            return -1;
        done += ulen, src += 8 + clen, n -= 8 + (size_t)clen;
    }
    return n == 0 && done == want ? 0 : -1;
}

int pq_decompress(pq_cursor *c, const uint8_t *src, size_t n, uint8_t *dst, size_t want, gk_err *e)
{
    const char *name = pq_codec_name(c->codec);
    size_t got;
    switch (c->codec) {
    case PQ_SNAPPY:
        if (snappy_uncompressed_length((const char *)src, n, &got) != SNAPPY_OK || got != want ||
            snappy_uncompress((const char *)src, n, (char *)dst, &got) != SNAPPY_OK || got != want)
            return gk_errf(e, GK_EFORMAT, "SNAPPY page does not uncompress to its %zu bytes", want);
        return 0;
    case PQ_GZIP:
        return gunzip(src, n, dst, want, e);
    case PQ_ZSTD:
        if (!c->zstd && !(c->zstd = ZSTD_createDCtx()))
            return gk_errf(e, GK_ENOMEM, "zstd: out of memory");
        got = ZSTD_decompressDCtx(c->zstd, dst, want, src, n);
        if (ZSTD_isError(got) || got != want)
            return gk_errf(e, GK_EFORMAT, "ZSTD page does not uncompress to its %zu bytes (%s)",
                           want, ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size differs");
        return 0;
    case PQ_LZ4:
        if (lz4_hadoop(src, n, dst, want) == 0) return 0;
        __attribute__((fallthrough)); /* a bare block, as early parquet-cpp wrote LZ4 */
    case PQ_LZ4_RAW:
        if (n > INT_MAX || want > INT_MAX ||
            LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)want) != (int)want)
            return gk_errf(e, GK_EFORMAT, "%s page does not uncompress to its %zu bytes", name,
                           want);
        return 0;
    default:
        return gk_errf(e, GK_EFORMAT,
                       "pages compressed with %s: not supported "
                       "(UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4, LZ4_RAW are)",
                       name);
    }
}

/* The body of a page (or of its values in v2) uncompressed: in the chunk itself when not
 * compressed, else into *buf (grown to want). */
static int body(pq_cursor *c, const uint8_t *src, size_t n, size_t want, int compressed,
                uint8_t **buf, size_t *cap, const uint8_t **out, gk_err *e)
{
    if (c->codec == PQ_UNCOMPRESSED || !compressed) {
        if (n != want)
            return gk_errf(e, GK_EFORMAT, "an uncompressed page of %zu bytes declares %zu", n,
                           want);
        *out = src;
        return 0;
    }
    if (want > c->max_page)
        return gk_errf(e, GK_EFORMAT, "a page of %zu bytes uncompressed, over the limit of %zu",
                       want, c->max_page);
    if (*cap < want || !*buf) {
        uint8_t *nb = realloc(*buf, want ? want : 1);
        if (!nb) return gk_errf(e, GK_ENOMEM, "out of memory for a page of %zu bytes", want);
        *buf = nb, *cap = want ? want : 1;
    }
    *out = *buf;
    return pq_decompress(c, src, n, *buf, want, e);
}

/* ---- pages ---- */

void pq_cursor_begin(pq_cursor *c, const uint8_t *chunk, size_t len, int codec, int max_def,
                     size_t max_page, long long expect)
{
    c->expect = expect, c->nulls = 0;
    c->chunk = chunk, c->len = len, c->pos = 0;
    c->codec = codec, c->max_def = max_def, c->max_page = max_page;
    c->have_dict = c->seen_data = 0;
    c->ndict = c->values = c->left = 0;
}

static int dictionary(pq_cursor *c, const pq_page_header *h, const uint8_t *src, gk_err *e)
{
    const uint8_t *p;
    if (c->have_dict || c->seen_data)
        return gk_errf(e, GK_EFORMAT, "a dictionary page %s",
                       c->have_dict ? "after another" : "after data pages");
    if (h->encoding != PQ_PLAIN && h->encoding != PQ_PLAIN_DICTIONARY)
        return gk_errf(e, GK_EFORMAT, "a dictionary page encoded %s: not supported",
                       pq_encoding_name(h->encoding));
    int rc = body(c, src, (size_t)h->compressed, (size_t)h->uncompressed, 1, &c->dict_buf,
                  &c->dict_cap, &p, e);
    if (rc) return rc;
    size_t n = (size_t)h->uncompressed, at = 0;
    if (h->num_values > (long long)(n / 4))
        return gk_errf(e, GK_EFORMAT, "a dictionary page of %zu bytes declares %lld values", n,
                       h->num_values);
    if (h->num_values > c->dict_entries_cap) {
        pq_str *d = realloc(c->dict, (size_t)h->num_values * sizeof *d);
        if (!d)
            return gk_errf(e, GK_ENOMEM, "out of memory for a dictionary of %lld values",
                           h->num_values);
        c->dict = d, c->dict_entries_cap = h->num_values;
    }
    for (long long i = 0; i < h->num_values; i++) {
        uint32_t len =
            (uint32_t)p[at] | p[at + 1] << 8 | p[at + 2] << 16 | (uint32_t)p[at + 3] << 24;
        at += 4;
        if (len > n - at)
            return gk_errf(e, GK_EFORMAT, "dictionary value %lld runs past its page", i);
        c->dict[i] = (pq_str){(uint32_t)at, len};
        at += len;
        if (i + 1 < h->num_values && n - at < 4)
            return gk_errf(e, GK_EFORMAT, "dictionary value %lld runs past its page", i + 1);
    }
    c->dict_src = p;
    c->ndict = h->num_values;
    c->have_dict = 1;
    return 0;
}

/* Levels of a v1 page: a 4-byte length, then that many bytes of the hybrid. */
static int v1_levels(pq_rle *r, const uint8_t **p, const uint8_t *end, int width, int encoding,
                     gk_err *e)
{
    if (encoding != PQ_RLE)
        return gk_errf(e, GK_EFORMAT, "definition levels encoded %s: not supported",
                       pq_encoding_name(encoding));
    if (end - *p < 4) return gk_errf(e, GK_EFORMAT, "definition levels run past the page");
    uint32_t n = (uint32_t)(*p)[0] | (*p)[1] << 8 | (*p)[2] << 16 | (uint32_t)(*p)[3] << 24;
    *p += 4;
    if (n > (size_t)(end - *p))
        return gk_errf(e, GK_EFORMAT, "definition levels of %u bytes run past the page", n);
    pq_rle_init(r, *p, n, width);
    *p += n;
    return 0;
}

/* The values section p[0..end) of a data page, in its encoding. */
static int values_begin(pq_cursor *c, int enc, const uint8_t *p, const uint8_t *end, long long n,
                        gk_err *e)
{
    c->vp = p, c->vend = end;
    c->encoding = enc == PQ_PLAIN_DICTIONARY ? PQ_RLE_DICTIONARY : enc;
    switch (c->encoding) {
    case PQ_PLAIN: return 0;
    case PQ_RLE_DICTIONARY:
        if (!c->have_dict)
            return gk_errf(e, GK_EFORMAT, "a dictionary-encoded page and no dictionary page");
        if (p < end && *p > 32) return gk_errf(e, GK_EFORMAT, "dictionary indices of %d bits", *p);
        pq_rle_init(&c->idx, p + (p < end), (size_t)(end - p - (p < end)), p < end ? *p : 0);
        return 0;
    case PQ_DELTA_LENGTH_BYTE_ARRAY:
    case PQ_DELTA_BYTE_ARRAY:
        c->prev_len = 0;
        memset(&c->lens, 0, sizeof c->lens); /* no values left: any asked for runs past the page */
        memset(&c->prefixes, 0, sizeof c->prefixes);
        if (p == end) return 0;
        if (c->encoding == PQ_DELTA_BYTE_ARRAY) {
            if (pq_delta_init(&c->prefixes, p, (size_t)(end - p), n) ||
                !(p = pq_delta_end(&c->prefixes)))
                return gk_errf(e, GK_EFORMAT, "damaged DELTA_BYTE_ARRAY prefix lengths");
        }
        if (pq_delta_init(&c->lens, p, (size_t)(end - p), n) || !(c->vp = pq_delta_end(&c->lens)))
            return gk_errf(e, GK_EFORMAT, "damaged %s lengths", pq_encoding_name(enc));
        return 0;
    default:
        return gk_errf(e, GK_EFORMAT,
                       "values encoded %s: not supported (PLAIN, "
                       "dictionaries and DELTA_*BYTE_ARRAY are)",
                       pq_encoding_name(enc));
    }
}

static int data_page(pq_cursor *c, const pq_page_header *h, const uint8_t *src, gk_err *e)
{
    int v2 = h->type == PQ_DATA_PAGE_V2, width = bit_width(c->max_def), rc;
    if (v2 ? !h->have_v2 : !h->have_data)
        return gk_errf(e, GK_EFORMAT, "a data page without its header");
    if (h->num_values > c->expect - c->values)
        return gk_errf(e, GK_EFORMAT, "the pages hold over %lld values, the footer says %lld",
                       c->values + h->num_values - 1, c->expect);
    const uint8_t *p, *end;
    if (v2) {
        long long lv = h->rep_len + h->def_len;
        if (lv > h->compressed || lv > h->uncompressed)
            return gk_errf(e, GK_EFORMAT, "levels of %lld bytes in a page of %lld", lv,
                           h->compressed);
        if (h->rep_len)
            return gk_errf(e, GK_EFORMAT, "repetition levels in a column that is not repeated");
        pq_rle_init(&c->def, src, (size_t)h->def_len, width);
        rc = body(c, src + lv, (size_t)(h->compressed - lv), (size_t)(h->uncompressed - lv),
                  h->is_compressed, &c->page, &c->page_cap, &p, e);
        if (rc) return rc;
        end = p + (h->uncompressed - lv);
    } else {
        rc = body(c, src, (size_t)h->compressed, (size_t)h->uncompressed, 1, &c->page, &c->page_cap,
                  &p, e);
        if (rc) return rc;
        end = p + h->uncompressed;
        if (c->max_def > 0 && (rc = v1_levels(&c->def, &p, end, width, h->def_encoding, e)))
            return rc;
    }
    if ((rc = values_begin(c, h->encoding, p, end, h->num_values, e))) return rc;
    c->left = h->num_values;
    c->values += h->num_values;
    c->seen_data = 1;
    return 0;
}

/* Reads page headers until a data page with levels left, or the chunk's end (returns 1). */
static int next_page(pq_cursor *c, gk_err *e)
{
    while (c->left == 0) {
        if (c->pos >= c->len) return 1;
        pq_page_header h;
        size_t used;
        int rc = pq_read_page_header(c->chunk + c->pos, c->len - c->pos, &h, &used, e);
        if (rc) return rc;
        size_t at = c->pos + used;
        if ((unsigned long long)h.compressed > c->len - at)
            return gk_errf(e, GK_EFORMAT,
                           "a page of %lld bytes at chunk byte %zu "
                           "runs past the chunk's end (%zu bytes)",
                           h.compressed, c->pos, c->len);
        c->pos = at + (size_t)h.compressed;
        if (h.have_crc && (uint32_t)crc32(0, c->chunk + at, (uInt)h.compressed) != h.crc)
            return gk_errf(e, GK_EFORMAT, "the page at chunk byte %zu fails its checksum (damaged)",
                           at - used);
        if (h.type == PQ_DICTIONARY_PAGE) {
            if (!h.have_dict) return gk_errf(e, GK_EFORMAT, "a dictionary page without its header");
            rc = dictionary(c, &h, c->chunk + at, e);
        } else if (h.type == PQ_DATA_PAGE || h.type == PQ_DATA_PAGE_V2) {
            rc = data_page(c, &h, c->chunk + at, e);
        }
        if (rc) return rc;
    }
    return 0;
}

/* DELTA_BYTE_ARRAY: the previous value's first `prefix` bytes, then the suffix. */
static int delta_value(pq_cursor *c, const uint8_t **s, size_t *len, gk_err *e)
{
    int64_t prefix = 0, n;
    if (c->encoding == PQ_DELTA_BYTE_ARRAY && pq_delta_next(&c->prefixes, &prefix))
        return gk_errf(e, GK_EFORMAT, "DELTA_BYTE_ARRAY prefix lengths run past the page");
    if (pq_delta_next(&c->lens, &n))
        return gk_errf(e, GK_EFORMAT, "%s lengths run past the page",
                       pq_encoding_name(c->encoding));
    if (n < 0 || n > c->vend - c->vp)
        return gk_errf(e, GK_EFORMAT, "a value of %lld bytes runs past the page", (long long)n);
    if (c->encoding == PQ_DELTA_LENGTH_BYTE_ARRAY) {
        *s = c->vp, *len = (size_t)n;
        c->vp += n;
        return 0;
    }
    if (prefix < 0 || (uint64_t)prefix > c->prev_len)
        return gk_errf(e, GK_EFORMAT, "a prefix of %lld bytes of a value of %zu", (long long)prefix,
                       c->prev_len);
    /* at most the page's bytes: each byte came from a suffix */
    size_t want = (size_t)prefix + (size_t)n;
    if (want > c->prev_cap) {
        uint8_t *nb = realloc(c->prev, want);
        if (!nb) return gk_errf(e, GK_ENOMEM, "out of memory for a value of %zu bytes", want);
        c->prev = nb, c->prev_cap = want;
    }
    if (n) memcpy(c->prev + prefix, c->vp, (size_t)n);
    c->vp += n;
    c->prev_len = want;
    *s = c->prev, *len = want;
    return 0;
}

static int value(pq_cursor *c, const uint8_t **s, size_t *len, gk_err *e)
{
    uint32_t i, n;
    switch (c->encoding) {
    case PQ_RLE_DICTIONARY:
        if (pq_rle_next(&c->idx, &i))
            return gk_errf(e, GK_EFORMAT, "dictionary indices run past the page");
        if (i >= c->ndict)
            return gk_errf(e, GK_EFORMAT, "dictionary index %u out of range (%lld values)", i,
                           c->ndict);
        *s = c->dict_src + c->dict[i].off, *len = c->dict[i].len;
        return 0;
    case PQ_PLAIN:
        if (c->vend - c->vp < 4) return gk_errf(e, GK_EFORMAT, "values run past the page");
        n = (uint32_t)c->vp[0] | c->vp[1] << 8 | c->vp[2] << 16 | (uint32_t)c->vp[3] << 24;
        c->vp += 4;
        if (n > (size_t)(c->vend - c->vp))
            return gk_errf(e, GK_EFORMAT, "a value of %u bytes runs past the page", n);
        *s = c->vp, *len = n;
        c->vp += n;
        return 0;
    default:
        return delta_value(c, s, len, e);
    }
}

int pq_cursor_next(pq_cursor *c, const uint8_t **s, size_t *len, int *what, gk_err *e)
{
    for (;;) {
        int rc = next_page(c, e);
        if (rc < 0) return rc;
        if (rc == 1) {
            *what = PQ_END;
            return 0;
        }
        if (c->max_def > 0 && c->def.rle_left && c->def.value < (uint32_t)c->max_def) {
            /* a run of nulls at once: a few bytes may stand for millions */
            long long k =
                (long long)c->def.rle_left < c->left ? (long long)c->def.rle_left : c->left;
            c->def.rle_left -= (uint64_t)k, c->left -= k, c->nulls += k;
            continue;
        }
        c->left--;
        if (c->max_def > 0) {
            uint32_t d;
            if (pq_rle_next(&c->def, &d))
                return gk_errf(e, GK_EFORMAT, "definition levels run past their end");
            if (d > (uint32_t)c->max_def)
                return gk_errf(e, GK_EFORMAT, "definition level %u over the column's %d", d,
                               c->max_def);
            if (d < (uint32_t)c->max_def) {
                c->nulls++;
                continue;
            }
        }
        *what = PQ_VALUE;
        return value(c, s, len, e);
    }
}

void pq_cursor_free(pq_cursor *c)
{
    free(c->page);
    free(c->dict_buf);
    free(c->dict);
    free(c->prev);
    ZSTD_freeDCtx(c->zstd);
    *c = (pq_cursor){0};
}
