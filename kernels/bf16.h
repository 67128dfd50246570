/* bf16.h: bf16, fp16 and Q8_0 <-> fp32 on the host, and element access by gk_elt, for the CPU-side
 * code (the CPU backends, the model's parameter loading). Owns nothing; pure inline functions. The
 * scalar conversions (gk_f2bf16, gk_bf16f, gk_f2f16, gk_f16f) are common/half.h's, the project's
 * one rounding rule (the CPU backend's fast kernels convert fp16 with F16C). */
#ifndef GK_BF16_H
#define GK_BF16_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/half.h"
#include "common/io/q8.h"
#include "kernels/backend.h"

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
