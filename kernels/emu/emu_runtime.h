/* emu_runtime.h: the CUDA runtime API subset of the emulator (see kernels/emu/README.md for the
 * whole subset).
 * Owns: the vector and dimension types (dim3, uint3, float2/4, int4, uint4), cudaError_t and the
 * enums' real numeric values, and the runtime calls on host memory. Every call is synchronous:
 * a launch or copy has finished when it returns; streams and events are plain handles, except
 * that a stream can capture its work into a graph that cudaGraphLaunch replays (see below).
 * Errors: a launch's configuration error is returned once by cudaGetLastError (as on a GPU); a
 * fault inside a kernel (barrier or warp deadlock, shared memory out of bounds,
 * GPT_EMU_FAIL_LAUNCH) is sticky as on a GPU: every later launch, copy, set and synchronize returns
 * it until cudaDeviceReset. GPT_EMU_LOSE_DEVICE=N loses the device at the Nth launch (a GPU fallen
 * off the bus): cudaErrorDevicesUnavailable, sticky past cudaDeviceReset, cudaMemGetInfo included.
 * cudaGetErrorString of the last such code on the calling host thread returns the
 * detailed message (kernel, block, thread). */
#ifndef GK_EMU_RUNTIME_H
#define GK_EMU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#define GK_EMU_API __attribute__((visibility("hidden")))

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
struct alignas(8) float2 { float x, y; };
struct float3 { float x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorDevicesUnavailable = 46,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorUnsupportedPtxVersion = 222,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorStreamCaptureWrongThread = 908,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxBlockDimX = 2,
    cudaDevAttrMaxBlockDimY = 3,
    cudaDevAttrMaxBlockDimZ = 4,
    cudaDevAttrMaxGridDimX = 5,
    cudaDevAttrMaxGridDimY = 6,
    cudaDevAttrMaxGridDimZ = 7,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrL2CacheSize = 38,
    cudaDevAttrMaxThreadsPerMultiProcessor = 39,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02

typedef struct gk_emu_stream *cudaStream_t;
typedef struct gk_emu_event *cudaEvent_t;
typedef struct gk_emu_graph *cudaGraph_t;
typedef struct gk_emu_graph_exec *cudaGraphExec_t;

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

/* The fields of cudaDeviceProp the emulator fills (a subset of the real struct: use only these). */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int integrated; /* 1: the host's memory (no GPT_EMU_MEM) */
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    size_t sharedMemPerMultiprocessor;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int maxThreadsPerMultiProcessor;
    int multiProcessorCount;
    int l2CacheSize;
    int major;
    int minor;
};

/* Memory. cudaMalloc'd memory is filled with 0xFF bytes (NaN as fp32 and bf16) so that reading
 * what no one wrote shows; GK_EMU_FAIL_MALLOC=N makes the Nth cudaMalloc (counted from the first
 * call that sees this value) fail with cudaErrorMemoryAllocation. */
GK_EMU_API cudaError_t cudaMalloc(void **ptr, size_t size);
template <class T> inline cudaError_t cudaMalloc(T **ptr, size_t size)
{
    return cudaMalloc(reinterpret_cast<void **>(ptr), size);
}
GK_EMU_API cudaError_t cudaFree(void *ptr);
GK_EMU_API cudaError_t cudaMallocHost(void **ptr, size_t size);
template <class T> inline cudaError_t cudaMallocHost(T **ptr, size_t size)
{
    return cudaMallocHost(reinterpret_cast<void **>(ptr), size);
}
GK_EMU_API cudaError_t cudaFreeHost(void *ptr);
GK_EMU_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind);
GK_EMU_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       cudaMemcpyKind kind, cudaStream_t stream = 0);
GK_EMU_API cudaError_t cudaMemset(void *ptr, int value, size_t count);
GK_EMU_API cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream = 0);
GK_EMU_API cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

/* Streams and events. */
GK_EMU_API cudaError_t cudaStreamCreate(cudaStream_t *stream);
GK_EMU_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
GK_EMU_API cudaError_t cudaStreamDestroy(cudaStream_t stream);
GK_EMU_API cudaError_t cudaStreamSynchronize(cudaStream_t stream);
/* cudaSuccess: all work has finished */
GK_EMU_API cudaError_t cudaStreamQuery(cudaStream_t stream);
GK_EMU_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                           unsigned flags = 0);
GK_EMU_API cudaError_t cudaDeviceSynchronize(void);
GK_EMU_API cudaError_t cudaEventCreate(cudaEvent_t *event);
GK_EMU_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
GK_EMU_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
GK_EMU_API cudaError_t cudaEventSynchronize(cudaEvent_t event);
GK_EMU_API cudaError_t cudaEventQuery(cudaEvent_t event); /* cudaSuccess: the event has completed */
GK_EMU_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
GK_EMU_API cudaError_t cudaEventDestroy(cudaEvent_t event);

/* Stream capture and graphs (emu_graph.cpp). One stream per capture: events are accepted in a
 * capturing stream and do nothing, so no other stream joins a capture (no fork/join).
 * - cudaStreamBeginCapture: the legacy stream 0 -> cudaErrorStreamCaptureUnsupported; a stream
 *   already capturing -> cudaErrorIllegalState; a mode not in the enum -> cudaErrorInvalidValue.
 * - While a stream captures, what is issued to it is recorded in order and not run: GK_LAUNCH
 *   (its arguments copied then, as by <<<...>>>), cudaMemcpyAsync, cudaMemsetAsync,
 *   cublasLtMatmul (its descriptors, layouts, alpha and beta copied then). Pointers are kept:
 *   memory is read and written when the graph runs. A launch's configuration error (grid, block,
 *   dynamic shared memory) and a copy's or set's bad argument are returned (and by
 *   cudaGetLastError) at capture, and invalidate the capture. cudaEventRecord and
 *   cudaStreamWaitEvent on it are accepted and record nothing (the event is not marked recorded).
 *   Other streams run their work as before. Stream 0's work (launch, copy or set, event record,
 *   cudaStreamSynchronize(0), cudaGraphLaunch) while a blocking stream (not
 *   cudaStreamNonBlocking) captures -> cudaErrorStreamCaptureImplicit, and invalidates that
 *   capture.
 * - Calls not allowed during capture -> cudaErrorStreamCaptureUnsupported, and the capture that
 *   forbids them is invalidated (not sticky: later calls work): cudaMalloc, cudaFree,
 *   cudaMallocHost, cudaFreeHost, cudaMemcpy, cudaMemset from any thread while a Global capture
 *   is active, or from the thread that began a ThreadLocal or Global one (Relaxed allows them);
 *   cudaStreamSynchronize / cudaStreamQuery of a capturing stream, cudaGraphLaunch into one, and
 *   cudaDeviceSynchronize during any capture (any mode).
 * - Once invalidated, work issued to the stream -> cudaErrorStreamCaptureInvalidated and
 *   cudaStreamIsCapturing says Invalidated until cudaStreamEndCapture, which returns
 *   cudaErrorStreamCaptureInvalidated with *graph NULL and ends the capture.
 * - cudaStreamEndCapture: a stream not capturing -> cudaErrorIllegalState; from another thread than
 *   BeginCapture's (not Relaxed) -> cudaErrorStreamCaptureWrongThread (the capture goes on).
 * - cudaStreamIsCapturing(0) while a blocking stream captures -> cudaErrorStreamCaptureImplicit.
 * - cudaGraphInstantiate copies the graph (flags must be 0); cudaGraphLaunch(exec, stream) runs its
 *   nodes in order on stream, each as the call it recorded would run now (launch checks, sticky
 *   faults, GPT_EMU_FAIL_LAUNCH / GPT_EMU_LOSE_DEVICE counting, GPT_EMU_ORDER), stops at the first
 *   error and returns it. NCCL calls are not captured: on a capturing stream they are refused. */
GK_EMU_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
GK_EMU_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
GK_EMU_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
GK_EMU_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                            unsigned long long flags = 0);
GK_EMU_API cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
GK_EMU_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
GK_EMU_API cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/* Errors. */
GK_EMU_API cudaError_t cudaGetLastError(void);
GK_EMU_API cudaError_t cudaPeekAtLastError(void);
GK_EMU_API const char *cudaGetErrorString(cudaError_t error);
GK_EMU_API const char *cudaGetErrorName(cudaError_t error);
/* Clears the sticky fault (memory stays allocated, unlike on a GPU). */
GK_EMU_API cudaError_t cudaDeviceReset(void);

/* Device: one sm_90-like device, "gptkit CUDA emulator". */
GK_EMU_API cudaError_t cudaGetDeviceCount(int *count);
/* The CUDA version the driver supports (GPT_EMU_DRIVER, default 13000; 0: no driver installed,
 * as on a machine without NVIDIA's driver) and the runtime's (13000). A driver below the
 * runtime's version makes cudaGetDeviceCount fail with cudaErrorInsufficientDriver. */
GK_EMU_API cudaError_t cudaDriverGetVersion(int *version);
GK_EMU_API cudaError_t cudaRuntimeGetVersion(int *version);
GK_EMU_API cudaError_t cudaSetDevice(int device);
GK_EMU_API cudaError_t cudaGetDevice(int *device);
GK_EMU_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
GK_EMU_API cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);

namespace gk_emu {
GK_EMU_API cudaError_t func_set_attribute(const void *func, cudaFuncAttribute attr, int value);
}
/* MaxDynamicSharedMemorySize: a kernel launched with more than 48 KiB of dynamic shared memory
 * needs this first (at most 227 KiB); the carveout is accepted and ignored. */
template <class F>
inline cudaError_t cudaFuncSetAttribute(F *func, cudaFuncAttribute attr, int value)
{
    return gk_emu::func_set_attribute(reinterpret_cast<const void *>(func), attr, value);
}

#endif
