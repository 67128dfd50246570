/* test_emu_sched.cu: the emulator's blocks, barriers, shared memory, indices and warp collectives
 * against hand-computed results; the launch errors where a GPU would hang or corrupt memory
 * (divergent __syncthreads, warp collectives that never complete, dynamic shared memory out of
 * bounds, stack overflow), sm_90's launch limits, speed, and results that do not depend on
 * GK_EMU_THREADS (GPT_EMU_ORDER's orders: test_emu_order.cu). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/emu/emu_test.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* out[block] = the sum of the block's 256 values, by a shared-memory tree. */
__global__ void block_sum(const float *in, float *out, int n)
{
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

static void test_block_reduction(void)
{
    enum { n = 1000, blocks = 4 };
    float h[n], sums[blocks];
    for (int i = 0; i < n; i++) h[i] = (float)i;
    float *in = to_dev(h, n), *out = to_dev<float>(NULL, blocks);
    GK_LAUNCH(block_sum, blocks, 256, 0, 0, in, out, n);
    CUDA_OK(cudaGetLastError());
    to_host(sums, out, blocks);
    /* sums of 0..255, 256..511, .., 768..999 */
    const float want[blocks] = {32640, 98176, 163712, 204972};
    for (int b = 0; b < blocks; b++)
        CHECKF(sums[b] == want[b], "block %d: %g, want %g", b, sums[b], want[b]);
    cudaFree(in);
    cudaFree(out);
}

/* Every thread rotates a ring through shared memory `steps` times: two barriers per step. */
__global__ void rotate(int *out, int steps)
{
    __shared__ int ring[1024];
    int t = threadIdx.x, n = blockDim.x, v = t * 7;
    for (int s = 0; s < steps; s++) {
        ring[t] = v;
        __syncthreads();
        v = ring[(t + 1) % n];
        __syncthreads();
    }
    out[blockIdx.x * n + t] = v;
}

static void test_barriers_order(void)
{
    enum { n = 1024, blocks = 3, steps = 5 };
    static int h[n * blocks];
    int *out = to_dev<int>(NULL, n * blocks);
    GK_LAUNCH(rotate, blocks, n, 0, 0, out, (int)steps);
    CUDA_OK(cudaGetLastError());
    to_host(h, out, n * blocks);
    int bad = 0;
    for (int i = 0; i < n * blocks; i++) bad += h[i] != (i % n + steps) % n * 7;
    CHECKF(bad == 0, "%d wrong values", bad);
    cudaFree(out);
}

__global__ void write_ids(unsigned *out)
{
    unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    out[bid * blockDim.x * blockDim.y * blockDim.z + tid] = threadIdx.x | threadIdx.y << 4 |
                                                            threadIdx.z << 8 | blockIdx.x << 12 |
                                                            blockIdx.y << 16 | blockIdx.z << 20;
}

static void test_indices(void)
{
    enum { tx = 8, ty = 4, tz = 2, bx = 3, by = 2, bz = 2, total = tx * ty * tz * bx * by * bz };
    unsigned h[total];
    unsigned *out = to_dev<unsigned>(NULL, total);
    GK_LAUNCH(write_ids, dim3(bx, by, bz), dim3(tx, ty, tz), 0, 0, out);
    CUDA_OK(cudaGetLastError());
    to_host(h, out, total);
    int bad = 0;
    for (unsigned i = 0; i < total; i++) {
        unsigned t = i % (tx * ty * tz), b = i / (tx * ty * tz);
        unsigned want = t % tx | t / tx % ty << 4 | t / (tx * ty) << 8 | b % bx << 12 |
                        b / bx % by << 16 | b / (bx * by) << 20;
        bad += h[i] != want;
    }
    CHECKF(bad == 0, "%d wrong ids", bad);
    cudaFree(out);
}

__global__ void shuffles(int *out, double *dbl)
{
    int t = threadIdx.x, n = blockDim.x, v = t;
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    out[0 * n + t] = v;
    out[1 * n + t] = __shfl_down_sync(0xffffffffu, t * 10, 3);
    out[2 * n + t] = __shfl_up_sync(0xffffffffu, t, 2, 8);
    out[3 * n + t] = __shfl_sync(0xffffffffu, t, 3, 16);
    out[4 * n + t] = __shfl_xor_sync(0xffffffffu, t, 8, 8);
    out[5 * n + t] = __shfl_down_sync(0xffffffffu, t, 2, 16);
    out[6 * n + t] = __shfl_sync(0xffffffffu, t, 35); /* source lane 35 % 32 */
    dbl[t] = __shfl_sync(0xffffffffu, t + 0.5, 31);
}

static void test_shuffles(void)
{
    enum { n = 64 };
    int h[7 * n];
    double hd[n];
    int *out = to_dev<int>(NULL, 7 * n);
    double *dbl = to_dev<double>(NULL, n);
    GK_LAUNCH(shuffles, 1, n, 0, 0, out, dbl);
    CUDA_OK(cudaGetLastError());
    to_host(h, out, 7 * n);
    to_host(hd, dbl, n);
    for (int t = 0; t < n; t++) {
        int lane = t % 32, warp_sum = 496 + (t / 32) * 32 * 32; /* 0+..+31, 32+..+63 */
        CHECKF(h[t] == warp_sum, "xor sum at %d: %d", t, h[t]);
        CHECKF(h[n + t] == (lane < 29 ? t + 3 : t) * 10, "down at %d: %d", t, h[n + t]);
        CHECKF(h[2 * n + t] == (lane % 8 >= 2 ? t - 2 : t), "up width 8 at %d: %d", t,
               h[2 * n + t]);
        CHECKF(h[3 * n + t] == (t & ~15) + 3, "broadcast width 16 at %d: %d", t, h[3 * n + t]);
        CHECKF(h[4 * n + t] == (lane & 8 ? t - 8 : t), "xor 8 width 8 at %d: %d", t, h[4 * n + t]);
        CHECKF(h[5 * n + t] == (lane % 16 < 14 ? t + 2 : t), "down width 16 at %d: %d", t,
               h[5 * n + t]);
        CHECKF(h[6 * n + t] == (t & ~31) + 3, "source lane 35 at %d: %d", t, h[6 * n + t]);
        CHECKF(hd[t] == (t & ~31) + 31.5, "double broadcast at %d: %g", t, hd[t]);
    }
    cudaFree(out);
    cudaFree(dbl);
}

/* Lanes are the linear thread id % 32: in a (16,4) block lane ^ 16 is the next row (y ^ 1). */
__global__ void warp_of_2d_block(int *out)
{
    out[threadIdx.y * blockDim.x + threadIdx.x] =
        __shfl_xor_sync(0xffffffffu, (int)threadIdx.y, 16);
}

static void test_warps_of_2d_block(void)
{
    int h[64], *out = to_dev<int>(NULL, 64);
    GK_LAUNCH(warp_of_2d_block, 1, dim3(16, 4), 0, 0, out);
    CUDA_OK(cudaGetLastError());
    to_host(h, out, 64);
    for (int i = 0; i < 64; i++) CHECKF(h[i] == ((i / 16) ^ 1), "at %d: %d", i, h[i]);
    cudaFree(out);
}

__global__ void votes(unsigned *out)
{
    int t = threadIdx.x, n = blockDim.x, lane = t % 32;
    out[0 * n + t] = __ballot_sync(0xffffffffu, lane % 3 == 0);
    out[1 * n + t] = __any_sync(0xffffffffu, t == 40);
    out[2 * n + t] = __all_sync(0xffffffffu, t < 40);
    out[3 * n + t] = lane < 16 ? __ballot_sync(0x0000ffffu, lane & 1) : 7u;
    __syncwarp();
    out[4 * n + t] = __activemask();
    out[5 * n + t] = lane < 20 ? __activemask() : 0; /* the other lanes exit */
}

static void test_votes(void)
{
    enum { n = 64 };
    unsigned h[6 * n], *out = to_dev<unsigned>(NULL, 6 * n);
    GK_LAUNCH(votes, 1, n, 0, 0, out);
    CUDA_OK(cudaGetLastError());
    to_host(h, out, 6 * n);
    for (int t = 0; t < n; t++) {
        CHECKF(h[t] == 0x49249249u, "ballot at %d: %08x", t, h[t]);
        CHECKF(h[n + t] == (t >= 32), "any at %d: %u", t, h[n + t]);
        CHECKF(h[2 * n + t] == (t < 32), "all at %d: %u", t, h[2 * n + t]);
        CHECKF(h[3 * n + t] == (t % 32 < 16 ? 0xaaaau : 7u), "half-warp ballot at %d: %08x", t,
               h[3 * n + t]);
        CHECKF(h[4 * n + t] == 0xffffffffu, "activemask at %d: %08x", t, h[4 * n + t]);
        CHECKF(h[5 * n + t] == (t % 32 < 20 ? 0xfffffu : 0u), "divergent activemask at %d: %08x", t,
               h[5 * n + t]);
    }
    cudaFree(out);
}

__global__ void dyn_smem_sum(float *out, int count)
{
    GK_DYN_SMEM(float, s);
    for (int i = threadIdx.x; i < count; i += blockDim.x) s[i] = (float)i;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0;
        for (int i = 0; i < count; i++) sum += s[i];
        out[blockIdx.x] = sum;
    }
}

static void test_dynamic_smem(void)
{
    enum { blocks = 64 };
    float h[blocks], *out = to_dev<float>(NULL, blocks);
    GK_LAUNCH(dyn_smem_sum, blocks, 32, 100 * sizeof(float), 0, out, 100);
    CUDA_OK(cudaGetLastError());
    to_host(h, out, blocks);
    for (int b = 0; b < blocks; b++) CHECKF(h[b] == 4950.0f, "block %d: %g", b, h[b]);
    cudaFree(out);
}

#if defined(GK_CUDA_EMU)
__global__ void divergent_barrier(int *out)
{
    if (threadIdx.x < 16) __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void warp_lanes_exit(int *out)
{
    if (threadIdx.x % 32 >= 16) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

__global__ void warp_vs_barrier(int *out)
{
    int v = threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    else __syncthreads();
    out[threadIdx.x] = v;
}

__global__ void mask_without_caller(int *out)
{
    out[threadIdx.x] = __shfl_sync(0x1u, (int)threadIdx.x, 0);
}

/* Lane 0 waits for lane 1 with mask 0x3, lane 1 goes on with a shuffle of its own (mask 0x2). */
__global__ void masks_disagree(int *out)
{
    unsigned lane = threadIdx.x % 32;
    if (lane == 0) out[0] = __shfl_sync(0x3u, 5, 1);
    if (lane == 1) out[1] = __shfl_sync(0x2u, 6, 1);
}

/* No dynamic parallelism: a launch from a kernel fails (and would need -rdc with nvcc). */
__global__ void nested_launch(int *out)
{
    if (threadIdx.x == 0) GK_LAUNCH(masks_disagree, 1, 32, 0, 0, out);
}

/* Lane 0 waits for lane 1 with mask 0x3, lane 1 waits for the whole warp. */
__global__ void masks_overlap(int *out)
{
    out[threadIdx.x] = __shfl_sync(threadIdx.x == 0 ? 0x3u : ~0u, 1, 0);
}

/* Launches kernel on `blocks` blocks of 32 and checks the error names it and the words. */
#define EXPECT_FAULT(kernel, blocks, w1, w2)                                                 \
    do {                                                                                     \
        int *out_ = to_dev<int>(NULL, 64 * 32);                                              \
        double t0_ = now_s();                                                                \
        GK_LAUNCH(kernel, blocks, 32, 0, 0, out_);                                           \
        const char *words_[] = {"'" #kernel "'", w1, w2};                                    \
        CHECKF(launch_failed_with(cudaErrorLaunchFailure, words_, 3), "%s", #kernel);        \
        CHECKF(now_s() - t0_ < 10, "%s took %.1f s", #kernel, now_s() - t0_);               \
        CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure); /* sticky, as a fault */   \
        CUDA_OK(cudaDeviceReset());                                                          \
        cudaFree(out_);                                                                      \
    } while (0)

static void test_barrier_and_warp_errors(void)
{
    EXPECT_FAULT(divergent_barrier, 1, "__syncthreads is not reached by thread (16,0,0)", "exited");
    EXPECT_FAULT(divergent_barrier, 64, "block (0,0,0)", "exited");
    EXPECT_FAULT(warp_lanes_exit, 1, "__shfl_xor_sync (mask 0xffffffff) never completes",
                 "lane 16, thread (16,0,0), exited");
    EXPECT_FAULT(warp_vs_barrier, 1, "__shfl_xor_sync", "waits at __syncthreads");
    EXPECT_FAULT(mask_without_caller, 1, "leaves out the calling lane 1", "thread (1,0,0)");
    EXPECT_FAULT(masks_disagree, 1, "__shfl_sync (mask 0x00000003) never completes",
                 "lane 1, thread (1,0,0), exited");
    EXPECT_FAULT(masks_overlap, 1, "warp collectives do not match",
                 "lane 0 at __shfl_sync (mask 0x00000003)");
    int *out = to_dev<int>(NULL, 32);
    GK_LAUNCH(nested_launch, 1, 32, 0, 0, out);
    const char *nested[] = {"masks_disagree", "launched from a kernel"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, nested, 2));
    CUDA_OK(cudaDeviceReset());
    cudaFree(out);
    test_block_reduction(); /* the emulator is fine afterwards */
}

static void test_smem_out_of_bounds(void)
{
    float *out = to_dev<float>(NULL, 64);
    GK_LAUNCH(dyn_smem_sum, 64, 32, 100 * sizeof(float), 0, out, 101);
    const char *words[] = {"dyn_smem_sum", "dynamic shared memory access out of bounds",
                           "0 bytes past the end"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, words, 3));
    CUDA_OK(cudaDeviceReset());
    GK_LAUNCH(dyn_smem_sum, 64, 32, 0, 0, out, 1); /* no dynamic shared memory at all */
    const char *none[] = {"dyn_smem_sum", "past the end of the 0 bytes"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, none, 2));
    CUDA_OK(cudaDeviceReset());
    test_dynamic_smem();
    cudaFree(out);
}

__device__ int deep(int depth)
{
    volatile char frame[2048];
    frame[0] = (char)depth;
    return depth ? deep(depth - 1) + frame[0] : 0;
}
__global__ void recurse(int *out, int depth) { out[threadIdx.x] = deep(depth); }
__global__ void wild_write(int *out) { out[threadIdx.x + (1 << 30)] = 1; }

static void test_other_faults(void)
{
    int *out = to_dev<int>(NULL, 32);
    GK_LAUNCH(recurse, 1, 32, 0, 0, out, 100000);
    const char *words[] = {"recurse", "thread stack overflow"};
    CHECK(launch_failed_with(cudaErrorLaunchFailure, words, 2));
    CUDA_OK(cudaDeviceReset());
    fflush(NULL);
    pid_t pid = fork(); /* any other fault still crashes the process */
    if (pid == 0) {
        freopen("/dev/null", "w", stderr); /* quiet: a sanitizer's report would read as a failure */
        GK_LAUNCH(wild_write, 1, 32, 0, 0, out);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
#if defined(__SANITIZE_ADDRESS__)
    CHECKF(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "status %x", status);
#else
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status %x", status);
#endif
    cudaFree(out);
}
#endif

__global__ void fill_smem(int *out, int bytes)
{
    GK_DYN_SMEM(unsigned char, s);
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) s[i] = (unsigned char)(i & 0xff);
    __syncthreads();
    if (threadIdx.x == 0) {
        int sum = 0;
        for (int i = 0; i < bytes; i++) sum += s[i];
        out[0] = sum;
    }
}

static void expect_config_error(cudaError_t e, const char *what)
{
#if defined(GK_CUDA_EMU)
    const char *words[] = {"fill_smem"};
    CHECKF(launch_failed_with(e, words, 1), "%s", what);
#else
    CHECKF(cudaGetLastError() == e, "%s", what);
#endif
}

static void test_launch_limits(void)
{
    int *out = to_dev<int>(NULL, 1), sum = 0;
    GK_LAUNCH(fill_smem, 1, 1025, 0, 0, out, 0);
    expect_config_error(cudaErrorInvalidConfiguration, "1025 threads");
    GK_LAUNCH(fill_smem, 1, dim3(32, 33), 0, 0, out, 0);
    expect_config_error(cudaErrorInvalidConfiguration, "32x33 threads");
    GK_LAUNCH(fill_smem, 1, dim3(1, 1, 65), 0, 0, out, 0);
    expect_config_error(cudaErrorInvalidConfiguration, "block z 65");
    GK_LAUNCH(fill_smem, dim3(1, 65536), 32, 0, 0, out, 0);
    expect_config_error(cudaErrorInvalidConfiguration, "grid y 65536");
    GK_LAUNCH(fill_smem, 1, 32, 48 * 1024 + 16, 0, out, 0);
    expect_config_error(cudaErrorInvalidValue, "48 KiB + 16 without the attribute");
    CUDA_OK(cudaDeviceSynchronize()); /* configuration errors are not sticky */
    CHECK(cudaFuncSetAttribute(fill_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               227 * 1024 + 1) == cudaErrorInvalidValue);
    cudaGetLastError();
    CUDA_OK(
        cudaFuncSetAttribute(fill_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    GK_LAUNCH(fill_smem, 1, 256, 100 * 1024, 0, out, 100 * 1024);
    CUDA_OK(cudaGetLastError());
    to_host(&sum, out, 1);
    CHECKF(sum == 400 * (255 * 256 / 2), "sum %d", sum); /* 400 runs of 0..255 */
    GK_LAUNCH(fill_smem, 1, 256, 100 * 1024 + 16, 0, out, 0);
    expect_config_error(cudaErrorInvalidValue, "above the attribute");
    GK_LAUNCH(fill_smem, 1, 256, 228 * 1024, 0, out, 0);
    expect_config_error(cudaErrorInvalidValue, "228 KiB");
    cudaFree(out);
}

__global__ void affine(float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * i + 1.0f;
}

static void test_speed(void)
{
    enum { n = 1 << 20 };
    float *h = (float *)malloc(n * sizeof(float)), *out = to_dev<float>(NULL, n),
          *sums = to_dev<float>(NULL, n / 256);
    double t0 = now_s();
    GK_LAUNCH(affine, n / 256, 256, 0, 0, out, (int)n);
    double t1 = now_s();
    CUDA_OK(cudaGetLastError());
    to_host(h, out, n);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != 2.0f * i + 1.0f;
    CHECKF(bad == 0, "%d wrong", bad);
    GK_LAUNCH(block_sum, n / 256, 256, 0, 0, out, sums, (int)n);
    double t2 = now_s();
    CUDA_OK(cudaGetLastError());
    fprintf(stderr, "  1M threads: %.3f s without barriers, %.3f s with 9 barriers each\n", t1 - t0,
            t2 - t1);
    CHECKF(t1 - t0 < 5.0, "a barrier-free kernel of 1M threads took %.2f s", t1 - t0);
    free(h);
    cudaFree(out);
    cudaFree(sums);
}

/* A digest of block sums and warp sums of 1M pseudo-random floats: bit-exact, whatever the
 * threads. */
__global__ void warp_sums(const float *in, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    for (int m = 1; m < 32; m <<= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    if (threadIdx.x % 32 == 0) out[i / 32] = v;
}

static int print_digest(void)
{
    enum { n = 1 << 20 };
    float *h = (float *)malloc(n * sizeof(float));
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) h[i] = (x = x * 1664525u + 1013904223u) / 4294967296.0f;
    float *in = to_dev(h, n), *out = to_dev<float>(NULL, n / 256 + n / 32);
    GK_LAUNCH(block_sum, n / 256, 256, 0, 0, in, out, (int)n);
    GK_LAUNCH(warp_sums, n / 128, 128, 0, 0, in, out + n / 256);
    if (cudaGetLastError() != cudaSuccess) return 1;
    to_host(h, out, n / 256 + n / 32);
    uint64_t d = 14695981039346656037ull;
    for (int i = 0; i < n / 256 + n / 32; i++) {
        uint32_t bits;
        memcpy(&bits, &h[i], 4);
        d = (d ^ bits) * 1099511628211ull;
    }
    printf("%016llx\n", (unsigned long long)d);
    free(h);
    cudaFree(in);
    cudaFree(out);
    return 0;
}

static void digest_with_threads(const char *self, int threads, char *out, size_t n)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "GK_EMU_THREADS=%d '%s' --digest", threads, self);
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(out, (int)n, p)) out[0] = 0;
    pclose(p);
}

static void test_threads_do_not_change_results(void)
{
    char self[4096], one[64], three[64];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) SKIP("no /proc/self/exe");
    self[len] = 0;
    digest_with_threads(self, 1, one, sizeof one);
    digest_with_threads(self, 3, three, sizeof three);
    CHECKF(one[0] && !strcmp(one, three), "1 thread: %s, 3 threads: %s", one, three);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--digest")) return print_digest();
    RUN(test_block_reduction);
    RUN(test_barriers_order);
    RUN(test_indices);
    RUN(test_shuffles);
    RUN(test_warps_of_2d_block);
    RUN(test_votes);
    RUN(test_dynamic_smem);
#if defined(GK_CUDA_EMU)
    RUN(test_barrier_and_warp_errors);
    RUN(test_smem_out_of_bounds);
    RUN(test_other_faults);
#endif
    RUN(test_launch_limits);
    RUN(test_speed);
    RUN(test_threads_do_not_change_results);
    return TEST_END();
}
