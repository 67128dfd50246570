/* backend.cu: the CUDA backend's context and everything that is not an op's math.
 * Owns: create/destroy of cu_ctx (device, stream, cuBLASLt handle and workspace, scratch), the
 * checks that turn CUDA failures into the sticky backend error, memory (alloc, free, copies,
 * zero, sync), the buffers the ops share (scratch, grown by reserve to the largest of the op
 * families' needs, which each family's file computes; the column reductions' arrival counters),
 * the gk_ops table and the library's one exported symbol
 * (gk_cuda_backend_entry). Compiled by nvcc into libgptkit-cuda.so, or by g++ against kernels/emu
 * into libgptkit-cuda-emu.so (GK_CUDA_EMU); every other symbol is hidden (-fvisibility=hidden).
 * Thread safety: as backend.h (one host thread per backend). */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_peak.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GK_CUDA_EMU
#define CU_NAME "cuda-emu"
#else
#define CU_NAME "cuda"
#endif

#define CU_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt workspace (Hopper's recommendation) */
#define CU_MIN_SCRATCH ((size_t)64 << 10)     /* scratch before reserve: small ops never get NULL */


/* ---- errors ---- */

/* "cudaMemcpyAsync(dst, ...)" -> "cudaMemcpyAsync": the message names the call, not its text. */
static void call_name(char *buf, size_t n, const char *call)
{
    size_t len = strcspn(call, "(");
    if (len >= n) len = n - 1;
    memcpy(buf, call, len);
    buf[len] = 0;
}

int cu_fail(gk_backend *be, int code, const char *file, int line, const char *fmt, ...)
{
    cu_ctx *c = CU(be);
    char msg[sizeof c->capture_fail];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!c->capturing) return gk_backend_fail(be, code, file, line, "%s", msg);
    if (!c->capture_fail[0]) snprintf(c->capture_fail, sizeof c->capture_fail, "%s", msg);
    return code;
}

int cu_check(gk_backend *be, cudaError_t rc, const char *call, const char *file, int line)
{
    if (rc == cudaSuccess) return 0;
    char name[64];
    call_name(name, sizeof name, call);
    int code = rc == cudaErrorMemoryAllocation ? GK_ENOMEM : GK_EIO;
    return cu_fail(be, code, file, line, "CUDA error: %s (%s) in %s", cudaGetErrorString(rc),
                   cudaGetErrorName(rc), name);
}

int cu_launched(gk_backend *be, const char *kernel, const char *file, int line)
{
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess)
        return cu_fail(be, GK_EIO, file, line, "CUDA error: %s (%s) in kernel %s",
                       cudaGetErrorString(rc), cudaGetErrorName(rc), kernel);
    if (!CU(be)->sync_each) return 0;
    rc = cudaStreamSynchronize(CU(be)->stream);
    if (rc != cudaSuccess)
        return gk_backend_fail(be, GK_EIO, file, line,
                               "CUDA error: %s (%s) in kernel %s (GPT_CUDA_SYNC=1)",
                               cudaGetErrorString(rc), cudaGetErrorName(rc), kernel);
    return 0;
}

/* ---- the buffers the ops share ---- */

void *cu_scratch(gk_backend *be, size_t n, const char *op)
{
    cu_ctx *c = CU(be);
    if (n <= c->scratch_bytes) return c->scratch;
    gk_backend_fail(be, GK_EUSAGE, __FILE__, __LINE__,
                    "cuda %s: needs %zu bytes of scratch, reserve gave %zu", op, n,
                    c->scratch_bytes);
    return NULL;
}

unsigned *cu_col_counters(gk_backend *be, size_t n)
{
    cu_ctx *c = CU(be);
    if (n <= c->col_count_n) return c->col_count;
    unsigned *p = NULL;
    /* the old counters may be in use by a kernel in flight */
    if (CU_CHECK(be, cudaStreamSynchronize(c->stream)) ||
        CU_CHECK(be, cudaMalloc(&p, n * sizeof *p)))
        return NULL;
    if (CU_CHECK(be, cudaMemsetAsync(p, 0, n * sizeof *p, c->stream))) {
        cudaFree(p);
        return NULL;
    }
    cudaFree(c->col_count);
    c->col_count = p, c->col_count_n = n;
    return p;
}

/* ---- memory ---- */

void *cu_alloc(gk_backend *be, size_t n)
{
    void *p = NULL;
    /* cudaMalloc aligns to 256 bytes; a zero-byte request still gets a distinct pointer */
    if (cudaMalloc(&p, n ? n : 256) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: the next launch must not report it */
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, n, CU(be)->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    return p;
}

void cu_free(gk_backend *be, void *p)
{
    if (p) CU_CHECK(be, cudaFree(p));
}

static void *cu_pinned(gk_backend *be, void *p, size_t n)
{
    (void)be;
    if (!n) {
        if (p) cudaFreeHost(p);
        return NULL;
    }
    if (cudaMallocHost(&p, n) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky, as cu_alloc's */
        return NULL;
    }
    return p;
}

void cu_to_device(gk_backend *be, void *dst, const void *host_src, size_t n)
{
    CU_BEGIN(be);
    if (n) CU_CHECK(be, cudaMemcpyAsync(dst, host_src, n, cudaMemcpyHostToDevice, CU(be)->stream));
}

void cu_to_host(gk_backend *be, void *host_dst, const void *src, size_t n)
{
    CU_BEGIN(be);
    if (n &&
        CU_CHECK(be, cudaMemcpyAsync(host_dst, src, n, cudaMemcpyDeviceToHost, CU(be)->stream)))
        return;
    CU_CHECK(be, cudaStreamSynchronize(CU(be)->stream));
}

void cu_copy(gk_backend *be, void *dst, const void *src, size_t n)
{
    CU_BEGIN(be);
    if (n) CU_CHECK(be, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, CU(be)->stream));
}

void cu_zero(gk_backend *be, void *p, size_t n)
{
    CU_BEGIN(be);
    if (n) CU_CHECK(be, cudaMemsetAsync(p, 0, n, CU(be)->stream));
}

void cu_sync(gk_backend *be)
{
    CU_BEGIN(be);
    CU_CHECK(be, cudaStreamSynchronize(CU(be)->stream));
}

/* ---- reserve ---- */

/* The largest scratch an op takes for activations of rows x cols (each family says its own), with
 * attention's for heads of head_size over sequences of T where given, and the arrival counters
 * a recorded decode step takes (growing them would synchronize the stream inside a capture). */
int cu_reserve(gk_backend *be, size_t rows, size_t cols, int head_size, int T, gk_err *err)
{
    cu_ctx *c = CU(be);
    size_t fam[] = {cu_bias_bwd_scratch(rows, cols), cu_layernorm_scratch(rows, cols),
                    cu_encoder_scratch(rows, cols), cu_sumsq_scratch(rows, cols),
                    cu_mlp_scratch(rows, cols),
                    head_size > 0 && T > 0 ? cu_attention_scratch(rows, cols, head_size, T) : 0};
    size_t need = 0;
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++)
        if (fam[i] > need) need = fam[i];
    if (head_size > 0 && !cu_col_counters(be, cu_attention_counters(rows, cols, head_size)))
        return gk_errf(err, be->err.code, "%s", be->err.msg);
    if (need <= c->scratch_bytes) return 0;
    void *s = NULL;
    cudaError_t rc = cudaStreamSynchronize(c->stream); /* ops in flight may use the old scratch */
    if (rc == cudaSuccess) rc = cudaMalloc(&s, need);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        return gk_errf(err, rc == cudaErrorMemoryAllocation ? GK_ENOMEM : GK_EIO,
                       "%s: %zu bytes of scratch: %s", be->what, need, cudaGetErrorString(rc));
    }
    cudaFree(c->scratch);
    c->scratch = s;
    c->scratch_bytes = need;
    return 0;
}

/* ---- memory report ---- */

/* What cudaMemGetInfo says is free, plus the cuBLASLt workspace and the ops' scratch this backend
 * already holds: the plan counts them (GK_GPT2_MEM_SCRATCH), and counted them twice when the
 * backend's were out of the free bytes too. */
static int cu_mem_info(gk_backend *be, size_t *free_bytes, size_t *total_bytes, gk_err *err)
{
    cu_ctx *c = CU(be);
    cudaError_t rc = cudaSetDevice(c->device);
    if (rc == cudaSuccess) rc = cudaMemGetInfo(free_bytes, total_bytes);
    if (rc == cudaSuccess) {
        size_t held = (c->workspace ? c->workspace_bytes : 0) + (c->scratch ? c->scratch_bytes : 0);
        *free_bytes = *free_bytes + held < *total_bytes ? *free_bytes + held : *total_bytes;
        return 0;
    }
    (void)cudaGetLastError();
    return gk_errf(err, GK_EIO, "%s: cudaMemGetInfo: %s", be->what, cudaGetErrorString(rc));
}

/* ---- the table ---- */

/* Filled by name (C++17 has no designated initializers); every slot is set. */
static gk_ops make_ops(void)
{
    gk_ops o;
    memset(&o, 0, sizeof o);
    o.name = CU_NAME;
    o.alloc = cu_alloc, o.free = cu_free, o.to_device = cu_to_device, o.to_host = cu_to_host;
    o.pinned = cu_pinned;
    o.copy = cu_copy, o.zero = cu_zero, o.sync = cu_sync, o.reserve = cu_reserve, o.cast = cu_cast;
    o.gemm = cu_gemm, o.bias_bwd = cu_bias_bwd, o.gemm_bwd = cu_gemm_bwd;
    o.encoder_fwd = cu_encoder_fwd, o.encoder_bwd = cu_encoder_bwd;
    o.layernorm_fwd = cu_layernorm_fwd, o.layernorm_bwd = cu_layernorm_bwd;
    o.attention_fwd = cu_attention_fwd, o.attention_bwd = cu_attention_bwd;
    o.gelu_fwd = cu_gelu_fwd, o.gelu_bwd = cu_gelu_bwd, o.dropout_bwd = cu_dropout_bwd;
    o.residual_layernorm_fwd = cu_residual_layernorm_fwd;
    o.xent_fwd = cu_xent_fwd, o.xent_bwd = cu_xent_bwd, o.sample = cu_sample;
    o.sumsq = cu_sumsq, o.scale = cu_scale, o.adamw = cu_adamw;
    o.adamw_multi = cu_adamw_multi, o.zero_multi = cu_zero_multi, o.add = cu_add_floats;
    o.attention_fwd_at = cu_attention_fwd_at;
    o.matvec = cu_matvec_built() ? cu_matvec : NULL;
    o.mlp = cu_mlp_built() ? cu_mlp : NULL;
    o.record_begin = cu_record_begin, o.record_end = cu_record_end;
    o.replay = cu_replay, o.record_free = cu_record_free;
    o.comm_open = cu_comm_open;
    o.mem_info = cu_mem_info;
    return o;
}
static const gk_ops cu_ops = make_ops();

/* ---- create / destroy ---- */

static void cu_destroy(gk_backend *be)
{
    cu_ctx *c = CU(be);
    if (c) {
        if (c->stream) cudaStreamSynchronize(c->stream);
        cu_gemm_cache_free(be);
        cu_cudnn_close(be);
        cu_optim_cache_free(be);
        cudaFree(c->col_count);
        cudaFree(c->scratch);
        cudaFree(c->bias16);
        cudaFree(c->workspace);
        if (c->lt) cublasLtDestroy(c->lt);
        if (c->stream) cudaStreamDestroy(c->stream);
        (void)cudaGetLastError();
        free(c);
    }
    free(be);
}

/* A failed cuBLASLt call as the sticky error (matmul.cu has its own for the matmuls). */
static int lt_check(gk_backend *be, cublasStatus_t st, const char *call, int line)
{
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    return gk_backend_fail(be, GK_EIO, __FILE__, line, "cublasLt %s: %s", call,
                           cublasLtGetStatusString(st));
}

/* One empty kernel, launched at create: on a GPU this library has no code for, it fails. */
__global__ void probe_kernel(int unused) { (void)unused; }

/* Whether this library's kernels run on the device: a GPU older than sm_80 (their bf16 and wmma
 * need Ampere), or one the build left out of CUDA_ARCH, is refused with one line saying what
 * would help, so that device = auto takes the CPU instead. */
static void cu_probe(gk_backend *be, cu_ctx *c, const cudaDeviceProp *prop)
{
    GK_LAUNCH(probe_kernel, 1, 1, 0, c->stream, 0);
    cudaError_t rc = cudaGetLastError();
    if (rc == cudaSuccess) rc = cudaStreamSynchronize(c->stream);
    int cc = prop->major * 10 + prop->minor;
    if (rc != cudaErrorNoKernelImageForDevice && rc != cudaErrorInvalidDeviceFunction &&
        rc != cudaErrorUnsupportedPtxVersion) {
        CU_CHECK(be, rc);
        return;
    }
    (void)cudaGetLastError();
    if (cc < 80)
        gk_backend_fail(be, GK_EIO, __FILE__, __LINE__,
                        "%.60s has compute capability %d.%d; the CUDA backend needs 8.0 or newer "
                        "(A100, RTX 30xx, H100 and later): use --device=cpu",
                        prop->name, prop->major, prop->minor);
    else
        gk_backend_fail(be, GK_EIO, __FILE__, __LINE__, "%.60s (compute capability %d.%d): this "
                        "libgptkit-cuda.so has no code for it: rebuild with CUDA_ARCH=\"%d\" (%s)",
                        prop->name, prop->major, prop->minor, cc, cudaGetErrorString(rc));
}

/* be->props from the device's properties. */
static void cu_props(gk_backend *be, const cudaDeviceProp *prop)
{
    gk_backend_props *p = &be->props;
    snprintf(p->device, sizeof p->device, "%.63s", prop->name);
    p->memory_bytes = prop->totalGlobalMem;
#ifdef GK_CUDA_EMU
    p->host_memory = prop->integrated; /* the emulator's is the host's, unless GPT_EMU_MEM */
#endif
    p->recompute = 1; /* device memory is the limit: recompute the GELU's output */
#ifdef GK_CUDA_EMU
    p->kind = GK_KIND_CUDA_EMU;
    p->bf16_peak_flops = 0; /* the emulator's speed is no GPU's */
#else
    p->kind = GK_KIND_CUDA;
    p->bf16_peak_flops = gk_cuda_peak_bf16_flops(prop->name);
#endif
}

/* Fills the context of be on device c->device (named GPU gpu in be->what when not 0); any
 * failure is left in be->err. sync_each, no_graphs: gk_backend_opts's cuda_sync, cuda_no_graphs. */
static void cu_setup(gk_backend *be, cu_ctx *c, int bf16_acts, int gpu, int sync_each,
                     int no_graphs)
{
    cudaDeviceProp prop;
    if (CU_CHECK(be, cudaSetDevice(c->device)) ||
        CU_CHECK(be, cudaGetDeviceProperties(&prop, c->device)) ||
        CU_CHECK(be, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) ||
        lt_check(be, cublasLtCreate(&c->lt), "cublasLtCreate", __LINE__) ||
        CU_CHECK(be, cudaMalloc(&c->workspace, CU_WORKSPACE_BYTES)) ||
        CU_CHECK(be, cudaMalloc(&c->scratch, CU_MIN_SCRATCH)) ||
        CU_CHECK(be, cudaMalloc(&c->bias16, CU_BIAS16_MAX * sizeof(bf16))))
        return;
    cu_probe(be, c, &prop);
    if (be->err.code) return;
    c->workspace_bytes = CU_WORKSPACE_BYTES;
    c->scratch_bytes = CU_MIN_SCRATCH;
    c->sm_count = prop.multiProcessorCount;
    c->smem_optin = prop.sharedMemPerBlockOptin;
    c->sync_each = sync_each;
    c->graphs = !no_graphs;
    be->act = bf16_acts ? GK_BF16 : GK_F32;
    cu_props(be, &prop);
    char ordinal[24] = "";
    if (gpu) snprintf(ordinal, sizeof ordinal, "GPU %d: ", gpu);
    snprintf(be->what, sizeof be->what, "%s (%s%.52s, %s)", CU_NAME, ordinal, prop.name,
             bf16_acts ? "bf16" : "fp32");
}

/* The device for ordinal gpu: itself when the machine has it; under the emulator every ordinal
 * >= 0 is its one device (each rank of a run on one machine is a process with its own). */
static int cu_pick_device(int gpu, int *device, gk_err *err)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    (void)cudaGetLastError();
#ifdef GK_CUDA_EMU
    if (gpu >= 0 && count > 0) gpu = 0;
#endif
    if (gpu < 0 || gpu >= count)
        return gk_errf(err, GK_ENOTFOUND, "%s: no GPU %d (this machine has %d)", CU_NAME, gpu,
                       count);
    *device = gpu;
    return 0;
}

/* The attention path o asks for (attention.cu reads c->attention); cudnn where cuDNN is absent
 * is refused here, once, rather than at the first step. */
static void cu_attention_setup(gk_backend *be, cu_ctx *c, int attention)
{
    if (attention < GK_ATTN_AUTO || attention > GK_ATTN_PLAIN) {
        gk_backend_fail(be, GK_EUSAGE, __FILE__, __LINE__, "attention: no path %d", attention);
        return;
    }
    c->attention = attention;
    if (attention != GK_ATTN_CUDNN) return;
    char why[320];
    if (be->act != GK_BF16)
        snprintf(why, sizeof why, "cuDNN's attention is bf16: dtype = bfloat16");
    else if (cu_cudnn_open(be, why, sizeof why) == 0)
        return;
    gk_backend_fail(be, GK_EIO, __FILE__, __LINE__, "attention = cudnn: %s (attention = auto or "
                    "flash takes the own kernels)", why);
}

static int cu_create(gk_backend **out, const gk_backend_opts *o, gk_err *err)
{
    *out = NULL;
    int gpu = o ? o->gpu : 0, device = 0;
    int rc = cu_pick_device(gpu, &device, err);
    if (rc) return rc;
    gk_backend *be = (gk_backend *)calloc(1, sizeof *be);
    cu_ctx *c = (cu_ctx *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return gk_errf(err, GK_ENOMEM, "%s backend: out of memory", CU_NAME);
    }
    be->ops = &cu_ops;
    be->impl = c;
    be->destroy = cu_destroy;
    snprintf(be->what, sizeof be->what, "%s", CU_NAME);
    c->device = device;
    cu_setup(be, c, !o || o->bf16 != 0, gpu, o && o->cuda_sync == 1, o && o->cuda_no_graphs == 1);
    c->fused_grads = o && o->cuda_fused_grads == 1;
    if (!be->err.code) cu_attention_setup(be, c, o ? o->attention : GK_ATTN_AUTO);
    if (be->err.code) {
        int code = gk_errf(err, be->err.code, "%s backend: %s", CU_NAME, be->err.msg);
        cu_destroy(be);
        return code;
    }
    *out = be;
    return 0;
}

/* Devices the runtime sees; no GPU or no NVIDIA driver at all is 0, not an error. A driver
 * older than this library's CUDA (nvidia-smi sees the GPU, CUDA does not) is one, naming both
 * versions: device = auto then says why it took the CPU. */
static int cu_device_count(gk_err *err)
{
    int n = 0, drv = 0, rt = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc == cudaSuccess) return n;
    (void)cudaGetLastError();
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaGetLastError();
    if (rc == cudaErrorNoDevice || (rc == cudaErrorInsufficientDriver && drv == 0)) return 0;
    if (rc == cudaErrorInsufficientDriver)
        return gk_errf(err, GK_EIO,
                       "%s: the NVIDIA driver supports CUDA %d.%d, this "
                       "libgptkit-cuda.so was built with CUDA %d.%d: update "
                       "the driver (or build gptkit with an older CUDA)",
                       CU_NAME, drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    return gk_errf(err, GK_EIO, "%s: %s (%s)", CU_NAME, cudaGetErrorString(rc),
                   cudaGetErrorName(rc));
}

static const gk_backend_entry cu_entry = {GK_BACKEND_ABI, CU_NAME, cu_device_count, cu_create};

extern "C" __attribute__((visibility("default")))
const gk_backend_entry *gk_cuda_backend_entry(void)
{
    return &cu_entry;
}
