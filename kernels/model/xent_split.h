/* xent_split.h: softmax cross-entropy over logits split by vocabulary across the ranks of a comm
 * (Megatron's vocab-parallel cross-entropy; issue 41's tensor parallel builds on it). Rank r
 * holds the columns [lo, lo + n) of every row (gk_xent_split_cols: ceil(V / world) a rank, the
 * last fewer or none); the logits are never gathered: each row's log-sum-exp is made from every
 * slice's (an all-gather of N floats a rank), its target's logit comes from the rank that holds
 * that column (a sum of N floats), and each rank's gradient is its columns' softmax with the
 * whole row's log-sum-exp, less the one-hot where it holds the target (xent_bwd's targets >= V).
 * Results equal the unsplit xent_fwd / xent_bwd's within float rounding (tests/unit/
 * test_xent_split.c). Every rank calls each function with the same N (each is a collective).
 * Owns: device and host scratch for up to max_N rows. Lifetime: new .. free. */
#ifndef GK_XENT_SPLIT_H
#define GK_XENT_SPLIT_H

#include "common/err.h"
#include "kernels/backend.h"
#include "kernels/comm/comm.h"

typedef struct gk_xent_split gk_xent_split;

/* For logits of V columns split over c's ranks (be's memory), up to max_N rows a call. 0,
 * GK_ENOMEM, or GK_EUSAGE (V or max_N below 1). */
int gk_xent_split_new(gk_xent_split **out, gk_backend *be, gk_comm *c, int V, int max_N,
                      gk_err *err);
void gk_xent_split_free(gk_xent_split *x);
/* This rank's columns: [*lo, *lo + *n) of the V. */
void gk_xent_split_cols(const gk_xent_split *x, int *lo, int *n);
/* losses (N, device) = -log softmax(row)[target] (0 where target < 0), lse (N, device) = the
 * whole row's log-sum-exp, from this rank's logits (N rows of stride Vp >= n, its n columns
 * first; be's activation type) and targets (N, host memory: columns of the whole V, or -1). */
int gk_xent_split_fwd(gk_xent_split *x, float *losses, float *lse, const void *logits,
                      const int *targets, int N, int Vp, gk_err *err);
/* dlogits (N, Vp; may alias logits) = (softmax - onehot(target)) * dloss over this rank's
 * columns (0 on rows with target < 0 and on columns n..Vp), from the forward's lse. */
int gk_xent_split_bwd(gk_xent_split *x, void *dlogits, const void *logits, const float *lse,
                      const int *targets, float dloss, int N, int Vp, gk_err *err);

#endif
