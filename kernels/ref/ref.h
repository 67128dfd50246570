/* ref.h: the reference backend: plain single-threaded loops, double accumulators, no fast paths.
 * Owns: a gk_backend whose ops are the test oracle for every fast backend (and can run the whole
 * GPT-2 graph). Lifetime: gk_ref_create / gk_backend_free. Thread safety: one host thread. */
#ifndef GK_REF_H
#define GK_REF_H

#include "kernels/backend.h"

/* Creates the reference backend in *out. Returns 0 or GK_ENOMEM. */
int gk_ref_create(gk_backend **out, gk_err *err);

/* The reference ops themselves, for backends that reuse one as their own plain path. */
extern const gk_ops gk_ref_ops;

#endif
