/* matmul.c: the reference gemm, any element types widened to double (the oracle of every
 * gemm combination, bf16, fp16 and int8 weights included), with the bias and GELU epilogues. */
#include "kernels/ref/ref_internal.h"

#include "kernels/bf16.h"

void gk_ref_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                 const void *A, gk_elt tA, int lda, const void *B, gk_elt tB, int ldb,
                 float beta, void *C, gk_elt tC, int ldc, const float *bias, void *pre_gelu)
{
    if (pre_gelu && beta != 0.0f) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "ref gemm: the GELU epilogue needs beta 0");
        return;
    }
    size_t sak = ta ? (size_t)lda : 1, sai = ta ? 1 : (size_t)lda; /* strides of A's k and i */
    size_t sbk = tb ? 1 : (size_t)ldb, sbj = tb ? (size_t)ldb : 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)gk_elt_get(A, tA, i * sai + k * sak) *
                     gk_elt_get(B, tB, k * sbk + j * sbj);
            size_t c = (size_t)i * ldc + j;
            double r = alpha * s + (beta == 0.0f ? 0.0 : (double)beta * gk_elt_get(C, tC, c));
            if (bias) r += bias[j];
            if (pre_gelu) {
                gk_elt_put(pre_gelu, tC, c, (float)r);
                r = gk_ref_gelu(gk_elt_get(pre_gelu, tC, c)); /* from the stored pre-activation */
            }
            gk_elt_put(C, tC, c, (float)r);
        }
}
