/* cuda_internal.h: what the CUDA backend's files share (not part of any API).
 * Owns: the backend context (cu_ctx, its fields grouped by the file that owns them), the checks
 * that turn CUDA/cuBLAS failures into the sticky backend error, the element helpers that let one
 * kernel template serve fp32 and bf16 activations, the prototypes of every op (one per gk_ops
 * slot; backend.cu assembles the table) and of each op family's scratch size (reserve takes the
 * largest). Compiled by nvcc, or by g++ against kernels/emu.
 * Thread safety: as backend.h (one host thread per backend). */
#ifndef GK_CUDA_INTERNAL_H
#define GK_CUDA_INTERNAL_H

#include "kernels/cuda/dialect.h"
#include "kernels/backend.h"

typedef __nv_bfloat16 bf16;

/* The backend's context, grouped by the file that owns each field (sets it and says what it means;
 * others may read it). */
typedef struct cu_ctx {
    /* backend.cu: the device and what every op uses; set at create */
    int device;
    cudaStream_t stream;
    int sm_count;
    size_t smem_optin;      /* max dynamic shared memory per block after opt-in */
    int sync_each;          /* opts cuda_sync (GPT_CUDA_SYNC=1): synchronize after every launch */
    /* backend.cu: buffers the ops share, one op at a time on the stream */
    void *scratch;          /* op scratch sized by reserve (partial
                             * sums of reductions, ...): cu_scratch */
    size_t scratch_bytes;
    unsigned *col_count;    /* arrival counters of the column
                             * reductions that finish in one launch */
    size_t col_count_n;     /* (bias_bwd, layernorm_bwd), zero between launches: cu_col_counters */
    /* matmul.cu: cuBLASLt (the handle and workspace made at create by backend.cu) */
    cublasLtHandle_t lt;
    void *workspace;        /* cuBLASLt workspace */
    size_t workspace_bytes;
    int fused_grads;        /* opts cuda_fused_grads: gemm_bwd takes cuBLASLt's DGELU, BGRADA */
    void *gemm_cache;       /* cached cuBLASLt descriptors and algorithms */
    void *bias16;           /* a gemm's fp32 bias rounded to bf16 (CU_BIAS16_MAX) */
    /* optimizer.cu */
    void *optim_cache;      /* device copies of the multi-tensor ops' tables */
    /* attention.cu, attention_cudnn.cpp */
    int attention;          /* gk_attention (backend.h): the path attention.cu takes */
    void *cudnn;            /* attention_cudnn.cpp's handle and plans, or NULL: no cuDNN */
    /* graph.cu: recorded steps (cu_fail in backend.cu writes capture_fail) */
    int graphs;             /* record steps as CUDA graphs (opts cuda_no_graphs: never) */
    int capturing;          /* between record_begin and the end of record_end */
    char capture_fail[160]; /* the first call that failed while capturing (cu_fail) */
} cu_ctx;

/* cuBLASLt adds a bias only in D's type: a bf16 gemm's bias goes through c->bias16 (as under
 * PyTorch's autocast and in llm.c); a wider one is added by matmul.cu's epilogue kernel. */
#define CU_BIAS16_MAX 65536

/* The column reductions over rows (bias_bwd in elementwise.cu, layernorm_bwd in layernorm.cu)
 * cut the rows into at most CU_COL_CHUNKS chunks (layernorm_bwd: blocks), each writing fp32
 * partials to scratch (each file says how much reserve must allow). The cut depends on the shapes
 * only, so results do not change from run to run; they change with the knob. A knob for measuring
 * on a GPU (tests/bench/gpu_session.sh's variants, CUDA_DEFS=-DCU_COL_CHUNKS=N): more chunks keep
 * more loads in flight (256 blocks of layernorm_bwd are 2 an SM on an H100), fewer make the last
 * block's sum shorter. */
#ifndef CU_COL_CHUNKS
#define CU_COL_CHUNKS 256
#endif

#define CU(be) ((cu_ctx *)(be)->impl)

/* Ops do nothing once the backend has failed (outputs are undefined after an error anyway). */
#define CU_BEGIN(be)                 \
    do {                             \
        if ((be)->err.code) return;  \
    } while (0)

/* Records a failed CUDA or cuBLASLt call: the sticky error, "MESSAGE (file:line)", and code.
 * While a step is recorded (c->capturing) nothing runs, so no failure there is the device's: it
 * goes to c->capture_fail instead, and record_end runs the step unrecorded (graph.cu), where
 * a failure that is not the capture's shows again. Returns code. */
int cu_fail(gk_backend *be, int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Records a failed CUDA runtime call as the sticky error ("cuda CALL: MESSAGE (file:line)");
 * returns 0 when rc is cudaSuccess, else GK_EIO (GK_ENOMEM for allocation failures). */
int cu_check(gk_backend *be, cudaError_t rc, const char *call, const char *file, int line);
#define CU_CHECK(be, call) cu_check((be), (call), #call, __FILE__, __LINE__)
/* After a launch: records a launch error naming the kernel, and with GPT_CUDA_SYNC=1 waits for the
 * kernel and records its fault. Returns 0 or the error code. */
int cu_launched(gk_backend *be, const char *kernel, const char *file, int line);
#define CU_LAUNCHED(be, kernel) cu_launched((be), (kernel), __FILE__, __LINE__)
/* Launches kernel on the backend's stream and checks it: one line per launch site. */
#define CU_LAUNCH(be, kernel, grid, block, smem, ...)                                   \
    do {                                                                               \
        GK_LAUNCH(kernel, grid, block, smem, CU(be)->stream, __VA_ARGS__);              \
        CU_LAUNCHED(be, #kernel);                                                      \
    } while (0)
/* Scratch of at least n bytes (reserved by ops->reserve), or NULL with the sticky error set. */
void *cu_scratch(gk_backend *be, size_t n, const char *op);
/* The arrival counters, n of them (zero), or NULL with the sticky error set: col_count, grown
 * (after the kernels in flight) when n is more. A kernel that uses them leaves them at zero. */
unsigned *cu_col_counters(gk_backend *be, size_t n);

/* Element access for kernels templated on the activation type (float or bf16). */
__device__ __forceinline__ float cu_f(float x) { return x; }
__device__ __forceinline__ float cu_f(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T cu_to(float x);
template <> __device__ __forceinline__ float cu_to<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 cu_to<bf16>(float x) { return __float2bfloat16(x); }
/* GELU's tanh form in fp32: the fallback gemm epilogue (matmul.cu) and gelu_fwd
 * (elementwise.cu). */
static __device__ __forceinline__ float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* A gemm's epilogue (the fallbacks of matmul.cu, matmul_rows.cu): stores result r of element c
 * (column j): + bias, then either C = r or, with pre non-NULL, pre = r and C = gelu(pre)
 * computed from the stored (rounded) pre-activation. */
template <typename T>
__device__ __forceinline__ void cu_gemm_store(float r, size_t c, int j, T *C, const float *bias,
                                              T *pre)
{
    if (bias) r += bias[j];
    if (pre) {
        T p = cu_to<T>(r);
        pre[c] = p;
        r = gelu_tanh(cu_f(p));
    }
    C[c] = cu_to<T>(r);
}

static inline unsigned cu_blocks(size_t n, unsigned threads)
{
    return (unsigned)((n + threads - 1) / threads);
}

/* ---- the ops (signatures as the gk_ops slots in backend.h) ---- */
/* backend.cu: memory, sync, reserve; cast.cu: cast */
void *cu_alloc(gk_backend *be, size_t n);
void cu_free(gk_backend *be, void *p);
void cu_to_device(gk_backend *be, void *dst, const void *host_src, size_t n);
void cu_to_host(gk_backend *be, void *host_dst, const void *src, size_t n);
void cu_copy(gk_backend *be, void *dst, const void *src, size_t n);
void cu_zero(gk_backend *be, void *p, size_t n);
void cu_sync(gk_backend *be);
int cu_reserve(gk_backend *be, size_t rows, size_t cols, int head_size, int T, gk_err *err);
void cu_cast(gk_backend *be, void *dst, gk_elt dt, const void *src, gk_elt st, size_t n);
/* cu_cast's kernel launched on stream (the comm's), n > 0 elements to dt from the other type;
 * sets no error: check cudaGetLastError after it. */
void cu_cast_on(gk_backend *be, cudaStream_t stream, void *dst, gk_elt dt, const void *src,
                size_t n);
/* matmul.cu */
void cu_gemm(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
             const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb, float beta,
             void *C, gk_elt tc, int ldc, const float *bias, void *pre_gelu);
void cu_gemm_bwd(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
                 const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb, float beta,
                 void *C, gk_elt tc, int ldc, const void *pre_gelu, float *dbias);
/* Frees gemm_cache (the backend's destroy calls it). */
void cu_gemm_cache_free(gk_backend *be);
/* matmul_rows.cu: the gemm of a few rows (decoding) in one launch when it takes the call (1), else
 * 0 and nothing done; arguments as cu_gemm's. */
int cu_gemv(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha, const void *A,
            gk_elt tA, int lda, const void *B, gk_elt tB, int ldb, float beta, void *C, gk_elt tC,
            int ldc, const float *bias, void *pre);
/* matmul_rows.cu: backend.h's matvec (the decode step's fused few-row products), offered when
 * cu_matvec_built() (not in a library built with -DGV_MATVEC=0 or fewer GV_ROWS than 4). */
int cu_matvec_built(void);
void cu_matvec(gk_backend *be, void *out, const void *x, const float *ln_w, const float *ln_b,
               const void *W, int transW, const float *bias, int gelu, const void *res, int M,
               int N, int K);
/* matmul_rows.cu: backend.h's mlp (both products of a few rows in one launch), offered when
 * cu_mlp_built() (not with -DGV_MLP=0); cu_mlp_scratch: reserve's family. */
int cu_mlp_built(void);
void cu_mlp(gk_backend *be, void *out, const void *x, const float *ln_w, const float *ln_b,
            const void *W1, const float *b1, const void *W2, const float *b2, int M, int C,
            int Cm);
size_t cu_mlp_scratch(size_t rows, size_t cols);
/* The scratch each op family needs at most for activations of rows x cols (reserve's arguments;
 * cu_reserve takes the largest): elementwise.cu (bias_bwd), layernorm.cu, encoder.cu,
 * optimizer.cu (sumsq), attention.cu (heads of head_size over sequences of T). */
size_t cu_bias_bwd_scratch(size_t rows, size_t cols);
size_t cu_layernorm_scratch(size_t rows, size_t cols);
size_t cu_encoder_scratch(size_t rows, size_t cols);
size_t cu_sumsq_scratch(size_t rows, size_t cols);
size_t cu_attention_scratch(size_t rows, size_t cols, int head_size, int T);
/* The arrival counters (cu_col_counters) attention.cu's KV-cache decode takes at most. */
size_t cu_attention_counters(size_t rows, size_t cols, int head_size);
/* elementwise.cu, encoder.cu, layernorm.cu, classifier.cu */
void cu_bias_bwd(gk_backend *be, float *dbias, const void *dout, int N, int C);
void cu_encoder_fwd(gk_backend *be, void *out, const int *tokens, const void *wte, gk_elt tw,
                    const float *wpe, const int *t0, int B, int T, int C, float p, uint64_t key);
void cu_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens,
                    int B, int T, int C, float p, uint64_t key);
void cu_layernorm_fwd(gk_backend *be, void *out, float *mean, float *rstd, const void *inp,
                      const float *weight, const float *bias, int N, int C);
void cu_residual_layernorm_fwd(gk_backend *be, void *res_out, void *ln_out, float *mean,
                               float *rstd, const void *res, const void *x, const float *bias,
                               float p, uint64_t key, const float *ln_weight, const float *ln_bias,
                               int N, int C);
void cu_layernorm_bwd(gk_backend *be, void *dinp, float *dweight, float *dbias, const void *dout,
                      const void *inp, const float *weight, const float *mean, const float *rstd,
                      int N, int C);
void cu_gelu_fwd(gk_backend *be, void *out, const void *x, int N, int C);
void cu_gelu_bwd(gk_backend *be, void *dinp, const void *x, const void *dout, int N, int C);
void cu_dropout_bwd(gk_backend *be, void *dinp, const void *dout, size_t n, float p, uint64_t key);
/* sample.cu: backend.h's sample. */
void cu_sample(gk_backend *be, int *ids, const void *logits, size_t ld, int B, int n,
               const gk_params *p, int *st);
void cu_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits, const int *targets,
                 int N, int V, int Vp);
void cu_xent_bwd(gk_backend *be, void *dlogits, const void *logits, const float *lse,
                 const int *targets, float dloss, int N, int V, int Vp);
/* optimizer.cu */
void cu_sumsq(gk_backend *be, double *host_out, const float *x, size_t n);
void cu_scale(gk_backend *be, float *x, float s, size_t n);
void cu_add_floats(gk_backend *be, float *y, const float *x, size_t n);
void cu_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
              float lr, float beta1, float beta2, float eps, float wd, int t, float grad_scale,
              void *copy, gk_elt tcopy);
void cu_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float beta1,
                    float beta2, float eps, float wd, int t, float grad_scale, gk_elt tcopy);
void cu_zero_multi(gk_backend *be, const gk_span *sp, int count);
/* Frees optim_cache (the backend's destroy calls it). */
void cu_optim_cache_free(gk_backend *be);
/* attention.cu */
void cu_attention_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C,
                      int NH, float p, uint64_t key);
void cu_attention_bwd(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                      const void *out, const float *lse, int B, int T, int C, int NH, float p,
                      uint64_t key);
void cu_attention_fwd_at(gk_backend *be, void *out, void *cache, const void *qkv_new, int B,
                         int Tc, const int *t0, int n, int C, int NH);
/* attention_cudnn.cpp: cuDNN's fused attention (where built with it; else these say it is absent).
 * Loads libcudnn and makes the handle and plan cache (be's cudnn); 0, or -1 with why[n] saying
 * why not (not built with it, the emulator, no libcudnn.so.9). */
int cu_cudnn_open(gk_backend *be, char *why, size_t n);
/* Frees what cu_cudnn_open made (the backend's destroy calls it); none is a no-op. */
void cu_cudnn_close(gk_backend *be);
/* The attention_fwd and attention_bwd ops (bf16) on cuDNN under attention = cudnn: 1 when cuDNN
 * ran the call or it failed (the sticky error set: a call it does not take, or a cuDNN failure),
 * 0 when the caller runs its own kernels (another setting, or a shape cuDNN has no plan for). */
int cu_cudnn_attn_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C,
                      int NH, float p);
int cu_cudnn_attn_bwd(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                      const void *out, const float *lse, int B, int T, int C, int NH, float p);
/* graph.cu: recorded steps (the record_begin, record_end, replay and record_free slots) */
int cu_record_begin(gk_backend *be);
void *cu_record_end(gk_backend *be);
void cu_replay(gk_backend *be, void *rec);
void cu_record_free(gk_backend *be, void *rec);
/* comm_nccl.cu: NCCL communicators (the comm_open slot) */
int cu_comm_open(gk_backend *be, const struct gk_comm_boot *b, struct gk_comm **out, gk_err *e);

#endif
