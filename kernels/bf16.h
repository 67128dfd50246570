/* bf16.h: bf16 <-> fp32 on the host, and element access by gk_elt, for the CPU-side code (the CPU
 * backends, the model's parameter loading). Owns nothing; pure inline functions. A bf16 value is
 * the high half of an fp32. */
#ifndef GK_BF16_H
#define GK_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/backend.h"

/* bf16 -> fp32, exact */
static inline float gk_bf16f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 -> bf16, round to nearest even (a NaN stays a NaN) */
static inline uint16_t gk_f2bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* Element i of a buffer of type t, as fp32; and the store that rounds to t. */
static inline float gk_elt_get(const void *p, gk_elt t, size_t i)
{
    return t == GK_BF16 ? gk_bf16f(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static inline void gk_elt_put(void *p, gk_elt t, size_t i, float x)
{
    if (t == GK_BF16) ((uint16_t *)p)[i] = gk_f2bf16(x);
    else ((float *)p)[i] = x;
}

#endif
