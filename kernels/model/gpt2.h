/* gpt2.h: the GPT-2 model (nanoGPT's, = HuggingFace's layout), written once against backend.h.
 * Owns: parameters, gradients, AdamW moments (one device block each, laid out by one parameter
 * table) and every activation for batches up to max_B x max_T, all allocated by gk_gpt2_create and
 * freed by gk_gpt2_free; no op allocates inside a step. Thread safety: one host thread per
 * model. */
#ifndef GK_GPT2_H
#define GK_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/backend.h"
#include "kernels/comm/comm.h"

/* nanoGPT's GPTConfig (same key names in config files and checkpoint metadata). */
typedef struct gk_gpt2_config {
    int n_layer, n_head, n_embd; /* n_embd % n_head == 0 */
    int block_size;              /* max sequence length: rows of wpe */
    int vocab_size;              /* logical vocab; stored padded to a
                                  * multiple of 64 in memory only */
    int bias;                    /* 1: Linear and LayerNorm biases exist (GPT-2); 0: they do not */
    float dropout;               /* embedding, attention-probability
                                  * and residual dropout, in [0,1) */
} gk_gpt2_config;

/* The parameter table's dimensions, symbolically: 1, vocab_size, block_size, n_embd, 3 n_embd,
 * 4 n_embd (gk_gpt2_dim_size gives a config's value; the checkpoint tools keep them to lay out
 * other formats, such as llm.c's padded vocabulary rows). */
enum gk_gpt2_dim { GK_DIM_1, GK_DIM_V, GK_DIM_T, GK_DIM_C, GK_DIM_3C, GK_DIM_4C };

/* One entry of the parameter table, in HuggingFace order (wte, wpe, h.0.ln_1.weight, ...,
 * ln_f.bias). Shapes are HuggingFace's: Conv1D weights stored [in, out]; wte [vocab_size, C]
 * (its block holds padded_vocab rows: the extra rows are zero, never trained, never saved).
 * All pointers are device pointers into the model's blocks, valid until gk_gpt2_free, for the
 * graph, backends and tests: tools move tensors with gk_gpt2_tensor_get/set instead. */
typedef struct gk_param {
    char name[64];        /* "transformer.h.3.attn.c_attn.weight" */
    int ndim;             /* 1 or 2 */
    int shape[2];         /* logical shape (shape[1] unused when ndim == 1) */
    enum gk_gpt2_dim dim[2]; /* the shape symbolically (dim[1] GK_DIM_1 when ndim == 1) */
    size_t numel;         /* logical element count */
    size_t offset;        /* in floats, from the start of the parameter block */
    float *data, *grad;   /* fp32 parameter, gradient (grad NULL in inference models; data NULL
                           * when the tensor is kept as bf16 or fp16 only: GK_GPT2_BF16 or
                           * GK_GPT2_F16 weight matrices) */
    float *m, *v;         /* AdamW first and second moments (NULL in inference models) */
    void *copy;           /* the 16-bit weight matrix the matmuls read (bf16 or fp16 weights, or
                           * bf16 activations), updated with data by every optimizer step; else
                           * NULL */
    int decay;            /* 1: AdamW weight decay applies (2-D tensors, as nanoGPT) */
    /* Tensor parallel (gk_gpt2_create_tp): shape and numel above are this rank's part of the
     * tensor, full_shape and full_numel the whole one's (a checkpoint's); split says how it is
     * cut (gk_tp_part). Without tensor parallel full equals the part and split is GK_SPLIT_NONE. */
    int split;            /* enum gk_split */
    int full_shape[2];
    size_t full_numel;
} gk_param;

/* How tensor parallel cuts a table entry over N ranks (Megatron's split): NONE, every rank holds
 * it whole (LayerNorms, wpe, the row-split projections' biases); ROWS, rank r the r-th N-th of
 * its rows (the projections' weights, [in, out]: their inputs); COLS, of its columns (c_fc's
 * weight and bias: its outputs); QKV, the r-th N-th of each of its three column groups (c_attn's
 * q, k and v: heads r N_h/N on); VOCAB, rows [r s, r s + s) with s = ceil(rows / N), the last
 * rank fewer or none (wte, as kernels/model/vocab_split.h cuts the vocabulary). */
enum gk_split { GK_SPLIT_NONE, GK_SPLIT_ROWS, GK_SPLIT_COLS, GK_SPLIT_QKV, GK_SPLIT_VOCAB };
/* Rank r's part of a tensor of full shape full (ndim 1: full[0] elements, cut as a row) cut by
 * split over n ranks: its shape into part. */
void gk_tp_part_shape(int split, int ndim, const int full[2], int n, int r, int part[2]);
/* Copies floats [lo, lo + count) of rank r's part (in part's row-major order) between part
 * (pointing at float lo) and the whole tensor: to_full 1 from part into whole, else back. */
void gk_tp_part_copy(int split, int ndim, const int full[2], int n, int r, float *whole,
                     float *part, size_t lo, size_t count, int to_full);

/* AdamW and clipping hyper-parameters (nanoGPT names). */
typedef struct gk_adamw {
    float beta1, beta2;   /* 0.9, 0.95 in nanoGPT */
    float eps;            /* 1e-8 */
    float weight_decay;   /* on 2-D tensors only */
    float grad_clip;      /* clip the global L2 norm to this; 0 = no clipping */
    double skip_norm;     /* a global norm above this updates nothing, as a non-finite one
                           * (the trainer's spike skipping); 0 = no limit */
} gk_adamw;

typedef struct gk_gpt2 gk_gpt2;

/* 0 or GK_EUSAGE with a message naming the bad field. */
int gk_gpt2_config_check(const gk_gpt2_config *cfg, gk_err *err);
/* The parameter table of a config without a model: fills up to cap entries of out (names,
 * shapes, numel, decay; pointers NULL) and returns the number of entries (out may be NULL to
 * count). The same table gk_gpt2_param walks. */
int gk_gpt2_param_table(const gk_gpt2_config *cfg, gk_param *out, int cap);
/* Dimension d of config c (1 for GK_DIM_1). */
int64_t gk_gpt2_dim_size(const gk_gpt2_config *c, enum gk_gpt2_dim d);

/* Creates a model on backend be (borrowed; must outlive the model) for batches up to
 * max_B x max_T (max_T <= block_size). Parameters start at zero: load them, or gk_gpt2_init. */
int gk_gpt2_create(gk_gpt2 **out, const gk_gpt2_config *cfg, gk_backend *be, int max_B, int max_T,
                   gk_err *err);
/* Flags of gk_gpt2_create_ex.
 * GK_GPT2_INFERENCE: parameters and forward activations only, no gradients, AdamW moments or
 *   backward buffers (a quarter of the training footprint); the row-wise activations are shared
 *   by all layers, each layer keeping only its qkv (the KV cache). backward, update and
 *   grad_norm return GK_EUSAGE / 0; training mode is refused.
 * GK_GPT2_BF16 (implies INFERENCE): the weight matrices (wte and the four per layer) are kept
 *   as bf16 only (rounded to nearest even from fp32 when set), halving the bytes read per
 *   token; matmuls read bf16 weights with fp32 accumulation. wpe, biases and LayerNorm stay fp32.
 * GK_GPT2_F16 (implies INFERENCE; cpu and ref backends only): the same with the weight matrices
 *   as IEEE fp16 (rounded to nearest even; overflow past 65504 becomes infinity): 3 more bits of
 *   mantissa than bf16, 5 fewer of exponent (GPT-2's weights are far inside the range).
 * GK_GPT2_Q8 (implies INFERENCE; cpu and ref backends, n_embd a multiple of 32): the same with the
 *   weight matrices as llama.cpp's Q8_0 (backend.h GK_Q8: blocks of 32 along each matrix's input
 *   dimension, one fp16 scale each; the Conv1D matrices kept transposed, [out, in]), a little
 *   over a quarter of fp32's bytes; the CPU backend's decoding multiplies them with activations
 *   quantized alike (int8 dot products), longer batches with the weights widened to fp32.
 * GK_GPT2_RECOMPUTE (training models): the backward recomputes each layer's GELU output from
 *   its input (ops->gelu_fwd) instead of keeping it, so one (B*T, 4C) buffer serves every layer:
 *   a quarter of the activations (llm.c's recompute = 1), for one elementwise pass per layer.
 *   The numbers are the same on cpu and ref; on cuda the recomputed values may differ from
 *   cuBLASLt's epilogue in their last bit.
 * GK_GPT2_RECOMPUTE_LN (training models): the same for the two LayerNorm outputs of each block
 *   (ln_1, ln_2), recomputed from the residual stream they normalize (ops->layernorm_fwd, the
 *   values the fused residual add + LayerNorm stored): one (B*T, C) buffer each serves every
 *   layer, another eighth of the activations (with RECOMPUTE: llm.c's recompute = 2).
 * GK_GPT2_DEFER_MOMENTS (training models): create allocates no AdamW moments; gk_gpt2_set_comm
 *   does, as this rank's shard alone with ZeRO-1 (so that the full moments are never on the
 *   device), else whole. Call it before anything uses them (init, update, loading them).
 * GK_GPT2_DEFER_GRADS (training models): the same for the gradients: gk_gpt2_set_comm allocates
 *   them, whole, or with zero_stage 2 this rank's shard and the backward's buckets (so that the
 *   whole gradient is never on the device). Call it before the first backward.
 * On a backend with bf16 activations the weight matrices are always read as bf16: a training
 * model keeps fp32 masters and a bf16 copy that each update refreshes; an inference model
 * keeps the bf16 copy only. */
enum { GK_GPT2_INFERENCE = 1, GK_GPT2_BF16 = 2, GK_GPT2_RECOMPUTE = 4, GK_GPT2_RECOMPUTE_LN = 8,
       GK_GPT2_DEFER_MOMENTS = 16, GK_GPT2_F16 = 32, GK_GPT2_Q8 = 64, GK_GPT2_DEFER_GRADS = 128,
       GK_GPT2_OFFLOAD = 256 /* the memory estimates only: gk_gpt2_set_offload will be called */ };
int gk_gpt2_create_ex(gk_gpt2 **out, const gk_gpt2_config *cfg, gk_backend *be, int max_B,
                      int max_T, int flags, gk_err *err);
/* Tensor parallel (Megatron's, kernels/model/gpt2_tp.c): a training model whose blocks are split
 * over the ranks of tp (borrowed; NULL or one rank: create_ex's model): attention by heads
 * (c_attn's q, k and v columns, c_proj's rows, one all-reduce of its output), the MLP by its
 * hidden units (c_fc's columns, c_proj's rows, one all-reduce), the vocabulary by rows of wte
 * (vocab_split.h: the embedding and the cross-entropy without gathering the logits); in the
 * backward the two all-reduces of the blocks' input gradients and the lm_head's. Every rank of tp
 * runs the same batch (forward and backward are collectives on tp); the table's entries are this
 * rank's parts (gk_param.split), which tensor_get and _set move; loading a checkpoint cuts each
 * tensor with gk_tp_part_copy. Dropout: the embedding's and the residual ones draw the same
 * numbers on every rank (the unsplit model's); attention's, inside the split, its own on each
 * rank (Megatron's rule; rank 0 the unsplit model's heads' first part). The logits
 * (gk_gpt2_logits_host, gk_gpt2_padded_vocab) are this rank's columns: its vocabulary slice and a
 * zero column, padded; the losses are the whole model's. Data parallel: a gk_gpt2_set_comm over
 * the ranks that hold the same part, at any zero_stage (the norm then sums the split tensors over
 * tp too). n_head and 4 n_embd must divide by tp's ranks. Not with 16-bit weights, offload or
 * forward_at (GK_EUSAGE). */
int gk_gpt2_create_tp(gk_gpt2 **out, const gk_gpt2_config *cfg, gk_backend *be, int max_B,
                      int max_T, int flags, gk_comm *tp, gk_err *err);
/* The tensor-parallel ranks (1 without) and this rank among them. */
int gk_gpt2_tp_world(const gk_gpt2 *m);
int gk_gpt2_tp_rank(const gk_gpt2 *m);
int gk_gpt2_flags(const gk_gpt2 *m);
/* Sets parameter i (table order) from host fp32 values (numel of them), and its bf16 copy (host
 * is then used as scratch and overwritten). */
void gk_gpt2_param_set(gk_gpt2 *m, int i, float *host);
/* Host copies of a table entry's tensors (numel floats) for checkpoints: the parameter (widened
 * from bf16 when kept so), its gradient, or its AdamW moments. get: GK_EUSAGE when the model has
 * no such tensor (an inference model's moments); set: the parameter also refreshes its bf16
 * copy. Both return the backend's sticky error. */
enum gk_tensor_kind { GK_TENSOR_PARAM, GK_TENSOR_GRAD, GK_TENSOR_ADAM_M, GK_TENSOR_ADAM_V };
int gk_gpt2_tensor_get(gk_gpt2 *m, int i, enum gk_tensor_kind kind, float *host, gk_err *err);
int gk_gpt2_tensor_set(gk_gpt2 *m, int i, enum gk_tensor_kind kind, const float *host,
                       gk_err *err);
/* Frees everything; NULL is a no-op. */
void gk_gpt2_free(gk_gpt2 *m);

/* ---- the fit check (gpt2_mem.c): what a model needs, against what the backend has ---- */

/* The memory gk_gpt2_create_ex takes, by part, in bytes, computed without allocating. */
typedef struct gk_gpt2_mem {
    size_t params;      /* fp32 parameters and bf16 weight copies (wte rows padded to 64) */
    size_t grads;       /* fp32 gradients (0 for inference models) */
    size_t optimizer;   /* AdamW m and v (0 for inference models) */
    size_t activations; /* every activation for max_B x max_T (inference: the KV cache and one
                         * layer's buffers), plus GK_GPT2_MEM_SCRATCH for the ops' scratch */
    size_t total;       /* the sum */
    size_t master;      /* the fp32 parameters alone (a whole copy's bytes: a checkpoint's) */
    size_t copies;      /* of params: the 16-bit weight copies held (zero_stage 3: wte's and two
                         * layers') */
    size_t snapshot;    /* a training checkpoint's host copy on this rank: its slice of the
                         * parameters and moments (gk_gpt2_slices; rank 0's, with the tails) */
    size_t slice;       /* of snapshot, one kind's slice (a kind read in place needs none) */
    size_t host;        /* with GK_GPT2_OFFLOAD: the host memory of the offloaded optimizer
                         * (master weights, moments, a gradient copy, the copies' staging);
                         * params and optimizer then count the device's only */
} gk_gpt2_mem;
#define GK_GPT2_MEM_SCRATCH ((size_t)64 << 20) /* cuBLASLt workspace (32 MiB) and op scratch */
/* Fills *out for cfg on a backend of activation type act (be->act) with flags as
 * gk_gpt2_create_ex's; sizes past what a size_t holds saturate. 0 or GK_EUSAGE (a bad config).
 * optimizer is the whole moments' (with GK_GPT2_DEFER_MOMENTS too: what set_comm allocates
 * without sharding). */
int gk_gpt2_mem_estimate(const gk_gpt2_config *cfg, gk_elt act, int max_B, int max_T, int flags,
                         gk_gpt2_mem *out, gk_err *err);
/* The same with the moments sharded over world ranks (ZeRO-1, GK_GPT2_DEFER_MOMENTS): optimizer
 * becomes one rank's shard and the shared tail, and total follows. */
void gk_gpt2_mem_shard(gk_gpt2_mem *m, int world);
/* Refuses a model that would not fit, before anything is allocated: need (gk_gpt2_mem_estimate)
 * against gk_backend_mem_info of be, and extra bytes of host buffers (extra_what names them, e.g.
 * "checkpoint copy"; 0 for none) against the host's memory, which is the device's on cpu, ref
 * and cuda-emu (the two then add up). GK_ENOMEM with "model + batch need 31.2 GB (parameters
 * 6.2 GB, gradients 6.2 GB, optimizer 12.4 GB, activations 6.4 GB) but 22.9 GB are available
 * (MemAvailable): HINT". The caller honours gk_mem_check_mode (common/mem.h). */
int gk_gpt2_mem_check(gk_backend *be, const gk_gpt2_mem *need, size_t extra, const char *extra_what,
                      const char *hint, gk_err *e);

/* The largest batch *B in 1..GK_GPT2_MEM_MAX_B at T whose estimate (flags as
 * gk_gpt2_mem_estimate's; sharded over world ranks at zero_stage stage when world > 1, in
 * tensor-parallel groups of tp, as gk_gpt2_mem_plan), plus extra bytes, is at most avail; 0 when
 * not even 1 is. 0 or the estimate's error. */
#define GK_GPT2_MEM_MAX_B (1 << 20)
int gk_gpt2_mem_max_batch(const gk_gpt2_config *cfg, gk_elt act, int T, int flags, int world,
                          int stage, int tp, size_t extra, size_t avail, int *B, gk_err *err);

/* One rank's memory plan (gpt-train --plan): the bytes it holds, by row, from an estimate
 * (gk_gpt2_mem_plan), and the rows a tool adds for its own buffers (gk_gpt2_plan_add: a
 * checkpoint's host copy); sharded layouts and offload add theirs the same way. Rows of 0 bytes
 * are kept, so that the plans of several ranks line up row by row. Owns nothing. */
#define GK_GPT2_PLAN_ROWS 12
typedef struct gk_gpt2_plan_row {
    const char *name; /* static text: "weights, fp32 master" */
    size_t bytes;
    int host;         /* 1: host memory (the device's too where the backend's is the host's) */
} gk_gpt2_plan_row;
typedef struct gk_gpt2_plan {
    gk_gpt2_plan_row row[GK_GPT2_PLAN_ROWS];
    int n;
} gk_gpt2_plan;
/* gk_gpt2_mem_estimate into *mem (sharded over world ranks when world > 1 at zero_stage stage:
 * 1 the moments, as gk_gpt2_mem_shard, 2 the gradients too: this rank's shard of them and the
 * backward's buckets, gk_gpt2_set_comm's layout; 3 the parameters too, with the buffers they
 * are gathered into), of rank 0 of tensor-parallel groups of tp ranks (gk_gpt2_create_tp's
 * parts, the most of wte's rows; 1: none; world then counts the groups), and the same as rows
 * into *p: weights, fp32 master; weights, bf16 copy (16-bit copy where act is not bf16);
 * gradients, fp32; AdamW moments, fp32; activations (with the batch's token ids); workspace and
 * scratch. 0 or the estimate's error. */
int gk_gpt2_mem_plan(const gk_gpt2_config *cfg, gk_elt act, int max_B, int max_T, int flags,
                     int world, int stage, int tp, gk_gpt2_mem *mem, gk_gpt2_plan *p,
                     gk_err *err);
/* Appends a row (name: static text); a full plan drops it (GK_GPT2_PLAN_ROWS holds every row
 * there is today with room to spare). */
void gk_gpt2_plan_add(gk_gpt2_plan *p, const char *name, size_t bytes, int host);
/* What p needs on the device (host rows included when shared: the device's memory is the
 * host's) and in host memory apart (0 when shared); sums saturate. */
void gk_gpt2_plan_sum(const gk_gpt2_plan *p, int shared, size_t *device, size_t *host);

const gk_gpt2_config *gk_gpt2_cfg(const gk_gpt2 *m);
int gk_gpt2_padded_vocab(const gk_gpt2 *m);
/* The parameter table: n entries, i in [0,n). Drives checkpoint I/O and tests. */
int gk_gpt2_n_params(const gk_gpt2 *m);
const gk_param *gk_gpt2_param(const gk_gpt2 *m, int i);
/* Number of scalar parameters (logical: padded wte rows not counted; the whole model's under
 * tensor parallel). */
size_t gk_gpt2_num_scalars(const gk_gpt2 *m);

/* nanoGPT's init from seed: weights and embeddings normal(0, 0.02), c_proj weights
 * normal(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm weights 1. Counter-based RNG: the same
 * seed gives the same weights on every backend. Also resets the AdamW moments and step. */
int gk_gpt2_init(gk_gpt2 *m, uint64_t seed, gk_err *err);

/* Training mode turns dropout on (when cfg.dropout > 0); the default is off (eval). Each training
 * forward draws fresh masks from (seed, counter), counter += 1 per training forward; set both
 * to resume a run exactly. */
void gk_gpt2_set_training(gk_gpt2 *m, int on); /* ignored by inference models */
void gk_gpt2_set_rng(gk_gpt2 *m, uint64_t seed, uint64_t counter);
void gk_gpt2_get_rng(const gk_gpt2 *m, uint64_t *seed, uint64_t *counter);

/* Errors of the backend: gk_gpt2_forward, forward_at, backward and update return, after their
 * ops, the backend's sticky error (backend.h), e.g. GK_ENOMEM with the failing op and its
 * file:line in err; the model's outputs are then undefined and the backend stays failed. */

/* host tokens (B,T) -> logits (B,T,padded_vocab) on the device; with targets (B,T) (host, -1 =
 * ignore) also *loss = mean cross-entropy over the non-ignored targets (loss may be NULL) and
 * the per-token losses (gk_gpt2_token_losses). B <= max_B, T <= max_T. Tokens outside
 * [0, vocab_size) are GK_EUSAGE. */
int gk_gpt2_forward(gk_gpt2 *m, const int *inputs, const int *targets, int B, int T, float *loss,
                    gk_err *err);
/* Host copy of rows row0..row0+nrows-1 of the last forward's logits (row b*T + t is position t
 * of sequence b; forward_at: b*n + i), the first ncols (<= padded_vocab) columns of each, as fp32
 * into host (nrows, ncols). After gk_gpt2_backward they hold the logits' gradient instead.
 * Returns the backend's sticky error, or GK_EUSAGE for rows or columns out of range. */
int gk_gpt2_logits_host(gk_gpt2 *m, int row0, int nrows, int ncols, float *host, gk_err *err);
/* Host per-token losses (B*T, 0 where the target was -1) of the last forward with targets. */
const float *gk_gpt2_token_losses(const gk_gpt2 *m);

/* Sets every gradient to zero. */
void gk_gpt2_zero_grad(gk_gpt2 *m);
/* Backward of the last forward (which must have had targets): grads += d(loss_scale * loss).
 * Gradient accumulation: zero_grad, then per micro-step forward + backward with
 * loss_scale = 1/steps (nanoGPT divides the loss by gradient_accumulation_steps), then update. */
int gk_gpt2_backward(gk_gpt2 *m, float loss_scale, gk_err *err);
/* Global L2 norm of all gradients (before any clipping); NAN with zero_stage 2 (each rank holds
 * its shard: update's *grad_norm is the global one). */
double gk_gpt2_grad_norm(gk_gpt2 *m);
/* Data-parallel training (kernels/comm/comm.h; c borrowed, NULL: one process): update first
 * sums the gradients of every rank (each rank's backward scales its loss by 1/(micro-batches of
 * all ranks), so the sum is the global mean). zero_stage 1 (ZeRO-1) shards the AdamW moments:
 * rank r keeps those of floats [r n/W, (r+1) n/W) of the parameter block (plus a shared tail of
 * under 16 W floats), and update reduce-scatters the gradients (unless the backward summed them:
 * gk_gpt2_reduce_in_next_backward), takes the global norm, updates its shard and all-gathers the
 * parameters. zero_stage 2 (ZeRO-2) shards the gradients too, and by layer: the parameter block
 * is cut into the backward's buckets (wte and wpe; each layer, the last with ln_f), each bucket
 * into W pieces (rank r keeps piece r of each, plus a shared tail of under 16 W floats, for the
 * moments as for the gradients); the backward starts each bucket's reduce-scatter as soon as its
 * gradients are written (comm.h reduce_scatter_start: it runs while the backward goes on), folds
 * it into this rank's gradient shard (accumulated there over micro-steps) once ended, and reuses
 * the bucket's buffer two layers later: a rank holds the gradients of wte, wpe and two layers,
 * and its shard, never the whole. update then takes the global norm from the shards, updates its
 * pieces and all-gathers each bucket's parameters. The moments held now are kept (each rank its
 * shard); a model made with GK_GPT2_DEFER_MOMENTS (GK_GPT2_DEFER_GRADS) gets them here (zero),
 * its shard only, or whole without sharding (then c may be NULL). zero_stage 3 (ZeRO-3, FSDP's
 * full shard) shards the parameters too, by the same buckets: each rank keeps the fp32
 * parameters of its pieces (and the tails), frees the whole block and weight copies, and every
 * forward and backward all-gathers a bucket's parameters (and casts its weight copies) just
 * before reading them, into one of three buffers (wte and wpe's, and two layers'), so that a rank
 * holds the parameters of wte, wpe and two layers and its shard (gpt2_gather.c); every rank then
 * makes the same forwards and backwards (each one is a collective), and tensor_get of a parameter
 * is GK_EUSAGE (gk_gpt2_shards_gather_packed gathers them); init before this call. 0, GK_ENOMEM,
 * or GK_EUSAGE for a model too small to shard, a stage not 0..3, or stage 3 with one rank. */
int gk_gpt2_set_comm(gk_gpt2 *m, gk_comm *c, int zero_stage, gk_err *err);
/* Optimizer offload (ZeRO-Offload), before gk_gpt2_set_comm: moves the fp32 master weights and
 * the AdamW moments to host memory, where every gk_gpt2_update runs AdamW on the host (a
 * host-memory backend: the CPU backend, borrowed; its threads do the work), with the gradients
 * summed, their norm taken and clipped on the device as before and copied to the host a chunk at
 * a time for it; the updated weights go back to the device. Without ZeRO the device keeps what
 * the graph reads: with 16-bit weight copies (bf16 training) those copies and the fp32 of the
 * small tensors (LayerNorms, biases, wpe) only, else the fp32 weights; and the gradients and
 * activations; the host holds 3 x the fp32 parameters (master, moments) and chunk-sized staging.
 * With ZeRO over several ranks (set_comm's stage 1-3) the host holds the moments of this rank's
 * shard only and the device keeps the fp32 weights of that stage (the whole block; at stage 3
 * the shard), the master its update stages through the host. tensor_get and _set of parameters
 * and moments then use the host's; the model cannot be initialized anew. 0, GK_ENOMEM, or
 * GK_EUSAGE (an inference model, after set_comm or a second time, host not host memory). */
int gk_gpt2_set_offload(gk_gpt2 *m, gk_backend *host, gk_err *err);
/* Says that the next gk_gpt2_backward is the last before gk_gpt2_update (the last micro-step).
 * In a data-parallel run that backward sums each layer's gradients over the ranks as soon as the
 * layer's backward has written them (comm.h allreduce_start), so that the sums run while the
 * layers below are differentiated, and waits for them at its end (the first layer's, with the
 * embeddings, cannot overlap); update then sums nothing more. The sums are update's one sum in
 * pieces (the same bits with 2 ranks; with more, the collective may add in another order within
 * a float's rounding). With ZeRO-1 they are whole sums too (as PyTorch's DDP beside a
 * ZeroRedundancyOptimizer): twice the bytes of update's reduce-scatter, but hidden behind the
 * backward; each rank then updates its shard of them. Every rank must make the same call.
 * zero_stage 2 sums (reduce-scatters) in every backward: the call changes nothing there.
 * Without the call (or with one process) update sums the gradients as documented above. */
void gk_gpt2_reduce_in_next_backward(gk_gpt2 *m);
/* ZeRO checkpoints: gather collects every rank's moments (a collective: all ranks call it) in
 * pieces through a small device buffer (no rank holds them whole on the device) into host memory
 * of the ranks that keep them (keep != 0: the one that writes the checkpoint), where
 * gk_gpt2_tensor_get reads them; release frees them again. Without sharding both do nothing.
 * While sharded and not gathered here, tensor_get of a moment is GK_EUSAGE; tensor_set of one
 * keeps this rank's part. */
int gk_gpt2_moments_gather(gk_gpt2 *m, int keep, gk_err *err);
/* 1 when the AdamW moments are sharded across ranks (zero_stage 1, 2 or 3), else 0; params: when
 * the parameters are too (zero_stage 3). */
int gk_gpt2_moments_sharded(const gk_gpt2 *m);
int gk_gpt2_params_sharded(const gk_gpt2 *m);
/* The same gather without a copy of its own, of whatever is sharded: every rank's parameters
 * (zero_stage 3) and moments straight into p_out, m_out and v_out (host memory of
 * gk_gpt2_num_scalars floats each, every table entry's numel in table order, as a checkpoint packs
 * its tensors) on the rank that writes the checkpoint, NULL on the others, which take part (a
 * collective: every rank gathers the same kinds whatever it passes). Without sharding it gathers
 * nothing; what is not sharded is read with gk_gpt2_tensor_get. */
int gk_gpt2_shards_gather_packed(gk_gpt2 *m, float *p_out, float *m_out, float *v_out,
                                 gk_err *err);
void gk_gpt2_moments_release(gk_gpt2 *m);
/* A checkpoint's slices: each rank takes a host copy of the part of the state it owns, so that no
 * rank holds the whole state for a checkpoint. The parameter block (every table entry's floats at
 * its gk_param.offset, with alignment gaps) is cut as ZeRO's layout cuts it over the ranks of the
 * comm (gk_gpt2_set_comm; without sharding, the whole block as one bucket): rank r owns piece r
 * of every bucket, and rank 0 the tails too. A slice holds one rank's floats of one kind (the
 * parameters, or a moment) in block order; with one rank it is the whole block. The layout is a
 * copy, read-only: any thread may use it. */
typedef struct gk_gpt2_slices gk_gpt2_slices;
gk_gpt2_slices *gk_gpt2_slices_new(const gk_gpt2 *m); /* NULL: out of memory */
void gk_gpt2_slices_free(gk_gpt2_slices *s);          /* NULL-safe */
/* The ranks the state is cut over (the comm's; 1 without). */
int gk_gpt2_slices_world(const gk_gpt2_slices *s);
/* The floats of rank's slice. */
size_t gk_gpt2_slice_floats(const gk_gpt2_slices *s, int rank);
/* For the block's float off: the rank that owns it, where it lies in that rank's slice, and how
 * many floats from off on lie there one after another. */
void gk_gpt2_slice_owner(const gk_gpt2_slices *s, size_t off, int *rank, size_t *at, size_t *run);
/* This rank's slice of kind (GK_TENSOR_PARAM, _ADAM_M, _ADAM_V) into host (slice_floats of its
 * rank): no collective. */
int gk_gpt2_slice_get(gk_gpt2 *m, const gk_gpt2_slices *s, enum gk_tensor_kind kind, float *host,
                      gk_err *err);
/* Whether a rank's slice of kind lies in memory the host reads as it is: every kind on a backend
 * whose memory is the host's (host_backend: cpu, ref), the offloaded moments (offload), and the
 * offloaded parameters where ZeRO leaves them on the host (zero_stage 0). Needs no model: the
 * plan asks it too. */
int gk_gpt2_slice_on_host(int host_backend, int offload, int zero_stage, enum gk_tensor_kind kind);
/* gk_gpt2_slice_on_host for m (its backend, offload and stage): whether gk_gpt2_slice_read may
 * read this rank's slice of kind. */
int gk_gpt2_slice_in_place(const gk_gpt2 *m, enum gk_tensor_kind kind);
/* The floats [from, from + n) of this rank's slice of kind (gk_gpt2_slice_in_place) into host,
 * read in place without the backend: any thread may call it, and it reads the model's state as
 * the last update left it, so the caller keeps gk_gpt2_update, loads and gk_gpt2_free from
 * running meanwhile (the checkpoint writer: tr_checkpoint_settle). GK_EUSAGE otherwise. */
int gk_gpt2_slice_read(const gk_gpt2 *m, const gk_gpt2_slices *s, enum gk_tensor_kind kind,
                       size_t from, size_t n, float *host, gk_err *err);
/* One optimizer step: the sum over ranks (gk_gpt2_set_comm), clip to h->grad_clip as
 * torch.nn.utils.clip_grad_norm_, then AdamW with learning rate lr (refreshing the bf16 weight
 * copies in the same pass); step count t += 1. *grad_norm (may be NULL) = the norm before clipping
 * (of the summed gradients). A norm that is not finite, or above h->skip_norm when that is set,
 * updates nothing (weights, moments and t stay): the caller sees it in *grad_norm. */
int gk_gpt2_update(gk_gpt2 *m, const gk_adamw *h, float lr, double *grad_norm, gk_err *err);
/* Optimizer updates done so far (AdamW's t); set it when resuming. */
int64_t gk_gpt2_get_step(const gk_gpt2 *m);
void gk_gpt2_set_step(gk_gpt2 *m, int64_t step);

/* Incremental forward with a KV cache (kernels/model/gpt2_infer.c), eval mode (no dropout).
 * host tokens (B,n): the tokens at positions t0..t0+n-1 of each of B sequences -> logits (B,n,
 * padded_vocab) for gk_gpt2_logits_host (row b*n + i is position t0+i of sequence b). The cache is
 * each layer's qkv activation viewed as (max_B, max_T, 3C): this call writes rows t0..t0+n-1 and
 * reads rows 0..t0-1, which earlier forward_at calls with the same B must have written (t0 = 0
 * starts afresh). gk_gpt2_forward (training, evaluation) overwrites the cache. B <= max_B,
 * t0 + n <= max_T. Tokens outside [0, vocab_size) are GK_EUSAGE. */
int gk_gpt2_forward_at(gk_gpt2 *m, const int *tokens, int B, int t0, int n, gk_err *err);

/* Drawing on the device, where the backend samples (backend.h's sample: cuda): the tokens never
 * come to the host as logits, and a decoded token is one recorded replay. gk_gpt2_can_draw: the
 * backend samples (not with tensor parallel). gk_gpt2_draw: the next token of each of the last
 * forward_at's B sequences, from the first nv of its last position's logits (nv <= vocab_size),
 * with p at step `step` (the host's gk_sample in kernels/infer/sampler.h, but for the rounding
 * the op states) -> ids (host, B).
 * gk_gpt2_step_draw: the one-row step of the tokens drawn last, at the position after the ones
 * before them, then their draw (at the next step), recorded once for B and p and replayed ->
 * ids. GK_EUSAGE without a draw before it (forward_at and gk_gpt2_forward end the chain) or past
 * max_T. The logits stay readable (gk_gpt2_logits_host) after either. */
int gk_gpt2_can_draw(const gk_gpt2 *m);
int gk_gpt2_draw(gk_gpt2 *m, const gk_params *p, int nv, int64_t step, int *ids, gk_err *err);
int gk_gpt2_step_draw(gk_gpt2 *m, const gk_params *p, int nv, int *ids, gk_err *err);

#endif
