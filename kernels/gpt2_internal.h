/* gpt2_internal.h: the model struct shared by gpt2_*.c (not part of the API).
 * Owns: the layout of gk_gpt2: blocks of parameters/grads/moments, per-layer pointers into them,
 * and the activation buffers. Lifetime and thread safety: as gpt2.h. */
#ifndef GK_GPT2_INTERNAL_H
#define GK_GPT2_INTERNAL_H

#include "kernels/gpt2.h"

/* Per-layer tensors, in table order. */
enum { L_LN1W, L_LN1B, L_QKVW, L_QKVB, L_ATTPW, L_ATTPB, L_LN2W, L_LN2B,
       L_FCW, L_FCB, L_FCPW, L_FCPB, L_COUNT };
/* Global tensors. */
enum { G_WTE, G_WPE, G_LNFW, G_LNFB, G_COUNT };

/* Activations of one layer (rows = B*T of the current batch, allocated for max_B*max_T). */
typedef struct gk_layer_acts {
    float *res;            /* (BT,C)  input of the block (the residual stream) */
    float *ln1, *ln1_mean, *ln1_rstd; /* (BT,C), (BT), (BT) */
    float *qkv;            /* (BT,3C) */
    float *atty;           /* (BT,C)  attention output, before c_proj */
    float *lse;            /* (B,NH,T) */
    float *res2;           /* (BT,C)  res + attention branch */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch;            /* (BT,4C) c_fc output + bias (GELU input) */
    float *fch_gelu;       /* (BT,4C) */
} gk_layer_acts;

struct gk_gpt2 {
    gk_gpt2_config cfg;
    gk_backend *be;
    int Vp, max_B, max_T;
    int flags;              /* GK_GPT2_INFERENCE, GK_GPT2_BF16 */
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
    size_t n_halves;        /* bf16 block (GK_GPT2_BF16), in uint16 */
    uint16_t *h_block;
    int grads_pending_zero; /* zero_grad was called and nothing has written g_block since: the
                             * next backward writes the weight-matrix grads (gemm beta 0) instead
                             * of adding to them, and zeroes only the rest (gpt2_optim.c) */
    float **lp, **lg;       /* [layer * L_COUNT + k]: param / grad pointer or NULL */
    uint16_t **lh;          /* [layer * L_COUNT + k]: bf16 param pointer or NULL */
    float *gp[G_COUNT], *gg[G_COUNT];
    uint16_t *gh[G_COUNT];

    /* activations (inference models: every layer's entry but qkv points at the same buffers) */
    float *act_block;
    gk_layer_acts *acts;    /* n_layer entries */
    float *res_out;         /* (BT,C) output of the last block */
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;          /* (BT,Vp); dlogits after backward */
    float *losses, *xent_lse; /* (BT) */
    float *tmp;             /* (BT,C) c_proj output before the residual add */
    int *d_inputs, *d_targets; /* (BT) */
    int *h_targets;         /* host copy of the last targets (NULL entries: none) */
    int last_B, last_T, last_has_targets;
    float *h_losses;        /* host (BT) */

    /* backward buffers (NULL in inference models) */
    float *dres;            /* (BT,C) gradient of the residual stream */
    float *dtmp;            /* (BT,C) gradient of a layernorm output / attention output */
    float *ddrop;           /* (BT,C) dropout backward scratch (only with dropout) */
    float *dqkv;            /* (BT,3C) */
    float *dfch;            /* (BT,4C) */
};

#define LP(m, l, k) ((m)->lp[(size_t)(l) * L_COUNT + (k)])
#define LG(m, l, k) ((m)->lg[(size_t)(l) * L_COUNT + (k)])
#define LH(m, l, k) ((m)->lh[(size_t)(l) * L_COUNT + (k)])

/* gpt2_fwd.c, shared with gpt2_infer.c: the three places where a weight may be bf16.
 * gk_gpt2_matmul: out (N,OC) = inp (N,IC) @ weight (IC,OC) (Conv1D layout, stored [in, out]),
 * the weight being fp32 w or, when h is non-NULL, bf16 h (the backend's gemm_bf16). */
void gk_gpt2_matmul(gk_backend *be, float *out, const float *inp, const float *w,
                    const uint16_t *h, int N, int IC, int OC);
/* logits (N,Vp) = lnf (N,C) @ wte^T (the tied lm_head) */
void gk_gpt2_lm_head(gk_gpt2 *m, int N);
/* acts[0].res (B,T,C) = dropout(wte[d_inputs] + wpe[t0 + t]) (bf16 wte: no dropout) */
void gk_gpt2_embed(gk_gpt2 *m, int B, int T, int t0, float p, uint64_t key);

/* gpt2_optim.c: the deferred zero_grad (see there). */
void gk_gpt2_grads_flush(gk_gpt2 *m);
float gk_gpt2_grads_begin(gk_gpt2 *m);

/* dropout sites of gk_rng_key */
enum { SITE_EMB, SITE_ATTN, SITE_ATTN_RESID, SITE_MLP_RESID };

#endif
