/* sampler.h: choosing the next token from logits as a chain of small steps (llama.cpp style):
 * temperature -> top-k -> softmax -> top-p -> pick, or greedy when the temperature is 0.
 * Owns: gk_sampler, the candidate buffer for one vocabulary (create/free). Randomness is
 * counter-based (kernels/rng.h): the draw for (seed, sample, step) is a pure function, so the
 * same seed gives the same tokens whatever the batch or thread count. One thread per sampler. */
#ifndef GS_SAMPLER_H
#define GS_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/sampling.h" /* gk_params */

typedef struct gk_cand {
    int id;
    float logit; /* after temperature */
    float p;     /* probability (after gk_softmax) */
} gk_cand;

/* The candidates of one step; steps shrink n and keep the array sorted when `sorted`. */
typedef struct gk_list {
    gk_cand *c;
    int n;
    int sorted; /* by logit, descending */
} gk_list;

/* ---- the steps (each usable alone; tests check them on hand-made lists) ---- */
/* list = logits[0..n) as candidates 0..n-1, unsorted; a NaN logit as -inf. */
void gk_fill(gk_list *l, const float *logits, int n);
/* logits /= t (t > 0). */
void gk_temperature(gk_list *l, float t);
/* Keeps the k largest logits (ties: lower id first), sorted descending. k <= 0 or >= n: no-op. */
void gk_top_k(gk_list *l, int k);
/* p = softmax(logit), the largest logit subtracted first (exp never overflows). */
void gk_softmax(gk_list *l);
/* Keeps the shortest prefix (by descending p) whose probabilities sum to >= top_p (at least one
 * candidate); renormalizes. Sorts first if needed. top_p >= 1: no-op. */
void gk_top_p(gk_list *l, float top_p);
/* The candidate at which the cumulative probability first exceeds u * total (u in [0,1)). */
int gk_pick(const gk_list *l, float u);
/* argmax of logits[0..n) (lowest id on ties). */
int gk_greedy(const float *logits, int n);

/* ---- the chain ---- */
typedef struct gk_sampler gk_sampler;

/* A sampler for logits rows of n_vocab entries. GK_ENOMEM, GK_EUSAGE for bad params. */
int gk_sampler_create(gk_sampler **out, const gk_params *p, int n_vocab, gk_err *e);
void gk_sampler_free(gk_sampler *s); /* NULL-safe */
/* Next token of sample `sample` at step `step` from logits[0..n_vocab). */
int gk_sample(gk_sampler *s, const float *logits, uint32_t sample, uint64_t step);

#endif
