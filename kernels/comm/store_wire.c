/* store_wire.c: the rendezvous store's wire helpers (store_wire.h), shared by the client (store.c)
 * and the server (store_server.c, store_serve.c): the clock, little-endian integers, growable
 * buffers, frames and field readers. Pure functions of their arguments. */
#include "kernels/comm/store_wire.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/grow.h"

double gk_store_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Rounded up, so that a poll does not wake early and spin. */
int gk_store_ms_until(double deadline)
{
    double ms = (deadline - gk_store_now()) * 1e3;
    return ms <= 0 ? 0 : ms >= INT_MAX ? INT_MAX : (int)ms + 1;
}

void gk_store_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

uint32_t gk_store_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void gk_store_put_u64(uint8_t *p, uint64_t v)
{
    gk_store_put_u32(p, (uint32_t)v);
    gk_store_put_u32(p + 4, (uint32_t)(v >> 32));
}

uint64_t gk_store_get_u64(const uint8_t *p)
{
    return gk_store_get_u32(p) | (uint64_t)gk_store_get_u32(p + 4) << 32;
}

int gk_store_buf_reserve(gk_store_buf *b, size_t more)
{
    if (b->cap - b->n >= more)
        return 0;
    return more > SIZE_MAX - b->n || gk_grow(&b->p, &b->cap, b->n + more, 1, 256) ? -1 : 0;
}

int gk_store_buf_put(gk_store_buf *b, const void *p, size_t n)
{
    if (gk_store_buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

int gk_store_buf_field(gk_store_buf *b, const void *p, size_t n)
{
    uint8_t len[4];
    gk_store_put_u32(len, (uint32_t)n);
    return gk_store_buf_put(b, len, 4) || gk_store_buf_put(b, p, n) ? -1 : 0;
}

size_t gk_store_frame_begin(gk_store_buf *b, int code, int *fail)
{
    size_t at = b->n;
    uint8_t head[5] = {0, 0, 0, 0, (uint8_t)code};
    *fail |= gk_store_buf_put(b, head, 5);
    return at;
}

void gk_store_frame_end(gk_store_buf *b, size_t at)
{
    gk_store_put_u32(b->p + at, (uint32_t)(b->n - at - 4));
}

int gk_store_rd_field(gk_store_rd *r, const uint8_t **p, size_t *n)
{
    if (r->n < 4 || r->n - 4 < gk_store_get_u32(r->p))
        return -1;
    *n = gk_store_get_u32(r->p), *p = r->p + 4;
    r->p += 4 + *n, r->n -= 4 + *n;
    return 0;
}

int gk_store_rd_u64(gk_store_rd *r, uint64_t *v)
{
    const uint8_t *p;
    size_t n;
    if (gk_store_rd_field(r, &p, &n) || n != 8)
        return -1;
    *v = gk_store_get_u64(p);
    return 0;
}

int gk_store_rd_key(gk_store_rd *r, char *key)
{
    const uint8_t *p;
    size_t n;
    if (gk_store_rd_field(r, &p, &n) || n == 0 || n > MAX_KEY || memchr(p, 0, n))
        return -1;
    memcpy(key, p, n);
    key[n] = 0;
    return 0;
}
