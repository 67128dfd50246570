/* test_emu_race.cu: the emulator's shared-memory race checker (kernels/emu/emu_race.cpp).
 * A block reduction called twice without the barrier between one call's reads of the partial
 * sums and the next call's writes (attention.cu's block_reduce without its first __syncthreads)
 * fails naming the kernel and the offset, in dynamic and in static __shared__ memory, and passes
 * with the barrier; a warp-local exchange ordered by __syncwarp passes, and fails without it or
 * when the exchange crosses warps (a __syncwarp orders the lanes of one warp only); a tile that
 * one warp reads by ldmatrix and another refills by cp.async without a barrier between (the
 * double-buffered loops of the fa2 kernels) fails too. The kernels are plain CUDA (nvcc compiles
 * them too); the race errors are the emulator's. */
#include "kernels/cuda/mma.h"
#include "tests/unit/emu/emu_test.h"

/* The race errors are the emulator's, when its build has the checker (one with SAN=1, which
 * excludes -fsanitize=thread, or by a compiler other than GCC has not: those parts skip, saying
 * so). nvcc checks only the results. */
#if defined(GK_CUDA_EMU) && defined(__SANITIZE_THREAD__)
#define RACE_CHECKED 1
#else
#define RACE_CHECKED 0
#endif
#if defined(GK_CUDA_EMU) && !RACE_CHECKED
#define SKIP_UNCHECKED() \
    SKIP("no race checker in this build (SAN=1 excludes its -fsanitize=thread; GCC only)")
#else
#define SKIP_UNCHECKED() ((void)0)
#endif

enum { kThreads = 256, kWarps = kThreads / 32 };

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The block's sum of v through red[kWarps]; barrier = 0 leaves out the barrier that keeps this
 * call's writes of red from the reads of a previous call. */
__device__ float block_sum(float v, float *red, int barrier)
{
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    v = warp_sum(v);
    if (barrier) __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = 0.0f;
    for (int w = 0; w < kWarps; w++) r += red[w];
    return r;
}

/* out[block] = the sum of in's block, then of its squares: two reductions in a row. */
__global__ void sums_dyn(const float *in, float *out, int barrier)
{
    GK_DYN_SMEM(float, red);
    float x = in[blockIdx.x * kThreads + threadIdx.x];
    float s = block_sum(x, red, barrier);
    float q = block_sum(x * x, red, barrier);
    if (threadIdx.x == 0) out[blockIdx.x * 2] = s, out[blockIdx.x * 2 + 1] = q;
}

__global__ void sums_static(const float *in, float *out, int barrier)
{
    __shared__ float partials[kWarps];
    float x = in[blockIdx.x * kThreads + threadIdx.x];
    float s = block_sum(x, partials, barrier);
    float q = block_sum(x * x, partials, barrier);
    if (threadIdx.x == 0) out[blockIdx.x * 2] = s, out[blockIdx.x * 2 + 1] = q;
}

/* Each lane of each warp writes its slot, then reads its partner's (lane ^ 1, or with cross the
 * same lane of the next warp) and writes its slot again: sync = 1 puts __syncwarp between. */
__global__ void exchange(int *out, int sync, int cross)
{
    __shared__ int slot[64];
    int t = threadIdx.x, partner = cross ? (t + 32) % 64 : t ^ 1;
    slot[t] = t * 10;
    if (sync) __syncwarp();
    int v = slot[partner];
    if (sync) __syncwarp();
    slot[t] = v + 1;
    if (sync) __syncwarp();
    out[t] = slot[t];
}

/* Warp 0 reads an 8 x 8 tile by ldmatrix; then warp 1 refills it by cp.async from src + 64,
 * with a barrier between when barrier = 1. out[0..31]: warp 0's fragments; out[32..95]: the
 * tile. */
__global__ void tile_refill(const unsigned short *src, uint32_t *out, int barrier)
{
    alignas(16) __shared__ unsigned short tile[64];
    int t = threadIdx.x, warp = t / 32, lane = t % 32;
    if (t < 8) cp_async16(&tile[t * 8], src + t * 8, 16);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if (warp == 0) {
        uint32_t r[1];
        ldmatrix<1, false>(r, &tile[(lane % 8) * 8]);
        out[lane] = r[0];
    }
    if (barrier) __syncthreads();
    if (warp == 1 && lane < 8) cp_async16(&tile[lane * 8], src + 64 + lane * 8, 16);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    out[32 + t] = tile[t];
}

static void run_sums(bool dyn, int barrier, const float *in, float *out)
{
    if (dyn) GK_LAUNCH(sums_dyn, 3, kThreads, kWarps * sizeof(float), 0, in, out, barrier);
    else GK_LAUNCH(sums_static, 3, kThreads, 0, 0, in, out, barrier);
}

static void check_sums(bool dyn)
{
    enum { n = 3 * kThreads };
    float h[n], got[6];
    for (int i = 0; i < n; i++) h[i] = (float)(i % 7) - 3.0f; /* small integers: exact sums */
    float *in = to_dev(h, n), *out = to_dev<float>(NULL, 6);
    run_sums(dyn, 1, in, out);
    CUDA_OK(cudaGetLastError());
    to_host(got, out, 6);
    for (int b = 0; b < 3; b++) {
        float s = 0, q = 0;
        for (int i = 0; i < kThreads; i++)
            s += h[b * kThreads + i], q += h[b * kThreads + i] * h[b * kThreads + i];
        CHECKF(got[2 * b] == s && got[2 * b + 1] == q, "block %d: %g %g, want %g %g", b, got[2 * b],
               got[2 * b + 1], s, q);
    }
#if RACE_CHECKED
    run_sums(dyn, 0, in, out);
    /* the second call's lane 0 of warp 0 writes red[0] that the first call's threads read */
    const char *dyn_words[] = {"kernel 'sums_dyn' block (0,0,0) thread (0,0,0)",
                               "shared memory race", "writes dynamic shared memory at offset 0",
                               "read in the same barrier interval"};
    const char *static_words[] =
        {"kernel 'sums_static' block (0,0,0) thread (0,0,0)", "shared memory race",
         "writes static __shared__ 'sums_static(float const*, float*, int)::partials' at offset 0",
         "read in the same barrier interval"};
    const char *const *words = dyn ? dyn_words : static_words;
    CHECK(launch_failed_with(cudaErrorLaunchFailure, words, 4));
    CUDA_OK(cudaDeviceReset());
#endif
    cudaFree(in);
    cudaFree(out);
    SKIP_UNCHECKED();
}

static void test_missing_barrier_dynamic(void) { check_sums(true); }
static void test_missing_barrier_static(void) { check_sums(false); }

static void test_warp_exchange(void)
{
    int got[64], *out = to_dev<int>(NULL, 64);
    GK_LAUNCH(exchange, 1, 64, 0, 0, out, 1, 0);
    CUDA_OK(cudaGetLastError());
    to_host(got, out, 64);
    int bad = 0;
    for (int t = 0; t < 64; t++) bad += got[t] != (t ^ 1) * 10 + 1;
    CHECKF(bad == 0, "%d wrong values", bad);
#if RACE_CHECKED
    GK_LAUNCH(exchange, 1, 64, 0, 0, out, 0, 0); /* lane 1's write after lane 0 read its slot */
    const char *unsynced[] = {"kernel 'exchange' block (0,0,0) thread (1,0,0)",
                              "writes static __shared__", "which thread (0,0,0) read",
                              "no __syncthreads or __syncwarp"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, unsynced, 4));
    CUDA_OK(cudaDeviceReset());
    GK_LAUNCH(exchange, 1, 64, 0, 0, out, 1, 1); /* __syncwarp does not order two warps */
    const char *crossed[] = {"kernel 'exchange'", "shared memory race",
                             "(no __syncthreads between"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, crossed, 3));
    CUDA_OK(cudaDeviceReset());
#endif
    cudaFree(out);
    SKIP_UNCHECKED();
}

static void test_tile_refill(void)
{
    unsigned short h[128];
    uint32_t got[96];
    for (int i = 0; i < 128; i++) h[i] = (unsigned short)(i + 1);
    unsigned short *src = to_dev(h, 128);
    uint32_t *out = to_dev<uint32_t>(NULL, 96);
    GK_LAUNCH(tile_refill, 1, 64, 0, 0, src, out, 1);
    CUDA_OK(cudaGetLastError());
    to_host(got, out, 96);
    int bad = 0;
    for (int l = 0; l < 32; l++) { /* lane l holds row l / 4, columns 2 (l % 4) and the next */
        int at = l / 4 * 8 + 2 * (l % 4);
        bad += got[l] != ((uint32_t)h[at] | (uint32_t)h[at + 1] << 16);
    }
    for (int i = 0; i < 64; i++) bad += got[32 + i] != h[64 + i];
    CHECKF(bad == 0, "%d wrong values", bad);
#if RACE_CHECKED
    GK_LAUNCH(tile_refill, 1, 64, 0, 0, src, out, 0);
    const char *words[] = {"kernel 'tile_refill'", "shared memory race", "static __shared__"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, words, 3));
    CUDA_OK(cudaDeviceReset());
#endif
    cudaFree(src);
    cudaFree(out);
    SKIP_UNCHECKED();
}

int main(void)
{
    RUN(test_missing_barrier_dynamic);
    RUN(test_missing_barrier_static);
    RUN(test_warp_exchange);
    RUN(test_tile_refill);
    return TEST_END();
}
