/* gpt2_internal.h: the model struct shared by gpt2_*.c (not part of the API).
 * Owns: the layout of gk_gpt2: blocks of parameters/grads/moments, per-layer pointers into them,
 * and the activation buffers. Lifetime and thread safety: as gpt2.h. */
#ifndef GK_GPT2_INTERNAL_H
#define GK_GPT2_INTERNAL_H

#include "kernels/comm/comm.h"
#include "kernels/model/gpt2.h"

/* Per-layer tensors, in table order. */
enum { L_LN1W, L_LN1B, L_QKVW, L_QKVB, L_ATTPW, L_ATTPB, L_LN2W, L_LN2B,
       L_FCW, L_FCB, L_FCPW, L_FCPB, L_COUNT };
/* Global tensors. */
enum { G_WTE, G_WPE, G_LNFW, G_LNFB, G_COUNT };

/* A bucket of ZeRO's layout (gpt2_shard.c): floats [lo, lo + n) of the parameter block, cut into
 * W pieces of `piece` floats (a multiple of 16; rank r's from lo + r * piece) and the tail past
 * lo + W * piece, which every rank keeps alike (its sums all-reduced); this rank's piece, then the
 * tail, lie at `at` in its shard buffers (m_shard, v_shard, g_shard). */
typedef struct gk_bucket {
    size_t lo, n, piece, at;
} gk_bucket;

/* Activations of one layer (rows = B*T of the current batch, allocated for max_B*max_T).
 * void *: elements of the backend's activation type m->act; float *: fp32 always. */
typedef struct gk_layer_acts {
    void *res;             /* (BT,C)  input of the block (the residual stream) */
    void *ln1;             /* (BT,C); with GK_GPT2_RECOMPUTE_LN one buffer for all layers, as ln2 */
    float *ln1_mean, *ln1_rstd; /* (BT), (BT) */
    void *qkv;             /* (BT,3C) */
    void *atty;            /* (BT,C)  attention output, before c_proj */
    float *lse;            /* (B,NH,T) */
    void *res2;            /* (BT,C)  res + attention branch */
    void *ln2;
    float *ln2_mean, *ln2_rstd;
    void *fch;             /* (BT,4C) c_fc output + bias (GELU input) */
    void *fch_gelu;        /* (BT,4C); with GK_GPT2_RECOMPUTE one buffer for all layers */
} gk_layer_acts;

struct gk_gpt2 {
    gk_gpt2_config cfg;
    gk_backend *be;
    int Vp, max_B, max_T;
    int flags;              /* GK_GPT2_INFERENCE, GK_GPT2_BF16, GK_GPT2_RECOMPUTE(_LN) */
    gk_elt act;             /* activation type: the backend's */
    gk_elt wt;              /* type of the weight matrices the matmuls read: GK_BF16 with bf16
                             * weights (GK_GPT2_BF16) or bf16 activations, GK_F16 with fp16
                             * weights (GK_GPT2_F16), else GK_F32 */
    int training;
    uint64_t rng_seed, rng_counter;
    uint64_t fwd_counter;   /* rng counter of the last training forward (for its backward) */
    int fwd_dropout;        /* the last forward used dropout */
    int64_t step;

    /* parameter table */
    gk_param *params;
    int n_params;
    int *p_init;            /* per table entry: its init kind (gpt2_params.c) */
    size_t n_floats;        /* per block (params, grads, m, v) */
    float *p_block, *g_block, *m_block, *v_block; /* g, m, v: NULL in inference models */
    size_t n_copy;          /* elements of the weight-copy block (wt != GK_F32), else 0 */
    void *w_block;          /* the bf16 / fp16 weight matrices (gk_param.copy) */
    int grads_pending_zero; /* zero_grad was called and nothing has written g_block since: the
                             * next backward writes the weight-matrix grads (gemm beta 0) instead
                             * of adding to them, and zeroes only the rest (gpt2_optim.c) */
    float **lp, **lg;       /* [layer * L_COUNT + k]: fp32 param / grad pointer or NULL */
    void **lw;              /* [layer * L_COUNT + k]: the weight the matmuls read (type wt) */
    float *gp[G_COUNT], *gg[G_COUNT];
    void *gw[G_COUNT];
    gk_comm *comm;          /* gk_gpt2_set_comm; NULL: one process */
    int reduce_next;        /* gk_gpt2_reduce_in_next_backward was called */
    int grads_reduced;      /* the last backward summed g_block over the ranks (update need not) */
    int zero;               /* ZeRO's stage (gpt2_shard.c): 1, the moments of this rank's shard
                             * only; 2, the gradients too; 3, the parameters too; 0 none */
    int nbuckets;           /* ZeRO's layout (gk_bucket): stage 1 one, stages 2-3 n_layer + 1 */
    gk_bucket *buckets;
    size_t shard_floats;    /* this rank's: the sum of every bucket's piece and tail */
    float *m_shard, *v_shard; /* (shard_floats): the moments of this rank's shard */
    float *g_shard;         /* stage 2 (shard_floats): the gradients summed over the ranks and
                             * accumulated over the micro-steps; g_block is NULL then, and each
                             * gradient lives in g_head (wte, wpe) or layer l's in g_layer[l % 2]
                             * (the last layer's with ln_f's), reused by the backward
                             * (gpt2_bwd.c) */
    float *g_head, *g_layer[2];
    /* ZeRO-2 and 3 without tensor parallel (gpt2_head.c): wte's gradient is never whole. The
     * head bucket's pieces are head_rows whole rows of wte (gk_gpt2_head_rows; its tail wte's
     * last rows and wpe), and the backward's end makes every rank's rows stripe_rows at a time
     * into g_stripe (two buffers of world x stripe_rows rows and one more, for the tokens
     * outside them), each reduce-scattered into the shard while the next is made, and the tail
     * in g_tail (and such a row), all-reduced. g_head is NULL then; stripe_rows 0 otherwise. */
    size_t head_rows, stripe_rows;
    float *g_stripe, *g_tail, *g_sink; /* g_sink (max_T x C): the stripes' wpe, not kept */
    int *d_rows, *h_rows, *h_tokens; /* (max_B x max_T) tokens as rows; the forward's tokens */
    /* ZeRO-3 (head_rows): wte is never whole either. The embedding, the lm_head and the
     * backward's dlnf read it a stripe at a time, all-gathered into p_stripe and g_stripe in
     * turn (the next stripe's gather runs while one is read; g_stripe is free but at the
     * backward's end) and cast into w_stripe (16-bit weights), then its tail's rows; a last
     * zero row for the tokens outside them. e_rows (max_B x max_T x C fp32): the embedding's
     * rows, then dlnf's sums; e_tmp a 16-bit partial's float32; d_ident the rows 0, 1, ... */
    float *p_stripe, *e_rows, *e_tmp;
    void *w_stripe;
    int *d_ident;
    size_t layers_at, layers_end; /* where layer 0's floats start and ln_f's (the table's) */
    size_t *c_off;          /* per table entry: its weight copy's offset (elements of wt) in the
                             * copy block, or (size_t)-1 when it has none */
    size_t copies_at;       /* where layer 0's weight copies start in the copy block */
    size_t small_floats;    /* the entries without a copy: their floats, each rounded to 16 */
    float *p_shard;         /* stage 3 (shard_floats): the fp32 parameters of this rank's shard;
                             * p_block and w_block are NULL then, and each parameter (and its
                             * copy) is read from the bucket buffers as for the gradients: wte
                             * and wpe in p_head (w_head), layer l's in p_layer[l % 2]
                             * (w_layer[l % 2]), gathered before use (gpt2_gather.c) */
    float *p_head, *p_layer[2];
    void *w_head, *w_layer[2];
    int gathered[3];        /* stage 3: the bucket each of p_head, p_layer[0], p_layer[1] holds
                             * as the shard is now, -1 none */
    int prefetch;           /* stage 3: the bucket whose gather is started (comm.h
                             * all_gather_start) and not yet waited for, -1 none */
    int gather_rc;          /* stage 3: the first gather that failed (gather_err), until the
                             * forward or backward returns it */
    gk_err gather_err;
    gk_backend *offload;    /* gk_gpt2_set_offload's host backend (gpt2_offload.c), or NULL: then
                             * the master weights and moments are host memory (p_host, om, ov;
                             * n_floats each); with 16-bit copies p_block is NULL and the
                             * device's fp32 are the small block's (p_small, entry i at s_off[i]).
                             * With ZeRO (zero > 0): om and ov are the shard's (shard_floats, in
                             * its layout), p_host is NULL: the device's fp32 weights stay that
                             * stage's as without offload and the update stages them */
    float *p_host, *om, *ov;
    size_t offload_chunk;   /* floats in one chunk of the update (gk_gpt2_offload_chunk) */
    float *g_stage[2], *p_stage[2]; /* the update's two chunks (gpt2_offload_step.c): gradients, */
    void *w_stage[2];               /* staged weights (ZeRO) and 16-bit copies (without); pinned
                                     * where the backend has ops->pinned */
    float *p_small;
    size_t *s_off;
    float *m_host, *v_host; /* every rank's moments in host memory (n_floats each) while gathered
                             * for a checkpoint (gk_gpt2_moments_gather with keep), else NULL */

    /* tensor parallel (gpt2_tp.c; tp NULL: none, and tp_n 1, tp_rank 0) */
    gk_comm *tp;
    int tp_n, tp_rank;
    int Ca, Cm, NHa;        /* this rank's attention width (n_embd / tp_n), MLP width (4 n_embd /
                             * tp_n) and heads; the whole model's without tensor parallel */
    struct gk_vocab_split *vs; /* the vocabulary's split (wte's rows, the logits' columns) */
    int *h_inputs;          /* host copy of the last forward's tokens (B*T) */
    float *tp_f32;          /* (BT,C) fp32 scratch for the sums of 16-bit activations */

    /* activations (inference models: every layer's entry but qkv points at the same buffers) */
    void *act_block;
    gk_layer_acts *acts;    /* n_layer entries */
    void *res_out;          /* (BT,C) output of the last block */
    void *lnf;
    float *lnf_mean, *lnf_rstd;
    void *logits;           /* (BT,Vp); dlogits after backward */
    float *losses, *xent_lse; /* (BT) */
    void *tmp;              /* (BT,C) c_proj output before the residual add */
    int *d_inputs, *d_targets; /* (BT) */
    int *d_pos;             /* (2) forward_at's first position, read by its ops when they run,
                             * and the step of the next draw (gk_gpt2_draw: backend.h's sample) */
    void *decode_rec;       /* forward_at's one-row step recorded for replay (ops->record_*), */
    int decode_rec_B;       /* for batch decode_rec_B; NULL: none yet (or the backend has none) */
    void *draw_rec;         /* gk_gpt2_step_draw's step and draw, recorded for batch draw_rec_B */
    int draw_rec_B;         /* with draw_rec_p (NULL: none yet) */
    gk_params draw_rec_p;
    int draw_rec_n;         /* and draw_rec_n logits a row */
    int last_t0;            /* forward_at's t0 (-1: the last forward was gk_gpt2_forward's) */
    int draw_pos;           /* the drawn tokens' position (-1: no draw since the last forward) */
    int *h_targets;         /* host copy of the last targets (NULL entries: none) */
    int last_B, last_T, last_has_targets;
    float *h_losses;        /* host (BT) */

    /* backward buffers (NULL in inference models) */
    void *dres;             /* (BT,C) gradient of the residual stream */
    void *dtmp;             /* (BT,C) gradient of a layernorm output / attention output */
    void *ddrop;            /* (BT,C) dropout backward scratch (only with dropout) */
    void *dqkv;             /* (BT,3C) */
    void *dfch;             /* (BT,4C) */
};

#define LP(m, l, k) ((m)->lp[(size_t)(l) * L_COUNT + (k)])
#define LG(m, l, k) ((m)->lg[(size_t)(l) * L_COUNT + (k)])
#define LW(m, l, k) ((m)->lw[(size_t)(l) * L_COUNT + (k)])

/* gpt2_fwd.c, shared with gpt2_infer.c and gpt2_bwd.c.
 * gk_gpt2_matmul: out (N,OC) = inp (N,IC) @ weight (IC,OC) (Conv1D layout, stored [in, out])
 * + bias (OC, or NULL); with pre_gelu, pre_gelu = that and out = gelu(pre_gelu). */
void gk_gpt2_matmul(gk_gpt2 *m, void *out, const void *inp, const void *w, const float *bias,
                    void *pre_gelu, int N, int IC, int OC);
/* The forward's ops, the one layer loop: tokens in d_inputs (B,T) -> logits (B*T,Vp). d_pos NULL:
 * the whole sequence (positions 0..T-1), every activation kept for the backward, dropout p with
 * the keys of rng counter ctr. d_pos (a device int t0): T new positions t0.. through the KV cache
 * (each layer's qkv buffer), p 0 (gpt2_infer.c). */
void gk_gpt2_forward_ops(gk_gpt2 *m, int B, int T, const int *d_pos, float p, uint64_t ctr);
/* Activation row r of buffer x (C wide): a pointer, for the graph's row offsets. */
static inline void *gk_gpt2_row(const gk_gpt2 *m, const void *x, size_t r, size_t C)
{
    return (char *)x + r * C * gk_elt_size(m->act);
}

/* gpt2_optim.c: the deferred zero_grad (see there); zero_small zeroes the gradients of the
 * parameter block's floats [lo, hi) that the backward adds to (all but the weight matrices). */
void gk_gpt2_grads_flush(gk_gpt2 *m);
float gk_gpt2_grads_begin(gk_gpt2 *m);
void gk_gpt2_zero_small(gk_gpt2 *m, size_t lo, size_t hi);
/* gpt2_head.c: ZeRO-2 and 3's head gradient in stripes (head_rows): its buffers (after the
 * layout), freed; and at the backward's end, wte's gradient (dlogits^T @ lnf, from the logits
 * that hold dlogits, and the embedding's rows of dres) and wpe's, summed over the ranks into the
 * shard (first: overwriting it), or with_grads 0 zeros summed alike. No collective may be
 * started meanwhile. 0 or the comm's error. */
int gk_gpt2_head_alloc(gk_gpt2 *m, gk_err *err);
/* ZeRO-3's wte a stripe at a time (p_stripe: allocated by gk_gpt2_head_weights before the
 * gradient's buffers): the embedding of the last forward's tokens (h_tokens) into out, as
 * encoder_fwd with t0, p and key; the logits (N,Vp) from lnf; dx (N,C) = dlogits @ wte. No
 * collective may be started before (they start and wait for their own). A failed gather is kept
 * as the gathers' (m->gather_rc). */
int gk_gpt2_head_weights(gk_gpt2 *m, gk_err *err);
void gk_gpt2_head_embed(gk_gpt2 *m, void *out, int B, int T, const int *t0, float p,
                        uint64_t key);
void gk_gpt2_head_logits(gk_gpt2 *m, int N);
void gk_gpt2_head_dlnf(gk_gpt2 *m, void *dx, int N);
/* dlnf's gathers alone: a backward with no target to learn from (every rank makes the same
 * collectives). */
void gk_gpt2_head_gathers(gk_gpt2 *m);
void gk_gpt2_head_free(gk_gpt2 *m);
int gk_gpt2_head_grads(gk_gpt2 *m, int first, int with_grads, float p, uint64_t key,
                       gk_err *err);
/* gpt2_shard.c: ZeRO's layout. Floats per piece of a bucket of n floats over world ranks (a
 * multiple of 16, so that every piece starts 64-byte aligned; 0: all tail), the tail of b, and
 * the backward's buckets: 0 the head (wte, wpe), 1 + l layer l (the last one to the end of the
 * block: ln_f's), as [lo, hi) into *lo, *hi. */
static inline size_t gk_gpt2_piece(size_t n, int world)
{
    return n / (size_t)world / 16 * 16;
}
/* ZeRO-2 and 3: the whole rows of wte (Vp of them) in each rank's piece of the head bucket, a
 * multiple of 16; 0 (the head cut as any bucket) with tensor parallel, below stage 2, or where
 * wte has fewer than 16 rows a rank. */
static inline size_t gk_gpt2_head_rows(size_t Vp, int world, int stage, int tp)
{
    return stage < 2 || tp > 1 || world < 2 ? 0 : Vp / (size_t)world / 16 * 16;
}
/* The rows of wte a stripe takes of each rank's (g_stripe: about 4 MB for every rank's). */
static inline size_t gk_gpt2_stripe_rows(size_t head_rows, int world, size_t C)
{
    size_t S = ((size_t)1 << 20) / ((size_t)world * C) / 16 * 16;
    S = S < 16 ? 16 : S;
    return S < head_rows ? S : head_rows;
}
static inline size_t gk_bucket_tail(const gk_bucket *b, int world)
{
    return b->n - b->piece * (size_t)world;
}
void gk_gpt2_bwd_bucket(const gk_gpt2 *m, int b, size_t *lo, size_t *hi);
/* The backward's bucket holding the parameter block's float off. */
int gk_gpt2_bucket_of(const gk_gpt2 *m, size_t off);
/* Copies this rank's floats of every bucket (its piece and the tail) between full (n_floats,
 * the parameter block's layout) and part (the shard's): to_part 1 from full, else back. */
void gk_gpt2_shard_copy(gk_gpt2 *m, float *full, float *part, int to_part);
/* Where the gradient of the parameter block's float off lives: g_block, or stage 2's g_head and
 * g_layer; NULL while none is allocated (GK_GPT2_DEFER_GRADS before gk_gpt2_set_comm). */
float *gk_gpt2_grad_at(const gk_gpt2 *m, size_t off);
/* gpt2_params.c: points every gradient (gk_param.grad, lg, gg) where gk_gpt2_grad_at says, and
 * (point_all) every parameter and weight copy where gk_gpt2_param_at and gk_gpt2_copy_at say. */
void gk_gpt2_point_grads(gk_gpt2 *m);
void gk_gpt2_point_all(gk_gpt2 *m);
/* gpt2_gather.c, stage 3: where the parameter block's float off is read (p_block, or p_head and
 * p_layer), and the weight copy's element coff (w_block, or w_head and w_layer). */
float *gk_gpt2_param_at(const gk_gpt2 *m, size_t off);
void *gk_gpt2_copy_at(const gk_gpt2 *m, size_t coff);
/* Stage 3: shards the parameters (this rank's floats of every bucket into p_shard) and frees
 * the whole block and copies; 0 or GK_ENOMEM. */
int gk_gpt2_shard_params(gk_gpt2 *m, gk_err *err);
/* Stage 3: bucket b's parameters gathered into its buffer (and its weight copies cast), unless
 * it holds them already; a failure is kept in gather_rc. Other stages: nothing. */
void gk_gpt2_params_need(gk_gpt2 *m, int b);
/* Stage 3: bucket b's gather started (all_gather_start), so that it runs while the graph goes on,
 * unless it is held or another is started (or the comm cannot start one); params_need waits for
 * it. Between the two no collective but a started one may be called. Other stages: nothing. */
void gk_gpt2_params_prefetch(gk_gpt2 *m, int b);
/* Whether bucket b's parameters are where the graph reads them (always, but at stage 3). */
int gk_gpt2_params_held(const gk_gpt2 *m, int b);
/* Stage 3: the buffers no longer hold the shard's values (after an update or a set; a started
 * gather is waited for and its result dropped). */
void gk_gpt2_params_stale(gk_gpt2 *m);
/* The floats of one chunk of an offloaded update over a block of n floats: at most 2^24 (its
 * gradients and 16-bit copies staged: 64 + 32 MB; two chunks at a time) and at most a quarter of
 * the block, so that the copies of a chunk overlap the AdamW of another at every size. */
static inline size_t gk_gpt2_offload_chunk(size_t n)
{
    size_t q = (n / 4 + 15) / 16 * 16;
    return q < ((size_t)1 << 24) ? (q ? q : 16) : ((size_t)1 << 24);
}
/* gpt2_offload.c: entry i's host tensor of kind (optimizer offload); after a set of its
 * parameter there, pushed puts it where the device reads it. gpt2_offload_step.c: update is
 * gk_gpt2_update's AdamW on the host (the gradients summed and scale, the clip factor, found on
 * the device). */
float *gk_gpt2_offload_tensor(const gk_gpt2 *m, int i, enum gk_tensor_kind kind);
void gk_gpt2_offload_pushed(gk_gpt2 *m, int i);
int gk_gpt2_offload_update(gk_gpt2 *m, const gk_adamw *h, float lr, float scale, gk_err *err);
/* set_comm's end with offload: without ZeRO the device's fp32 shrunk to the small block (16-bit
 * copies); with it (m->zero) the moments moved into the shard's layout on the host. */
int gk_gpt2_offload_place(gk_gpt2 *m, gk_err *err);
/* Frees the host memory of offload (the model's free; none held: a no-op). */
void gk_gpt2_offload_free(gk_gpt2 *m);
/* ZeRO's update with offload: AdamW on the host over the slices ts (the device's parameters and
 * gradients, the host's moments, no copies), staged a chunk at a time (m->step already counted). */
int gk_gpt2_offload_sharded(gk_gpt2 *m, const gk_adamw *h, float lr, float scale,
                            const gk_adamw_tensor *ts, int n, gk_err *err);
/* gk_gpt2_forward / backward's end: the backend's error, else a failed gather's. */
int gk_gpt2_pass_status(gk_gpt2 *m, gk_err *err);
/* Stage 2: folds bucket b's sums (reduce-scattered in place in buf, its floats [lo, lo + n)) into
 * g_shard: copied when first (the step's first micro-step), else added. */
void gk_gpt2_shard_fold(gk_gpt2 *m, int b, const float *buf, int first);
/* gpt2_shard.c: tensor_get of a sharded moment: from the host copy gk_gpt2_moments_gather
 * keeps, else GK_EUSAGE; tensor_set of a sharded tensor (a moment, a stage 3 parameter): this
 * rank's part kept. */
int gk_gpt2_shard_moment_get(gk_gpt2 *m, int i, enum gk_tensor_kind kind, float *host, gk_err *err);
int gk_gpt2_shard_set(gk_gpt2 *m, int i, enum gk_tensor_kind kind, const float *host,
                      gk_err *err);

/* gpt2_params.c: what a model of cfg made by gk_gpt2_create_tp(cfg, a backend of activation type
 * act, max_B, max_T, flags, tp ranks; rank 0's) would allocate, from the same table and layout,
 * without allocating it (gpt2_mem.c's estimate): n_floats per fp32 block (params; grads and each
 * moment alike in a training model), copy_bytes of the weight copies, act_bytes of activations
 * (saturated at 2^60). 0, GK_EUSAGE (a bad config, batch or weight type) or GK_ENOMEM. */
typedef struct gk_gpt2_sizes {
    size_t n_floats, copy_bytes, act_bytes;
    size_t layers_at, layers_end, copies_at; /* as gk_gpt2's */
    size_t copy_elems;                       /* gk_gpt2's n_copy */
    size_t small_floats; /* the fp32 of the entries without a copy (an offload's small block) */
    size_t whole_floats; /* tensor parallel: the largest whole tensor (a checkpoint's writer puts
                          * one together at a time), else 0 */
    int inference;
    size_t vocab_rows, width; /* wte's rows when the head can be cut in them (the model's
                               * head_rows), else 0; n_embd */
    size_t embed_floats;      /* ZeRO-3's e_rows and e_tmp (gpt2_head.c) */
} gk_gpt2_sizes;
int gk_gpt2_sizes_of(const gk_gpt2_config *cfg, gk_elt act, int max_B, int max_T, int flags,
                     int tp, gk_gpt2_sizes *out, gk_err *err);

/* gpt2_tp.c: tensor parallel's parts of the graph. tp_setup at create (tp_n > 1): the vocabulary's
 * split and the scratch; tp_free. tp_sum: the all-reduce over tp of an activation buffer (n
 * elements of m->act; 16-bit ones summed in float32), a failure kept as a gather's (pass_status);
 * nothing without tensor parallel. tp_norm: the sum of squares of every gradient of the whole
 * model (each split part once, each replicated tensor once) from this rank's block. */
int gk_gpt2_tp_check(const gk_gpt2_config *c, int flags, int tp, gk_err *err);
/* The device bytes of tensor parallel's scratch (tp_setup's and vocab_split's) for a batch. */
size_t gk_gpt2_tp_scratch(const gk_gpt2_config *c, gk_elt act, int max_B, int max_T, int tp);
int gk_gpt2_tp_setup(gk_gpt2 *m, gk_err *err);
void gk_gpt2_tp_free(gk_gpt2 *m);
void gk_gpt2_tp_sum(gk_gpt2 *m, void *buf, size_t n);
/* The same in two halves, so that other work runs between them (the sum on the comm's thread or
 * stream): start, then wait (the sum in buf). No other collective on tp in between. */
void gk_gpt2_tp_sum_start(gk_gpt2 *m, void *buf, size_t n);
void gk_gpt2_tp_sum_wait(gk_gpt2 *m, void *buf, size_t n);
int gk_gpt2_tp_norm(gk_gpt2 *m, double *sumsq, gk_err *err);
/* The split of a table entry (layer slot k, or a global tensor when layer < 0) under tensor
 * parallel. */
int gk_gpt2_tp_split_of(int layer, int slot);

/* dropout sites of gk_rng_key; attention's, inside tensor parallel's split, its own on each rank
 * (rank 0's the unsplit model's) */
enum { SITE_EMB, SITE_ATTN, SITE_ATTN_RESID, SITE_MLP_RESID };
#define GK_GPT2_SITE_ATTN(m) ((uint32_t)SITE_ATTN + 4u * (uint32_t)(m)->tp_rank)

#endif
