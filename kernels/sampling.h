/* sampling.h: what the two samplers share: the chain's parameters (gk_params) and its random
 * draw. The host's sampler (kernels/infer/sampler.c) and the backends' sample op (backend.h,
 * cuda's sample.cu) take the same parameters and draw the same uniform number for a sample at a
 * step (counter-based, kernels/rng.h: a pure function of seed, sample and step). */
#ifndef GK_SAMPLING_H
#define GK_SAMPLING_H

#include <stdint.h>

#include "kernels/rng.h"

typedef struct gk_params {
    float temperature; /* 0: greedy */
    int top_k;         /* 0: off */
    float top_p;       /* 1: off */
    uint64_t seed;
} gk_params;

#define GK_SAMPLE_SITE 0x53414d50u /* rng site of sampling draws */

/* The uniform number in [0,1) that picks sample `sample`'s token at step `step`. */
GK_RNG_FN float gk_sample_uniform(uint64_t seed, uint32_t sample, uint64_t step)
{
    return gk_rng_uniform(gk_rng_key(seed, 0, sample, GK_SAMPLE_SITE), step);
}

#endif
