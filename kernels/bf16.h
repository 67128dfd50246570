/* bf16.h: bf16, fp16 and Q8_0 <-> fp32 on the host, and element access by gk_elt, for the CPU-side
 * code (the CPU backends, the model's parameter loading). Owns nothing; pure inline functions. A bf16
 * value is the high half of an fp32; an fp16 value is IEEE binary16 (portable bit code here; the
 * CPU backend's fast kernels convert with F16C). */
#ifndef GK_BF16_H
#define GK_BF16_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/io/q8.h"
#include "kernels/backend.h"

/* an fp32's bits, and the fp32 of bits */
static inline uint32_t gk_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float gk_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* bf16 -> fp32, exact */
static inline float gk_bf16f(uint16_t h) { return gk_bits_f32((uint32_t)h << 16); }

/* fp32 -> bf16, round to nearest even (a NaN stays a NaN) */
static inline uint16_t gk_f2bf16(float f)
{
    uint32_t u = gk_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* fp16 -> fp32, exact (subnormals, infinities and NaNs included) */
static inline float gk_f16f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) {
        u = sign | 0x7f800000u | (m << 13);
    } else if (e) {
        u = sign | ((e + 112) << 23) | (m << 13);
    } else { /* zero or subnormal: m * 2^-24, exact in fp32 */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return gk_bits_f32(u);
}

/* fp32 -> fp16, round to nearest even; overflow to infinity, a NaN stays a NaN */
static inline uint16_t gk_f2f16(float f)
{
    uint32_t u = gk_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t ax = u & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) { /* below 2^-14: subnormal m * 2^-24, RNE */
        if (ax < 0x33000000u) return sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, sh = 126 - e;
        uint32_t r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

/* Element i of a GK_Q8 buffer (backend.h): its block's scale times its int8 */
static inline float gk_q8_get(const void *p, size_t i)
{
    const uint8_t *b = (const uint8_t *)p + i / GK_Q8_BLOCK * GK_Q8_BLOCK_BYTES;
    uint16_t d;
    memcpy(&d, b, 2);
    return gk_f16f(d) * (float)(int8_t)b[2 + i % GK_Q8_BLOCK];
}

/* x[0..32) -> one GK_Q8 block at out (34 bytes), by common/io/q8.h's rule (the checkpoint
 * format's): d = max|x| / 127 as fp16, q = x / d rounded half away from zero, as llama.cpp's
 * quantize_row_q8_0. Requantizing d * q gives d and q back. */
static inline void gk_q8_quantize_block(const float *x, uint8_t *out)
{
    uint16_t d;
    int8_t q[GK_Q8_BLOCK];
    gk_q8_quantize32(x, 1, &d, q);
    memcpy(out, &d, 2);
    memcpy(out + 2, q, GK_Q8_BLOCK);
}

/* Element i of a buffer of type t, as fp32; and the store that rounds to t (not GK_Q8, whose
 * blocks are quantized whole: gk_q8_quantize_block). */
static inline float gk_elt_get(const void *p, gk_elt t, size_t i)
{
    if (t == GK_BF16) return gk_bf16f(((const uint16_t *)p)[i]);
    if (t == GK_F16) return gk_f16f(((const uint16_t *)p)[i]);
    if (t == GK_Q8) return gk_q8_get(p, i);
    return ((const float *)p)[i];
}
static inline void gk_elt_put(void *p, gk_elt t, size_t i, float x)
{
    if (t == GK_BF16) ((uint16_t *)p)[i] = gk_f2bf16(x);
    else if (t == GK_F16) ((uint16_t *)p)[i] = gk_f2f16(x);
    else ((float *)p)[i] = x;
}

#endif
