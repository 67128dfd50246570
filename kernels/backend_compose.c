/* backend_compose.c: the ops a backend may build from its other ops: gemm_bwd as gemm, gelu_bwd
 * and bias_bwd one after the other (cpu and ref always; cuda when its fused epilogues are off or
 * refused). Linked into the CUDA libraries too (Makefile: CUDA_CSRC). */
#include "kernels/backend.h"

int gk_gemm_bwd_check(gk_backend *be, int transB, int N, int ldb, gk_elt tb, int ldc, gk_elt tc,
                      float beta, const void *pre_gelu, const float *dbias)
{
    if (pre_gelu && (beta != 0.0f || ldc != N || tc != be->act))
        return GK_BACKEND_FAIL(be, GK_EUSAGE,
                               "%s gemm_bwd: the GELU gradient needs beta "
                               "0, ldc = N and C of the activations' type",
                               be->ops->name);
    if (dbias && (transB || ldb != N || tb != be->act))
        return GK_BACKEND_FAIL(be, GK_EUSAGE,
                               "%s gemm_bwd: the bias gradient needs B not "
                               "transposed, ldb = N, of the activations' type",
                               be->ops->name);
    return 0;
}

void gk_gemm_bwd_apart(gk_backend *be, int transA, int transB, int M, int N, int K, float alpha,
                       const void *A, gk_elt ta, int lda, const void *B, gk_elt tb, int ldb,
                       float beta, void *C, gk_elt tc, int ldc, const void *pre_gelu, float *dbias)
{
    if (be->err.code || gk_gemm_bwd_check(be, transB, N, ldb, tb, ldc, tc, beta, pre_gelu, dbias))
        return;
    const gk_ops *op = be->ops;
    op->gemm(be, transA, transB, M, N, K, alpha, A, ta, lda, B, tb, ldb, beta, C, tc, ldc, NULL,
             NULL);
    if (pre_gelu) op->gelu_bwd(be, C, pre_gelu, C, M, N);
    if (dbias) op->bias_bwd(be, dbias, B, K, N);
}
