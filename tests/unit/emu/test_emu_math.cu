/* test_emu_math.cu: the emulator's atomics, bf16 conversions and operators, wmma fragments and
 * math intrinsics against hand-computed values and naive loops. */
#include <math.h>
#include <stdint.h>

#include "tests/unit/emu/emu_test.h"

/* ---- atomics from many blocks (run in parallel on the host thread pool) ---- */

__global__ void atomics(int *i, unsigned *u, unsigned long long *ull, float *f, double *d, int *mx,
                        int *mn, unsigned *umx, unsigned *umn, int *cas_counter, int *exch)
{
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(i, 1);
    atomicAdd(u, 2u);
    atomicAdd(ull, 1ull << 33);
    atomicAdd(f, 1.0f);
    atomicAdd(d, 0.5);
    atomicMax(mx, id);
    atomicMin(mn, -id);
    atomicMax(umx, (unsigned)id * 3u);
    atomicMin(umn, (unsigned)id + 5u);
    int old = *cas_counter, seen;
    while ((seen = atomicCAS(cas_counter, old, old + 1)) != old) old = seen; /* increment by CAS */
    atomicExch(exch, 7);
}

static void test_atomics(void)
{
    enum { blocks = 64, threads = 128, n = blocks * threads };
    int *i = to_dev<int>(NULL, 1), *mx = to_dev<int>(NULL, 1), *mn = to_dev<int>(NULL, 1);
    int *cas = to_dev<int>(NULL, 1), *exch = to_dev<int>(NULL, 1);
    unsigned *u = to_dev<unsigned>(NULL, 1), *umx = to_dev<unsigned>(NULL, 1),
             *umn = to_dev<unsigned>(NULL, 1);
    unsigned long long *ull = to_dev<unsigned long long>(NULL, 1);
    float *f = to_dev<float>(NULL, 1);
    double *d = to_dev<double>(NULL, 1);
    int zero = 0, big = 1 << 30;
    unsigned uzero = 0, ubig = ~0u;
    cudaMemcpy(i, &zero, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(mx, &zero, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(mn, &big, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(cas, &zero, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(exch, &zero, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(u, &uzero, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(umx, &uzero, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(umn, &ubig, 4, cudaMemcpyHostToDevice);
    CUDA_OK(cudaMemset(ull, 0, 8));
    CUDA_OK(cudaMemset(f, 0, 4));
    CUDA_OK(cudaMemset(d, 0, 8));
    GK_LAUNCH(atomics, blocks, threads, 0, 0, i, u, ull, f, d, mx, mn, umx, umn, cas, exch);
    CUDA_OK(cudaGetLastError());
    int hi, hmx, hmn, hcas, hexch;
    unsigned hu, humx, humn;
    unsigned long long hull;
    float hf;
    double hd;
    to_host(&hi, i, 1), to_host(&hmx, mx, 1), to_host(&hmn, mn, 1), to_host(&hcas, cas, 1);
    to_host(&hexch, exch, 1), to_host(&hu, u, 1), to_host(&humx, umx, 1), to_host(&humn, umn, 1);
    to_host(&hull, ull, 1), to_host(&hf, f, 1), to_host(&hd, d, 1);
    CHECKF(hi == n, "int add %d", hi);
    CHECKF(hu == 2u * n, "unsigned add %u", hu);
    CHECKF(hull == (unsigned long long)n << 33, "ull add %llu", hull);
    CHECKF(hf == (float)n, "float add %g", hf); /* integers below 2^24 add exactly in any order */
    CHECKF(hd == n * 0.5, "double add %g", hd);
    CHECKF(hmx == n - 1 && hmn == -(n - 1), "int max %d min %d", hmx, hmn);
    CHECKF(humx == 3u * (n - 1) && humn == 5u, "unsigned max %u min %u", humx, humn);
    CHECKF(hcas == n, "CAS increments %d", hcas);
    CHECKF(hexch == 7, "exch %d", hexch);
    cudaFree(i), cudaFree(mx), cudaFree(mn), cudaFree(cas), cudaFree(exch), cudaFree(u),
        cudaFree(umx);
    cudaFree(umn), cudaFree(ull), cudaFree(f), cudaFree(d);
}

/* ---- bf16 ---- */

static uint16_t bits_of(__nv_bfloat16 h)
{
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

__global__ void bf16_round_trip(const float *in, __nv_bfloat16 *mid, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        mid[i] = __float2bfloat16(in[i]);
        out[i] = __bfloat162float(mid[i]);
    }
}

static const struct Bf16Case {
    uint32_t in;
    uint16_t want;
} bf16_cases[] = {
    {0x3f800000u, 0x3f80}, /* 1 */
    {0x3f808000u, 0x3f80}, /* 1 + 2^-8: a tie, to the even 1 */
    {0x3f818000u, 0x3f82}, /* a tie, to the even 0x3f82 */
    {0x3f808001u, 0x3f81}, /* just above the tie */
    {0x3f80ffffu, 0x3f81}, /* just below 1 + 2^-7 */
    {0xbf808000u, 0xbf80}, /* negative tie */
    {0x80000000u, 0x8000}, /* -0 */
    {0x7f800000u, 0x7f80}, /* inf */
    {0x7f7fffffu, 0x7f80}, /* the largest float rounds to inf */
    {0x00000001u, 0x0000}, /* the smallest subnormal rounds to 0 */
    {0x00018000u, 0x0002}, /* a subnormal tie, to even */
};

static void test_bf16(void)
{
    enum { ncase = sizeof bf16_cases / sizeof bf16_cases[0], n = ncase + 3 };
    float in[n], out[n];
    for (int i = 0; i < ncase; i++) in[i] = float_of_bits(bf16_cases[i].in);
    in[ncase] = float_of_bits(0x7f800001u);     /* a NaN whose payload would round to inf */
    in[ncase + 1] = float_of_bits(0xffffffffu); /* a negative NaN that would carry out */
    in[ncase + 2] = NAN;
    for (int i = 0; i < ncase; i++) {
        uint16_t got = bits_of(__float2bfloat16(in[i]));
        CHECKF(got == bf16_cases[i].want, "host %08x -> %04x, want %04x", bf16_cases[i].in, got,
               bf16_cases[i].want);
    }
    float *d_in = to_dev(in, n), *d_out = to_dev<float>(NULL, n);
    __nv_bfloat16 *mid = to_dev<__nv_bfloat16>(NULL, n);
    GK_LAUNCH(bf16_round_trip, 1, 32, 0, 0, d_in, mid, d_out, (int)n);
    CUDA_OK(cudaGetLastError());
    to_host(out, d_out, n);
    for (int i = 0; i < ncase; i++) {
        uint32_t want = (uint32_t)bf16_cases[i].want << 16, got;
        memcpy(&got, &out[i], 4);
        CHECKF(got == want, "device %08x -> %08x, want %08x", bf16_cases[i].in, got, want);
    }
    for (int i = ncase; i < n; i++)
        CHECKF(isnan(out[i]), "NaN %d came back as %g", i - ncase, out[i]);
    CHECK(isnan(__bfloat162float(__float2bfloat16(in[ncase]))));
    __nv_bfloat162 two = __floats2bfloat162_rn(1.5f, -2.25f);
    CHECK(__low2float(two) == 1.5f && __high2float(two) == -2.25f);
    __nv_bfloat162 dup = __bfloat162bfloat162(__float2bfloat16(3.0f));
    CHECK(__low2float(dup) == 3.0f && __high2float(dup) == 3.0f);
    CHECK(sizeof(__nv_bfloat16) == 2 && sizeof(__nv_bfloat162) == 4);
    /* 2^-8 */
    __nv_bfloat16 a = __float2bfloat16(1.0f), b = __float2bfloat16(float_of_bits(0x3b800000u));
    CHECK(bits_of(a + b) == 0x3f80); /* 1 + 2^-8 rounds back to 1: bf16 arithmetic rounds */
    CHECK(__bfloat162float(a * __float2bfloat16(3.0f)) == 3.0f);
    CHECK(__bfloat162float(a - __float2bfloat16(3.0f)) == -2.0f);
    CHECK(a < __float2bfloat16(2.0f) && a == __float2bfloat16(1.0f) && !(a > a));
    cudaFree(d_in), cudaFree(d_out), cudaFree(mid);
}

/* ---- wmma ---- */

using namespace nvcuda;

/* D (16x16, row-major, ldd) = A B + C with A row- or col-major and B row- or col-major in memory,
 * C loaded row-major, times `scale` applied elementwise to the accumulator's .x[]. One warp. */
template <class LA, class LB>
__global__ void wmma_tile(const __nv_bfloat16 *A, const __nv_bfloat16 *B, const float *C, float *D,
                          int ld, float scale, int store_col_major)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LA> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LB> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(a, A, ld);
    wmma::load_matrix_sync(b, B, ld);
    wmma::load_matrix_sync(acc, C, ld, wmma::mem_row_major);
    wmma::mma_sync(acc, a, b, acc);
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= scale;
    wmma::store_matrix_sync(D, acc, ld,
                            store_col_major ? wmma::mem_col_major : wmma::mem_row_major);
}

template <class LA, class LB> static void check_wmma(bool a_col, bool b_col, bool d_col)
{
    enum { ld = 24 }; /* a leading dimension wider than the tile */
    static float hA[16 * ld], hB[16 * ld], hC[16 * ld], hD[16 * ld];
    __nv_bfloat16 bA[16 * ld], bB[16 * ld];
    for (int i = 0; i < 16 * ld; i++) {
        hA[i] = (float)((i * 7) % 11 - 5), hB[i] = (float)((i * 5) % 13 - 6),
        hC[i] = (float)(i % 9);
        bA[i] = __float2bfloat16(hA[i]), bB[i] = __float2bfloat16(hB[i]);
    }
    __nv_bfloat16 *A = to_dev(bA, 16 * ld), *B = to_dev(bB, 16 * ld);
    float *C = to_dev(hC, 16 * ld), *D = to_dev(hC, 16 * ld);
    GK_LAUNCH((wmma_tile<LA, LB>), 1, 32, 0, 0, A, B, C, D, (int)ld, 2.0f, (int)d_col);
    CUDA_OK(cudaGetLastError());
    to_host(hD, D, 16 * ld);
    int bad = 0;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            float want = hC[r * ld + c];
            for (int k = 0; k < 16; k++)
                want += hA[a_col ? k * ld + r : r * ld + k] * hB[b_col ? c * ld + k : k * ld + c];
            want *= 2.0f;
            float got = hD[d_col ? c * ld + r : r * ld + c];
            if (got != want && bad++ < 3)
                fprintf(stderr, "  (%d,%d): %g, want %g\n", r, c, got, want);
        }
    CHECKF(bad == 0, "A %s, B %s, D %s: %d wrong", a_col ? "col" : "row", b_col ? "col" : "row",
           d_col ? "col" : "row", bad);
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(D);
}

static void test_wmma(void)
{
    check_wmma<wmma::row_major, wmma::row_major>(false, false, false);
    check_wmma<wmma::row_major, wmma::col_major>(false, true, false);
    check_wmma<wmma::col_major, wmma::row_major>(true, false, true);
    check_wmma<wmma::col_major, wmma::col_major>(true, true, true);
}

/* One lane holds 8 of the 256 elements, each in exactly one lane: the fragment's sum over the warp
 * is the tile's sum, while a lane's own .x[] sum is not. */
__global__ void fragment_ownership(const float *C, float *out)
{
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, C, 16, wmma::mem_row_major);
    float mine = 0;
    for (int i = 0; i < acc.num_elements; i++) mine += acc.x[i];
    out[threadIdx.x] = mine;
    out[32] = acc.num_elements;
}

#if defined(GK_CUDA_EMU)
__global__ void wmma_from_one_lane(const float *C, float *D)
{
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    /* a lane cannot do it alone */
    if (threadIdx.x == 0) wmma::load_matrix_sync(acc, C, 16, wmma::mem_row_major);
    wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
}
/* The lanes write a tile (a stripe each) and load it as a fragment: with the __syncwarp that must
 * come between, or (the race) without it. out[lane] = how many of its 8 entries it saw written. */
__global__ void load_after_write(float *tile, int *out, int sync)
{
    for (int i = threadIdx.x; i < 256; i += 32) tile[i] = 0.0f;
    __syncwarp();
    for (int i = threadIdx.x; i < 256; i += 32) tile[i] = 1.0f;
    if (sync) __syncwarp();
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, tile, 16, wmma::mem_row_major);
    int seen = 0;
    for (int e = 0; e < acc.num_elements; e++) seen += acc.x[e] == 1.0f;
    out[threadIdx.x] = seen;
}

/* Each lane reads back the whole tile it stored with the warp: with the __syncwarp that must
 * follow a store, or (the race) without it. out[lane] = how many entries it saw stored. */
__global__ void read_after_store(float *tile, int *out, int sync)
{
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 1.0f);
    for (int i = threadIdx.x; i < 256; i += 32) tile[i] = 0.0f;
    __syncwarp();
    wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
    if (sync) __syncwarp();
    int seen = 0;
    for (int i = 0; i < 256; i++) seen += tile[i] == 1.0f;
    out[threadIdx.x] = seen;
}
#endif

static void test_wmma_fragments(void)
{
    float h[256], out[33];
    for (int i = 0; i < 256; i++) h[i] = (float)i;
    float *C = to_dev(h, 256), *o = to_dev<float>(NULL, 256); /* wmma_from_one_lane stores a tile */
    GK_LAUNCH(fragment_ownership, 1, 32, 0, 0, C, o);
    CUDA_OK(cudaGetLastError());
    to_host(out, o, 33);
    double total = 0;
    for (int l = 0; l < 32; l++) total += out[l];
    CHECKF(total == 255 * 256 / 2, "sum over lanes %g", total);
    CHECKF(out[32] == 8, "num_elements %g", out[32]);
    CHECK(out[0] != out[31]); /* lanes hold different elements */
#if defined(GK_CUDA_EMU)
    GK_LAUNCH(wmma_from_one_lane, 1, 32, 0, 0, C, o);
    const char *words[] = {"wmma_from_one_lane", "wmma::"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, words, 2));
    CUDA_OK(cudaDeviceReset());
    GK_LAUNCH(fragment_ownership, 1, 32, 0, 0, C + 1, o); /* 4-byte aligned only: a GPU needs 32 */
    const char *align[] = {"fragment_ownership", "not 32-byte aligned"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, align, 2));
    CUDA_OK(cudaDeviceReset());
    /* wmma orders no memory between lanes: a missing __syncwarp shows (emu_wmma.h) */
    int seen[32], *d_seen = to_dev<int>(NULL, 32);
    for (int sync = 1; sync >= 0; sync--) {
        int full_loads = 0, full_reads = 0;
        GK_LAUNCH(load_after_write, 1, 32, 0, 0, o, d_seen, sync);
        CUDA_OK(cudaGetLastError());
        to_host(seen, d_seen, 32);
        for (int l = 0; l < 32; l++) full_loads += seen[l] == 8;
        GK_LAUNCH(read_after_store, 1, 32, 0, 0, o, d_seen, sync);
        CUDA_OK(cudaGetLastError());
        to_host(seen, d_seen, 32);
        for (int l = 0; l < 32; l++) full_reads += seen[l] == 256;
        if (sync) {
            CHECKF(full_loads == 32, "with __syncwarp: %d of 32 lanes loaded what the others wrote",
                   full_loads);
            CHECKF(full_reads == 32, "with __syncwarp: %d of 32 lanes read what the others stored",
                   full_reads);
        } else {
            CHECKF(full_loads < 32, "without __syncwarp every lane loaded what "
                                    "the others wrote: the race is hidden");
            CHECKF(full_reads < 32,
                   "without __syncwarp every lane read what the others stored: the race is hidden");
        }
    }
    cudaFree(d_seen);
#endif
    cudaFree(C), cudaFree(o);
}

/* ---- math ---- */

__global__ void math_fns(const float *x, float *out)
{
    float v = x[threadIdx.x];
    float *o = out + 12 * threadIdx.x;
    o[0] = expf(v), o[1] = __expf(v), o[2] = logf(v + 2.0f), o[3] = __logf(v + 2.0f);
    o[4] = rsqrtf(v + 2.0f), o[5] = tanhf(v), o[6] = __fdividef(v, 3.0f),
    o[7] = __frcp_rn(v + 2.0f);
    o[8] = fmaxf(v, 0.25f), o[9] = (float)max((int)v, 1), o[10] = (float)min((int)v, 1);
    o[11] = isinf(v * INFINITY) ? 1.0f : 0.0f;
}

static void test_math(void)
{
    float x[4] = {-1.5f, 0.0f, 0.5f, 3.0f}, out[48];
    float *dx = to_dev(x, 4), *o = to_dev<float>(NULL, 48);
    GK_LAUNCH(math_fns, 1, 4, 0, 0, dx, o);
    CUDA_OK(cudaGetLastError());
    to_host(out, o, 48);
    for (int t = 0; t < 4; t++) {
        float v = x[t], *g = out + 12 * t;
        float want[12] = {expf(v),
                          expf(v),
                          logf(v + 2),
                          logf(v + 2),
                          1 / sqrtf(v + 2),
                          tanhf(v),
                          v / 3,
                          1 / (v + 2),
                          v > 0.25f ? v : 0.25f,
                          (float)((int)v > 1 ? (int)v : 1),
                          (float)((int)v < 1 ? (int)v : 1),
                          v != 0 ? 1.0f : 0.0f};
        for (int k = 0; k < 12; k++)
            CHECKF(fabsf(g[k] - want[k]) <= 2e-6f * fabsf(want[k]), "x %g fn %d: %g, want %g", v, k,
                   g[k], want[k]);
    }
    cudaFree(dx), cudaFree(o);
}

int main(void)
{
    RUN(test_atomics);
    RUN(test_bf16);
    RUN(test_wmma);
    RUN(test_wmma_fragments);
    RUN(test_math);
    return TEST_END();
}
