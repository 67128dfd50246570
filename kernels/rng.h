/* rng.h: the counter-based random numbers behind dropout (and any other per-element randomness).
 * Owns nothing: pure functions of (key, counter), so every backend and thread count gives the
 * same mask. Thread-safe. Inline on purpose: the CUDA backend compiles the same two functions. */
#ifndef GK_RNG_H
#define GK_RNG_H

#include <stdint.h>

/* nvcc compiles them for the device too; every other compiler (the emulator included) as is. */
#ifdef __CUDACC__
#define GK_RNG_FN static inline __host__ __device__
#else
#define GK_RNG_FN static inline
#endif

/* splitmix64's output function: a bijective 64-bit mixer (Steele, Lea, Flood 2014). */
GK_RNG_FN uint64_t gk_rng_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The key of one dropout site: a hash of (seed, call counter, layer, site). */
GK_RNG_FN uint64_t gk_rng_key(uint64_t seed, uint64_t counter, uint32_t layer, uint32_t site)
{
    uint64_t k = gk_rng_mix(seed + 0x9e3779b97f4a7c15ULL);
    k = gk_rng_mix(k ^ (counter + 0x632be59bd9b4e019ULL));
    return gk_rng_mix(k ^ (((uint64_t)layer << 32 | site) + 0x8cb92ba72f3d8dd7ULL));
}

/* Uniform float in [0,1) with 24 random bits for element i of the stream key
 * (splitmix64 at state key + (i+1) * golden gamma). */
GK_RNG_FN float gk_rng_uniform(uint64_t key, uint64_t i)
{
    uint64_t x = gk_rng_mix(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
    return (float)(x >> 40) * (1.0f / 16777216.0f);
}

/* Dropout multiplier of element i: 0 (dropped) or 1/(1-p) (kept). */
GK_RNG_FN float gk_rng_dropout(uint64_t key, uint64_t i, float p)
{
    return gk_rng_uniform(key, i) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

#endif
