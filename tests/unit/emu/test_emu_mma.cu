/* test_emu_mma.cu: the warp-level primitives of kernels/cuda/mma.h (mma.m16n8k16 bf16, ldmatrix
 * .x1/.x2/.x4 and .trans, cp.async) under the emulator, against plain loops on the host. Each
 * lane builds or reads its registers with the lane layouts of the PTX ISA, written out here as
 * the documentation states them (not through the emulator's code); then the accumulator-to-A
 * fragment reuse of FlashAttention-2 (P = S in registers), cp.async's groups (under the emulator
 * the destination is written at the wait: a read before it sees the old bytes), ex2.approx.ftz,
 * and the launch errors. */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/mma.h"
#include "tests/unit/emu/emu_test.h"

/* The PTX ISA's fragments of mma.m16n8k16 (lane = 4g + t; register i, half h; C element i). */
__device__ __forceinline__ int a_row(int lane, int i) { return lane / 4 + 8 * (i % 2); }
__device__ __forceinline__ int a_col(int lane, int i, int h)
{
    return 2 * (lane % 4) + h + 8 * (i / 2);
}
__device__ __forceinline__ int b_row(int lane, int i, int h) { return 2 * (lane % 4) + h + 8 * i; }
__device__ __forceinline__ int c_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
__device__ __forceinline__ int c_col(int lane, int i) { return 2 * (lane % 4) + i % 2; }

static unsigned long long lcg = 0x9e3779b97f4a7c15ULL;
static float urand(void) /* uniform in [-1, 1) */
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(lcg >> 40) / 8388608.0f - 1.0f;
}
static void fill_bf16(__nv_bfloat16 *x, float *xf, int n)
{
    for (int i = 0; i < n; i++) x[i] = __float2bfloat16(urand()), xf[i] = __bfloat162float(x[i]);
}
/* |got - want| <= 1e-5 max|want| for n floats */
static void expect_close(const char *what, const float *got, const float *want, int n)
{
    double mx = 0;
    for (int i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-5 * mx)) bad = i;
    CHECKF(bad < 0, "%s: element %d is %.8g, want %.8g", what, bad, bad < 0 ? 0.0 : got[bad],
           bad < 0 ? 0.0 : want[bad]);
}

/* ---- mma from registers built by the documented layout ---- */

/* D (16,8) = A (16,16) B (16,8) + C, all row-major in global memory. */
__global__ void mma_tile(const __nv_bfloat16 *A, const __nv_bfloat16 *B, const float *C, float *D)
{
    int l = threadIdx.x;
    uint32_t a[4], b[2];
    float c[4], d[4];
    for (int i = 0; i < 4; i++)
        a[i] = pack_bf16x2(__bfloat162float(A[a_row(l, i) * 16 + a_col(l, i, 0)]),
                           __bfloat162float(A[a_row(l, i) * 16 + a_col(l, i, 1)]));
    for (int i = 0; i < 2; i++)
        b[i] = pack_bf16x2(__bfloat162float(B[b_row(l, i, 0) * 8 + l / 4]),
                           __bfloat162float(B[b_row(l, i, 1) * 8 + l / 4]));
    for (int i = 0; i < 4; i++) c[i] = C[c_row(l, i) * 8 + c_col(l, i)];
    mma_16816(d, a, b, c);
    for (int i = 0; i < 4; i++) D[c_row(l, i) * 8 + c_col(l, i)] = d[i];
}

/* S (16,16) = A B1 as two n8 tiles, P = bf16(S) as an A fragment straight from the accumulators
 * (registers 0, 1 from tile 0, 2, 3 from tile 1), D (16,8) = P B2. */
__global__ void mma_chain(const __nv_bfloat16 *A, const __nv_bfloat16 *B1, const __nv_bfloat16 *B2,
                          float *D)
{
    int l = threadIdx.x;
    uint32_t a[4], b[2], p[4];
    float s[2][4] = {}, d[4] = {};
    for (int i = 0; i < 4; i++)
        a[i] = pack_bf16x2(__bfloat162float(A[a_row(l, i) * 16 + a_col(l, i, 0)]),
                           __bfloat162float(A[a_row(l, i) * 16 + a_col(l, i, 1)]));
    for (int n = 0; n < 2; n++) {
        for (int i = 0; i < 2; i++)
            b[i] = pack_bf16x2(__bfloat162float(B1[b_row(l, i, 0) * 16 + n * 8 + l / 4]),
                               __bfloat162float(B1[b_row(l, i, 1) * 16 + n * 8 + l / 4]));
        mma_16816(s[n], a, b, s[n]);
    }
    for (int n = 0; n < 2; n++) {
        p[2 * n] = pack_bf16x2(s[n][0], s[n][1]);
        p[2 * n + 1] = pack_bf16x2(s[n][2], s[n][3]);
    }
    for (int i = 0; i < 2; i++)
        b[i] = pack_bf16x2(__bfloat162float(B2[b_row(l, i, 0) * 8 + l / 4]),
                           __bfloat162float(B2[b_row(l, i, 1) * 8 + l / 4]));
    mma_16816(d, p, b, d);
    for (int i = 0; i < 4; i++) D[c_row(l, i) * 8 + c_col(l, i)] = d[i];
}

static void test_mma(void)
{
    __nv_bfloat16 A[256], B[128], B1[256];
    float Af[256], Bf[128], B1f[256], C[128], want[128], got[128];
    fill_bf16(A, Af, 256), fill_bf16(B, Bf, 128), fill_bf16(B1, B1f, 256);
    for (int i = 0; i < 128; i++) C[i] = urand();
    __nv_bfloat16 *dA = to_dev(A, 256), *dB = to_dev(B, 128), *dB1 = to_dev(B1, 256);
    float *dC = to_dev(C, 128), *dD = to_dev<float>(NULL, 128);
    GK_LAUNCH(mma_tile, 1, 32, 0, 0, dA, dB, dC, dD);
    CUDA_OK(cudaGetLastError());
    to_host(got, dD, 128);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double acc = C[r * 8 + n];
            for (int k = 0; k < 16; k++) acc += (double)Af[r * 16 + k] * Bf[k * 8 + n];
            want[r * 8 + n] = (float)acc;
        }
    expect_close("mma.m16n8k16", got, want, 128);

    GK_LAUNCH(mma_chain, 1, 32, 0, 0, dA, dB1, dB, dD);
    CUDA_OK(cudaGetLastError());
    to_host(got, dD, 128);
    float P[256];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float acc = 0.0f; /* fp32 in k order, as the emulator and (to rounding) a GPU */
            for (int k = 0; k < 16; k++) acc += Af[r * 16 + k] * B1f[k * 16 + n];
            P[r * 16 + n] = __bfloat162float(__float2bfloat16(acc));
        }
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double acc = 0;
            for (int k = 0; k < 16; k++) acc += (double)P[r * 16 + k] * Bf[k * 8 + n];
            want[r * 8 + n] = (float)acc;
        }
    expect_close("accumulators as the next A fragment", got, want, 128);
    cudaFree(dA), cudaFree(dB), cudaFree(dB1), cudaFree(dC), cudaFree(dD);
}

/* ---- ldmatrix ---- */

#define LDS_ROWS 32
#define LDS_LD 24 /* b16 per shared row: 48 bytes, 16-byte aligned rows */

/* Lane l's row address: row (7l + 3) % 32, column 8 (l % 2): scattered, as a kernel may give. */
__device__ __host__ inline int lds_row(int l) { return (7 * l + 3) % LDS_ROWS; }
__device__ __host__ inline int lds_col(int l) { return 8 * (l % 2); }

template <int N, bool TRANS> __device__ void ldsm_one(const unsigned short *sm, uint32_t *out)
{
    int l = threadIdx.x;
    uint32_t r[4] = {0, 0, 0, 0};
    ldmatrix<N, TRANS>(r, sm + lds_row(l) * LDS_LD + lds_col(l));
    for (int i = 0; i < 4; i++) out[l * 4 + i] = r[i];
}

/* out (6 variants: x1, x2, x4, then .trans; 32 lanes, 4 registers) from M (LDS_ROWS, LDS_LD). */
__global__ void ldsm_all(const unsigned short *M, uint32_t *out)
{
    __shared__ uint4 raw[LDS_ROWS * LDS_LD / 8]; /* uint4: 16-byte aligned */
    unsigned short *sm = reinterpret_cast<unsigned short *>(raw);
    for (int i = threadIdx.x; i < LDS_ROWS * LDS_LD; i += 32) sm[i] = M[i];
    __syncthreads();
    ldsm_one<1, false>(sm, out);
    ldsm_one<2, false>(sm, out + 128);
    ldsm_one<4, false>(sm, out + 256);
    ldsm_one<1, true>(sm, out + 384);
    ldsm_one<2, true>(sm, out + 512);
    ldsm_one<4, true>(sm, out + 640);
}

/* D (16,8) = A (16,16, row-major) B, A by ldmatrix.x4, B twice: from Bt (8,16) = B^T row-major by
 * ldmatrix.x2 (as K rows for S = Q K^T) and from B (16,8) row-major by ldmatrix.x2.trans (as V
 * for O = P V); D1, D2. */
__global__ void ldsm_mma(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *D1, float *D2)
{
    __shared__ uint4 raw[(16 * 24 + 8 * 24 + 16 * 8) / 8];
    __nv_bfloat16 *a_s = reinterpret_cast<__nv_bfloat16 *>(raw), *bt_s = a_s + 16 * 24,
                  *b_s = bt_s + 8 * 24;
    int l = threadIdx.x;
    for (int i = l; i < 256; i += 32) a_s[i / 16 * 24 + i % 16] = A[i];
    for (int i = l; i < 128; i += 32) bt_s[i % 8 * 24 + i / 8] = B[i], b_s[i] = B[i];
    __syncthreads();
    uint32_t a[4], b[2];
    float d[4] = {};
    ldmatrix<4, false>(a, a_s + (l % 16) * 24 + (l / 16) * 8);
    ldmatrix<2, false>(b, bt_s + (l % 8) * 24 + (l / 8 % 2) * 8);
    mma_16816(d, a, b, d);
    for (int i = 0; i < 4; i++) D1[c_row(l, i) * 8 + c_col(l, i)] = d[i], d[i] = 0.0f;
    ldmatrix<2, true>(b, b_s + (l % 16) * 8);
    mma_16816(d, a, b, d);
    for (int i = 0; i < 4; i++) D2[c_row(l, i) * 8 + c_col(l, i)] = d[i];
}

static void test_ldmatrix(void)
{
    unsigned short M[LDS_ROWS * LDS_LD];
    for (int i = 0; i < LDS_ROWS * LDS_LD; i++) M[i] = (unsigned short)(i * 37 + 11);
    unsigned short *dM = to_dev(M, LDS_ROWS * LDS_LD);
    uint32_t *dout = to_dev<uint32_t>(NULL, 6 * 128), out[6 * 128];
    GK_LAUNCH(ldsm_all, 1, 32, 0, 0, dM, dout);
    CUDA_OK(cudaGetLastError());
    to_host(out, dout, 6 * 128);
    const int ns[3] = {1, 2, 4};
    for (int v = 0; v < 6; v++) {
        int n = ns[v % 3], trans = v >= 3, bad = 0;
        for (int l = 0; l < 32 && !bad; l++)
            for (int i = 0; i < 4 && !bad; i++) {
                /* matrix i row j: 8 b16 at lane 8i + j's address */
#define AT(j, c) M[lds_row(8 * i + (j)) * LDS_LD + lds_col(8 * i + (j)) + (c)]
                uint32_t want = 0;
                if (i < n)
                    want = trans ? (uint32_t)AT(2 * (l % 4), l / 4) |
                                       (uint32_t)AT(2 * (l % 4) + 1, l / 4) << 16
                                 : (uint32_t)AT(l / 4, 2 * (l % 4)) |
                                       (uint32_t)AT(l / 4, 2 * (l % 4) + 1) << 16;
#undef AT
                if (out[v * 128 + l * 4 + i] != want) {
                    bad = 1;
                    CHECKF(0, "ldmatrix.x%d%s lane %d register %d: 0x%08x, want 0x%08x", n,
                           trans ? ".trans" : "", l, i, out[v * 128 + l * 4 + i], want);
                }
            }
    }
    __nv_bfloat16 A[256], B[128];
    float Af[256], Bf[128], want[128], g1[128], g2[128];
    fill_bf16(A, Af, 256), fill_bf16(B, Bf, 128);
    __nv_bfloat16 *dA = to_dev(A, 256), *dB = to_dev(B, 128);
    float *d1 = to_dev<float>(NULL, 128), *d2 = to_dev<float>(NULL, 128);
    GK_LAUNCH(ldsm_mma, 1, 32, 0, 0, dA, dB, d1, d2);
    CUDA_OK(cudaGetLastError());
    to_host(g1, d1, 128), to_host(g2, d2, 128);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double acc = 0;
            for (int k = 0; k < 16; k++) acc += (double)Af[r * 16 + k] * Bf[k * 8 + n];
            want[r * 8 + n] = (float)acc;
        }
    expect_close("ldmatrix.x4 A, ldmatrix.x2 B^T rows", g1, want, 128);
    expect_close("ldmatrix.x4 A, ldmatrix.x2.trans B rows", g2, want, 128);
    cudaFree(dM), cudaFree(dout), cudaFree(dA), cudaFree(dB), cudaFree(d1), cudaFree(d2);
}

/* ---- cp.async ---- */

/* 64 threads: thread i copies chunk i (16 bytes) of src with 16, 8 or 0 source bytes (i % 3),
 * the rest zero-filled; dst = the shared copy after the wait. */
__global__ void cp_async_copy(const uint4 *src, uint4 *dst)
{
    __shared__ uint4 sm[64];
    int i = threadIdx.x;
    cp_async16(&sm[i], &src[i], i % 3 == 0 ? 16 : i % 3 == 1 ? 8 : 0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    dst[63 - i] = sm[63 - i];
}

static void test_cp_async(void)
{
    uint4 src[64], got[64];
    for (int i = 0; i < 64; i++) src[i] = make_uint4(4 * i + 1, 4 * i + 2, 4 * i + 3, 4 * i + 4);
    uint4 *ds = to_dev(src, 64), *dd = to_dev<uint4>(NULL, 64);
    GK_LAUNCH(cp_async_copy, 1, 64, 0, 0, ds, dd);
    CUDA_OK(cudaGetLastError());
    to_host(got, dd, 64);
    for (int i = 0; i < 64; i++) {
        uint4 w = src[i];
        if (i % 3 != 0) w.z = w.w = 0;
        if (i % 3 == 2) w.x = w.y = 0;
        CHECKF(got[i].x == w.x && got[i].y == w.y && got[i].z == w.z && got[i].w == w.w,
               "chunk %d: %u %u %u %u", i, got[i].x, got[i].y, got[i].z, got[i].w);
    }
    cudaFree(ds), cudaFree(dd);
}

/* One thread, two groups (chunk 0, then chunk 1) over zeroed shared memory: seen[k] = the two
 * chunks' first words before any wait (k = 0, 1), after wait<1> (2, 3) and after wait<0> (4, 5).
 * A GPU promises only the words after the waits that cover them (3 of chunk 0, 5 of both). */
__global__ void cp_async_groups(const uint4 *src, unsigned *seen)
{
    __shared__ uint4 sm[2];
    sm[0] = sm[1] = make_uint4(0, 0, 0, 0);
    cp_async16(&sm[0], &src[0], 16);
    cp_async_commit();
    cp_async16(&sm[1], &src[1], 16);
    cp_async_commit();
    seen[0] = sm[0].x, seen[1] = sm[1].x;
    cp_async_wait<1>();
    seen[2] = sm[0].x, seen[3] = sm[1].x;
    cp_async_wait<0>();
    seen[4] = sm[0].x, seen[5] = sm[1].x;
}

static void test_cp_async_groups(void)
{
    uint4 src[2] = {make_uint4(11, 0, 0, 0), make_uint4(22, 0, 0, 0)};
    unsigned seen[6];
    uint4 *ds = to_dev(src, 2);
    unsigned *dseen = to_dev<unsigned>(NULL, 6);
    GK_LAUNCH(cp_async_groups, 1, 1, 0, 0, ds, dseen);
    CUDA_OK(cudaGetLastError());
    to_host(seen, dseen, 6);
    CHECKF(seen[2] == 11 && seen[4] == 11 && seen[5] == 22, "after the waits: %u %u %u", seen[2],
           seen[4], seen[5]);
#if defined(GK_CUDA_EMU) /* the emulator writes at the wait: a missing one shows */
    CHECKF(seen[0] == 0 && seen[1] == 0 && seen[3] == 0,
           "before the waits: %u %u, after wait<1> %u", seen[0], seen[1], seen[3]);
#endif
    cudaFree(ds), cudaFree(dseen);
}

/* ex2.approx.ftz at values checked by hand: exact powers of two where 2^x is one (the PTX ISA
 * bounds the error at 2 ulp elsewhere), a subnormal result flushed to 0, -inf to 0. */
__global__ void ex2_values(const float *x, float *y, int n)
{
    int i = threadIdx.x;
    if (i < n) y[i] = ex2_ftz(x[i]);
}

static void test_ex2_ftz(void)
{
    const float x[] = {0.0f, 1.0f, -1.0f, 10.0f, -126.0f, -126.5f, -140.0f, -INFINITY, 0.5f,
                       -20.25f};
    const float want[] = {1.0f, 2.0f, 0.5f, 1024.0f, 0x1p-126f, 0.0f, 0.0f, 0.0f, 1.41421356f,
                          8.0194131e-7f};
    enum { N = sizeof x / sizeof x[0] };
    float got[N];
    float *dx = to_dev(x, N), *dy = to_dev<float>(NULL, N);
    GK_LAUNCH(ex2_values, 1, 32, 0, 0, dx, dy, N);
    CUDA_OK(cudaGetLastError());
    to_host(got, dy, N);
    for (int i = 0; i < N; i++) /* 2 ulp of the value, 0 and the powers of two exactly */
        CHECKF(i < 8 ? got[i] == want[i] : fabsf(got[i] - want[i]) <= 3e-7f * want[i],
               "ex2_ftz(%g) = %a, want %a", x[i], got[i], want[i]);
    cudaFree(dx), cudaFree(dy);
}

/* ---- errors a GPU would hang on or fault at (emulator only) ---- */

#if defined(GK_CUDA_EMU)
__global__ void mma_half_warp(float *D)
{
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float d[4] = {0, 0, 0, 0};
    if (threadIdx.x < 16) mma_16816(d, a, b, d); /* all 32 lanes must execute it */
    D[threadIdx.x] = d[0];
}
__global__ void mma_vs_ldmatrix(float *D)
{
    __shared__ uint4 raw[8];
    unsigned short *sm = reinterpret_cast<unsigned short *>(raw);
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float d[4] = {0, 0, 0, 0};
    for (int i = threadIdx.x; i < 64; i += 32) sm[i] = 0;
    __syncthreads();
    if (threadIdx.x < 16) mma_16816(d, a, b, d);
    else ldmatrix<1, false>(a, sm + threadIdx.x % 8 * 8);
    D[threadIdx.x] = d[0];
}
__global__ void ldmatrix_misaligned(float *D)
{
    __shared__ uint4 raw[16];
    unsigned short *sm = reinterpret_cast<unsigned short *>(raw);
    uint32_t r[1];
    for (int i = threadIdx.x; i < 128; i += 32) sm[i] = 0;
    __syncthreads();
    ldmatrix<1, false>(r, sm + threadIdx.x % 8 * 16 + 4); /* 8-byte aligned rows */
    D[threadIdx.x] = (float)r[0];
}
#endif

static void test_errors(void)
{
#if defined(GK_CUDA_EMU)
    float *D = to_dev<float>(NULL, 32);
    GK_LAUNCH(mma_half_warp, 1, 32, 0, 0, D);
    const char *w1[] = {"mma_half_warp", "mma.h warp primitive"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, w1, 2));
    CUDA_OK(cudaDeviceReset());
    GK_LAUNCH(mma_vs_ldmatrix, 1, 32, 0, 0, D);
    const char *w2[] = {"mma_vs_ldmatrix", "do not match", "mma.m16n8k16", "ldmatrix"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, w2, 4));
    CUDA_OK(cudaDeviceReset());
    GK_LAUNCH(ldmatrix_misaligned, 1, 32, 0, 0, D);
    const char *w3[] = {"ldmatrix_misaligned", "16-byte aligned"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, w3, 2));
    CUDA_OK(cudaDeviceReset());
    cudaFree(D);
#else
    SKIP("emulator only");
#endif
}

int main(void)
{
    RUN(test_mma);
    RUN(test_ldmatrix);
    RUN(test_cp_async);
    RUN(test_cp_async_groups);
    RUN(test_ex2_ftz);
    RUN(test_errors);
    return TEST_END();
}
