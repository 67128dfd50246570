/* backend.h: the backend-neutral op interface the GPT-2 graph is written against.
 * Owns: gk_ops (a vtable, one per backend kind) and gk_backend (one context per run: vtable +
 * device state).
 * Lifetime: create with gk_backend_open (or a constructor: gk_cpu_create, gk_ref_create, a CUDA
 * library's entry), free with gk_backend_free.
 * Thread safety: a gk_backend is used by one host thread at a time; ops may use threads
 * internally. */
#ifndef GK_BACKEND_H
#define GK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/sampling.h" /* gk_params */

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of device buffers. Activations (and their gradients) have the backend's
 * activation type be->act: GK_F32 on cpu and ref, GK_BF16 (or GK_F32) on cuda. Master weights,
 * parameter gradients, AdamW moments, LayerNorm statistics, log-sum-exps and losses are always
 * GK_F32. A bf16 value is the high half of an fp32 (uint16_t; to fp32: shift left by 16, exact;
 * from fp32: round to nearest even). */
typedef enum gk_elt { GK_F32 = 0, GK_BF16 = 1, GK_F16 = 2, GK_Q8 = 3 } gk_elt;
static inline size_t gk_elt_size(gk_elt t) { return t == GK_F32 ? 4 : t == GK_Q8 ? 1 : 2; }
/* GK_F16 (IEEE binary16, uint16_t) and GK_Q8 are weight types of the CPU backends only (the
 * model's GK_GPT2_F16 and GK_GPT2_Q8 weights), never activation types; cuda refuses them.
 * GK_Q8 is llama.cpp's Q8_0: blocks of GK_Q8_BLOCK consecutive elements, each an fp16 scale d
 * (2 bytes, little-endian) then GK_Q8_BLOCK int8 q (-127..127), element = d * q; a buffer of n
 * elements (n a multiple of GK_Q8_BLOCK) takes gk_elt_bytes(GK_Q8, n) = n / 32 * 34 bytes. As a
 * gemm operand it is B only, transposed (rows of K elements, K a multiple of 32, ldb = K). */
#define GK_Q8_BLOCK 32
#define GK_Q8_BLOCK_BYTES 34
static inline size_t gk_elt_bytes(gk_elt t, size_t n)
{
    return t == GK_Q8 ? n / GK_Q8_BLOCK * GK_Q8_BLOCK_BYTES : n * gk_elt_size(t);
}

/* Conventions for every op below.
 * - Pointers are device pointers (from ops->alloc); host pointers say "host". `float *` buffers
 *   are fp32 always; `void *` activation buffers hold elements of be->act; weights passed to gemm
 *   and the encoder carry their own gk_elt.
 * - Matrices are row-major. Shapes are in the comment: `inp (N,C)` is N rows of C elements.
 * - "+=" in a comment means the op accumulates into that output (parameter gradients always do,
 *   so gradient accumulation across micro-steps is free); "=" means it overwrites.
 * - Ops launch work and may return before it ends on asynchronous devices; ops->sync waits.
 *   The CPU backends are synchronous.
 * - Errors are sticky: an op that fails (an allocation, a launch, a device fault, a type
 *   combination it does not implement) records it in the backend with GK_BACKEND_FAIL (code, the
 *   failing call and its file:line; only the first error is kept) and returns without writing its
 *   outputs. Ops return nothing: callers learn of a failure from gk_backend_sync (waits, then
 *   returns the sticky error) or gk_backend_status (does not wait); the GPT-2 graph's entry points
 *   return gk_backend_status after their ops, so the error reaches the tool. After an error every
 *   output is undefined; the error is never cleared.
 * - Results never depend on the thread count: reductions use a fixed split of the data.
 * - Dropout masks come from a counter-based RNG (kernels/rng.h): keep element i iff
 *   gk_rng_uniform(key, i) >= p; kept values are scaled by 1/(1-p). Element i is the flat index
 *   of the masked tensor ((B,T,C) row-major for the embedding and residual dropouts; for the
 *   attention probabilities ((b*NH + h)*T + t)*T + u, query t, key u). Backward ops recompute
 *   the mask from the same key, so masks are never stored. p == 0 means no dropout (key
 *   ignored). */

typedef struct gk_backend gk_backend;
struct gk_comm;      /* kernels/comm/comm.h */
struct gk_comm_boot; /* kernels/comm/comm.h */

/* One tensor of adamw_multi: what differs between the adamw calls it stands for. */
typedef struct gk_adamw_tensor {
    float *param;
    const float *grad;
    float *m, *v;
    void *copy;   /* the updated param's copy (type tcopy), or NULL */
    size_t n;
    int decay;    /* 1: weight decay wd applies, 0: none */
} gk_adamw_tensor;
/* One range of zero_multi: n bytes at p. */
typedef struct gk_span {
    void *p;
    size_t n;
} gk_span;

/* The op table. Its layout is what a backend library and the tools built apart agree on, so:
 * - Slots are grouped by op family, one group per family file stem: every backend puts a group's
 *   ops in its file of that stem (kernels/ref/layernorm.c, kernels/cpu/layernorm.c,
 *   kernels/cuda/layernorm.cu); the op tests are tests/unit/ops/STEM.c. A slot's name need not
 *   carry the stem (xent_fwd is classifier's, bias_bwd elementwise's): its group says where it
 *   lives. Ops a backend builds from its other ops are backend_compose.c's (cpu's and ref's
 *   gemm_bwd).
 * - Groups keep this order, and each ends in spare slots (spare_GROUP[n], NULL). A new op takes
 *   its group's first spare (the array shrinks by one), so no other slot moves; slots are never
 *   removed or reordered (a retired one becomes a spare). A group with no spare left is laid out
 *   again, every group given two spares, in one change with one ABI bump. backend.c asserts the
 *   offsets at compile time, so a slot inserted anywhere else fails the build.
 * Whether a change needs a GK_BACKEND_ABI bump: see GK_BACKEND_ABI below. */
typedef struct gk_ops {
    const char *name; /* "cpu", "ref", "cuda", "cuda-emu" */
    /* ==== memory (kernels/cpu/host_mem.c for cpu and ref, cuda/backend.cu) ==== */
    /* Allocates n bytes of device memory, 64-byte aligned, zero-filled; NULL on failure (not a
     * sticky error: the caller reports it with the sizes it knows). */
    void *(*alloc)(gk_backend *be, size_t n);
    /* Frees memory from alloc; NULL is a no-op. */
    void (*free)(gk_backend *be, void *p);
    /* Copies n bytes: host -> device, device -> host, device -> device. to_host returns when the
     * host buffer is written (it waits for the ops before it). */
    void (*to_device)(gk_backend *be, void *dst, const void *host_src, size_t n);
    void (*to_host)(gk_backend *be, void *host_dst, const void *src, size_t n);
    void (*copy)(gk_backend *be, void *dst, const void *src, size_t n);
    /* Sets n bytes of device memory to zero. */
    void (*zero)(gk_backend *be, void *p, size_t n);
    /* Waits until every op launched so far has finished. */
    void (*sync)(gk_backend *be);
    /* Sizes internal scratch for problems up to rows x cols (rows = B*T, cols = widest row) and
     * attention heads of head_size over sequences of T; called once by the graph's create, so
     * that no op allocates inside a step. An op given more than was reserved still runs its own
     * code (cpu grows its scratch once, or fails with GK_ENOMEM), never another backend's.
     * Returns 0 or a negative GK_E* code. */
    int (*reserve)(gk_backend *be, size_t rows, size_t cols, int head_size, int T, gk_err *err);
    /* The tools' up-front "does it fit" checks: *free_bytes = device memory that allocations may
     * still take, plus what the backend holds for the ops' workspace and scratch (which the
     * model's plan counts: kernels/model/gpt2_mem.c), *total_bytes = all of it (cuda:
     * cudaMemGetInfo; cpu and ref: the host's, common/mem.h). 0 or a negative GK_E* code. */
    int (*mem_info)(gk_backend *be, size_t *free_bytes, size_t *total_bytes, gk_err *e);
    /* Pinned (page-locked) host memory, which to_device and to_host move at the bus's speed:
     * n > 0 allocates n bytes (p NULL; NULL on failure), n == 0 frees p (NULL: a no-op).
     * Optional: NULL where host memory is the device's (cpu, ref): use malloc then. */
    void *(*pinned)(gk_backend *be, void *p, size_t n);
    void (*spare_memory[2])(void);
    /* ==== cast (cast.c) ==== */
    /* dst (n, type dt) = src (n, type st), rounding to nearest even when narrowing. */
    void (*cast)(gk_backend *be, void *dst, gk_elt dt, const void *src, gk_elt st, size_t n);
    void (*spare_cast[2])(void);
    /* ==== matmul (matmul.c; gemm_bwd on cpu and ref: kernels/backend_compose.c) ==== */
    /* The one matmul: C (M,N) = alpha * op(A) op(B) + beta * C, row-major, BLAS semantics: op(A)
     * is (M,K), A stored (M,K) with lda >= K if !transA, else (K,M) with lda >= M; likewise B.
     * beta == 0: C not read. Products are summed in fp32 whatever the types (bf16 inputs are
     * widened exactly), then rounded to tc. Epilogue, applied to the result before it is stored:
     * bias (N, fp32, or NULL) is added to every row; with pre_gelu non-NULL (type tc, (M,N), row
     * stride ldc; beta must be 0) pre_gelu = the result and C = gelu(pre_gelu) (GELU's tanh form).
     * Type combinations every backend implements: all GK_F32; (ta, tb, tc) = (be->act, wt, be->act)
     * with A not transposed, and (be->act, be->act, GK_F32), where wt is the model's weight type
     * (GK_F32, or GK_BF16 for bf16 weights; GK_F16 and GK_Q8, transB, on cpu and ref); others
     * may fail with GK_EUSAGE. */
    void (*gemm)(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
                 const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb, float beta,
                 void *C, gk_elt tc, int ldc, const float *bias, void *pre_gelu);
    /* gemm's backward epilogues, for a layer y = x W + bias (GELU after it or not): gemm without
     * bias or GELU (the same operands, types and beta), and then
     *  - pre_gelu non-NULL (type tc = be->act, (M,N); beta 0, ldc = N): C = gelu'(pre_gelu) * the
     *    result, what gelu_bwd (C, pre_gelu, C) gives after the plain gemm;
     *  - dbias non-NULL (N, fp32): dbias += the column sums of op(B) (K,N) (B not transposed,
     *    ldb = N, tb = be->act): bias_bwd (dbias, B, K, N), the bias gradient of the layer whose
     *    output gradient B is, taken in the weight-gradient gemm that reads B anyway.
     * On cpu and ref, and on cuda unless opened with cuda_fused_grads, that is those ops one after
     * the other (the same bits); with cuda_fused_grads, cuBLASLt's DGELU and BGRADA epilogues
     * where it takes them (bias sums then in D's type). */
    void (*gemm_bwd)(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
                     const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb,
                     float beta, void *C, gk_elt tc, int ldc, const void *pre_gelu, float *dbias);
    /* Decoding's fused product of a few rows (NULL where the backend has none: cuda has it), the
     * same bits as the ops it replaces one after the other: out (M,N) =
     *  - with res (M,N) (then gelu 0): res + (x' W rounded to be->act + bias), gemm then
     *    residual_layernorm_fwd's add;
     *  - else x' W + bias, GELU'd when gelu (gemm with its epilogue),
     * where x' (M,K) = layernorm_fwd of x with ln_w (K), ln_b (K) or NULL when ln_w is not NULL,
     * else x; W (K,N) row-major, or (N,K) with transW (the tied lm_head); bias (N) or NULL. Its
     * reach (else GK_EUSAGE): be->act bf16 and W bf16, M at most 4, N and K multiples of 8,
     * 16-byte aligned pointers, with ln_w M K floats within 48 KiB of shared memory. */
    void (*matvec)(gk_backend *be, void *out, const void *x, const float *ln_w,
                   const float *ln_b, const void *W, int transW, const float *bias, int gelu,
                   const void *res, int M, int N, int K);
    /* Decoding's MLP block of a few rows (NULL where the backend has none: cuda has it): out
     * (M,C) = x + (h W2 rounded to be->act + b2), h (M,Cm) = GELU(x' W1 + b1) rounded to
     * be->act, x' = layernorm_fwd of x with ln_w, ln_b (ln_w required): matvec's two products
     * (the first with the layernorm and the GELU, the second with the residual add) in one
     * launch, the same bits but for the order of the second product's sum. W1 (C,Cm), W2
     * (Cm,C) row-major; b1, b2, ln_b may be NULL; out may not alias x. Reach: matvec's. */
    void (*mlp)(gk_backend *be, void *out, const void *x, const float *ln_w, const float *ln_b,
                const void *W1, const float *b1, const void *W2, const float *b2, int M, int C,
                int Cm);
    void (*spare_matmul[2])(void);
    /* ==== elementwise (elementwise.c): the bias gradient, GELU (tanh form; the forward of a
     * layer is gemm's epilogue), dropout ==== */
    /* dbias (C) += column sums of dout (N,C). */
    void (*bias_bwd)(gk_backend *be, float *dbias, const void *dout, int N, int C);
    /* x (N,C) -> out (N,C) = gelu(x): what gemm's epilogue stores in C from pre_gelu (bit for bit
     * on cpu and ref; within the rounding of be->act on cuda, whose epilogue is cuBLASLt's), so
     * that the backward can recompute the GELU output instead of keeping it. out may not alias
     * x. */
    void (*gelu_fwd)(gk_backend *be, void *out, const void *x, int N, int C);
    /* dout (N,C) -> dinp (N,C) = gelu'(x) * dout, x the pre-GELU values; dinp may alias dout. */
    void (*gelu_bwd)(gk_backend *be, void *dinp, const void *x, const void *dout, int N, int C);
    /* dout (n) -> dinp (n) = dout * mask / (1-p) (the backward of a dropout; may alias). */
    void (*dropout_bwd)(gk_backend *be, void *dinp, const void *dout, size_t n, float p,
                        uint64_t key);
    void (*spare_elementwise[2])(void);
    /* ==== encoder (encoder.c): the embedding ==== */
    /* tokens (B,T) -> out (B,T,C) = wte[token] + wpe[t0 + t], then dropout(p, key). wte has type
     * tw (fp32 master or the bf16 weights), wpe is fp32. t0 is a device int read when the op runs
     * (so that a recorded decode step replays at the next position), or NULL for 0. */
    void (*encoder_fwd)(gk_backend *be, void *out, const int *tokens, const void *wte, gk_elt tw,
                        const float *wpe, const int *t0, int B, int T, int C, float p,
                        uint64_t key);
    /* dout (B,T,C) -> dwte (V,C) +=, dwpe (T,C) +=, undoing the dropout of the forward. */
    void (*encoder_bwd)(gk_backend *be, float *dwte, float *dwpe, const void *dout,
                        const int *tokens, int B, int T, int C, float p, uint64_t key);
    void (*spare_encoder[2])(void);
    /* ==== layernorm (layernorm.c; eps 1e-5), and the residual add fused with the layernorm after
     * it ==== */
    /* inp (N,C) -> out (N,C), mean (N), rstd (N); weight (C), bias (C) or NULL. */
    void (*layernorm_fwd)(gk_backend *be, void *out, float *mean, float *rstd, const void *inp,
                          const float *weight, const float *bias, int N, int C);
    /* dout (N,C) -> dinp (N,C) +=, dweight (C) +=, dbias (C) += (dbias NULL when no bias). */
    void (*layernorm_bwd)(gk_backend *be, void *dinp, float *dweight, float *dbias,
                          const void *dout, const void *inp, const float *weight,
                          const float *mean, const float *rstd, int N, int C);
    /* res_out (N,C) = res + dropout(x + bias) (bias (C) may be NULL; res_out may alias res or x),
     * then ln_out (N,C), mean (N), rstd (N) = the layernorm of res_out as stored (rounded to
     * be->act) with ln_weight (C), ln_bias (C) or NULL: the same values as the residual add
     * followed by layernorm_fwd on its output, in one pass over each row. */
    void (*residual_layernorm_fwd)(gk_backend *be, void *res_out, void *ln_out, float *mean,
                                   float *rstd, const void *res, const void *x, const float *bias,
                                   float p, uint64_t key, const float *ln_weight,
                                   const float *ln_bias, int N, int C);
    void (*spare_layernorm[2])(void);
    /* ==== attention (attention.c): causal self-attention; the (T,T) score matrix is never
     * stored ==== */
    /* qkv (B,T,3C) [q | k | v, heads of C/NH inside each] -> out (B,T,C) =, lse (B,NH,T) =
     * (log-sum-exp of each scaled score row, kept for the backward); dropout p on the
     * probabilities. */
    void (*attention_fwd)(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T,
                          int C, int NH, float p, uint64_t key);
    /* dout (B,T,C) -> dqkv (B,T,3C) =, recomputing probabilities from qkv and lse. */
    void (*attention_bwd)(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                          const void *out, const float *lse, int B, int T, int C, int NH,
                          float p, uint64_t key);
    /* Inference with a KV cache (gk_gpt2_forward_at): causal attention of n new query positions
     * t0..t0+n-1 over a cache, no dropout, no lse.
     * t0 is a device int read when the op runs (a recorded decode step replays at the next
     * position); the caller keeps 0 <= t0 and t0 + n <= Tc (cuda clamps t0 into that range, cpu
     * and ref fail with GK_EUSAGE). cache (B,Tc,3C) [q | k | v as attention_fwd] holds, for each
     * batch row b, the k, v of rows < t0 from earlier calls. qkv_new (B,n,3C), when not NULL, is
     * first copied to the cache's rows t0..t0+n-1; NULL: they are in the cache already. Then
     * out (B,n,C) =, row i of batch b attending to cache rows 0..t0+i. With t0 = 0 and n = Tc it
     * equals attention_fwd's out. */
    void (*attention_fwd_at)(gk_backend *be, void *out, void *cache, const void *qkv_new, int B,
                             int Tc, const int *t0, int n, int C, int NH);
    void (*spare_attention[2])(void);
    /* ==== classifier (classifier.c): softmax + cross-entropy over the first V of Vp columns
     * ==== */
    /* logits (N,Vp), targets (N) -> losses (N) = -log softmax(logits)[target] (0 where target < 0),
     * lse (N) = log-sum-exp of the row. */
    void (*xent_fwd)(gk_backend *be, float *losses, float *lse, const void *logits,
                     const int *targets, int N, int V, int Vp);
    /* dlogits (N,Vp) = (softmax - onehot(target)) * dloss (0 on rows with target < 0 and on the
     * Vp-V padded columns; a target >= V: the softmax alone, as for a slice of the vocabulary
     * whose row's target another slice holds, with lse the whole row's), from logits and lse
     * without storing the probabilities; dlogits may alias logits. */
    void (*xent_bwd)(gk_backend *be, void *dlogits, const void *logits, const float *lse,
                     const int *targets, float dloss, int N, int V, int Vp);
    /* The next token of each of B rows on the device (NULL where the backend has none: cuda has
     * it): ids[b] (device) = kernels/infer/sampler.h's chain (gk_sample, p's temperature, top-k,
     * top-p and seed) over the n logits at logits + b ld (type be->act), with the draw of sample
     * b at step st[1]; then st[0] and st[1] (2 device ints) grow by one, so that a recorded
     * decode step (reading its position from st[0]) replays at the next position and step. The
     * same tokens as the host's chain but for the sums' rounding: the probabilities are integers
     * (exp(logit - max) 2^32, rounded down, summed exactly: a candidate under 2^-32 of the most
     * likely is never drawn), and a row with no finite probability takes the greedy token.
     * Greedy (temperature 0) is gk_greedy's, bit for bit. */
    void (*sample)(gk_backend *be, int *ids, const void *logits, size_t ld, int B, int n,
                   const gk_params *p, int *st);
    void (*spare_classifier[2])(void);
    /* ==== optimizer (optimizer.c): fp32 master weights, gradients and moments ==== */
    /* *host_out = sum of squares of x (n): partial sums of up to 1024 squares in fp32 or wider,
     * accumulated in double (a fixed split: deterministic). */
    void (*sumsq)(gk_backend *be, double *host_out, const float *x, size_t n);
    /* x (n) *= s. */
    void (*scale)(gk_backend *be, float *x, float s, size_t n);
    /* AdamW as torch.optim.AdamW, on one tensor: g = grad * grad_scale (the clip factor);
     * param *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * param -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). t counts from 1.
     * copy (n, type tcopy) = the updated param, in the same pass, when copy is not NULL (the
     * bf16 weights the matmuls read). */
    void (*adamw)(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
                  float lr, float beta1, float beta2, float eps, float wd, int t, float grad_scale,
                  void *copy, gk_elt tcopy);
    /* adamw on count tensors in one call (one launch on cuda): for each ts[i], adamw(param, grad,
     * m, v, n, ..., decay ? wd : 0, ..., copy, tcopy), with the same results bit for bit. ts is
     * host memory, read during the call only; the tensors do not overlap. */
    void (*adamw_multi)(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr,
                        float beta1, float beta2, float eps, float wd, int t, float grad_scale,
                        gk_elt tcopy);
    /* zero on count ranges in one call (one launch on cuda); sp is host memory, read during the
     * call only. */
    void (*zero_multi)(gk_backend *be, const gk_span *sp, int count);
    /* y (n) += x (n): one rounding an element (ZeRO-2's gradient shard over micro-steps). */
    void (*add)(gk_backend *be, float *y, const float *x, size_t n);
    void (*spare_optimizer[2])(void);
    /* ==== graph (cuda/graph.cu): recorded steps; optional: NULL where a launch costs nothing to
     * issue (cpu, ref) ==== */
    /* The ops launched between record_begin and record_end are recorded, not run (a CUDA stream
     * capture into a graph); replay runs them again in order, with the same pointers and
     * arguments, reading device memory as it is when they run. record_begin returns 0, or
     * nonzero when the backend will not record now (opened with cuda_sync or cuda_no_graphs):
     * nothing is recorded and no error is set. record_end returns the recording, or NULL: with the
     * sticky error set when an op failed for another reason, else because a call between them may
     * not be recorded on this device, and then the backend records nothing more (record_begin
     * returns nonzero), says why in be->note, and the caller runs the ops unrecorded instead.
     * record_free(NULL) is a no-op. */
    int (*record_begin)(gk_backend *be);
    void *(*record_end)(gk_backend *be);
    void (*replay)(gk_backend *be, void *rec);
    void (*record_free)(gk_backend *be, void *rec);
    void (*spare_graph[2])(void);
    /* ==== comm (kernels/comm/, cuda/comm_nccl.cu): collectives across processes; optional:
     * NULL in a test's hand-made backend ==== */
    /* Opens this process's rank (b->rank of b->world) of the collectives for be's memory,
     * bootstrapped through the rendezvous store b carries (kernels/comm/comm.h: gk_comm_boot;
     * tools call gk_comm_open): Gloo on cpu and ref (gk_comm_gloo_open), NCCL on cuda (rank 0
     * makes the communicator's id, the store carries it), NCCL's calls on the host collectives
     * under cuda-emu. Every rank calls it (collectively) within b->timeout_s seconds of the
     * others, else GK_EIO. *out's float buffers are memory of be; on a device its collectives
     * are ordered on be's stream: each one sees every op launched on be before it and every op
     * launched after it sees its result; it returns when its result is in place (or with GK_EIO,
     * a dead or silent peer included, within the timeout). Close *out (gk_comm_close) before
     * freeing be. */
    int (*comm_open)(gk_backend *be, const struct gk_comm_boot *b, struct gk_comm **out, gk_err *e);
    void (*spare_comm[2])(void);
} gk_ops;

/* What kind of backend a gk_backend is (gk_backend_props.kind); 0: unknown (a test's hand-made
 * backend). */
typedef enum gk_backend_kind {
    GK_KIND_UNKNOWN = 0, GK_KIND_CPU, GK_KIND_REF, GK_KIND_CUDA, GK_KIND_CUDA_EMU
} gk_backend_kind;

/* Facts about the device, filled by the constructor: what tools decide by (recompute, the MFU's
 * peak, whether host-side buffers share the device's memory) instead of names and messages. */
typedef struct gk_backend_props {
    int kind;               /* a gk_backend_kind */
    char device[64];        /* "CPU", "NVIDIA H100 80GB HBM3", "gptkit CUDA emulator" */
    double bf16_peak_flops; /* dense bf16 tensor-core peak in FLOP/s (kernels/cuda/cuda_peak.h);
                             * 0 where unknown: CPUs, the emulator, a GPU not in the table */
    size_t memory_bytes;    /* all of the device's memory (the host's MemTotal where host_memory) */
    int host_memory;        /* 1: device memory is host memory (cpu, ref, cuda-emu without
                             * GPT_EMU_MEM) */
    int recompute;          /* the default activation recompute (recompute = auto starts there):
                             * 0 none (cpu, ref), 1 the GELU's output (cuda, cuda-emu: device
                             * memory is the limit), 2 also the layernorms' */
    char ref_ops[128];      /* the slots this backend serves with the reference backend's code
                             * (kernels/ref/) instead of its own, space-separated, a slot served so
                             * only in some cases followed by them in parentheses, e.g.
                             * "layernorm_bwd gemm(q8)"; "" when none (every backend now: the CPU's
                             * scratch grows where a caller reserved too little, cpu_internal.h).
                             * A hidden speed cliff made visible: gk_backend_describe names them,
                             * and the op tests, which then compare the reference with itself. */
} gk_backend_props;

/* The context: the vtable plus the backend's own state (impl). Backends embed nothing else here. */
struct gk_backend {
    const gk_ops *ops;
    gk_elt act;        /* activation type (fixed at create) */
    void *impl;        /* backend-private state (thread count, scratch, device handles) */
    void (*destroy)(gk_backend *be); /* frees impl and be itself */
    gk_err err;        /* the sticky error: code 0 until an op fails (gk_backend_fail) */
    gk_backend_props props; /* set by the constructor */
    char what[96];     /* set by the constructor for messages: "cpu (8 threads)",
                        * "cuda (NVIDIA H100 80GB HBM3, bf16)" */
    char note[512];    /* empty, or something a tool should warn of once that is not an error:
                        * "device auto: the CPU, since device cuda: ..." (gk_backend_open),
                        * "CUDA graphs off: ..." (record_end). Tools print it (and empty it)
                        * after opening the backend and again at the end. */
};

/* Records an op's failure in be unless an error is already recorded (the first one is kept):
 * code and "MESSAGE (FILE:LINE)". Returns code. Use GK_BACKEND_FAIL, which passes the caller's
 * file and line; the message names the failing call, e.g. "ref attention_fwd: malloc(80)". */
int gk_backend_fail(gk_backend *be, int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define GK_BACKEND_FAIL(be, code, ...) \
    gk_backend_fail((be), (code), __FILE__, __LINE__, __VA_ARGS__)
/* 0, or the sticky error's code with the error copied to err (if not NULL), without waiting: an
 * asynchronous device's fault shows once an op has seen it. The error stays recorded: every later
 * call returns it. */
int gk_backend_status(gk_backend *be, gk_err *err);
/* Waits for every op launched so far (ops->sync), then returns gk_backend_status. */
int gk_backend_sync(gk_backend *be, gk_err *err);

/* The memory a model may still take on be (ops->mem_info): *free_bytes, *total_bytes; with
 * props.host_memory, free is capped by the host's limits (common/mem.h: MemAvailable, the cgroup,
 * RLIMIT_AS) and *bound names the one that binds ("MemAvailable", ...); else *bound = NULL. */
int gk_backend_mem_info(gk_backend *be, size_t *free_bytes, size_t *total_bytes, const char **bound,
                        gk_err *err);

/* gemm_bwd's arguments checked (the GELU gradient: beta 0, ldc = N, tc = be->act; the bias
 * gradient: B not transposed, ldb = N, tb = be->act): 0, or GK_EUSAGE recorded in be. */
int gk_gemm_bwd_check(gk_backend *be, int transB, int N, int ldb, gk_elt tb, int ldc, gk_elt tc,
                      float beta, const void *pre_gelu, const float *dbias);
/* gemm_bwd as the backend's gemm, gelu_bwd and bias_bwd one after the other (backend_compose.c):
 * cpu's and ref's gemm_bwd, and cuda's without its fused epilogues. */
void gk_gemm_bwd_apart(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
                       const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb,
                       float beta, void *C, gk_elt tc, int ldc, const void *pre_gelu, float *dbias);

/* Frees a backend from any constructor; NULL is a no-op. */
void gk_backend_free(gk_backend *be);

/* What a tool asks of gk_backend_open. */
typedef struct gk_backend_opts {
    const char *device; /* "cpu" | "ref" | "cuda" | "cuda-emu" | "auto" */
    int threads;        /* cpu: thread count, <= 0: all cores */
    int bf16;           /* activations in bf16: 1 yes, 0 fp32, -1 the device's default (bf16 on
                         * cuda); the CPU backends compute in fp32 whatever it says: the
                         * backend's act field tells what was granted */
    int gpu;            /* cuda: the device ordinal (LOCAL_RANK of a distributed run), 0 default;
                         * cuda-emu: every ordinal >= 0 is the emulator's one device */
    int attention;      /* cuda, cuda-emu: the attention path, a gk_attention (0: auto); fixed
                         * for the backend's life (a test compares paths by opening one backend
                         * per path); cpu and ref have one path and ignore it */
    int cuda_sync;      /* cuda, cuda-emu: 1 waits for every op (errors at the op that made them;
                         * nothing is recorded), 0 no: a tool's GPT_CUDA_SYNC=1 */
    int cuda_no_graphs; /* cuda, cuda-emu: 1 records no steps (record_begin refuses), 0 records:
                         * a tool's GPT_CUDA_GRAPHS=0 */
    int cuda_fused_grads; /* cuda, cuda-emu: 1 lets gemm_bwd take cuBLASLt's backward epilogues
                           * (a tool's GPT_CUDA_FUSED_GRADS=1), 0 runs gemm, gelu_bwd and bias_bwd
                           * apart: off until a GPU run has checked and timed it */
    const char *cuda_lib; /* cuda, cuda-emu, auto: the backend library's path (a tool's
                           * $GPT_CUDA_LIB), or NULL: the binary's ../lib, else dlopen's search */
} gk_backend_opts;

/* The CUDA backend's attention paths (the setting `attention`, gk_attention_parse).
 * auto and fa2: the FlashAttention-2 kernels (attention_fa2.cu, attention_fa2_bwd.cu) where they
 * apply (bf16, head sizes 16, 32, 64, 128), else plain; cudnn: cuDNN's fused attention, an error
 * at open where it is absent (the emulator has none) and at the op for a call it does not take
 * (fp32, dropout, other head sizes), the fa2 kernels for a shape it has no plan for (with a
 * note); flash: the wmma flash kernels (attention_flash.cu) where they apply, else plain; plain:
 * the row kernels (any type and head size), the reference the others are tested against. */
typedef enum gk_attention {
    GK_ATTN_AUTO = 0, GK_ATTN_CUDNN, GK_ATTN_FLASH, GK_ATTN_FA2, GK_ATTN_PLAIN
} gk_attention;
/* The names in gk_attention order, for help texts and key tables. */
#define GK_ATTENTION_CHOICES "auto|cudnn|flash|fa2|plain"
/* *out = the path s names; 0, or GK_EUSAGE with "SETTING: 'S' is not one of auto, cudnn, flash,
 * fa2, plain" (setting names the option or key, e.g. "--attention"). */
int gk_attention_parse(const char *s, const char *setting, int *out, gk_err *e);
/* The name of path a ("auto", ...); "?" when out of range. */
const char *gk_attention_name(int a);

/* Opens the backend o->device names (backend_open.c): "cpu", "ref", "cuda" and "cuda-emu" (loaded
 * at run time from libgptkit-cuda.so / libgptkit-cuda-emu.so: o->cuda_lib, else the binary's
 * ../lib, else the dlopen search path), "auto" (cuda when its library loads and sees a GPU, else
 * cpu; when the library was there but failed to load, or the GPU failed, be->note says why; with
 * attention = cudnn, a GPU whose backend fails (no cuDNN) is that error, not the CPU). Returns 0,
 * GK_EUSAGE for an unknown name, or GK_ENOTFOUND / GK_EFORMAT / another code with one line
 * naming the device. */
int gk_backend_open(gk_backend **out, const gk_backend_opts *o, gk_err *e);
/* Writes what be is for a tool's message, e.g. "cpu (8 threads)", "cuda (NVIDIA H100, bf16)",
 * followed by ", reference code for SLOTS" where props.ref_ops names any; returns buf. */
const char *gk_backend_describe(const gk_backend *be, char *buf, size_t n);

/* What a backend library exports: one function, GK_BACKEND_ENTRY_SYMBOL, returning its entry.
 * gk_backend_open refuses a library whose abi differs from GK_BACKEND_ABI.
 * Bump GK_BACKEND_ABI (once per change, by one) when a library built from the header before the
 * change would misbehave with tools built after it, or the reverse; that is, when any of these
 * changes: what a gk_ops slot takes, does or returns (a slot moved, removed or retyped, a type
 * combination or argument meaning added or dropped); a new slot that callers call without
 * checking for NULL (an older library has NULL in that spare); a field of gk_backend,
 * gk_backend_props, gk_backend_opts, gk_backend_entry or gk_comm (kernels/comm/comm.h) added,
 * removed, moved or given another meaning (the library allocates gk_backend, the tools allocate
 * gk_backend_opts: either side may read past the other's end); a value of gk_elt,
 * gk_attention or gk_backend_kind. No bump: comments; a backend's code behind an unchanged
 * contract (speed, results within the stated tolerances); an optional slot (callers treat NULL
 * as absent, as record_begin and comm_open) put in its group's spare; anything outside these
 * structs (the graph, the tools, the emulator's internals). The layout rule of gk_ops (above it)
 * keeps the bumps to the changes that need them and a new op's diff to its own line.
 * 16: gk_ops grouped by family with spares, gk_backend_props.ref_ops. 17: add (called without
 * a NULL check); gk_comm_ops' reduce_scatter_start and started_wait (ZeRO-2). 18: gk_comm_ops'
 * all_gather_start (ZeRO-3's prefetch), the optional pinned, xent_bwd's targets >= V,
 * gk_comm_boot.group. 19: gk_ops laid out again, two spares a group (matvec, mlp and sample
 * had taken the last ones). */
#define GK_BACKEND_ABI 19
#define GK_BACKEND_ENTRY_SYMBOL "gk_cuda_backend_entry"
typedef struct gk_backend_entry {
    int abi;          /* GK_BACKEND_ABI the library was built with */
    const char *name; /* "cuda", "cuda-emu" */
    /* Usable devices (0: none), or a negative GK_E* code with err set. */
    int (*device_count)(gk_err *err);
    /* Creates the backend on device o->gpu with o->bf16 (-1: bf16); 0 or a negative GK_E* code
     * with err set. */
    int (*create)(gk_backend **out, const gk_backend_opts *o, gk_err *err);
} gk_backend_entry;
typedef const gk_backend_entry *(*gk_backend_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
