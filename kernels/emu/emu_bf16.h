/* emu_bf16.h: the cuda_bf16.h subset of the emulator (see kernels/emu/README.md for the whole
 * subset).
 * Owns: __nv_bfloat16 (2 bytes, standard layout, the bits in __x as on a GPU), __nv_bfloat162
 * and the conversions: float -> bf16 rounds to nearest even and keeps NaN a (quiet) NaN.
 * Arithmetic and comparisons go through float and round the result back, as on a GPU.
 * As in CUDA, mixing bf16 and float in one operator is ambiguous: convert first. */
#ifndef GK_EMU_BF16_H
#define GK_EMU_BF16_H

#include <stdint.h>
#include <string.h>

#include "common/half.h"
#include "kernels/emu/emu_runtime.h"

namespace gk_emu {
/* the rounding is common/half.h's, the same bits as the host code's */
inline unsigned short float_to_bf16_bits(float f) { return gk_f2bf16(f); }
inline float bf16_bits_to_float(unsigned short b) { return gk_bf16f(b); }
} // namespace gk_emu

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(gk_emu::float_to_bf16_bits(f)) {}
    __nv_bfloat16(double f) : __x(gk_emu::float_to_bf16_bits((float)f)) {}
    __nv_bfloat16(int i) : __x(gk_emu::float_to_bf16_bits((float)i)) {}
    operator float() const { return gk_emu::bf16_bits_to_float(__x); }
};
struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162{a, b}; }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162{a, a}; }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 h) { return __nv_bfloat162{h, h}; }
inline float __low2float(__nv_bfloat162 v) { return (float)v.x; }
inline float __high2float(__nv_bfloat162 v) { return (float)v.y; }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return float2{(float)v.x, (float)v.y}; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u)
{
    __nv_bfloat16 h;
    h.__x = u;
    return h;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

#define GK_EMU_BF16_ARITH(op)                                                                   \
    inline __nv_bfloat16 operator op(__nv_bfloat16 a, __nv_bfloat16 b)                         \
    {                                                                                           \
        return __nv_bfloat16((float)a op(float) b);                                             \
    }                                                                                           \
    inline __nv_bfloat16 &operator op##=(__nv_bfloat16 &a, __nv_bfloat16 b) { return a = a op b; }
GK_EMU_BF16_ARITH(+)
GK_EMU_BF16_ARITH(-)
GK_EMU_BF16_ARITH(*)
GK_EMU_BF16_ARITH(/)
#undef GK_EMU_BF16_ARITH
inline __nv_bfloat16 operator-(__nv_bfloat16 a)
{
    return __ushort_as_bfloat16((unsigned short)(a.__x ^ 0x8000u));
}
#define GK_EMU_BF16_CMP(op) \
    inline bool operator op(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a op(float) b; }
GK_EMU_BF16_CMP(==)
GK_EMU_BF16_CMP(!=)
GK_EMU_BF16_CMP(<)
GK_EMU_BF16_CMP(<=)
GK_EMU_BF16_CMP(>)
GK_EMU_BF16_CMP(>=)
#undef GK_EMU_BF16_CMP

#endif
