/* graph.cu: the CUDA backend's recorded steps (backend.h: record_begin, record_end,
 * replay, record_free): a stream capture of the backend's stream into a CUDA graph, instantiated
 * once and launched as one unit. gk_gpt2_forward_at records its one-row decode step with it, so
 * a token costs one launch instead of ~10 a layer (launch overhead, not the GPU, bounds decoding
 * of small models). The open options cuda_no_graphs and cuda_sync (the tools' GPT_CUDA_GRAPHS=0,
 * GPT_CUDA_SYNC=1) turn recording off; so does the first capture that a call in it breaks
 * (cu_fail keeps that call's error out of the sticky one): the step then runs unrecorded, and
 * be->note says why.
 * Thread safety: as backend.h; the capture is thread-local, so another thread's CUDA calls
 * (a checkpoint writer, NCCL) neither join nor invalidate it. */
#include "kernels/cuda/cuda_internal.h"

#include <stdio.h>

int cu_record_begin(gk_backend *be)
{
    cu_ctx *c = CU(be);
    if (be->err.code || c->sync_each || !c->graphs) return 1;
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError(); /* not an error of the run: the step runs unrecorded */
        return 1;
    }
    c->capturing = 1;
    c->capture_fail[0] = 0;
    return 0;
}

/* A capture that failed without a device error: recording stops for good, and be->note says why
 * (the caller runs the step unrecorded, as with cuda_no_graphs). */
static void *give_up_recording(gk_backend *be, cu_ctx *c)
{
    c->graphs = 0;
    (void)cudaGetLastError();
    snprintf(be->note, sizeof be->note, "CUDA graphs off, the steps run unrecorded: %s",
             c->capture_fail);
    return NULL;
}

void *cu_record_end(gk_backend *be)
{
    cu_ctx *c = CU(be);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    /* ended even after an op failed inside it, so that the stream is usable for what follows;
     * still capturing for cu_fail: an instantiation that fails runs nothing either */
    int failed = CU_CHECK(be, cudaStreamEndCapture(c->stream, &graph));
    if (!failed && !be->err.code && !c->capture_fail[0])
        failed = CU_CHECK(be, cudaGraphInstantiate(&exec, graph, 0));
    c->capturing = 0;
    if (graph) cudaGraphDestroy(graph);
    if (failed || be->err.code || c->capture_fail[0]) {
        if (exec) cudaGraphExecDestroy(exec);
        return be->err.code ? NULL : give_up_recording(be, c);
    }
    return exec;
}

void cu_replay(gk_backend *be, void *rec)
{
    CU_BEGIN(be);
    if (CU_CHECK(be, cudaGraphLaunch((cudaGraphExec_t)rec, CU(be)->stream))) return;
    if (CU(be)->sync_each) CU_CHECK(be, cudaStreamSynchronize(CU(be)->stream));
}

void cu_record_free(gk_backend *be, void *rec)
{
    if (!rec) return;
    (void)cudaStreamSynchronize(CU(be)->stream); /* a replay may still be running */
    cudaGraphExecDestroy((cudaGraphExec_t)rec);
    (void)cudaGetLastError();
}
