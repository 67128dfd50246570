/* test_emu_cublaslt.cu: the emulator's cuBLASLt against naive column-major loops: every transpose
 * combination with padded leading dimensions, strided batches, bf16 in and out, fp32 C with bf16
 * A/B, C in place of D, the BIAS and GELU_AUX_BIAS epilogues, and what cuBLASLt refuses. */
#include <math.h>
#include <stdint.h>

#include <vector>

#include "tests/unit/emu/emu_test.h"

#define LT_OK(expr)                                                                        \
    do {                                                                                   \
        cublasStatus_t s_ = (expr);                                                        \
        CHECKF(s_ == CUBLAS_STATUS_SUCCESS, "%s -> %d", #expr, (int)s_);                   \
    } while (0)

/* One problem: sizes, ops, types, epilogue; host copies in fp32 of what went to the device. */
struct Problem {
    int m, n, k, batch;
    bool ta, tb;
    cudaDataType_t ab_type, cd_type;
    cublasLtEpilogue_t epi;
    float alpha, beta;
};

static float gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
static float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

/* Fills host values (rounded to bf16 when type is bf16) and returns a device copy of type. */
static void *make(std::vector<float> &h, size_t count, cudaDataType_t type, uint32_t seed)
{
    h.resize(count);
    std::vector<__nv_bfloat16> b(count);
    for (size_t i = 0; i < count; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = (float)((int)(seed >> 24) % 17 - 8) / 4.0f; /* quarters: exact in bf16 */
        if (type == CUDA_R_16BF) b[i] = __float2bfloat16(h[i]);
    }
    void *d = NULL;
    size_t size = count * (type == CUDA_R_32F ? 4 : 2);
    if (cudaMalloc(&d, size) != cudaSuccess) return NULL;
    cudaMemcpy(d, type == CUDA_R_32F ? (const void *)h.data() : (const void *)b.data(), size,
               cudaMemcpyHostToDevice);
    return d;
}

static std::vector<float> fetch(const void *d, size_t count, cudaDataType_t type)
{
    std::vector<float> out(count);
    if (type == CUDA_R_32F) {
        cudaMemcpy(out.data(), d, count * 4, cudaMemcpyDeviceToHost);
    } else {
        std::vector<__nv_bfloat16> b(count);
        cudaMemcpy(b.data(), d, count * 2, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < count; i++) out[i] = __bfloat162float(b[i]);
    }
    return out;
}

static cublasLtMatrixLayout_t layout(cudaDataType_t type, int rows, int cols, int ld, int batch,
                                     int64_t stride)
{
    cublasLtMatrixLayout_t l = NULL;
    cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld);
    cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                     sizeof stride);
    return l;
}

/* Runs p through cublasLtMatmul with C in place of D when in_place, and checks D (and aux)
 * against naive loops; values are quarters, so fp32 is exact and bf16 within one rounding. */
static void run(cublasLtHandle_t lt, const Problem &p, bool in_place)
{
    int ar = p.ta ? p.k : p.m, ac = p.ta ? p.m : p.k, br = p.tb ? p.n : p.k, bc = p.tb ? p.k : p.n;
    int lda = ar + 3, ldb = br + 1, ldc = p.m + 2, ldd = in_place ? ldc : p.m + 5,
        ldaux = (p.m + 7) / 8 * 8 + 8;
    int64_t sa = (int64_t)lda * ac + 7, sb = (int64_t)ldb * bc, sc = (int64_t)ldc * p.n + 1,
            sd = (int64_t)ldd * p.n + 3;
    if (in_place) sd = sc;
    std::vector<float> hA, hB, hC, hbias, hD0;
    void *A = make(hA, sa * p.batch, p.ab_type, 1), *B = make(hB, sb * p.batch, p.ab_type, 2);
    void *C = make(hC, sc * p.batch, p.cd_type, 3), *bias = make(hbias, p.m, p.cd_type, 4);
    void *D = in_place ? C : make(hD0, sd * p.batch, p.cd_type, 5);
    void *aux = NULL;
    cudaMalloc(&aux, (size_t)ldaux * p.n * 4);
    cublasLtMatmulDesc_t desc;
    LT_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t bias_type = p.cd_type, aux_type = CUDA_R_32F; /* the bias in D's type only */
    int64_t aux_ld = ldaux;
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_OK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epi, sizeof p.epi));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                         sizeof bias_type));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                         sizeof aux));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                         sizeof aux_ld));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                         &aux_type, sizeof aux_type));
    cublasLtMatrixLayout_t la = layout(p.ab_type, ar, ac, lda, p.batch, sa),
                           lb = layout(p.ab_type, br, bc, ldb, p.batch, sb);
    cublasLtMatrixLayout_t lc = layout(p.cd_type, p.m, p.n, ldc, p.batch, sc),
                           ld = layout(p.cd_type, p.m, p.n, ldd, p.batch, sd);
    cublasLtMatmulPreference_t pref;
    LT_OK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = 1 << 20;
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                               sizeof ws));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, &heur, &found));
    CHECK(found == 1);
    LT_OK(cublasLtMatmul(lt, desc, &p.alpha, A, la, B, lb, &p.beta, C, lc, D, ld, &heur.algo, NULL,
                         0, 0));
    std::vector<float> got = fetch(D, sd * p.batch, p.cd_type),
                       got_aux = fetch(aux, (size_t)ldaux * p.n, CUDA_R_32F);
    int bad = 0;
    for (int b = 0; b < p.batch; b++)
        for (int j = 0; j < p.n; j++)
            for (int i = 0; i < p.m; i++) {
                float acc = 0;
                for (int l = 0; l < p.k; l++)
                    acc += hA[b * sa + (p.ta ? i * lda + l : l * lda + i)] *
                           hB[b * sb + (p.tb ? l * ldb + j : j * ldb + l)];
                float pre = p.alpha * acc + p.beta * hC[b * sc + j * ldc + i];
                if (p.epi & CUBLASLT_EPILOGUE_BIAS) pre += hbias[i];
                float want = p.epi & CUBLASLT_EPILOGUE_GELU ? gelu(pre) : pre;
                if (p.cd_type == CUDA_R_16BF) want = round_bf16(want);
                float g = got[b * sd + j * ldd + i],
                      tol = p.cd_type == CUDA_R_16BF ? fabsf(want) / 128 : 1e-5f;
                bad += !(fabsf(g - want) <= tol);
                if ((p.epi & 128) && b == 0) bad += !(fabsf(got_aux[j * ldaux + i] - pre) <= 1e-5f);
            }
    CHECKF(bad == 0,
           "m %d n %d k %d batch %d ta %d tb %d types %d/%d epilogue %d in place %d: %d wrong", p.m,
           p.n, p.k, p.batch, p.ta, p.tb, p.ab_type, p.cd_type, p.epi, in_place, bad);
    if (!in_place) { /* the padding between columns and batches is untouched */
        int moved = 0;
        for (int64_t i = 0; i < sd * p.batch; i++)
            if (i % sd >= (int64_t)ldd * (p.n - 1) + p.m || (i % sd) % ldd >= p.m)
                moved += got[i] != hD0[i];
        CHECKF(moved == 0, "%d padding elements written", moved);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb),
        cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(ld), cublasLtMatmulDescDestroy(desc);
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(bias), cudaFree(aux);
    if (!in_place) cudaFree(D);
}

static cublasLtHandle_t lt;

static void test_transposes(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            Problem p = {5, 7, 3, 1, ta != 0, tb != 0, CUDA_R_32F, CUDA_R_32F,
                         CUBLASLT_EPILOGUE_DEFAULT, 1.5f, 0.5f};
            run(lt, p, false);
            run(lt, p, true);
        }
}

static void test_batched(void)
{
    Problem p = {6, 4, 9, 3, true, false, CUDA_R_32F, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, 1.0f,
                 1.0f};
    run(lt, p, false);
    p.ab_type = p.cd_type = CUDA_R_16BF;
    run(lt, p, false);
}

static void test_bf16_types(void)
{
    Problem p = {17, 9, 33, 1, false, true, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT,
                 1.0f, 0.0f};
    run(lt, p, false);
    run(lt, p, true);
    p.cd_type = CUDA_R_32F; /* fp32 C and D with bf16 A and B */
    p.beta = 1.0f;
    run(lt, p, false);
    p.ta = true;
    run(lt, p, true);
}

static void test_epilogues(void)
{
    Problem p = {24, 5, 16, 1, true, false, CUDA_R_32F, CUDA_R_32F, CUBLASLT_EPILOGUE_BIAS, 1.0f,
                 0.0f};
    run(lt, p, false);
    p.epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    run(lt, p, false);
    p.ab_type = p.cd_type = CUDA_R_16BF;
    run(lt, p, false);
    p.epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    run(lt, p, true);
}

static void test_refusals(void)
{
    cublasLtMatmulDesc_t desc;
    LT_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t f32 = layout(CUDA_R_32F, 8, 8, 8, 1, 0),
                           b16 = layout(CUDA_R_16BF, 8, 8, 8, 1, 0);
    cublasLtMatrixLayout_t wide = layout(CUDA_R_32F, 8, 9, 8, 1, 0),
                           thin = layout(CUDA_R_32F, 8, 8, 4, 1, 0);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t h;
    int found = 1;
    LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, f32, f32, f32, f32, pref, 1, &h, &found));
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, f32, f32, b16, b16, pref, 1, &h, &found) ==
          CUBLAS_STATUS_NOT_SUPPORTED && found == 0); /* fp32 inputs, bf16 output */
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, f32, wide, f32, f32, pref, 1, &h, &found) ==
          CUBLAS_STATUS_INVALID_VALUE); /* B has more columns than D */
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, thin, f32, f32, f32, pref, 1, &h, &found) ==
          CUBLAS_STATUS_INVALID_VALUE); /* ld < rows */
    /* a bias type other than D's: refused, even without a bias epilogue (as an H100 did) */
    int32_t f32_bias = CUDA_R_32F, b16_bias = CUDA_R_16BF;
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32_bias,
                                         sizeof f32_bias));
    LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, f32, f32, f32, f32, pref, 1, &h, &found));
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, b16, b16, b16, b16, pref, 1, &h, &found) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &b16_bias,
                                         sizeof b16_bias));
    LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, b16, b16, b16, b16, pref, 1, &h, &found));
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, f32, f32, f32, f32, pref, 1, &h, &found) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32_bias,
                                         sizeof f32_bias));
    cublasLtEpilogue_t bgrad = CUBLASLT_EPILOGUE_BGRADB;
    LT_OK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &bgrad, sizeof bgrad));
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, f32, f32, f32, f32, pref, 1, &h, &found) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    cublasLtEpilogue_t aux = CUBLASLT_EPILOGUE_GELU_AUX;
    int64_t bad_ld = 12;
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &aux, sizeof aux));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &bad_ld,
                                         sizeof bad_ld));
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, f32, f32, f32, f32, pref, 1, &h, &found) ==
          CUBLAS_STATUS_INVALID_VALUE); /* aux ld not a multiple of 8 */
    int32_t trans = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, 2) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(strlen(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)) > 0);
    uint32_t align = 4;
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                               &align, sizeof align));
    LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                               &align, sizeof align));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(f32), cublasLtMatrixLayoutDestroy(b16);
    cublasLtMatrixLayoutDestroy(wide), cublasLtMatrixLayoutDestroy(thin);
    cublasLtMatmulDescDestroy(desc);
}

/* beta = 0: C is not read, so NaN in C does not reach D. */
static void test_beta_zero_ignores_c(void)
{
    float a[4] = {1, 2, 3, 4}, c[4] = {NAN, NAN, NAN, NAN}, d[4], alpha = 1, beta = 0;
    float *dA = to_dev(a, 4), *dC = to_dev(c, 4), *dD = to_dev<float>(NULL, 4);
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t l = layout(CUDA_R_32F, 2, 2, 2, 1, 0);
    LT_OK(cublasLtMatmul(lt, desc, &alpha, dA, l, dA, l, &beta, dC, l, dD, l, NULL, NULL, 0, 0));
    to_host(d, dD, 4);
    CHECK(d[0] == 7 && d[1] == 10 && d[2] == 15 && d[3] == 22); /* [1 3; 2 4]^2 column-major */
    cublasLtMatrixLayoutDestroy(l), cublasLtMatmulDescDestroy(desc);
    cudaFree(dA), cudaFree(dC), cudaFree(dD);
}

int main(void)
{
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
    RUN(test_transposes);
    RUN(test_batched);
    RUN(test_bf16_types);
    RUN(test_epilogues);
    RUN(test_refusals);
    RUN(test_beta_zero_ignores_c);
    cublasLtDestroy(lt);
    return TEST_END();
}
