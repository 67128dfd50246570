/* test_emu_graph.cu: stream capture and graphs: a captured launch does not run at capture and runs
 * once per replay with the arguments it had then, against device memory as it is at replay;
 * copy and set nodes in order with kernels; a captured cuBLASLt matmul; calls a capture forbids
 * (they invalidate it, and the stream works again after cudaStreamEndCapture); refusals (stream 0,
 * EndCapture without Begin, stream 0's work beside a blocking capture); capture modes across
 * threads; emulator-only: exact error codes, errors at capture and during a replay. */
#include <stdlib.h>

#include <thread>

#include "tests/unit/emu/emu_test.h"

__global__ void bump(int *counter, int by)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) *counter += by;
}

__global__ void add_one(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

static int read_int(const int *dev)
{
    int v = -12345;
    to_host(&v, dev, 1);
    return v;
}

static void set_int(int *dev, int v) { cudaMemcpy(dev, &v, sizeof v, cudaMemcpyHostToDevice); }

static cudaStreamCaptureStatus capture_status(cudaStream_t s)
{
    cudaStreamCaptureStatus st = (cudaStreamCaptureStatus)-1;
    CUDA_OK(cudaStreamIsCapturing(s, &st));
    return st;
}

/* A kernel captured once: not run at capture, run at each replay with its captured argument,
 * adding to the counter as device memory holds it at replay. */
static void test_capture_replay(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *counter = to_dev<int>(NULL, 1);
    CHECK(counter != NULL);
    set_int(counter, 0);
    CHECK(capture_status(s) == cudaStreamCaptureStatusNone);
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(capture_status(s) == cudaStreamCaptureStatusActive);
    int by = 1;
    GK_LAUNCH(bump, 1, 32, 0, s, counter, by);
    CUDA_OK(cudaGetLastError());
    by = 7; /* captured by value: the replays still add 1 */
    cudaGraph_t graph = NULL;
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    CHECK(graph != NULL);
    CHECK(capture_status(s) == cudaStreamCaptureStatusNone);
    CHECKF(read_int(counter) == 0, "the captured kernel ran at capture: %d", read_int(counter));
    cudaGraphExec_t exec = NULL;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(exec != NULL);
    for (int i = 0; i < 3; i++) CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECKF(read_int(counter) == 3, "3 replays of +1 gave %d", read_int(counter));
    set_int(counter, 1000); /* a replay reads memory as it is now */
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECKF(read_int(counter) == 1001, "replay after a reset to 1000 gave %d", read_int(counter));
    /* the graph can be destroyed once instantiated; the exec keeps its nodes */
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECKF(read_int(counter) == 1002, "replay after cudaGraphDestroy gave %d", read_int(counter));
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaFree(counter));
    CUDA_OK(cudaStreamDestroy(s));
}

/* Set, copy in, kernel, copy out: recorded in order, run in order at each replay, the host
 * source read at replay. Pinned host memory, as capture on a GPU wants. */
static void test_copy_nodes(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *src = NULL, *out = NULL, *buf = to_dev<int>(NULL, 4);
    CUDA_OK(cudaMallocHost(&src, 4 * sizeof(int)));
    CUDA_OK(cudaMallocHost(&out, 4 * sizeof(int)));
    for (int i = 0; i < 4; i++) src[i] = i + 1, out[i] = -1;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMemsetAsync(buf, 0, 4 * sizeof(int), s));
    CUDA_OK(cudaMemcpyAsync(buf, src, 2 * sizeof(int), cudaMemcpyHostToDevice, s));
    GK_LAUNCH(add_one, 1, 32, 0, s, buf, 4);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpyAsync(out, buf, 4 * sizeof(int), cudaMemcpyDeviceToHost, s));
    cudaGraph_t graph = NULL;
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    CHECK(out[0] == -1 && out[3] == -1); /* nothing ran */
    src[0] = 10; /* read at replay */
    CUDA_OK(cudaMemset(buf, 0x7f, 4 * sizeof(int)));
    cudaGraphExec_t exec = NULL;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    /* set 0 -> {0,0,0,0}; copy {10,2} -> {10,2,0,0}; +1 -> {11,3,1,1} */
    CHECKF(out[0] == 11 && out[1] == 3 && out[2] == 1 && out[3] == 1, "got {%d,%d,%d,%d}", out[0],
           out[1], out[2], out[3]);
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaFreeHost(src));
    CUDA_OK(cudaFreeHost(out));
    CUDA_OK(cudaFree(buf));
    CUDA_OK(cudaStreamDestroy(s));
}

#define LT_OK(expr)                                                                        \
    do {                                                                                   \
        cublasStatus_t s_ = (expr);                                                        \
        CHECKF(s_ == CUBLAS_STATUS_SUCCESS, "%s -> %d", #expr, (int)s_);                   \
    } while (0)

/* D = alpha A B (fp32, 3x4 by 4x2) captured: the replay equals the call made directly, with
 * alpha, the descriptor and the layouts as they were at capture (changed or destroyed after). */
static void test_matmul(void)
{
    enum { m = 3, n = 2, k = 4 };
    float hA[m * k], hB[k * n], want[m * n], direct[m * n], replayed[m * n];
    for (int i = 0; i < m * k; i++) hA[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < k * n; i++) hB[i] = (float)(i % 3) + 0.5f;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int l = 0; l < k; l++) acc += hA[i + l * m] * hB[l + j * k];
            want[i + j * m] = 2.0f * acc; /* alpha 2 */
        }
    float *A = to_dev(hA, m * k), *B = to_dev(hB, k * n), *D1 = to_dev<float>(NULL, m * n),
          *D2 = to_dev<float>(NULL, m * n);
    CUDA_OK(cudaMemset(D2, 0, sizeof replayed));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cublasLtHandle_t lt = NULL;
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    LT_OK(cublasLtCreate(&lt));
    LT_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    LT_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    LT_OK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    float alpha = 2.0f, beta = 0.0f;
    LT_OK(cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D1, ld, D1, ld, NULL, NULL, 0, s));
    CUDA_OK(cudaStreamSynchronize(s));
    to_host(direct, D1, m * n);
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    LT_OK(cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D2, ld, D2, ld, NULL, NULL, 0, s));
    cudaGraph_t graph = NULL;
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    to_host(replayed, D2, m * n);
    CHECK(replayed[0] == 0.0f && replayed[m * n - 1] == 0.0f); /* not run at capture */
    alpha = 5.0f;
    cublasOperation_t t = CUBLAS_OP_T;
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    cudaGraphExec_t exec = NULL;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    to_host(replayed, D2, m * n);
    for (int i = 0; i < m * n; i++) {
        CHECKF(direct[i] == want[i], "direct D[%d] = %g, want %g", i, direct[i], want[i]);
        CHECKF(replayed[i] == direct[i], "replayed D[%d] = %g, direct %g", i, replayed[i],
               direct[i]);
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    cublasLtDestroy(lt);
    cudaFree(A);
    cudaFree(B);
    cudaFree(D1);
    cudaFree(D2);
    CUDA_OK(cudaStreamDestroy(s));
}

/* Ends s's capture, which a forbidden call invalidated: no graph, and s is usable again. */
static void end_invalidated(cudaStream_t s, int *counter)
{
    CHECK(capture_status(s) == cudaStreamCaptureStatusInvalidated);
    GK_LAUNCH(bump, 1, 32, 0, s, counter, 1); /* refused, never runs */
    CHECK(cudaGetLastError() == cudaErrorStreamCaptureInvalidated);
    cudaGraph_t graph = (cudaGraph_t)&graph;
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == NULL);
    cudaGetLastError();
    CHECK(capture_status(s) == cudaStreamCaptureStatusNone);
    set_int(counter, 0);
    GK_LAUNCH(bump, 1, 32, 0, s, counter, 1);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(s));
    CHECKF(read_int(counter) == 1, "launch after the failed capture: counter %d",
           read_int(counter));
}

static void test_forbidden_calls(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *counter = to_dev<int>(NULL, 1);
    set_int(counter, 0);

    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    GK_LAUNCH(bump, 1, 32, 0, s, counter, 1);
    CUDA_OK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaGetLastError() == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaGetLastError() == cudaSuccess); /* not sticky */
    end_invalidated(s, counter);

    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void *p = NULL;
    CHECK(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported);
    cudaGetLastError();
    end_invalidated(s, counter);
    p = NULL;
    CUDA_OK(cudaMalloc(&p, 64)); /* after the capture: allowed again */
    CUDA_OK(cudaFree(p));

    /* Relaxed allows cudaMalloc */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    p = NULL;
    CUDA_OK(cudaMalloc(&p, 64));
    CHECK(capture_status(s) == cudaStreamCaptureStatusActive);
    cudaGraph_t graph = NULL;
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    CHECK(graph != NULL);
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaFree(p));

    CUDA_OK(cudaFree(counter));
    CUDA_OK(cudaStreamDestroy(s));
}

/* A Global capture forbids cudaMalloc in every thread; a ThreadLocal one only in its own. */
static void test_modes_across_threads(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaError_t other = cudaSuccess;
    void *p = NULL;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    std::thread([&] { other = cudaMalloc(&p, 64); }).join();
    CHECKF(other == cudaSuccess, "cudaMalloc in another thread beside a ThreadLocal capture: %d",
           (int)other);
    void *q = NULL;
    CHECK(cudaMalloc(&q, 64) == cudaErrorStreamCaptureUnsupported && q == NULL);
    cudaGetLastError();
    cudaGraph_t graph = NULL;
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated && graph == NULL);
    cudaGetLastError();
    CUDA_OK(cudaFree(p));

    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    p = NULL;
    std::thread([&] { other = cudaMalloc(&p, 64); }).join();
    CHECKF(other == cudaErrorStreamCaptureUnsupported,
           "cudaMalloc in another thread beside a Global capture: %d", (int)other);
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    if (p) cudaFree(p);
    CUDA_OK(cudaStreamDestroy(s));
}

static void test_refusals(void)
{
    cudaStream_t s, blocking;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreate(&blocking));
    cudaGraph_t graph = NULL;

    CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) != cudaSuccess);
    cudaGetLastError();
    CHECK(capture_status(0) == cudaStreamCaptureStatusNone);
    CHECK(cudaStreamEndCapture(s, &graph) != cudaSuccess); /* no Begin */
    cudaGetLastError();
    CHECK(capture_status(s) == cudaStreamCaptureStatusNone);

    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess); /* already */
    cudaGetLastError();
    CHECK(capture_status(s) == cudaStreamCaptureStatusActive);
    CUDA_OK(cudaStreamEndCapture(s, &graph)); /* an empty graph */
    CHECK(graph != NULL);
    cudaGraphExec_t exec = NULL;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));

    /* stream 0's work would wait for a blocking stream's capture: refused, capture invalidated */
    int *counter = to_dev<int>(NULL, 1);
    set_int(counter, 0);
    CUDA_OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
    GK_LAUNCH(bump, 1, 32, 0, 0, counter, 1);
    CHECK(cudaGetLastError() == cudaErrorStreamCaptureImplicit);
    graph = (cudaGraph_t)&graph;
    CHECK(cudaStreamEndCapture(blocking, &graph) == cudaErrorStreamCaptureInvalidated &&
          graph == NULL);
    cudaGetLastError();
    CHECKF(read_int(counter) == 0, "stream 0's refused launch ran: %d", read_int(counter));
    GK_LAUNCH(bump, 1, 32, 0, 0, counter, 1); /* no capture now: runs */
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CHECKF(read_int(counter) == 1, "stream 0's launch after the capture: %d", read_int(counter));
    cudaFree(counter);
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(blocking));
}

#if defined(GK_CUDA_EMU)
/* The emulator's exact codes where CUDA leaves them to the driver, errors at capture, a replay's
 * errors (GPT_EMU_FAIL_LAUNCH counts replayed launches), what the emulator does not capture. */
static void test_emu_specifics(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph = NULL;
    CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) ==
          cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorIllegalState);
    CHECK(cudaStreamBeginCapture(s, (cudaStreamCaptureMode)3) == cudaErrorInvalidValue);
    CHECK(!strcmp(cudaGetErrorName(cudaErrorStreamCaptureInvalidated),
                  "cudaErrorStreamCaptureInvalidated"));
    CHECK(!strcmp(cudaGetErrorName(cudaErrorStreamCaptureImplicit),
                  "cudaErrorStreamCaptureImplicit"));
    cudaGetLastError();

    int *counter = to_dev<int>(NULL, 1);
    set_int(counter, 0);
    /* a configuration error shows at capture and invalidates it */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState);
    GK_LAUNCH(bump, 1, 2048, 0, s, counter, 1);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    CHECK(capture_status(s) == cudaStreamCaptureStatusInvalidated);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated && graph == NULL);
    cudaGetLastError();

    /* cudaDeviceSynchronize and a graph launch into a capturing stream are refused */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    GK_LAUNCH(bump, 1, 32, 0, s, counter, 1);
    GK_LAUNCH(bump, 1, 32, 0, s, counter, 10);
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec = NULL;
    CHECK(cudaGraphInstantiate(&exec, graph, 1) == cudaErrorInvalidValue && exec == NULL);
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    CHECK(cudaDeviceSynchronize() == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaGraphLaunch(exec, s) == cudaErrorStreamCaptureInvalidated);
    cudaGraph_t g2 = NULL;
    CHECK(cudaStreamEndCapture(s, &g2) == cudaErrorStreamCaptureInvalidated && g2 == NULL);
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    CHECK(cudaGraphLaunch(exec, s) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(s, &g2) == cudaErrorStreamCaptureInvalidated && g2 == NULL);
    cudaGetLastError();
    CHECKF(read_int(counter) == 0, "a refused graph launch ran: %d", read_int(counter));
    cudaStream_t blocking; /* a synchronous copy or set is stream 0's work too */
    CUDA_OK(cudaStreamCreate(&blocking));
    CUDA_OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMemset(counter, 0x01, sizeof(int)) == cudaErrorStreamCaptureImplicit);
    CHECK(cudaStreamEndCapture(blocking, &g2) == cudaErrorStreamCaptureInvalidated && g2 == NULL);
    cudaGetLastError();
    CUDA_OK(cudaStreamDestroy(blocking));
    CHECKF(read_int(counter) == 0, "a refused cudaMemset ran: %d", read_int(counter));

    /* the replay's second launch fails: it stops there, returns the fault, which is sticky */
    setenv("GPT_EMU_FAIL_LAUNCH", "2", 1);
    CHECK(cudaGraphLaunch(exec, s) == cudaErrorLaunchFailure);
    unsetenv("GPT_EMU_FAIL_LAUNCH");
    CHECK(cudaStreamSynchronize(s) == cudaErrorLaunchFailure);
    CUDA_OK(cudaDeviceReset());
    cudaGetLastError();
    CHECKF(read_int(counter) == 1, "the first node +1 ran, the failed one +10 not: %d",
           read_int(counter));
    CUDA_OK(cudaGraphLaunch(exec, s)); /* both now */
    CHECKF(read_int(counter) == 12, "after a clean replay: %d", read_int(counter));
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));

    /* a stream destroyed while capturing takes its capture with it */
    cudaStream_t gone;
    CUDA_OK(cudaStreamCreateWithFlags(&gone, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamBeginCapture(gone, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaStreamDestroy(gone));
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, 16)); /* no capture forbids it now */
    cudaFree(p);
    cudaFree(counter);
    CUDA_OK(cudaStreamDestroy(s));
}
#endif

int main(void)
{
    RUN(test_capture_replay);
    RUN(test_copy_nodes);
    RUN(test_matmul);
    RUN(test_forbidden_calls);
    RUN(test_modes_across_threads);
    RUN(test_refusals);
#if defined(GK_CUDA_EMU)
    RUN(test_emu_specifics);
#endif
    return TEST_END();
}
