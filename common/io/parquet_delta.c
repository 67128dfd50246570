/* parquet_delta.c: DELTA_BINARY_PACKED, one value at a time (see parquet_int.h), as the lengths
 * of DELTA_LENGTH_BYTE_ARRAY and the prefix and suffix lengths of DELTA_BYTE_ARRAY use it.
 * A stream: <block size> <miniblocks a block> <value count> <first value, zigzag>, then blocks:
 * <min delta, zigzag> <one bit width a miniblock> <miniblocks, each block/miniblocks deltas
 * bit-packed LSB first>; the last block holds only the miniblocks it needs. Nothing is
 * decoded into arrays; where a stream ends is found by skipping whole miniblocks. */
#include <string.h>

#include "common/io/parquet_int.h"

static int uvarint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return -1;
        uint8_t c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int zvarint(const uint8_t **p, const uint8_t *end, int64_t *out)
{
    uint64_t v;
    if (uvarint(p, end, &v)) return -1;
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 0;
}

int pq_delta_init(pq_delta *d, const uint8_t *p, size_t n, long long max_values)
{
    uint64_t block, nmini, total;
    memset(d, 0, sizeof *d);
    d->end = p + n;
    if (uvarint(&p, d->end, &block) || uvarint(&p, d->end, &nmini) || uvarint(&p, d->end, &total) ||
        zvarint(&p, d->end, &d->value))
        return -1;
    if (block == 0 || block % 128 || nmini == 0 || block % nmini || (block / nmini) % 32 ||
        block > (1u << 20) || total > (uint64_t)max_values)
        return -1;
    d->p = p;
    d->per_mini = block / nmini, d->nmini = nmini, d->left = total;
    d->first = total > 0;
    d->mini = nmini; /* a block header comes first */
    return 0;
}

/* Moves to the next miniblock (reading a block header when one ends). */
static int next_mini(pq_delta *d)
{
    if (d->mini + 1 >= d->nmini) {
        if (zvarint(&d->p, d->end, &d->min_delta)) return -1;
        if ((uint64_t)(d->end - d->p) < d->nmini) return -1;
        d->widths = d->p;
        d->p += d->nmini;
        d->mini = 0;
    } else {
        d->mini++;
    }
    d->width = d->widths[d->mini];
    if (d->width > 64) return -1;
    uint64_t bytes = d->per_mini * (uint64_t)d->width / 8, left = (uint64_t)(d->end - d->p);
    d->mini_p = d->p;
    d->mini_bytes = bytes < left ? bytes : left; /* a short last miniblock keeps what is there */
    d->p += d->mini_bytes;
    d->in_mini = 0;
    return 0;
}

int pq_delta_next(pq_delta *d, int64_t *v)
{
    if (d->left == 0) return -1;
    d->left--;
    if (d->first) {
        d->first = 0;
        *v = d->value;
        return 0;
    }
    if ((d->mini >= d->nmini || d->in_mini == d->per_mini) && next_mini(d)) return -1;
    uint64_t bit = d->in_mini * (uint64_t)d->width;
    if (bit + (uint64_t)d->width > d->mini_bytes * 8) return -1;
    uint64_t lo = 0, hi = 0;
    size_t byte = (size_t)(bit >> 3), need = (size_t)((bit & 7) + (uint64_t)d->width + 7) / 8;
    for (size_t i = 0; i < need && i < 8; i++) lo |= (uint64_t)d->mini_p[byte + i] << (8 * i);
    if (need > 8) hi = d->mini_p[byte + 8];
    int sh = (int)(bit & 7);
    uint64_t bits = sh ? lo >> sh | hi << (64 - sh) : lo;
    if (d->width < 64) bits &= (1ull << d->width) - 1;
    d->value = (int64_t)((uint64_t)d->value + (uint64_t)d->min_delta + bits);
    d->in_mini++;
    *v = d->value;
    return 0;
}

const uint8_t *pq_delta_end(const pq_delta *stream)
{
    pq_delta d = *stream;
    if (d.first) d.first = 0, d.left--;
    while (d.left > 0) {
        if ((d.mini >= d.nmini || d.in_mini == d.per_mini) && next_mini(&d)) return NULL;
        uint64_t k = d.per_mini - d.in_mini < d.left ? d.per_mini - d.in_mini : d.left;
        if ((d.in_mini + k) * (uint64_t)d.width > d.mini_bytes * 8) return NULL;
        d.in_mini += k, d.left -= k;
    }
    return d.p;
}
