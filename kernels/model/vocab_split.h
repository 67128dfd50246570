/* vocab_split.h: the vocabulary split across the ranks of a comm (Megatron's vocab-parallel
 * embedding and cross-entropy; issue 41's tensor parallel builds on them). Rank r holds the
 * vocabulary [lo, lo + n) (gk_vocab_split_cols: ceil(V / world) a rank, the last fewer or none):
 * those rows of wte, those columns of the logits.
 * - The embedding: each rank looks up the tokens it holds (the others read a zero row of its
 *   wte, row n) and rank 0 adds wpe; the ranks' outputs are summed (an all-reduce of N x C).
 *   The backward adds each rank's tokens' gradients to its rows (row n's are dropped).
 * - The cross-entropy: the logits are never gathered: each row's log-sum-exp is made from every
 *   slice's (an all-gather of N floats a rank), its target's logit comes from the rank that holds
 *   that column (a sum of N floats), and each rank's gradient is its columns' softmax with the
 *   whole row's log-sum-exp, less the one-hot where it holds the target (xent_bwd's targets >= V).
 * Results equal the unsplit encoder and xent ops' within float rounding (the float32 embedding
 * exactly: tests/unit/test_vocab_split.c). Every rank calls each function with the same B, T, N
 * (each is a collective). Owns: device and host scratch for up to max_N rows (of C for the
 * embedding). Lifetime: new .. free. */
#ifndef GK_VOCAB_SPLIT_H
#define GK_VOCAB_SPLIT_H

#include <stdint.h>

#include "common/err.h"
#include "kernels/backend.h"
#include "kernels/comm/comm.h"

typedef struct gk_vocab_split gk_vocab_split;

/* For a vocabulary of V split over c's ranks (be's memory), up to max_N rows a call and, for
 * the embedding, rows of C (max_T positions). 0, GK_ENOMEM, or GK_EUSAGE (a size below 1). */
int gk_vocab_split_new(gk_vocab_split **out, gk_backend *be, gk_comm *c, int V, int C, int max_N,
                       int max_T, gk_err *err);
void gk_vocab_split_free(gk_vocab_split *x);
/* This rank's vocabulary: [*lo, *lo + *n) of the V. */
void gk_vocab_split_cols(const gk_vocab_split *x, int *lo, int *n);
/* out (B, T, C; be's activation type) = wte[token] + wpe[t], with dropout p (key) as
 * encoder_fwd's, from this rank's rows of wte (wte: at least n + 1 rows of C, float32, row n
 * zero) and wpe (T rows used; float32), tokens (B x T, host memory: of the whole V). */
int gk_vocab_embed_fwd(gk_vocab_split *x, void *out, const int *tokens, const float *wte,
                       const float *wpe, int B, int T, float p, uint64_t key, gk_err *err);
/* dwte (this rank's rows) += and dwpe += the gradients of dout (B, T, C: the same on every rank),
 * as encoder_bwd's; row n of dwte left zero. */
int gk_vocab_embed_bwd(gk_vocab_split *x, float *dwte, float *dwpe, const void *dout,
                       const int *tokens, int B, int T, float p, uint64_t key, gk_err *err);
/* losses (N, device) = -log softmax(row)[target] (0 where target < 0), lse (N, device) = the
 * whole row's log-sum-exp, from this rank's logits (N rows of stride Vp >= n, its n columns
 * first; be's activation type) and targets (N, host memory: columns of the whole V, or -1). */
int gk_vocab_xent_fwd(gk_vocab_split *x, float *losses, float *lse, const void *logits,
                      const int *targets, int N, int Vp, gk_err *err);
/* dlogits (N, Vp; may alias logits) = (softmax - onehot(target)) * dloss over this rank's
 * columns (0 on rows with target < 0 and on columns n..Vp), from the forward's lse. */
int gk_vocab_xent_bwd(gk_vocab_split *x, void *dlogits, const void *logits, const float *lse,
                      const int *targets, float dloss, int N, int Vp, gk_err *err);

#endif
