/* emu_runtime.cpp: the CUDA runtime calls of the emulator (declared in emu_runtime.h).
 * Owns: the error state (per host thread: the last error and the detailed message of the last
 * emulator error; per process: the sticky fault), streams and events as handles, the one
 * device's properties, kernel attributes, fault injection counters (device memory:
 * emu_memory.cpp).
 * What a capturing stream does with a call is emu_graph.cpp's: the calls here ask it first.
 * GK_EMU_NO_DEVICE=1 makes the emulator report no device (cudaErrorNoDevice), for tests of that.
 * GPT_EMU_LAUNCH_LOG=FILE appends a line to FILE for each kernel and cuBLASLt matmul run. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unordered_map>

#include "kernels/emu/emu_internal.h"

struct gk_emu_event {
    unsigned flags;
    bool recorded;
    double ms;
};

namespace gk_emu {

static std::atomic<int> sticky{cudaSuccess};
static thread_local cudaError_t last_error = cudaSuccess;
static thread_local cudaError_t detail_code = cudaSuccess;
static thread_local std::string detail;

void record_error(cudaError_t code, bool fault, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    detail = buf;
    detail_code = code;
    last_error = code;
    int none = cudaSuccess;
    if (fault) sticky.compare_exchange_strong(none, code);
}

cudaError_t sticky_error() { return (cudaError_t)sticky.load(std::memory_order_relaxed); }

static std::atomic<bool> lost{false};

bool device_lost() { return lost.load(); }

void lose_device(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lost.store(true);
    sticky.store(cudaErrorDevicesUnavailable); /* replaces any fault: the device is gone */
    record_error(cudaErrorDevicesUnavailable, true, "%s", buf);
}

/* A failed call: the error is also what cudaGetLastError returns next. */
cudaError_t fail(cudaError_t code, const char *call)
{
    record_error(code, false, "%s: %s", call, cudaGetErrorName(code));
    return code;
}

bool nth_call_fails(const char *env, int which)
{
    static std::mutex mu;
    static std::string seen[3];
    static long calls[3];
    const char *v = getenv(env);
    std::lock_guard<std::mutex> lock(mu);
    if (seen[which] != (v ? v : "")) {
        seen[which] = v ? v : "";
        calls[which] = 0;
    }
    long n = v ? strtol(v, nullptr, 10) : 0;
    return n > 0 && ++calls[which] == n;
}

void log_launch(const char *name, const char *shape, double seconds)
{
    static std::mutex mu;
    static std::string path;
    static FILE *f;
    const char *v = getenv("GPT_EMU_LAUNCH_LOG");
    if (!v || !*v) return;
    std::lock_guard<std::mutex> lock(mu);
    if (path != v) { /* (a new value: that file from now on) */
        if (f) fclose(f);
        path = v;
        f = fopen(v, "a");
    }
    if (!f) return;
    for (const char *c = name; *c; c++) /* "(fa2_fwd<D, DROP>)" as one word */
        if (*c != ' ') fputc(*c, f);
    fprintf(f, " %s %.1f\n", shape, seconds * 1e6);
    fflush(f);
}

int env_int(const char *name, int fallback, int lo, int hi)
{
    const char *v = getenv(name);
    char *end;
    long n = v && *v ? strtol(v, &end, 10) : 0;
    return v && *v && !*end && n >= lo && n <= hi ? (int)n : fallback;
}

Order schedule_order()
{
    const char *v = getenv("GPT_EMU_ORDER");
    if (v && !strcmp(v, "reverse")) return ORDER_REVERSE;
    if (v && !strcmp(v, "shuffle")) return ORDER_SHUFFLE;
    return !v || !*v || !strcmp(v, "forward") ? ORDER_FORWARD : ORDER_INVALID;
}

static std::mutex attr_mu;
static std::unordered_map<const void *, int> smem_limits;

int max_dyn_smem(const void *func)
{
    std::lock_guard<std::mutex> lock(attr_mu);
    auto it = smem_limits.find(func);
    return it == smem_limits.end() ? (int)kDefaultSmem : it->second;
}

cudaError_t func_set_attribute(const void *func, cudaFuncAttribute attr, int value)
{
    if (!func) return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute");
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
        value > (int)kMaxSmemOptin)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute");
    std::lock_guard<std::mutex> lock(attr_mu);
    smem_limits[func] = value;
    return cudaSuccess;
}

static bool no_device() { return env_int("GK_EMU_NO_DEVICE", 0, 0, 1) == 1; }

int emu_compute_capability(void)
{
    const char *v = getenv("GPT_EMU_SM");
    char *end = NULL;
    long sm = v && *v ? strtol(v, &end, 10) : 90;
    return end && *end == 0 && sm >= 10 && sm <= 199 ? (int)sm : 90;
}

} // namespace gk_emu

using namespace gk_emu;

static bool copy_args_bad(const void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    return (unsigned)kind > cudaMemcpyDefault || (count && (!dst || !src));
}

static cudaError_t copy_now(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            const char *call)
{
    if (cudaError_t e = sticky_error()) return e;
    if (copy_args_bad(dst, src, count, kind)) return fail(cudaErrorInvalidValue, call);
    if (count) memmove(dst, src, count);
    return cudaSuccess;
}

static cudaError_t set_now(void *ptr, int value, size_t count, const char *call)
{
    if (cudaError_t e = sticky_error()) return e;
    if (count && !ptr) return fail(cudaErrorInvalidValue, call);
    if (count) memset(ptr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    bool legacy = false; /* stream 0's work: refused beside a blocking capture */
    if (cudaError_t e = capture_forbids("cudaMemcpy")) return e;
    if (cudaError_t e = capture_route(nullptr, "cudaMemcpy", &legacy)) return e;
    return copy_now(dst, src, count, kind, "cudaMemcpy");
}

/* On a capturing stream: the arguments are checked now, the copy made at each replay. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    bool captured = false;
    if (cudaError_t e = capture_route(stream, "cudaMemcpyAsync", &captured)) return e;
    if (!captured) return copy_now(dst, src, count, kind, "cudaMemcpyAsync");
    if (copy_args_bad(dst, src, count, kind)) {
        capture_invalidate(stream);
        return fail(cudaErrorInvalidValue, "cudaMemcpyAsync");
    }
    capture_add(stream,
                [=](cudaStream_t) { return copy_now(dst, src, count, kind, "cudaMemcpyAsync"); });
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    bool legacy = false;
    if (cudaError_t e = capture_forbids("cudaMemset")) return e;
    if (cudaError_t e = capture_route(nullptr, "cudaMemset", &legacy)) return e;
    return set_now(ptr, value, count, "cudaMemset");
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
    bool captured = false;
    if (cudaError_t e = capture_route(stream, "cudaMemsetAsync", &captured)) return e;
    if (!captured) return set_now(ptr, value, count, "cudaMemsetAsync");
    if (count && !ptr) {
        capture_invalidate(stream);
        return fail(cudaErrorInvalidValue, "cudaMemsetAsync");
    }
    capture_add(stream,
                [=](cudaStream_t) { return set_now(ptr, value, count, "cudaMemsetAsync"); });
    return cudaSuccess;
}

/* ---- streams and events ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    if (!stream || flags > cudaStreamNonBlocking)
        return fail(cudaErrorInvalidValue, "cudaStreamCreate");
    *stream = new gk_emu_stream{flags};
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy");
    capture_forget(stream);
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    if (cudaError_t e = capture_sync(stream, false, "cudaStreamSynchronize")) return e;
    return sticky_error();
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    if (cudaError_t e = capture_sync(stream, false, "cudaStreamQuery")) return e;
    return sticky_error();
}

/* In a capturing stream: accepted, nothing recorded (one stream per capture). */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
    if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent");
    if (flags) return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent");
    bool captured = false;
    if (cudaError_t e = capture_route(stream, "cudaStreamWaitEvent", &captured)) return e;
    return sticky_error();
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (cudaError_t e = capture_sync(nullptr, true, "cudaDeviceSynchronize")) return e;
    return sticky_error();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags)
{
    if (!event || flags > (cudaEventBlockingSync | cudaEventDisableTiming))
        return fail(cudaErrorInvalidValue, "cudaEventCreate");
    *event = new gk_emu_event{flags, false, 0.0};
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord");
    if (cudaError_t e = sticky_error()) return e;
    bool captured = false;
    if (cudaError_t e = capture_route(stream, "cudaEventRecord", &captured)) return e;
    if (captured) return cudaSuccess; /* one stream per capture: nothing to record */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    event->ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    event->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize");
    return sticky_error();
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery");
    return sticky_error();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms) return fail(cudaErrorInvalidValue, "cudaEventElapsedTime");
    if (!start || !end || !start->recorded || !end->recorded ||
        ((start->flags | end->flags) & cudaEventDisableTiming))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime");
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    if (!event) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy");
    delete event;
    return cudaSuccess;
}

/* ---- errors ---- */

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error ? last_error : sticky_error();
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error ? last_error : sticky_error(); }

const char *cudaGetErrorName(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorDevicesUnavailable: return "cudaErrorDevicesUnavailable";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    case cudaErrorUnsupportedPtxVersion: return "cudaErrorUnsupportedPtxVersion";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
    if (error != cudaSuccess && error == detail_code && !detail.empty()) return detail.c_str();
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorDevicesUnavailable: return "CUDA-capable device(s) is/are busy or unavailable";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoKernelImageForDevice:
        return "no kernel image is available for execution on the device";
    case cudaErrorUnsupportedPtxVersion:
        return "the provided PTX was compiled with an unsupported toolchain.";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched:
        return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureImplicit:
        return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureWrongThread:
        return "attempt to terminate a thread-local capture sequence from another thread";
    }
    return "unknown error";
}

cudaError_t cudaDeviceReset(void)
{
    if (lost.load()) return cudaErrorDevicesUnavailable;
    sticky.store(cudaSuccess);
    last_error = cudaSuccess;
    return cudaSuccess;
}

/* ---- the device ---- */

static const int kRuntimeVersion = 13000;
static int driver_version() { return env_int("GPT_EMU_DRIVER", kRuntimeVersion, 0, 99999); }

cudaError_t cudaDriverGetVersion(int *version)
{
    if (!version) return fail(cudaErrorInvalidValue, "cudaDriverGetVersion");
    *version = driver_version();
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version) return fail(cudaErrorInvalidValue, "cudaRuntimeGetVersion");
    *version = kRuntimeVersion;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count) return fail(cudaErrorInvalidValue, "cudaGetDeviceCount");
    *count = 0;
    if (driver_version() < kRuntimeVersion)
        return fail(cudaErrorInsufficientDriver, "cudaGetDeviceCount");
    *count = no_device() ? 0 : 1;
    return *count ? cudaSuccess : fail(cudaErrorNoDevice, "cudaGetDeviceCount");
}

cudaError_t cudaSetDevice(int device)
{
    if (no_device()) return fail(cudaErrorNoDevice, "cudaSetDevice");
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice, "cudaSetDevice");
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device) return fail(cudaErrorInvalidValue, "cudaGetDevice");
    *device = 0;
    return no_device() ? fail(cudaErrorNoDevice, "cudaGetDevice") : cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (!prop) return fail(cudaErrorInvalidValue, "cudaGetDeviceProperties");
    if (no_device()) return fail(cudaErrorNoDevice, "cudaGetDeviceProperties");
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties");
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "gptkit CUDA emulator");
    prop->totalGlobalMem = device_memory_total();
    prop->integrated = !device_memory_own(); /* the host's memory, as an integrated GPU's */
    prop->sharedMemPerBlock = kDefaultSmem;
    prop->sharedMemPerBlockOptin = kMaxSmemOptin;
    prop->sharedMemPerMultiprocessor = 228 * 1024;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = kMaxThreadsPerBlock;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->multiProcessorCount = kNumSMs;
    prop->l2CacheSize = 50 * 1024 * 1024;
    int sm = emu_compute_capability();
    prop->major = sm / 10;
    prop->minor = sm % 10;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    cudaDeviceProp p;
    if (!value) return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute");
    if (cudaError_t e = cudaGetDeviceProperties(&p, device)) return e;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
        *value = (int)p.sharedMemPerMultiprocessor;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute");
    }
    return cudaSuccess;
}
