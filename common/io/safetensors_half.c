/* safetensors_half.c: fp32 <-> bf16 / fp16 conversion (see safetensors.h). Bit-exact integer code:
 * no dependence on the FPU rounding mode or on compiler support for _Float16. */
#include "common/io/safetensors.h"

#include <math.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t gk_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, make it quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float gk_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

/* |f| below 2^-14: an fp16 subnormal (or zero), m * 2^-24 rounded to nearest even. */
static uint16_t f16_subnormal(uint32_t ax)
{
    if (ax < 0x33000000u) /* below 2^-25 (half the smallest subnormal): zero */
        return 0;
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* value = m * 2^(e-150) = (m >> shift) * 2^-24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u)))
        r++; /* may carry into the smallest normal, 0x0400, which is the right encoding */
    return (uint16_t)r;
}

uint16_t gk_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t ax = u & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (incl. inf): rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u)
        return (uint16_t)(sign | f16_subnormal(ax));
    uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float gk_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* exact */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

void gk_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gk_f32_to_bf16(src[i]);
}

void gk_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gk_bf16_to_f32(src[i]);
}

void gk_f32_to_f16_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gk_f32_to_f16(src[i]);
}

void gk_f16_to_f32_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = gk_f16_to_f32(src[i]);
}
