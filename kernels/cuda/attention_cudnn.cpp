/* attention_cudnn.cpp: causal self-attention on cuDNN's fused scaled-dot-product attention,
 * forward and backward in bf16, through NVIDIA's header-only cudnn-frontend (its graph API).
 * Host code only, so the C++ compiler builds it (nvcc would spend minutes on the frontend's
 * headers for no kernel): it includes the CUDA headers that dialect.h would, not dialect.h.
 * Owns: loading libcudnn.so.9 at run time (the frontend's dynamic-loading mode: nothing links
 * cuDNN, so libgptkit-cuda.so loads and runs its own kernels without it), the cuDNN handle, the
 * plans built once per shape (B, T, NH, HS) and kept (a shape cuDNN refuses is remembered too),
 * and which calls cuDNN takes.
 * Layout: qkv (B,T,3C) holds q, k, v as C-wide blocks of each row, head h at h*HS inside each, so
 * Q is the (B,NH,T,HS) tensor at qkv with strides (3CT, HS, 3C, 1), K the same at qkv + C, V at
 * qkv + 2C; out and dout (B,T,C) are (B,NH,T,HS) with strides (CT, HS, C, 1); dQ, dK and dV go
 * to dqkv as Q, K and V lie in qkv (no transposes). lse (B,NH,T) is cuDNN's softmax "stats": the
 * max plus the natural log of the sum of exp of each row of scaled scores, which is the lse of
 * the other paths (attention.cu), so that any backward takes any forward's.
 * Used under attention = cudnn only (auto takes the own fa2 kernels: cuDNN's outputs have not
 * yet been checked on a GPU, see tests/bench/gpu-results.md). Taken: bf16 activations, head
 * sizes of multiples of 8 up to 128, 16-byte aligned buffers, no dropout (cuDNN draws its masks
 * from its own Philox stream, not from gk_rng's keys: the masks of ref, cpu and the own kernels
 * would differ); the rest fails with a line saying why. A shape whose plan cuDNN refuses (T = 1:
 * "s_q = s_kv = 1 is not supported") runs on the own kernels, with be->note saying so once (the
 * tools print it). The workspace is cuDNN's own buffer, grown to the largest plan's: the
 * deterministic backward on Hopper takes cudnn-frontend's dP workspace, B NH T T 2 bytes (400 MB
 * for GPT-2 124M at B = 16), not an estimate of ours.
 * The backward runs cuDNN's deterministic algorithm (the same inputs give the same bits).
 * Built with cuDNN when the Makefile finds cudnn_frontend.h and cudnn.h (GK_HAVE_CUDNN); without
 * them, and under the emulator (which compiles this file too), the same functions say that cuDNN
 * is absent.
 * Thread safety: as backend.h; the loaded library is process-wide (the frontend reads one global
 * handle to it), loaded once and never closed. */
#ifdef GK_CUDA_EMU
#include "kernels/cuda/cuda_internal.h"
#else /* host code alone, compiled by the C++ compiler: the CUDA headers without the dialect */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#define GK_CUDA_DIALECT_H
#include "kernels/cuda/cuda_internal.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#if defined(GK_HAVE_CUDNN) && !defined(GK_CUDA_EMU)

#include <dlfcn.h>

#include <cudnn_frontend.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

namespace fe = cudnn_frontend;

/* The frontend's dynamic loading resolves every cuDNN call in this library through it. */
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace {

enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

typedef std::tuple<int, int, int, int> shape_key; /* B, T, NH, HS */

/* A plan, or why there is none (graph NULL). */
struct plan {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace = 0;
    std::string why;
};

struct cudnn_state {
    cudnnHandle_t handle = nullptr;
    std::map<shape_key, plan> fwd, bwd;
    void *ws = nullptr; /* the plans' workspace, as large as the largest run so far wants */
    size_t ws_bytes = 0;
};

cudnn_state *state(gk_backend *be) { return (cudnn_state *)CU(be)->cudnn; }

/* A (B,NH,T,HS) bf16 tensor whose rows are ld elements apart (3C in qkv, C in out). */
std::shared_ptr<fe::graph::Tensor_attributes> bhtd(fe::graph::Graph &g, const char *name, int uid,
                                                   int B, int T, int NH, int HS, int64_t ld)
{
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({B, NH, T, HS})
                        .set_stride({ld * T, HS, ld, 1})
                        .set_data_type(fe::DataType_t::BFLOAT16));
}
void set_out(const std::shared_ptr<fe::graph::Tensor_attributes> &t, int uid, int B, int T, int NH,
             int HS, int64_t ld)
{
    t->set_output(true).set_uid(uid).set_dim({B, NH, T, HS}).set_stride({ld * T, HS, ld, 1});
    t->set_data_type(fe::DataType_t::BFLOAT16);
}
std::shared_ptr<fe::graph::Graph> new_graph()
{
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

/* Validates and builds g on the handle (the slow part: once per shape); "" or why not. */
std::string build(fe::graph::Graph &g, cudnnHandle_t h, int64_t *workspace)
{
    fe::error_object e = g.validate();
    if (e.is_good()) e = g.build_operation_graph(h);
    if (e.is_good()) e = g.create_execution_plans({fe::HeurMode_t::A});
    if (e.is_good()) e = g.check_support(h);
    if (e.is_good()) e = g.build_plans(h);
    if (e.is_good()) e = g.get_workspace_size(*workspace);
    return e.is_good() ? std::string() : e.get_message();
}

plan make_fwd(cudnnHandle_t h, int B, int T, int NH, int HS)
{
    plan p;
    auto g = new_graph();
    int64_t ld = 3 * (int64_t)NH * HS;
    auto Q = bhtd(*g, "Q", UID_Q, B, T, NH, HS, ld), K = bhtd(*g, "K", UID_K, B, T, NH, HS, ld);
    auto V = bhtd(*g, "V", UID_V, B, T, NH, HS, ld);
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("attention_fwd")
                    .set_generate_stats(true)
                    .set_causal_mask(true)
                    .set_attn_scale(1.0f / sqrtf((float)HS));
    auto [O, stats] = g->sdpa(Q, K, V, opts);
    set_out(O, UID_O, B, T, NH, HS, (int64_t)NH * HS);
    stats->set_output(true).set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT);
    stats->set_dim({B, NH, T, 1}).set_stride({(int64_t)NH * T, T, 1, 1});
    p.why = build(*g, h, &p.workspace);
    if (p.why.empty()) p.graph = g;
    return p;
}

plan make_bwd(cudnnHandle_t h, int B, int T, int NH, int HS)
{
    plan p;
    auto g = new_graph();
    int64_t ld = 3 * (int64_t)NH * HS, C = (int64_t)NH * HS;
    auto Q = bhtd(*g, "Q", UID_Q, B, T, NH, HS, ld), K = bhtd(*g, "K", UID_K, B, T, NH, HS, ld);
    auto V = bhtd(*g, "V", UID_V, B, T, NH, HS, ld), O = bhtd(*g, "O", UID_O, B, T, NH, HS, C);
    auto dO = bhtd(*g, "dO", UID_DO, B, T, NH, HS, C);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("stats")
                               .set_uid(UID_STATS)
                               .set_dim({B, NH, T, 1})
                               .set_stride({(int64_t)NH * T, T, 1, 1})
                               .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("attention_bwd")
                    .set_causal_mask(true)
                    .set_deterministic_algorithm(true)
                    .set_attn_scale(1.0f / sqrtf((float)HS));
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, opts);
    set_out(dQ, UID_DQ, B, T, NH, HS, ld);
    set_out(dK, UID_DK, B, T, NH, HS, ld);
    set_out(dV, UID_DV, B, T, NH, HS, ld);
    p.why = build(*g, h, &p.workspace);
    if (p.why.empty()) p.graph = g;
    return p;
}

/* The plan for the shape from cache (built on first use; a refusal is kept as one). */
const plan &lookup(std::map<shape_key, plan> &cache, int bwd, cudnnHandle_t h, int B, int T, int NH,
                   int HS)
{
    shape_key k(B, T, NH, HS);
    auto it = cache.find(k);
    if (it != cache.end()) return it->second;
    plan p;
    try {
        p = bwd ? make_bwd(h, B, T, NH, HS) : make_fwd(h, B, T, NH, HS);
    } catch (const std::exception &x) {
        p = plan();
        p.why = x.what();
    }
    if (p.why.empty() && !p.graph) p.why = "no plan";
    return cache.emplace(k, p).first->second;
}

/* Whether the call is one cuDNN takes; else why in why[n]. */
int takes(gk_backend *be, int C, int NH, float p, const void *a, const void *b, const void *c,
          const void *d, char *why, size_t n)
{
    int hs = C / NH;
    const void *ptrs[] = {a, b, c, d};
    int aligned = 1;
    for (const void *q : ptrs) aligned &= ((uintptr_t)q % 16) == 0;
    if (be->act != GK_BF16)
        snprintf(why, n, "fp32 activations (cuDNN's attention is bf16: dtype = bfloat16)");
    else if (hs % 8 || hs > 128)
        snprintf(why, n, "head size %d (cuDNN takes multiples of 8 up to 128)", hs);
    else if (p > 0.0f)
        snprintf(why, n, "dropout %g (cuDNN's masks are not gptkit's: attention = auto or flash)",
                 p);
    else if (!aligned || C % 8)
        snprintf(why, n, "buffers not 16-byte aligned");
    else
        return 1;
    return 0;
}

/* The workspace for a plan that wants n bytes: cuDNN's own buffer, grown when a plan wants more
 * (after the stream drains: calls in flight may use the old one); NULL with the sticky error set
 * when the device has no room. */
void *workspace(gk_backend *be, cudnn_state *s, size_t n, const char *op)
{
    if (n <= s->ws_bytes) return s->ws;
    void *w = nullptr;
    cudaError_t rc = cudaStreamSynchronize(CU(be)->stream);
    if (rc == cudaSuccess) rc = cudaMalloc(&w, n);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        cu_fail(be, rc == cudaErrorMemoryAllocation ? GK_ENOMEM : GK_EIO, __FILE__, __LINE__,
                "cudnn %s: %zu bytes of workspace: %s", op, n, cudaGetErrorString(rc));
        return nullptr;
    }
    cudaFree(s->ws);
    s->ws = w, s->ws_bytes = n;
    return w;
}

/* Runs the plan for op (0 fwd, 1 bwd) with pack under attention = cudnn; 1 when it ran or failed
 * (the sticky error set), 0 when the caller runs its own kernels: another setting, or a shape
 * cuDNN has no plan for (T = 1, for one: be->note says so once, and the tools print it). */
int run(gk_backend *be, int bwd, int B, int T, int C, int NH, float p, const void *a,
        const void *b, const void *c, const void *d, std::unordered_map<int64_t, void *> &pack)
{
    cu_ctx *cx = CU(be);
    cudnn_state *s = state(be);
    const char *op = bwd ? "attention_bwd" : "attention_fwd";
    if (!s || cx->attention != GK_ATTN_CUDNN) return 0;
    char why[160];
    if (!takes(be, C, NH, p, a, b, c, d, why, sizeof why)) {
        cu_fail(be, GK_EUSAGE, __FILE__, __LINE__, "cuda %s: attention = cudnn: %s", op, why);
        return 1;
    }
    const plan &pl = lookup(bwd ? s->bwd : s->fwd, bwd, s->handle, B, T, NH, C / NH);
    if (!pl.graph) {
        if (!be->note[0])
            snprintf(be->note, sizeof be->note, "attention = cudnn: the own kernels for %s at "
                     "B=%d T=%d NH=%d HS=%d, since cuDNN has no plan: %.300s", op, B, T, NH,
                     C / NH, pl.why.c_str());
        return 0;
    }
    void *ws = pl.workspace > 0 ? workspace(be, s, (size_t)pl.workspace, op) : nullptr;
    if (pl.workspace > 0 && !ws) return 1;
    cudnnStatus_t st = fe::detail::set_stream(s->handle, cx->stream);
    if (st != CUDNN_STATUS_SUCCESS) {
        cu_fail(be, GK_EIO, __FILE__, __LINE__, "cudnn %s: cudnnSetStream: status %d", op, (int)st);
        return 1;
    }
    std::string err;
    try {
        fe::error_object e = pl.graph->execute(s->handle, pack, ws);
        if (!e.is_good()) err = e.get_message();
    } catch (const std::exception &x) {
        err = x.what();
    }
    if (!err.empty())
        cu_fail(be, GK_EIO, __FILE__, __LINE__, "cudnn %s: %.300s", op, err.c_str());
    return 1;
}

} // namespace

int cu_cudnn_open(gk_backend *be, char *why, size_t n)
{
    if (!fe::cudnn_dlhandle) {
        fe::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
        if (!fe::cudnn_dlhandle) {
            const char *err = dlerror();
            snprintf(why, n, "libcudnn.so.9 does not load (%.200s): install cuDNN 9 or put its "
                     "folder on LD_LIBRARY_PATH", err ? err : "not found");
            return -1;
        }
    }
    cudnn_state *s = new (std::nothrow) cudnn_state();
    if (!s) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    try {
        st = fe::detail::create_handle(&s->handle);
    } catch (const std::exception &x) {
        snprintf(why, n, "cudnnCreate: %.200s", x.what());
        delete s;
        return -1;
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(why, n, "cudnnCreate: status %d", (int)st);
        delete s;
        return -1;
    }
    CU(be)->cudnn = s;
    return 0;
}

void cu_cudnn_close(gk_backend *be)
{
    cudnn_state *s = state(be);
    if (!s) return;
    s->fwd.clear();
    s->bwd.clear();
    cudaFree(s->ws);
    if (s->handle) (void)fe::detail::destroy_handle(s->handle);
    delete s;
    CU(be)->cudnn = nullptr;
}

int cu_cudnn_attn_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C,
                      int NH, float p)
{
    const bf16 *q = (const bf16 *)qkv;
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, (void *)q}, {UID_K, (void *)(q + C)}, {UID_V, (void *)(q + 2 * C)},
        {UID_O, out}, {UID_STATS, (void *)lse}};
    return run(be, 0, B, T, C, NH, p, qkv, out, out, lse, pack);
}

int cu_cudnn_attn_bwd(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                      const void *out, const float *lse, int B, int T, int C, int NH, float p)
{
    const bf16 *q = (const bf16 *)qkv;
    bf16 *dq = (bf16 *)dqkv;
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, (void *)q},          {UID_K, (void *)(q + C)}, {UID_V, (void *)(q + 2 * C)},
        {UID_O, (void *)out},        {UID_DO, (void *)dout},   {UID_STATS, (void *)lse},
        {UID_DQ, (void *)dq},        {UID_DK, (void *)(dq + C)}, {UID_DV, (void *)(dq + 2 * C)}};
    return run(be, 1, B, T, C, NH, p, qkv, dqkv, dout, out, pack);
}

#else /* no cuDNN: the emulator, or a build without the frontend's headers */

int cu_cudnn_open(gk_backend *be, char *why, size_t n)
{
    (void)be;
#ifdef GK_CUDA_EMU
    snprintf(why, n, "cuDNN does not run under the CUDA emulator");
#else
    snprintf(why, n, "this libgptkit-cuda.so was built without cuDNN (no cudnn_frontend.h was "
             "found: see the Makefile's CUDNN)");
#endif
    return -1;
}
void cu_cudnn_close(gk_backend *be) { (void)be; }
int cu_cudnn_attn_fwd(gk_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C,
                      int NH, float p)
{
    (void)be, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH, (void)p;
    return 0;
}
int cu_cudnn_attn_bwd(gk_backend *be, void *dqkv, const void *dout, const void *qkv,
                      const void *out, const float *lse, int B, int T, int C, int NH, float p)
{
    (void)be, (void)dqkv, (void)dout, (void)qkv, (void)out, (void)lse;
    (void)B, (void)T, (void)C, (void)NH, (void)p;
    return 0;
}

#endif
