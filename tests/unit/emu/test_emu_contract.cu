/* test_emu_contract.cu: the kernels' sources are compiled with fused multiply-adds under the
 * emulator, as nvcc compiles them for a GPU. This file is built with the kernels' flags (the
 * Makefile's EMU_CUFLAGS): a * b + c in a kernel must round once. It fails on a build without
 * contraction (GK_EMU_CONTRACT=0) and skips, saying why, on a CPU without FMA, whose builds leave
 * it out (the Makefile warns then). Under nvcc it checks the GPU the same way. */
#include "tests/unit/emu/emu_test.h"

/* out[i] = a[i] * b[i] + c[i], which a compiler that contracts computes with one rounding. */
__global__ void mul_add(const float *a, const float *b, const float *c, float *out)
{
    int i = threadIdx.x;
    out[i] = a[i] * b[i] + c[i];
}

/* out[i] = a[i] * b[i] + c[i] with the product rounded first (__fmul_rn is never contracted). */
__global__ void mul_then_add(const float *a, const float *b, const float *c, float *out)
{
    int i = threadIdx.x;
    out[i] = __fmul_rn(a[i], b[i]) + c[i];
}

static void test_kernels_contract(void)
{
#if defined(GK_CUDA_EMU) && defined(__x86_64__)
    if (!__builtin_cpu_supports("fma"))
        SKIP("this CPU has no FMA: the emulator's kernels are built "
             "without fused multiply-adds (GK_EMU_CONTRACT=0)");
#endif
    /* (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: rounded, the 2^-24 (half an ulp, to even) is lost */
    const float e = 1.0f / 4096.0f;
    float a[2] = {1.0f + e, 3.0f}, b[2] = {1.0f + e, 5.0f}, c[2] = {-(1.0f + 2.0f * e), 1.0f};
    float fused[2], split[2];
    float *da = to_dev(a, 2), *db = to_dev(b, 2), *dc = to_dev(c, 2),
          *dout = to_dev<float>(NULL, 2);
    GK_LAUNCH(mul_add, 1, 2, 0, 0, da, db, dc, dout);
    CUDA_OK(cudaGetLastError());
    to_host(fused, dout, 2);
    GK_LAUNCH(mul_then_add, 1, 2, 0, 0, da, db, dc, dout);
    CUDA_OK(cudaGetLastError());
    to_host(split, dout, 2);
    CHECKF(fused[0] == e * e,
           "a * b + c = %a, want %a (one rounding): the .cu sources are compiled without "
           "contraction (GK_EMU_CONTRACT=0?)",
           fused[0], e * e);
    CHECKF(split[0] == 0.0f, "__fmul_rn(a, b) + c = %a, want 0 (the product rounded first)",
           split[0]);
    CHECKF(fused[1] == 16.0f && split[1] == 16.0f, "exact: %g %g, want 16", fused[1], split[1]);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dout);
}

int main(void)
{
    RUN(test_kernels_contract);
    return TEST_END();
}
