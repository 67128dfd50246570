/* safetensors_half.c: fp32 <-> bf16 / fp16 conversion (see safetensors.h), the exported face of
 * common/half.h's rounding rule (bit-exact integer code, shared with the kernels and the
 * emulator). */
#include "common/io/safetensors.h"

#include "common/half.h"

uint16_t gk_f32_to_bf16(float f) { return gk_f2bf16(f); }
float gk_bf16_to_f32(uint16_t h) { return gk_bf16f(h); }
uint16_t gk_f32_to_f16(float f) { return gk_f2f16(f); }
float gk_f16_to_f32(uint16_t h) { return gk_f16f(h); }

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
