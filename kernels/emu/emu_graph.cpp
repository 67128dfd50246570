/* emu_graph.cpp: stream capture and CUDA graphs (declared in emu_runtime.h, which says what a GPU
 * does that this does too, and what it does not).
 * Owns: the captures in progress (per stream: mode, the host thread that began it, invalidated
 * or not, the nodes recorded so far), the rules on which calls a capture forbids and which it
 * invalidates, and graphs and their executables as lists of nodes. A node is the call it records
 * as a closure that owns its arguments (kernels/emu/emu.h's Launcher keeps a copy of a kernel's,
 * emu_runtime.cpp and emu_cublaslt.cpp copy theirs); cudaGraphLaunch runs them in order. */
#include <thread>
#include <unordered_map>

#include "kernels/emu/emu_internal.h"

struct gk_emu_graph {
    std::vector<gk_emu::Node> nodes;
};
struct gk_emu_graph_exec {
    std::vector<gk_emu::Node> nodes;
};

namespace gk_emu {

struct Capture {
    cudaStreamCaptureMode mode;
    std::thread::id owner; /* the thread that began it */
    bool blocking;         /* its stream synchronizes with stream 0 */
    bool invalid;
    std::vector<Node> nodes;
};

static std::mutex mu;
static std::unordered_map<cudaStream_t, Capture> captures; /* under mu */
static std::atomic<int> ncaptures{0};                     /* captures.size(), read without mu */

static const char *mode_name(cudaStreamCaptureMode m)
{
    if (m == cudaStreamCaptureModeGlobal) return "Global";
    return m == cudaStreamCaptureModeThreadLocal ? "ThreadLocal" : "Relaxed";
}

/* Invalidates every blocking stream's capture; true when there was one (under mu). */
static bool invalidate_blocking()
{
    bool any = false;
    for (auto &kv : captures)
        if (kv.second.blocking) any = kv.second.invalid = true;
    return any;
}

cudaError_t capture_route(cudaStream_t s, const char *call, bool *captured)
{
    *captured = false;
    if (!ncaptures.load(std::memory_order_acquire)) return cudaSuccess;
    std::lock_guard<std::mutex> lock(mu);
    if (!s) {
        if (!invalidate_blocking()) return cudaSuccess;
        record_error(cudaErrorStreamCaptureImplicit, false,
                     "%s: work on the legacy stream 0 while a "
                     "blocking stream captures (capture invalidated)",
                     call);
        return cudaErrorStreamCaptureImplicit;
    }
    auto it = captures.find(s);
    if (it == captures.end()) return cudaSuccess;
    if (it->second.invalid) {
        record_error(cudaErrorStreamCaptureInvalidated, false,
                     "%s: the stream's capture was invalidated by an "
                     "earlier error (end it with cudaStreamEndCapture)",
                     call);
        return cudaErrorStreamCaptureInvalidated;
    }
    *captured = true;
    return cudaSuccess;
}

void capture_add(cudaStream_t s, Node node)
{
    std::lock_guard<std::mutex> lock(mu);
    auto it = captures.find(s);
    if (it != captures.end() && !it->second.invalid) it->second.nodes.push_back(std::move(node));
}

void capture_invalidate(cudaStream_t s)
{
    std::lock_guard<std::mutex> lock(mu);
    auto it = captures.find(s);
    if (it != captures.end()) it->second.invalid = true;
}

cudaError_t capture_forbids(const char *call)
{
    if (!ncaptures.load(std::memory_order_acquire)) return cudaSuccess;
    std::lock_guard<std::mutex> lock(mu);
    std::thread::id self = std::this_thread::get_id();
    const Capture *why = nullptr;
    for (auto &kv : captures) {
        Capture &c = kv.second;
        bool mine = c.owner == self && c.mode != cudaStreamCaptureModeRelaxed;
        if (mine || c.mode == cudaStreamCaptureModeGlobal) {
            c.invalid = true;
            why = &c;
        }
    }
    if (!why) return cudaSuccess;
    record_error(cudaErrorStreamCaptureUnsupported, false,
                 "%s: not allowed while a stream captures in "
                 "cudaStreamCaptureMode%s (capture invalidated)",
                 call, mode_name(why->mode));
    return cudaErrorStreamCaptureUnsupported;
}

cudaError_t capture_sync(cudaStream_t s, bool device, const char *call)
{
    if (!ncaptures.load(std::memory_order_acquire)) return cudaSuccess;
    std::lock_guard<std::mutex> lock(mu);
    if (device) {
        if (captures.empty()) return cudaSuccess;
        for (auto &kv : captures) kv.second.invalid = true;
    } else if (!s) {
        if (!invalidate_blocking()) return cudaSuccess;
        record_error(cudaErrorStreamCaptureImplicit, false,
                     "%s: the legacy stream 0 waits for a capturing "
                     "blocking stream (capture invalidated)",
                     call);
        return cudaErrorStreamCaptureImplicit;
    } else {
        auto it = captures.find(s);
        if (it == captures.end()) return cudaSuccess;
        it->second.invalid = true;
    }
    record_error(cudaErrorStreamCaptureUnsupported, false,
                 "%s: waits for a capturing stream, whose work has not run (capture invalidated)",
                 call);
    return cudaErrorStreamCaptureUnsupported;
}

void capture_forget(cudaStream_t s)
{
    std::lock_guard<std::mutex> lock(mu);
    if (captures.erase(s)) ncaptures.fetch_sub(1);
}

/* A failed call: the error is also what cudaGetLastError returns next. */
static cudaError_t fail(cudaError_t code, const char *call, const char *why)
{
    record_error(code, false, "%s: %s", call, why);
    return code;
}

} // namespace gk_emu

using namespace gk_emu;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    const char *call = "cudaStreamBeginCapture";
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue, call, "unknown mode");
    if (!stream)
        return fail(cudaErrorStreamCaptureUnsupported, call, "the legacy stream 0 cannot capture");
    std::lock_guard<std::mutex> lock(mu);
    Capture c{mode,
              std::this_thread::get_id(),
              !(stream->flags & cudaStreamNonBlocking),
              false,
              {}};
    if (!captures.emplace(stream, std::move(c)).second)
        return fail(cudaErrorIllegalState, call, "the stream already captures");
    ncaptures.fetch_add(1, std::memory_order_release);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    const char *call = "cudaStreamEndCapture";
    if (!graph) return fail(cudaErrorInvalidValue, call, "graph is NULL");
    std::unique_lock<std::mutex> lock(mu);
    auto it = stream ? captures.find(stream) : captures.end();
    if (it == captures.end()) {
        lock.unlock();
        return fail(cudaErrorIllegalState, call, "the stream is not capturing");
    }
    Capture &c = it->second;
    if (c.mode != cudaStreamCaptureModeRelaxed && c.owner != std::this_thread::get_id()) {
        lock.unlock();
        return fail(cudaErrorStreamCaptureWrongThread, call,
                    "not the thread that began the capture");
    }
    bool invalid = c.invalid;
    *graph = invalid ? nullptr : new gk_emu_graph{std::move(c.nodes)};
    captures.erase(it);
    ncaptures.fetch_sub(1, std::memory_order_release);
    lock.unlock();
    return invalid ? fail(cudaErrorStreamCaptureInvalidated, call,
                          "the capture was invalidated by an earlier error")
                   : cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status)
{
    const char *call = "cudaStreamIsCapturing";
    if (!status) return fail(cudaErrorInvalidValue, call, "status is NULL");
    *status = cudaStreamCaptureStatusNone;
    std::lock_guard<std::mutex> lock(mu);
    if (!stream) {
        for (auto &kv : captures)
            if (kv.second.blocking)
                return fail(cudaErrorStreamCaptureImplicit, call,
                            "the legacy stream 0 while a blocking stream captures");
        return cudaSuccess;
    }
    auto it = captures.find(stream);
    if (it != captures.end())
        *status =
            it->second.invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    const char *call = "cudaGraphInstantiate";
    if (!exec || !graph) return fail(cudaErrorInvalidValue, call, "exec or graph is NULL");
    *exec = nullptr;
    if (flags) return fail(cudaErrorInvalidValue, call, "the emulator takes no flags");
    *exec = new gk_emu_graph_exec{graph->nodes};
    return cudaSuccess;
}

/* The nodes run here, in order, each as the call it recorded; the first error ends the replay. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    const char *call = "cudaGraphLaunch";
    if (!exec) return fail(cudaErrorInvalidResourceHandle, call, "exec is NULL");
    if (cudaError_t e = sticky_error()) return e;
    bool captured = false;
    if (cudaError_t e = capture_route(stream, call, &captured)) return e;
    if (captured) {
        capture_invalidate(stream);
        return fail(cudaErrorStreamCaptureUnsupported, call,
                    "the emulator cannot capture a graph launch (capture invalidated)");
    }
    for (const Node &node : exec->nodes)
        if (cudaError_t e = node(stream)) return e;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    if (!exec) return fail(cudaErrorInvalidValue, "cudaGraphExecDestroy", "exec is NULL");
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    if (!graph) return fail(cudaErrorInvalidValue, "cudaGraphDestroy", "graph is NULL");
    delete graph;
    return cudaSuccess;
}
