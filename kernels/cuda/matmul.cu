/* matmul.cu: the one matmul (gk_ops.gemm) of the CUDA backend.
 * Owns: the mapping of backend.h's row-major BLAS semantics onto column-major cuBLASLt (the
 * row-major C (M,N) is the column-major C^T (N,M) = op(B)^T op(A)^T, so A and B swap places and
 * keep their transposes), the bias and GELU epilogues (a bf16 D's bias rounded to bf16 first:
 * cuBLASLt takes the bias in D's type only), a cache of cuBLASLt descriptors and
 * algorithms per problem, and the fallbacks: an epilogue kernel when cuBLASLt refuses an epilogue
 * for a combination, and a small tiled kernel for type combinations cuBLASLt does not take (A and
 * B of different types, fp32 inputs into bf16) or that it refuses outright. A product of a few
 * bf16 rows (decoding) goes to matmul_rows.cu's kernels instead.
 * Thread safety: as backend.h (the cache belongs to one backend). */
#include "kernels/cuda/cuda_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- kernels (the epilogue math, cu_gemm_store, is in cuda_internal.h) ---- */

/* The epilogue cuBLASLt refused: src (M,N, row stride ldc; C or pre) holds the matmul's result. */
template <typename T>
__global__ void epilogue_kernel(T *C, T *pre, const T *src, const float *bias, int M, int N,
                                int ldc)
{
    size_t n = (size_t)M * N, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        int i = (int)(e / (size_t)N), j = (int)(e % (size_t)N);
        size_t c = (size_t)i * ldc + j;
        cu_gemm_store(cu_f(src[c]), c, j, C, bias, pre);
    }
}

/* The three element types of a fallback gemm in one template argument (a launch macro's
 * argument cannot hold a comma). */
template <typename TA_, typename TB_, typename TC_> struct gemm_types {
    typedef TA_ TA;
    typedef TB_ TB;
    typedef TC_ TC;
};

#define TILE 16
/* C (M,N) = alpha op(A) op(B) + beta C with the epilogue: one thread per element of C, 16x16
 * tiles of A and B staged in shared memory, fp32 sums. For rare combinations, not for speed. */
template <typename Ty>
__global__ void gemm_small_kernel(int ta, int tb, int M, int N, int K, float alpha,
                                  const typename Ty::TA *A, int lda, const typename Ty::TB *B,
                                  int ldb, float beta, typename Ty::TC *C, int ldc,
                                  const float *bias, typename Ty::TC *pre)
{
    __shared__ float As[TILE][TILE + 1], Bs[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ak = k0 + tx, bk = k0 + ty;
        As[ty][tx] = i < M && ak < K
                         ? cu_f(A[ta ? (size_t)ak * lda + i : (size_t)i * lda + ak]) : 0.0f;
        Bs[ty][tx] = j < N && bk < K
                         ? cu_f(B[tb ? (size_t)j * ldb + bk : (size_t)bk * ldb + j]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (i >= M || j >= N) return;
    size_t c = (size_t)i * ldc + j;
    float r = alpha * acc;
    if (beta != 0.0f) r += beta * cu_f(C[c]);
    cu_gemm_store(r, c, j, C, bias, pre);
}

template <typename TA, typename TB, typename TC>
static void gemm_small(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                       const void *A, int lda, const void *B, int ldb, float beta, void *C, int ldc,
                       const float *bias, void *pre)
{
    typedef gemm_types<TA, TB, TC> Ty;
    dim3 grid(cu_blocks((size_t)N, TILE), cu_blocks((size_t)M, TILE)), block(TILE, TILE);
    CU_LAUNCH(be, gemm_small_kernel<Ty>, grid, block, 0, ta, tb, M, N, K, alpha,
              (const TA *)A, lda, (const TB *)B, ldb, beta, (TC *)C, ldc, bias, (TC *)pre);
}

template <typename TA, typename TB>
static void gemm_small_tc(gk_backend *be, gk_elt tc, int ta, int tb, int M, int N, int K,
                          float alpha, const void *A, int lda, const void *B, int ldb, float beta,
                          void *C, int ldc, const float *bias, void *pre)
{
    if (tc == GK_BF16)
        gemm_small<TA, TB, bf16>(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias,
                                 pre);
    else
        gemm_small<TA, TB, float>(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias,
                                  pre);
}

/* Any of the eight type combinations through gemm_small_kernel. */
static void gemm_fallback(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                          const void *A, gk_elt tA, int lda, const void *B, gk_elt tB, int ldb,
                          float beta, void *C, gk_elt tC, int ldc, const float *bias, void *pre)
{
    if (tA == GK_BF16 && tB == GK_BF16)
        gemm_small_tc<bf16, bf16>(be, tC, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                                  bias, pre);
    else if (tA == GK_BF16)
        gemm_small_tc<bf16, float>(be, tC, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                                   bias, pre);
    else if (tB == GK_BF16)
        gemm_small_tc<float, bf16>(be, tC, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                                   bias, pre);
    else
        gemm_small_tc<float, float>(be, tC, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                                    bias, pre);
}

/* The part of the epilogue a cuBLASLt plan left undone, on src (where cuBLASLt wrote). */
static void epilogue(gk_backend *be, gk_elt tc, void *C, void *pre, const float *bias, int M,
                     int N, int ldc)
{
    unsigned threads = 256, blocks = cu_blocks((size_t)M * N, threads);
    unsigned most = (unsigned)CU(be)->sm_count * 8;
    if (blocks > most) blocks = most;
    const void *src = pre ? pre : C;
    if (tc == GK_BF16)
        CU_LAUNCH(be, epilogue_kernel<bf16>, blocks, threads, 0, (bf16 *)C, (bf16 *)pre,
                  (const bf16 *)src, bias, M, N, ldc);
    else
        CU_LAUNCH(be, epilogue_kernel<float>, blocks, threads, 0, (float *)C, (float *)pre,
                  (const float *)src, bias, M, N, ldc);
}

/* ---- cuBLASLt plans ---- */

/* What a plan depends on: the problem in row-major terms, the types, the epilogue asked for, and
 * the alignments (capped at 256 bytes) the heuristic assumed. All ints: compared with memcmp. */
typedef struct gemm_key {
    int ta, tb, M, N, K, lda, ldb, ldc;
    int tA, tB, tC, bias, gelu, dgelu, bgrad; /* dgelu, bgrad: gemm_bwd's (cu_gemm_bwd) */
    int align_a, align_b, align_c, align_bias, align_pre;
} gemm_key;

/* How cuBLASLt runs a key: its descriptors and algorithm, the epilogue it does itself (lt_bias,
 * lt_gelu; lt_dgelu, lt_bgrad) and what the epilogue kernel (or gelu_bwd, bias_bwd) adds after it;
 * lt == 0: gemm_small_kernel does the product. */
typedef struct gemm_plan {
    gemm_key key;
    int lt, lt_bias, lt_gelu, lt_dgelu, lt_bgrad;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

#define GEMM_CACHE 64 /* a GPT-2 step has about a dozen distinct problems */
typedef struct gemm_cache {
    gemm_plan plans[GEMM_CACHE];
    int used, next; /* plans in use; the slot the next new plan replaces once full */
} gemm_cache;

static int align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (a == 0) return 256;
    uintptr_t low = a & (~a + 1);
    return low > 256 ? 256 : (int)low;
}

static cudaDataType_t lt_type(gk_elt t) { return t == GK_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

static void plan_release(gemm_plan *p)
{
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

void cu_gemm_cache_free(gk_backend *be)
{
    gemm_cache *gc = (gemm_cache *)CU(be)->gemm_cache;
    if (!gc) return;
    for (int i = 0; i < gc->used; i++) plan_release(&gc->plans[i]);
    free(gc);
    CU(be)->gemm_cache = NULL;
}

/* Records a failed cuBLASLt call; 0 when st is success. */
static int lt_fail(gk_backend *be, cublasStatus_t st, const char *call, int line)
{
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    return cu_fail(be, GK_EIO, __FILE__, line, "cublasLt %s: %s", call,
                   cublasLtGetStatusString(st));
}
#define LT(be, call, name) lt_fail((be), (call), (name), __LINE__)

/* A new matmul descriptor (the old one destroyed): no epilogue attribute of an earlier try left
 * in it (a real cuBLASLt refuses even the plain matmul while a bias type it does not take is
 * set). */
static int plan_desc(gk_backend *be, gemm_plan *p)
{
    const gemm_key *k = &p->key;
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    p->desc = NULL;
    return LT(be, cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              "cublasLtMatmulDescCreate") ||
           LT(be,
              cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                             sizeof opa),
              "cublasLtMatmulDescSetAttribute(TRANSA)") ||
           LT(be,
              cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                             sizeof opb),
              "cublasLtMatmulDescSetAttribute(TRANSB)");
}

/* The column-major problem: D (N,M) = op(B as stored) (N,K) * op(A as stored) (K,M). */
static int plan_layouts(gk_backend *be, gemm_plan *p)
{
    const gemm_key *k = &p->key;
    return LT(be,
              cublasLtMatrixLayoutCreate(&p->la, lt_type((gk_elt)k->tB), k->tb ? k->K : k->N,
                                         k->tb ? k->N : k->K, k->ldb),
              "cublasLtMatrixLayoutCreate(B)") ||
           LT(be,
              cublasLtMatrixLayoutCreate(&p->lb, lt_type((gk_elt)k->tA), k->ta ? k->M : k->K,
                                         k->ta ? k->K : k->M, k->lda),
              "cublasLtMatrixLayoutCreate(A)") ||
           LT(be, cublasLtMatrixLayoutCreate(&p->lc, lt_type((gk_elt)k->tC), k->N, k->M, k->ldc),
              "cublasLtMatrixLayoutCreate(C)");
}

/* Sets the epilogue and this call's pointers: forward, bias and/or GELU with its aux output
 * (pre_ptr); backward (gemm_bwd), DGELU with its aux input (pre_ptr, the GELU's input) or BGRADA,
 * the sums of cuBLASLt's A (our B) over k into bias_ptr. Bias vectors and aux are in D's type. */
static int set_epilogue(gk_backend *be, gemm_plan *p, int bias, int gelu, int dgelu, int bgrad,
                        const void *bias_ptr, const void *pre_ptr)
{
    cublasLtEpilogue_t epi =
        dgelu   ? CUBLASLT_EPILOGUE_DGELU
        : bgrad ? CUBLASLT_EPILOGUE_BGRADA
        : gelu  ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    cublasLtMatmulDesc_t d = p->desc;
    if (LT(be, cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
           "cublasLtMatmulDescSetAttribute(EPILOGUE)"))
        return -1;
    if (bias || bgrad) {
        int32_t bt = lt_type((gk_elt)p->key.tC); /* D's type: a bf16 D's bias is c->bias16 */
        if (LT(be,
               cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                              sizeof bias_ptr),
               "cublasLtMatmulDescSetAttribute(BIAS_POINTER)") ||
            LT(be,
               cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                              sizeof bt),
               "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"))
            return -1;
    }
    if (gelu || dgelu) {
        int64_t ld = p->key.ldc;
        int32_t at = lt_type((gk_elt)p->key.tC);
        if (LT(be,
               cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                              &pre_ptr, sizeof pre_ptr),
               "cublasLtMatmulDescSetAttribute(AUX_POINTER)") ||
            LT(be,
               cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                              sizeof ld),
               "cublasLtMatmulDescSetAttribute(AUX_LD)") ||
            LT(be,
               cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at,
                                              sizeof at),
               "cublasLtMatmulDescSetAttribute(AUX_DATA_TYPE)"))
            return -1;
    }
    return 0;
}

/* The pointers' alignments, so that the heuristic does not assume 256 bytes (cuBLASLt's A is our
 * B and its B our A). */
static int set_alignments(gk_backend *be, cublasLtMatmulPreference_t pref, const gemm_key *k)
{
    const cublasLtMatmulPreferenceAttributes_t attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t align[4] = {(uint32_t)k->align_b, (uint32_t)k->align_a, (uint32_t)k->align_c,
                               (uint32_t)k->align_c};
    for (int i = 0; i < 4; i++)
        if (LT(be, cublasLtMatmulPreferenceSetAttribute(pref, attr[i], &align[i], sizeof align[i]),
               "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)"))
            return -1;
    return 0;
}

/* Asks cuBLASLt for an algorithm for the plan's current epilogue: 1 found, 0 refused (the
 * caller tries less), -1 error (sticky error set). */
static int find_algo(gk_backend *be, gemm_plan *p)
{
    cu_ctx *c = CU(be);
    const gemm_key *k = &p->key;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = c->workspace_bytes;
    /* cuBLASLt's A is our B and its B our A */
    if (LT(be, cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate")) return -1;
    int rc = LT(be,
                cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &ws, sizeof ws),
                "cublasLtMatmulPreferenceSetAttribute(WORKSPACE)") ||
                     set_alignments(be, pref, k)
                 ? -1
                 : 0;
    if (rc == 0) {
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        memset(&res, 0, sizeof res);
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->la, p->lb, p->lc,
                                                           p->lc, pref, 1, &res, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
            p->algo = res.algo;
            rc = 1;
        } else if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED &&
                   st != CUBLAS_STATUS_INVALID_VALUE) {
            rc = LT(be, st, "cublasLtMatmulAlgoGetHeuristic") ? -1 : 0;
        }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    return rc;
}

/* cuBLASLt takes A and B of one type, and C of that type or fp32 (never fp32 inputs into bf16). */
static int lt_takes(const gemm_key *k)
{
    return k->K > 0 && k->tA == k->tB && (k->tC == k->tA || k->tC == GK_F32);
}

/* Chooses how the plan runs: cuBLASLt with the whole epilogue, with part of it, with none (the
 * epilogue kernel, or gelu_bwd and bias_bwd, do the rest), or gemm_small_kernel. A backward plan
 * (dgelu, bgrad) takes one fused part at most: cuBLASLt has no DGELU with BGRADA. 0, or -1 with
 * the sticky error. */
static int plan_choose(gk_backend *be, gemm_plan *p, const float *bias, const void *pre)
{
    const gemm_key *k = &p->key;
    if (!lt_takes(k)) return 0;
    if (plan_layouts(be, p)) return -1;
    /* GELU's aux: ld a multiple of 8 and 16-byte alignment, else cuBLASLt refuses; GELU comes
     * after the bias, so it is fused only where the bias is */
    int aux_ok = k->ldc % 8 == 0 && k->align_pre >= 16;
    int lt_bias = k->bias && (k->tC == GK_F32 || k->N <= CU_BIAS16_MAX);
    int lt_gelu = k->gelu && aux_ok && (lt_bias || !k->bias);
    int lt_dgelu = k->dgelu && aux_ok, lt_bgrad = k->bgrad && !lt_dgelu;
    int tries[3][4] = {{lt_bias, lt_gelu, lt_dgelu, lt_bgrad}, {lt_bias, 0, 0, 0}, {0, 0, 0, 0}};
    for (int t = 0; t < 3; t++) {
        if (t > 0 && !memcmp(tries[t], tries[t - 1], sizeof tries[t])) continue;
        if (plan_desc(be, p) ||
            set_epilogue(be, p, tries[t][0], tries[t][1], tries[t][2], tries[t][3], bias, pre))
            return -1;
        int found = find_algo(be, p);
        if (found < 0) return -1;
        if (found) {
            p->lt = 1, p->lt_bias = tries[t][0], p->lt_gelu = tries[t][1];
            p->lt_dgelu = tries[t][2], p->lt_bgrad = tries[t][3];
            return 0;
        }
    }
    /* refused every way: gemm_small_kernel, correct but some 100 times slower, so say so once */
    if (!be->note[0])
        snprintf(be->note, sizeof be->note,
                 "cuda gemm: cuBLASLt refused M %d N %d K %d (types %d %d %d, bias %d, gelu %d): a "
                 "slow fallback kernel runs it",
                 k->M, k->N, k->K, k->tA, k->tB, k->tC, k->bias, k->gelu);
    return 0;
}

/* The cached plan for key, or a new one (replacing the oldest once the cache is full). */
static gemm_plan *plan_get(gk_backend *be, const gemm_key *key, const float *bias, const void *pre)
{
    cu_ctx *c = CU(be);
    gemm_cache *gc = (gemm_cache *)c->gemm_cache;
    if (!gc && !(gc = (gemm_cache *)calloc(1, sizeof *gc))) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "cuda gemm: out of memory for the plan cache");
        return NULL;
    }
    c->gemm_cache = gc;
    for (int i = 0; i < gc->used; i++)
        if (memcmp(&gc->plans[i].key, key, sizeof *key) == 0) return &gc->plans[i];
    gemm_plan *p;
    if (gc->used < GEMM_CACHE) {
        p = &gc->plans[gc->used++];
    } else {
        p = &gc->plans[gc->next];
        gc->next = (gc->next + 1) % GEMM_CACHE;
        plan_release(p);
    }
    p->key = *key;
    if (plan_choose(be, p, bias, pre)) {
        plan_release(p); /* its key is zeroed: never matches a real problem (M, N >= 1) */
        return NULL;
    }
    return p;
}

/* Runs a cuBLASLt plan with this call's pointers, then the epilogue it left undone. */
static void run_plan(gk_backend *be, gemm_plan *p, float alpha, const void *A, const void *B,
                     float beta, void *C, const float *bias, void *pre)
{
    cu_ctx *c = CU(be);
    const gemm_key *k = &p->key;
    const void *lt_bias = bias;
    if (p->lt_bias && k->tC == GK_BF16) { /* cuBLASLt takes D's type: bias rounded to bf16 */
        cu_cast_on(be, c->stream, c->bias16, GK_BF16, bias, (size_t)k->N);
        if (CU_LAUNCHED(be, "cast_kernel (gemm bias)")) return;
        lt_bias = c->bias16;
    }
    if (set_epilogue(be, p, p->lt_bias, p->lt_gelu, 0, 0, lt_bias, pre)) return;
    void *D = pre && !p->lt_gelu ? pre : C; /* GELU by the kernel: the matmul writes pre */
    if (LT(be,
           cublasLtMatmul(c->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, D, p->lc, D, p->lc,
                          &p->algo, c->workspace, c->workspace_bytes, c->stream),
           "cublasLtMatmul"))
        return;
    if (c->sync_each && CU_CHECK(be, cudaStreamSynchronize(c->stream))) return;
    if ((bias && !p->lt_bias) || (pre && !p->lt_gelu))
        epilogue(be, (gk_elt)k->tC, C, pre, p->lt_bias ? NULL : bias, k->M, k->N, k->ldc);
}

/* 0, or GK_EUSAGE recorded for a shape backend.h's gemm does not allow. */
static int gemm_shape_bad(gk_backend *be, int transA, int transB, int M, int N, int K, int lda,
                          int ldb, int ldc)
{
    if (M < 0 || N < 0 || K < 0 || lda < (transA ? M : K) || ldb < (transB ? K : N) || ldc < N)
        return GK_BACKEND_FAIL(be, GK_EUSAGE,
                               "cuda gemm: bad shape M %d N %d K %d lda %d ldb %d ldc %d", M, N, K,
                               lda, ldb, ldc);
    return 0;
}

void cu_gemm(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
             const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb, float beta,
             void *C, gk_elt tc, int ldc, const float *bias, void *pre_gelu)
{
    CU_BEGIN(be);
    if (gemm_shape_bad(be, transA, transB, M, N, K, lda, ldb, ldc)) return;
    if (pre_gelu && beta != 0.0f) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda gemm: the GELU epilogue needs beta 0");
        return;
    }
    if (M == 0 || N == 0) return;
    if (cu_gemv(be, transA, transB, M, N, K, alpha, A, ta, lda, B, tb, ldb, beta, C, tc, ldc, bias,
                pre_gelu))
        return; /* a few rows (decoding): matmul_rows.cu */
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.ta = !!transA, key.tb = !!transB, key.M = M, key.N = N, key.K = K;
    key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.tA = ta, key.tB = tb, key.tC = tc, key.bias = bias != NULL, key.gelu = pre_gelu != NULL;
    key.align_a = align_of(A), key.align_b = align_of(B), key.align_c = align_of(C);
    key.align_bias = bias ? align_of(bias) : 0, key.align_pre = pre_gelu ? align_of(pre_gelu) : 0;
    gemm_plan *p = plan_get(be, &key, bias, pre_gelu);
    if (!p) return;
    if (p->lt)
        run_plan(be, p, alpha, A, B, beta, C, bias, pre_gelu);
    else
        gemm_fallback(be, key.ta, key.tb, M, N, K, alpha, A, ta, lda, B, tb, ldb, beta, C, tc, ldc,
                      bias, pre_gelu);
}

/* ---- gemm_bwd: the backward epilogues (cuda_fused_grads) ---- */

/* dst (n) += src (n, T): BGRADA's sums, which cuBLASLt writes rather than adds */
template <typename T> __global__ void add_to_kernel(float *dst, const T *src, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] += cu_f(src[i]);
}

/* Runs a backward plan: the product with what cuBLASLt fused (DGELU, or BGRADA into scratch, then
 * added to dbias), then the ops it did not take. */
static void run_plan_bwd(gk_backend *be, gemm_plan *p, float alpha, const void *A, const void *B,
                         float beta, void *C, const void *pre, float *dbias, void *sums)
{
    cu_ctx *c = CU(be);
    const gemm_key *k = &p->key;
    if (set_epilogue(be, p, 0, 0, p->lt_dgelu, p->lt_bgrad, sums, pre) ||
        LT(be,
           cublasLtMatmul(c->lt, p->desc, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc,
                          &p->algo, c->workspace, c->workspace_bytes, c->stream),
           "cublasLtMatmul"))
        return;
    if (c->sync_each && CU_CHECK(be, cudaStreamSynchronize(c->stream))) return;
    if (pre && !p->lt_dgelu) cu_gelu_bwd(be, C, pre, C, k->M, k->N);
    if (!dbias) return;
    if (!p->lt_bgrad) {
        cu_bias_bwd(be, dbias, B, k->K, k->N);
        return;
    }
    unsigned blocks = cu_blocks((size_t)k->N, 256);
    if (k->tC == GK_BF16)
        CU_LAUNCH(be, add_to_kernel<bf16>, blocks, 256, 0, dbias, (const bf16 *)sums, k->N);
    else CU_LAUNCH(be, add_to_kernel<float>, blocks, 256, 0, dbias, (const float *)sums, k->N);
}

/* backend.h's gemm_bwd. Without cuda_fused_grads, for a few rows (cu_gemv's decoding sizes) and
 * for types cuBLASLt does not take: gemm, gelu_bwd and bias_bwd apart (backend_compose.c). */
void cu_gemm_bwd(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
                 const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb, float beta,
                 void *C, gk_elt tc, int ldc, const void *pre_gelu, float *dbias)
{
    CU_BEGIN(be);
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.ta = !!transA, key.tb = !!transB, key.M = M, key.N = N, key.K = K;
    key.lda = lda, key.ldb = ldb, key.ldc = ldc, key.tA = ta, key.tB = tb, key.tC = tc;
    if (!CU(be)->fused_grads || (!pre_gelu && !dbias) || M < 16 || N < 1 || K < 1 ||
        !lt_takes(&key)) {
        gk_gemm_bwd_apart(be, transA, transB, M, N, K, alpha, A, ta, lda, B, tb, ldb, beta, C, tc,
                          ldc, pre_gelu, dbias);
        return;
    }
    if (gemm_shape_bad(be, transA, transB, M, N, K, lda, ldb, ldc) ||
        gk_gemm_bwd_check(be, transB, N, ldb, tb, ldc, tc, beta, pre_gelu, dbias))
        return;
    void *sums = dbias ? cu_scratch(be, (size_t)N * gk_elt_size(tc), "gemm_bwd") : NULL;
    if (dbias && !sums) return;
    key.dgelu = pre_gelu != NULL, key.bgrad = dbias != NULL;
    key.align_a = align_of(A), key.align_b = align_of(B), key.align_c = align_of(C);
    key.align_bias = sums ? align_of(sums) : 0, key.align_pre = pre_gelu ? align_of(pre_gelu) : 0;
    gemm_plan *p = plan_get(be, &key, (const float *)sums, pre_gelu);
    if (!p) return;
    if (p->lt) {
        run_plan_bwd(be, p, alpha, A, B, beta, C, pre_gelu, dbias, sums);
        return;
    }
    gemm_fallback(be, key.ta, key.tb, M, N, K, alpha, A, ta, lda, B, tb, ldb, beta, C, tc, ldc,
                  NULL, NULL);
    if (pre_gelu) cu_gelu_bwd(be, C, pre_gelu, C, M, N);
    if (dbias) cu_bias_bwd(be, dbias, B, K, N);
}
