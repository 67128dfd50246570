/* q8.h: llama.cpp's Q8_0 quantization, shared by the checkpoint format (int8 tensors with fp16
 * scales: gpt-formats(5), gpt-ckpt convert --dtype int8, gk_ckpt_read) and the CPU backend's int8
 * weights (kernels/bf16.h), so that a checkpoint's int8 weights load into an int8 model exactly.
 * A block is 32 values with one scale d = max|x| / 127 (stored as fp16) and q = x / d rounded half
 * away from zero (-127..127); value = d * q. Requantizing d * q gives d and q back.
 * Owns nothing; thread-safe. */
#ifndef GK_Q8_H
#define GK_Q8_H

#include <stddef.h>
#include <stdint.h>

#define GK_Q8_N 32

/* x[0], x[stride], ..., x[31 * stride] -> *d (fp16 bits) and q[0..32) */
void gk_q8_quantize32(const float *x, size_t stride, uint16_t *d, int8_t *q);

/* An int8 tensor of shape (d0, d1) with the scales tensor of shape s (2-D): the axis its blocks
 * run along (0: s = (d0 / 32, d1); 1: s = (d0, d1 / 32)), or -1 when s fits neither. */
int gk_q8_axis(const int64_t *shape, const int64_t *s);

/* Element (i, j) of such a tensor: q at i * d1 + j, its scale in s (fp16 bits) */
float gk_q8_value(const int8_t *q, const uint16_t *s, int axis, int64_t d1, int64_t i, int64_t j);

#endif
