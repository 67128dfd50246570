/* emu_cublaslt.cpp: the cuBLASLt subset of emu_cublaslt.h on CBLAS.
 * Owns: the descriptor and layout state, the checks cuBLASLt makes (shapes, leading dimensions,
 * batch counts, supported type and epilogue combinations), and the matmul itself: per batch,
 * operands widened to fp32, one cblas_sgemm into an fp32 tile (column-major, as cuBLASLt), then
 * bias, aux and GELU (or DGELU's factor from aux), the store into D (rounded to nearest even when
 * D is bf16), and BGRADA's sums of A into the bias vector (in D's type). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "kernels/emu/emu_cublaslt.h"
#include "kernels/emu/emu_internal.h"

struct gk_emu_lt_handle {
    int unused;
};
struct gk_emu_lt_desc {
    int32_t compute, scale, transa, transb;
    uint32_t epilogue;
    const void *bias;
    int64_t bias_stride;
    int32_t bias_type;
    void *aux;
    int64_t aux_ld, aux_stride;
    int32_t aux_type;
};
struct gk_emu_lt_layout {
    int32_t type, order;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
};
struct gk_emu_lt_pref {
    uint64_t max_workspace;
    uint32_t search_mode, min_alignment[4];
};

namespace {

/* Copies buf into field when size is the field's; INVALID_VALUE otherwise. */
template <class T> cublasStatus_t set_field(T &field, const void *buf, size_t size)
{
    if (!buf || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&field, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

bool is_float_type(int32_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }
size_t type_size(int32_t t) { return t == CUDA_R_32F ? 4 : 2; }

float load(const void *p, int32_t type, size_t i)
{
    return type == CUDA_R_32F ? static_cast<const float *>(p)[i]
                              : (float)static_cast<const __nv_bfloat16 *>(p)[i];
}
void store(void *p, int32_t type, size_t i, float v)
{
    if (type == CUDA_R_32F) static_cast<float *>(p)[i] = v;
    else static_cast<__nv_bfloat16 *>(p)[i] = __nv_bfloat16(v);
}

const float GELU_S = 0.7978845608028654f; /* sqrt(2/pi) */
float gelu_tanh(float x) { return 0.5f * x * (1.0f + tanhf(GELU_S * (x + 0.044715f * x * x * x))); }
/* d gelu_tanh / dx (DGELU's factor) */
float gelu_grad(float x)
{
    float th = tanhf(GELU_S * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) +
           0.5f * x * (1.0f - th * th) * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
}

/* The epilogue's parts: bias added; aux written (GELU_AUX) or read (DGELU: the GELU input whose
 * gradient scales the result); GELU applied; the bias vector written with the sums of op(A)'s
 * rows over k (BGRADA). */
struct Problem {
    uint64_t m, n, k;
    int32_t bias_type, aux_type;
    bool bias, aux, gelu, dgelu, bgrad_a;
};

/* What cuBLASLt checks before it runs; pointers only when they are about to be used. */
cublasStatus_t check(const gk_emu_lt_desc *d, const gk_emu_lt_layout *A, const gk_emu_lt_layout *B,
                     const gk_emu_lt_layout *C, const gk_emu_lt_layout *D, bool pointers,
                     Problem *p)
{
    if (!d || !A || !B || !C || !D) return CUBLAS_STATUS_INVALID_VALUE;
    if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const gk_emu_lt_layout *all[4] = {A, B, C, D};
    for (const gk_emu_lt_layout *l : all) {
        if (l->order != CUBLASLT_ORDER_COL || !is_float_type(l->type))
            return CUBLAS_STATUS_NOT_SUPPORTED;
        if (l->ld < (int64_t)(l->rows ? l->rows : 1) || l->batch != D->batch || l->batch < 1)
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (A->type != B->type || C->type != D->type ||
        (A->type == CUDA_R_32F && D->type != CUDA_R_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    p->m = D->rows;
    p->n = D->cols;
    p->k = d->transa != CUBLAS_OP_N ? A->rows : A->cols;
    uint64_t a_m = d->transa != CUBLAS_OP_N ? A->cols : A->rows;
    uint64_t b_k = d->transb != CUBLAS_OP_N ? B->cols : B->rows,
             b_n = d->transb != CUBLAS_OP_N ? B->rows : B->cols;
    if (a_m != p->m || b_k != p->k || b_n != p->n || C->rows != p->m || C->cols != p->n)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (d->epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_BGRADA: break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    p->dgelu = d->epilogue == CUBLASLT_EPILOGUE_DGELU;
    p->bgrad_a = d->epilogue == CUBLASLT_EPILOGUE_BGRADA;
    p->bias = (d->epilogue & CUBLASLT_EPILOGUE_BIAS) || p->bgrad_a; /* a vector at BIAS_POINTER */
    p->gelu = d->epilogue & CUBLASLT_EPILOGUE_GELU;
    p->aux = d->epilogue & 128;
    /* the bias in D's type only (cublasLt.h; fp8 and integer kernels aside), and a real cuBLASLt
     * (13.0, H100) refuses even the plain matmul while another bias type is set */
    if (d->bias_type != -1 && d->bias_type != D->type) return CUBLAS_STATUS_NOT_SUPPORTED;
    p->bias_type = D->type;
    p->aux_type = d->aux_type == -1 ? D->type : d->aux_type;
    if ((p->bias && !is_float_type(p->bias_type)) || (p->aux && !is_float_type(p->aux_type)))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (p->aux && (d->aux_ld < (int64_t)p->m || d->aux_ld % 8 || d->aux_stride % 8))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (pointers && ((p->bias && !d->bias) || (p->aux && !d->aux)))
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

/* rows x cols of p (type, ld) as packed fp32 in out. */
void widen(const void *p, int32_t type, uint64_t rows, uint64_t cols, int64_t ld,
           std::vector<float> &out)
{
    out.resize(rows * cols);
    for (uint64_t j = 0; j < cols; j++)
        for (uint64_t i = 0; i < rows; i++) out[i + j * rows] = load(p, type, i + j * (uint64_t)ld);
}

/* Batch b of p (NULL stays NULL). */
const char *at(const void *p, const gk_emu_lt_layout *l, int b)
{
    return p ? static_cast<const char *>(p) + (int64_t)b * l->stride * (int64_t)type_size(l->type)
             : nullptr;
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle)
{
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new gk_emu_lt_handle{0};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasLtGetStatusName(cublasStatus_t status) { return cublasGetStatusName(status); }
const char *cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    }
    return "unknown error";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    *desc = new gk_emu_lt_desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT,
                               nullptr, 0, -1, nullptr, 0, 0, -1};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)
{
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size)
{
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set_field(d->compute, buf, size);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set_field(d->scale, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSA: return set_field(d->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set_field(d->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_field(d->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_field(d->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return set_field(d->bias_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_field(d->bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set_field(d->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set_field(d->aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return set_field(d->aux_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return set_field(d->aux_type, buf, size);
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
    *layout = new gk_emu_lt_layout{type, CUBLASLT_ORDER_COL, rows, cols, ld, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout)
{
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size)
{
    if (!l) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return set_field(l->type, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set_field(l->order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return set_field(l->rows, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return set_field(l->cols, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_LD: return set_field(l->ld, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_field(l->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set_field(l->stride, buf, size);
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    *pref = new gk_emu_lt_pref{0, 0, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return set_field(pref->search_mode, buf, size);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set_field(pref->max_workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        return set_field(pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                         buf, size);
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *returned)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!pref || !results || !returned || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    Problem p;
    if (cublasStatus_t s = check(desc, A, B, C, D, false, &p)) return s;
    memset(&results[0], 0, sizeof results[0]);
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* One batch: D = epilogue(alpha op(A) op(B) + beta C + bias), through an fp32 tile. */
static void matmul_one(const gk_emu_lt_desc *d, const Problem &p, float alpha, float beta,
                       const void *A, const gk_emu_lt_layout *Al, const void *B,
                       const gk_emu_lt_layout *Bl, const void *C, const gk_emu_lt_layout *Cl,
                       void *D, const gk_emu_lt_layout *Dl, int batch)
{
    std::vector<float> a, b, c(p.m * p.n, 0.0f);
    const float *ap = static_cast<const float *>(A), *bp = static_cast<const float *>(B);
    int64_t lda = Al->ld, ldb = Bl->ld;
    if (Al->type != CUDA_R_32F) {
        widen(A, Al->type, Al->rows, Al->cols, Al->ld, a);
        ap = a.data(), lda = (int64_t)(Al->rows ? Al->rows : 1);
    }
    if (Bl->type != CUDA_R_32F) {
        widen(B, Bl->type, Bl->rows, Bl->cols, Bl->ld, b);
        bp = b.data(), ldb = (int64_t)(Bl->rows ? Bl->rows : 1);
    }
    if (beta != 0.0f) /* as in BLAS, C is not read when beta is 0 */
        for (uint64_t j = 0; j < p.n; j++)
            for (uint64_t i = 0; i < p.m; i++)
                c[i + j * p.m] = load(C, Cl->type, i + j * (uint64_t)Cl->ld);
    if (p.m && p.n)
        cblas_sgemm(CblasColMajor, d->transa != CUBLAS_OP_N ? CblasTrans : CblasNoTrans,
                    d->transb != CUBLAS_OP_N ? CblasTrans : CblasNoTrans, (int)p.m, (int)p.n,
                    (int)p.k, alpha, ap, (int)lda, bp, (int)ldb, beta, c.data(), (int)p.m);
    char *bias = p.bias ? static_cast<char *>(const_cast<void *>(d->bias)) +
                              batch * d->bias_stride * (int64_t)type_size(p.bias_type)
                        : nullptr;
    char *aux =
        p.aux ? static_cast<char *>(d->aux) + batch * d->aux_stride * (int64_t)type_size(p.aux_type)
              : nullptr;
    for (uint64_t j = 0; j < p.n; j++)
        for (uint64_t i = 0; i < p.m; i++) {
            float v = c[i + j * p.m];
            size_t ai = i + j * (uint64_t)d->aux_ld;
            if (p.dgelu) v *= gelu_grad(load(aux, p.aux_type, ai));
            else if (p.bias && !p.bgrad_a) v += load(bias, p.bias_type, i);
            if (p.aux && !p.dgelu) store(aux, p.aux_type, ai, v);
            if (p.gelu) v = gelu_tanh(v);
            store(D, Dl->type, i + j * (uint64_t)Dl->ld, v);
        }
    if (p.bgrad_a) /* row i of op(A): A (m,k) at lda, or A^T stored (k,m) */
        for (uint64_t i = 0; i < p.m; i++) {
            float s = 0.0f;
            for (uint64_t kk = 0; kk < p.k; kk++)
                s += d->transa != CUBLAS_OP_N ? ap[kk + i * (uint64_t)lda]
                                              : ap[i + kk * (uint64_t)lda];
            store(bias, p.bias_type, i, s);
        }
}

/* Every batch of one matmul; descriptors by value, so that a captured call keeps them as they
 * were. */
static void matmul_all(const gk_emu_lt_desc &d, const Problem &p, float alpha, float beta,
                       const void *A, const gk_emu_lt_layout &Al, const void *B,
                       const gk_emu_lt_layout &Bl, const void *C, const gk_emu_lt_layout &Cl,
                       void *D, const gk_emu_lt_layout &Dl)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int b = 0; b < Dl.batch; b++)
        matmul_one(&d, p, alpha, beta, at(A, &Al, b), &Al, at(B, &Bl, b), &Bl, at(C, &Cl, b), &Cl,
                   const_cast<char *>(at(D, &Dl, b)), &Dl, b);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    char shape[96];
    snprintf(shape, sizeof shape, "m=%llu n=%llu k=%llu batch=%d%s%s", (unsigned long long)p.m,
             (unsigned long long)p.n, (unsigned long long)p.k, Dl.batch, p.bias ? " bias" : "",
             p.gelu ? " gelu" : "");
    gk_emu::log_launch("cublasLtMatmul", shape,
                       (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
}

/* On a capturing stream the call is checked now and recorded with copies of its descriptors, alpha
 * and beta (host pointers: read at the call, as cuBLASLt's host pointer mode does). */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t stream)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    Problem p;
    if (cublasStatus_t s = check(desc, Adesc, Bdesc, Cdesc, Ddesc, true, &p)) return s;
    if (!alpha || !beta || (p.m && p.n && (!D || (p.k && (!A || !B)))))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (gk_emu::sticky_error()) return CUBLAS_STATUS_EXECUTION_FAILED;
    float al = *static_cast<const float *>(alpha), be = *static_cast<const float *>(beta);
    if (be != 0.0f && !C) return CUBLAS_STATUS_INVALID_VALUE;
    bool captured = false;
    if (gk_emu::capture_route(stream, "cublasLtMatmul", &captured))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (!captured) {
        matmul_all(*desc, p, al, be, A, *Adesc, B, *Bdesc, C, *Cdesc, D, *Ddesc);
        return CUBLAS_STATUS_SUCCESS;
    }
    gk_emu_lt_desc d = *desc;
    gk_emu_lt_layout Al = *Adesc, Bl = *Bdesc, Cl = *Cdesc, Dl = *Ddesc;
    gk_emu::capture_add(stream, [=](cudaStream_t) {
        if (cudaError_t e = gk_emu::sticky_error()) return e;
        matmul_all(d, p, al, be, A, Al, B, Bl, C, Cl, D, Dl);
        return cudaSuccess;
    });
    return CUBLAS_STATUS_SUCCESS;
}
