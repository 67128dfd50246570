/* half.h: the one fp32 <-> bf16 / fp16 rounding rule of the project, as integer code (no dependence
 * on the FPU rounding mode or on compiler support for _Float16). Owns nothing; pure static inline
 * functions, valid C11 and C++17, so the CPU backends (kernels/bf16.h), the checkpoint and
 * safetensors I/O (common/io/safetensors_half.c) and the CUDA emulator (kernels/emu/emu_bf16.h)
 * round alike, bit for bit. A bf16 value is the high half of an fp32; fp16 is IEEE binary16. */
#ifndef GK_HALF_H
#define GK_HALF_H

#include <stdint.h>
#include <string.h>

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

/* fp32 -> bf16, round to nearest even; a NaN stays a NaN (sign and top payload kept, made quiet) */
static inline uint16_t gk_f2bf16(float f)
{
    uint32_t u = gk_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
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

/* fp32 -> fp16, round to nearest even; overflow to infinity, a NaN stays a (quiet) NaN */
static inline uint16_t gk_f2f16(float f)
{
    uint32_t u = gk_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t ax = u & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) { /* below 2^-14: subnormal m * 2^-24, RNE */
        if (ax < 0x33000000u) return sign; /* below half the smallest subnormal: zero */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, sh = 126 - e;
        uint32_t r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (r & 1u))) r++; /* may carry into 0x0400: right */
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

#endif
