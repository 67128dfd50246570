/* q8.c: Q8_0 blocks (see q8.h). */
#include "common/io/q8.h"

#include <math.h>

#include "common/io/safetensors.h"

void gk_q8_quantize32(const float *x, size_t stride, uint16_t *d, int8_t *q)
{
    float amax = 0.0f;
    for (int i = 0; i < GK_Q8_N; i++) amax = fmaxf(amax, fabsf(x[(size_t)i * stride]));
    float s = amax / 127.0f, is = s > 0.0f ? 1.0f / s : 0.0f;
    *d = gk_f32_to_f16(s);
    for (int i = 0; i < GK_Q8_N; i++) q[i] = (int8_t)roundf(x[(size_t)i * stride] * is);
}

int gk_q8_axis(const int64_t *shape, const int64_t *s)
{
    if (shape[0] % GK_Q8_N == 0 && s[0] == shape[0] / GK_Q8_N && s[1] == shape[1]) return 0;
    if (shape[1] % GK_Q8_N == 0 && s[0] == shape[0] && s[1] == shape[1] / GK_Q8_N) return 1;
    return -1;
}

float gk_q8_value(const int8_t *q, const uint16_t *s, int axis, int64_t d1, int64_t i, int64_t j)
{
    size_t k =
        axis == 0 ? (size_t)(i / GK_Q8_N * d1 + j) : (size_t)(i * (d1 / GK_Q8_N) + j / GK_Q8_N);
    return gk_f16_to_f32(s[k]) * (float)q[i * d1 + j];
}
