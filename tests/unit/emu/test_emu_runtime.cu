/* test_emu_runtime.cu: the emulator's runtime calls: copies and sets of every kind, streams and
 * events, the device's properties and attributes, errors (last, peek, sticky faults, detailed
 * messages), fault injection (GK_EMU_FAIL_MALLOC, GPT_EMU_FAIL_LAUNCH, GK_EMU_NO_DEVICE) and
 * the device's size (GPT_EMU_MEM). */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/emu/emu_test.h"

__global__ void add_one(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

static void test_copies(void)
{
    enum { n = 1000 };
    int h[n], back[n];
    for (int i = 0; i < n; i++) h[i] = i * 3;
    int *a = NULL, *b = NULL, *pinned = NULL;
    CUDA_OK(cudaMalloc(&a, n * sizeof(int)));
    CUDA_OK(cudaMalloc(&b, n * sizeof(int)));
    CUDA_OK(cudaMallocHost(&pinned, n * sizeof(int)));
    CUDA_OK(cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(b, a, sizeof h, cudaMemcpyDeviceToDevice));
    GK_LAUNCH(add_one, (n + 255) / 256, 256, 0, 0, b, (int)n);
    CUDA_OK(cudaGetLastError());
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMemcpyAsync(pinned, b, sizeof h, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++) CHECKF(pinned[i] == i * 3 + 1, "at %d: %d", i, pinned[i]);
    CUDA_OK(cudaMemsetAsync(b, 0x01, 8, s));
    CUDA_OK(cudaMemset(b + 2, 0, 4));
    CUDA_OK(cudaMemcpy(back, b, sizeof h, cudaMemcpyDefault));
    CHECK(back[0] == 0x01010101 && back[1] == 0x01010101 && back[2] == 0 && back[3] == 10);
    CUDA_OK(cudaMemcpy(back, h, sizeof h, cudaMemcpyHostToHost));
    CHECK(back[999] == 2997);
    CHECK(cudaMemcpy(back, a, 4, (cudaMemcpyKind)9) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaSuccess); /* read once */
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(b));
    CUDA_OK(cudaFreeHost(pinned));
    CUDA_OK(cudaFree(NULL));
#if defined(GK_CUDA_EMU)
    CHECK(cudaFree(h) == cudaErrorInvalidValue); /* not from cudaMalloc */
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidValue &&
          cudaGetLastError() == cudaErrorInvalidValue);
    float *poisoned = NULL;
    CUDA_OK(cudaMalloc(&poisoned, 16));
    float p0;
    to_host(&p0, poisoned, 1);
    CHECKF(isnan(p0), "fresh device memory reads %g, not NaN", p0); /* nothing to rely on */
    cudaFree(poisoned);
#endif
}

static void test_events(void)
{
    cudaEvent_t start, end, untimed;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&end));
    CUDA_OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    float ms = -1;
    CHECK(cudaEventElapsedTime(&ms, start, end) != cudaSuccess); /* not recorded yet */
    cudaGetLastError();
    CUDA_OK(cudaEventRecord(start, 0));
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CUDA_OK(cudaEventRecord(end));
    CUDA_OK(cudaEventSynchronize(end));
    CUDA_OK(cudaEventElapsedTime(&ms, start, end));
    CHECKF(ms >= 19.0f && ms < 5000.0f, "elapsed %g ms over a 20 ms sleep", ms);
    CUDA_OK(cudaEventRecord(untimed));
    CHECK(cudaEventElapsedTime(&ms, start, untimed) == cudaErrorInvalidResourceHandle);
    cudaGetLastError();
    CUDA_OK(cudaEventDestroy(start));
    CUDA_OK(cudaEventDestroy(end));
    CUDA_OK(cudaEventDestroy(untimed));
    CUDA_OK(cudaDeviceSynchronize());
}

static void test_device(void)
{
    int count = 0, dev = -1, v = 0;
    CUDA_OK(cudaGetDeviceCount(&count));
    CHECK(count >= 1);
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaGetDevice(&dev));
    CHECK(dev == 0);
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    CHECK(p.warpSize == 32 && p.maxThreadsPerBlock == 1024 && p.sharedMemPerBlock == 48 * 1024);
    CHECK(p.maxThreadsDim[2] == 64 && p.maxGridSize[1] == 65535 && p.totalGlobalMem > 0);
    CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    CHECK((size_t)v == p.sharedMemPerBlockOptin);
    CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    CHECK(v == p.multiProcessorCount);
    size_t free_b = 0, total_b = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    CHECK(total_b > 0 && free_b <= total_b);
#if defined(GK_CUDA_EMU)
    CHECK(!strcmp(p.name, "gptkit CUDA emulator") && p.major == 9 && p.minor == 0);
    CHECK(p.multiProcessorCount == 132 && p.sharedMemPerBlockOptin == 227 * 1024);
    CHECK(p.totalGlobalMem == total_b);
    CHECK(cudaSetDevice(1) == cudaErrorInvalidDevice);
    cudaGetLastError();
    setenv("GK_EMU_NO_DEVICE", "1", 1);
    CHECK(cudaGetDeviceCount(&count) == cudaErrorNoDevice && count == 0);
    CHECK(cudaSetDevice(0) == cudaErrorNoDevice);
    unsetenv("GK_EMU_NO_DEVICE");
    cudaGetLastError();
    CUDA_OK(cudaGetDeviceCount(&count));
#endif
}

/* A forked child that launches gets host threads of its own (the parent's are not in it). */
static void test_fork_child_launches(void)
{
    enum { n = 64 * 256 };
    int *d = to_dev<int>(NULL, n);
    CUDA_OK(cudaMemset(d, 0, n * sizeof(int)));
    GK_LAUNCH(add_one, n / 256, 256, 0, 0, d, (int)n); /* the parent's pool is up */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        GK_LAUNCH(add_one, n / 256, 256, 0, 0, d, (int)n);
        static int h[n];
        cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
        int bad = cudaGetLastError() != cudaSuccess;
        for (int i = 0; i < n; i++) bad += h[i] != 2;
        _exit(bad ? 1 : 0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %x", status);
    cudaFree(d);
}

#if defined(GK_CUDA_EMU)
static void test_fail_malloc(void)
{
    void *p[3] = {NULL, NULL, NULL};
    setenv("GK_EMU_FAIL_MALLOC", "2", 1);
    CUDA_OK(cudaMalloc(&p[0], 64));
    CHECK(cudaMalloc(&p[1], 64) == cudaErrorMemoryAllocation && p[1] == NULL);
    const char *msg = cudaGetErrorString(cudaGetLastError());
    CHECKF(strstr(msg, "GK_EMU_FAIL_MALLOC") != NULL, "%s", msg);
    CUDA_OK(cudaMalloc(&p[2], 64)); /* only the 2nd */
    unsetenv("GK_EMU_FAIL_MALLOC");
    CUDA_OK(cudaDeviceSynchronize()); /* not sticky */
    for (int i = 0; i < 3; i++) cudaFree(p[i]);
}

#if defined(GK_CUDA_EMU)
/* GPT_EMU_MEM=10K (10,000 bytes; allocations take 256-byte granules): cudaMalloc fits within it
 * and fails past it naming it, cudaFree gives the room back, cudaMemGetInfo and the properties
 * report it; 1Ki is 1024; a value that is not a size fails the call naming it. */
static void test_device_memory(void)
{
    void *a = NULL, *b = NULL, *c = NULL;
    size_t free_b = 0, total_b = 0;
    cudaDeviceProp p;
    setenv("GPT_EMU_MEM", "10K", 1);
    CUDA_OK(cudaMalloc(&a, 5000)); /* 5120 */
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    CHECKF(total_b == 10000 && free_b == 10000 - 5120, "%zu of %zu", free_b, total_b);
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    CHECK(p.totalGlobalMem == 10000);
    CHECK(cudaMalloc(&b, 4865) == cudaErrorMemoryAllocation && b == NULL); /* 5120 of 4880 */
    const char *msg = cudaGetErrorString(cudaGetLastError());
    CHECKF(strstr(msg, "cudaMalloc(4865 bytes): out of memory: 5120 of the device's 10000 bytes "
                       "(GPT_EMU_MEM) in use"),
           "%s", msg);
    CUDA_OK(cudaMalloc(&b, 4864)); /* 19 granules of the 4880 bytes left */
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    CHECK(free_b == 16);
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaMalloc(&c, 5000));
    CUDA_OK(cudaFree(b));
    CUDA_OK(cudaFree(c));
    setenv("GPT_EMU_MEM", "1Ki", 1);
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    CHECK(total_b == 1024 && free_b == 1024);
    const char *bad[] = {"lots", "24X", "-1", " 5M", "0", "12Gib", "99999999999T"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("GPT_EMU_MEM", bad[i], 1);
        CHECKF(cudaMalloc(&a, 64) == cudaErrorInvalidValue && a == NULL, "GPT_EMU_MEM=%s", bad[i]);
        msg = cudaGetErrorString(cudaGetLastError());
        CHECKF(strstr(msg, "GPT_EMU_MEM=") && strstr(msg, bad[i]), "%s", msg);
    }
    unsetenv("GPT_EMU_MEM");
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    CHECK(total_b > 1000000);
}
#endif

static void test_fail_launch(void)
{
    int h[4] = {0, 0, 0, 0}, *d = to_dev(h, 4);
    setenv("GPT_EMU_FAIL_LAUNCH", "3", 1);
    for (int i = 0; i < 2; i++) {
        GK_LAUNCH(add_one, 1, 32, 0, 0, d, 4);
        CUDA_OK(cudaGetLastError());
    }
    GK_LAUNCH(add_one, 1, 32, 0, 0, d, 4); /* the 3rd: fails, as an asynchronous fault would */
    cudaError_t e = cudaGetLastError();
    CHECK(e == cudaErrorLaunchFailure);
    const char *msg = cudaGetErrorString(e);
    CHECKF(strstr(msg, "add_one") && strstr(msg, "GPT_EMU_FAIL_LAUNCH"), "%s", msg);
    CHECK(cudaStreamSynchronize(0) == cudaErrorLaunchFailure); /* sticky */
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaErrorLaunchFailure);
    GK_LAUNCH(add_one, 1, 32, 0, 0, d, 4); /* does not run */
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    unsetenv("GPT_EMU_FAIL_LAUNCH");
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECKF(h[0] == 2 && h[3] == 2, "%d %d: the 2 launches before the failure and nothing after",
           h[0], h[3]);
    GK_LAUNCH(add_one, 1, 32, 0, 0, d, 4);
    CUDA_OK(cudaGetLastError());
    cudaFree(d);
}
#endif

int main(void)
{
    RUN(test_copies);
    RUN(test_events);
    RUN(test_device);
    RUN(test_fork_child_launches);
#if defined(GK_CUDA_EMU)
    RUN(test_fail_malloc);
    RUN(test_fail_launch);
#if defined(GK_CUDA_EMU)
    RUN(test_device_memory);
#endif
#endif
    return TEST_END();
}
