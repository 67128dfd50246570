/* sampler.h: choosing the next token from logits as a chain of small steps (llama.cpp style):
 * temperature -> top-k -> softmax -> top-p -> pick, or greedy when the temperature is 0.
 * Owns: gs_sampler, the candidate buffer for one vocabulary (create/free). Randomness is
 * counter-based (kernels/rng.h): the draw for (seed, sample, step) is a pure function, so the
 * same seed gives the same tokens whatever the batch or thread count. One thread per sampler. */
#ifndef GS_SAMPLER_H
#define GS_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct gs_cand {
    int id;
    float logit; /* after temperature */
    float p;     /* probability (after gs_softmax) */
} gs_cand;

/* The candidates of one step; steps shrink n and keep the array sorted when `sorted`. */
typedef struct gs_list {
    gs_cand *c;
    int n;
    int sorted; /* by logit, descending */
} gs_list;

typedef struct gs_params {
    float temperature; /* 0: greedy */
    int top_k;         /* 0: off */
    float top_p;       /* 1: off */
    uint64_t seed;
} gs_params;

/* ---- the steps (each usable alone; tests check them on hand-made lists) ---- */
/* list = logits[0..n) as candidates 0..n-1, unsorted. */
void gs_fill(gs_list *l, const float *logits, int n);
/* logits /= t (t > 0). */
void gs_temperature(gs_list *l, float t);
/* Keeps the k largest logits (ties: lower id first), sorted descending. k <= 0 or >= n: no-op. */
void gs_top_k(gs_list *l, int k);
/* p = softmax(logit), the largest logit subtracted first (exp never overflows). */
void gs_softmax(gs_list *l);
/* Keeps the shortest prefix (by descending p) whose probabilities sum to >= top_p (at least one
 * candidate); renormalizes. Sorts first if needed. top_p >= 1: no-op. */
void gs_top_p(gs_list *l, float top_p);
/* The candidate at which the cumulative probability first exceeds u * total (u in [0,1)). */
int gs_pick(const gs_list *l, float u);
/* argmax of logits[0..n) (lowest id on ties). */
int gs_greedy(const float *logits, int n);

/* ---- the chain ---- */
typedef struct gs_sampler gs_sampler;

/* A sampler for logits rows of n_vocab entries. GK_ENOMEM, GK_EUSAGE for bad params. */
int gs_sampler_create(gs_sampler **out, const gs_params *p, int n_vocab, gk_err *e);
void gs_sampler_free(gs_sampler *s); /* NULL-safe */
/* Next token of sample `sample` at step `step` from logits[0..n_vocab). */
int gs_sample(gs_sampler *s, const float *logits, uint32_t sample, uint64_t step);

#endif
