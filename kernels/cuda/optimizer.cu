/* optimizer.cu: the CUDA backend's optimizer ops: the sum of squares of the gradient norm, scale,
 * add, AdamW on one tensor, and the multi-tensor forms that take a whole table in one launch:
 * AdamW on every parameter tensor (writing the bf16 copy of the weights in the same pass) and the
 * zeroing of many small gradient tensors.
 * Owns: the device copies of the tables (optim_cache in cu_ctx), uploaded only when a table differs
 * from the one of the last call: a model passes the same table every step. A multi-tensor kernel
 * splits each table entry into chunks of a fixed size; a block takes chunks in a grid-stride loop
 * and finds a chunk's entry by binary search over the entries' first chunks, so that one launch
 * covers tensors of any sizes. Each element gets the arithmetic of the one-tensor op (the same
 * device function): the results are the same bits.
 * Thread safety: as backend.h (the cache belongs to one backend). */
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

#include <stdlib.h>
#include <string.h>

#define EW_THREADS 256

/* ---- sum of squares (double), scale ---- */

#define SUMSQ_BLOCKS 512 /* at most; fewer for small n (a function of n only: a fixed split) */
#define SUMSQ_THREADS 256
#define SUMSQ_QUADS 8 /* quads per thread before another block is worth it */

static unsigned sumsq_blocks(size_t n)
{
    size_t b =
        (n / 4 + (size_t)SUMSQ_THREADS * SUMSQ_QUADS - 1) / ((size_t)SUMSQ_THREADS * SUMSQ_QUADS);
    return (unsigned)(b < 1 ? 1 : b > SUMSQ_BLOCKS ? SUMSQ_BLOCKS : b);
}

/* Quad k (elements 4k..4k+3, fewer at the end) is summed by thread k % (blocks*threads) whatever
 * the alignment, so aligned and unaligned calls give the same bits. */
template <int ALIGNED>
static __global__ void sumsq_partial_kernel(double *part, const float *x, size_t n)
{
    __shared__ double red[SUMSQ_THREADS];
    double s = 0.0;
    GRID_STRIDE(k, n / 4)
    {
        float f[4];
        if (ALIGNED) load_f<4>(f, x + 4 * k);
        else
            for (int j = 0; j < 4; j++) f[j] = x[4 * k + j];
        for (int j = 0; j < 4; j++) s += (double)f[j] * f[j];
    }
    size_t tail = n / 4 * 4;
    if ((size_t)blockIdx.x * blockDim.x + threadIdx.x ==
        (tail / 4) % ((size_t)gridDim.x * blockDim.x))
        for (size_t i = tail; i < n; i++) s += (double)x[i] * x[i];
    s = block_tree_sum<SUMSQ_THREADS>(s, red);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* part[SUMSQ_BLOCKS] = the sum of part[0..parts), in a fixed tree; one block. */
static __global__ void sumsq_final_kernel(double *part, int parts)
{
    __shared__ double red[SUMSQ_THREADS];
    double s = 0.0;
    for (int i = threadIdx.x; i < parts; i += SUMSQ_THREADS) s += part[i];
    s = block_tree_sum<SUMSQ_THREADS>(s, red);
    if (threadIdx.x == 0) part[SUMSQ_BLOCKS] = s;
}

void cu_sumsq(gk_backend *be, double *host_out, const float *x, size_t n)
{
    CU_BEGIN(be);
    double *part = (double *)cu_scratch(be, cu_sumsq_scratch(0, 0), "sumsq");
    if (!part) return;
    unsigned blocks = sumsq_blocks(n);
    if (aligned16(x)) CU_LAUNCH(be, sumsq_partial_kernel<1>, blocks, SUMSQ_THREADS, 0, part, x, n);
    else CU_LAUNCH(be, sumsq_partial_kernel<0>, blocks, SUMSQ_THREADS, 0, part, x, n);
    CU_LAUNCH(be, sumsq_final_kernel, 1, SUMSQ_THREADS, 0, part, (int)blocks);
    double sum;
    if (CU_CHECK(be, cudaMemcpyAsync(&sum, part + SUMSQ_BLOCKS, sizeof sum, cudaMemcpyDeviceToHost,
                                     CU(be)->stream)))
        return;
    if (CU_CHECK(be, cudaStreamSynchronize(CU(be)->stream))) return;
    if (!be->err.code) *host_out = sum;
}

/* sumsq's double partials, whatever the shapes. */
size_t cu_sumsq_scratch(size_t rows, size_t cols)
{
    (void)rows, (void)cols;
    return (SUMSQ_BLOCKS + 1) * sizeof(double);
}

template <int V> static __device__ __forceinline__ void scale_at(float *x, float s, size_t i)
{
    float f[V];
    load_f<V>(f, x + i);
    for (int j = 0; j < V; j++) f[j] *= s;
    store_f<V>(x + i, f);
}
template <int V> static __global__ void scale_kernel(float *x, float s, size_t n)
{
    GRID_STRIDE(k, n / V) scale_at<V>(x, s, k * V);
    GRID_STRIDE(k, n % V) scale_at<1>(x, s, n / V * V + k);
}

void cu_scale(gk_backend *be, float *x, float s, size_t n)
{
    CU_BEGIN(be);
    if (n == 0) return;
    if (aligned16(x))
        CU_LAUNCH(be, scale_kernel<4>, grid_for(be, n / 4, EW_THREADS), EW_THREADS, 0, x, s, n);
    else CU_LAUNCH(be, scale_kernel<1>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, x, s, n);
}

template <int V> static __global__ void add_kernel(float *y, const float *x, size_t n)
{
    GRID_STRIDE(k, n / V)
    {
        float a[V], b[V];
        load_f<V>(a, y + k * V);
        load_f<V>(b, x + k * V);
        for (int j = 0; j < V; j++) a[j] += b[j];
        store_f<V>(y + k * V, a);
    }
    GRID_STRIDE(k, n % V) y[n / V * V + k] += x[n / V * V + k];
}

void cu_add_floats(gk_backend *be, float *y, const float *x, size_t n)
{
    CU_BEGIN(be);
    if (n == 0) return;
    if (aligned16(y) && aligned16(x))
        CU_LAUNCH(be, add_kernel<4>, grid_for(be, n / 4, EW_THREADS), EW_THREADS, 0, y, x, n);
    else CU_LAUNCH(be, add_kernel<1>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, y, x, n);
}

/* ---- AdamW on one tensor ---- */

/* AdamW's per-call constants, computed on the host in torch's order (see
 * kernels/ref/optimizer.c). */
typedef struct adamw_k {
    float beta1, beta2, eps, decay, step_size, bc2_sqrt, grad_scale;
} adamw_k;

static adamw_k adamw_consts(float lr, float beta1, float beta2, float eps, float wd, int t,
                            float grad_scale)
{
    adamw_k k;
    k.beta1 = beta1, k.beta2 = beta2, k.eps = eps, k.grad_scale = grad_scale;
    k.step_size = (float)(lr / (1.0 - pow(beta1, t)));
    k.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, t));
    k.decay = (float)(1.0 - (double)lr * wd);
    return k;
}

/* Elements i..i+V-1; copy (type E) written when not NULL. Every product is rounded on its own
 * (__fmul_rn), so that nvcc contracts none into a fused multiply-add: left to itself it contracted
 * them differently in adamw_kernel and adamw_multi_kernel, and the two disagreed in the last bit
 * (test_ops's test_multi saw it on a GPU); this is also the reference's order of roundings. */
template <int V, typename E>
static __device__ __forceinline__ void adamw_at(float *param, const float *grad, float *m, float *v,
                                                E *copy, const adamw_k &k, size_t i)
{
    float p[V], g[V], mm[V], vv[V];
    load_f<V>(p, param + i);
    load_f<V>(g, grad + i);
    load_f<V>(mm, m + i);
    load_f<V>(vv, v + i);
    for (int j = 0; j < V; j++) {
        float gj = __fmul_rn(g[j], k.grad_scale);
        p[j] = __fmul_rn(p[j], k.decay);
        mm[j] = __fmul_rn(mm[j], k.beta1) + __fmul_rn(1.0f - k.beta1, gj);
        vv[j] = __fmul_rn(vv[j], k.beta2) + __fmul_rn(1.0f - k.beta2, __fmul_rn(gj, gj));
        float denom = sqrtf(vv[j]) / k.bc2_sqrt + k.eps;
        p[j] = p[j] - __fmul_rn(k.step_size, mm[j] / denom);
    }
    store_f<V>(param + i, p);
    store_f<V>(m + i, mm);
    store_f<V>(v + i, vv);
    if (copy) store_f<V>(copy + i, p);
}
/* P::T is the copy's type. */
template <class P>
static __global__ void adamw_kernel(float *param, const float *grad, float *m, float *v,
                                    typename P::T *copy, size_t n, adamw_k k)
{
    constexpr int V = P::V;
    GRID_STRIDE(i, n / V) adamw_at<V>(param, grad, m, v, copy, k, i * V);
    GRID_STRIDE(i, n % V) adamw_at<1>(param, grad, m, v, copy, k, n / V * V + i);
}

template <typename E>
static void adamw_run(gk_backend *be, float *param, const float *grad, float *m, float *v, E *copy,
                      size_t n, const adamw_k &k)
{
    /* 4 floats per pack: 16 bytes of each fp32 array, 4 copy elements (8 bytes for bf16) */
    bool ok = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v) &&
              ((uintptr_t)copy & (4 * sizeof(E) - 1)) == 0;
    if (ok) {
        typedef op_cfg<E, 4> P;
        CU_LAUNCH(be, adamw_kernel<P>, grid_for(be, n / 4, EW_THREADS), EW_THREADS, 0, param, grad,
                  m, v, copy, n, k);
    } else {
        typedef op_cfg<E, 1> P;
        CU_LAUNCH(be, adamw_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, param, grad, m,
                  v, copy, n, k);
    }
}

void cu_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
              float lr, float beta1, float beta2, float eps, float wd, int t, float grad_scale,
              void *copy, gk_elt tcopy)
{
    CU_BEGIN(be);
    if (copy && tcopy != GK_F32 && tcopy != GK_BF16) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda adamw: copy type %d", (int)tcopy);
        return;
    }
    if (n == 0) return;
    adamw_k k = adamw_consts(lr, beta1, beta2, eps, wd, t, grad_scale);
    if (copy && tcopy == GK_BF16) adamw_run<bf16>(be, param, grad, m, v, (bf16 *)copy, n, k);
    else adamw_run<float>(be, param, grad, m, v, (float *)copy, n, k);
}

/* ---- the tables of the multi-tensor ops: device copies kept across calls ---- */

typedef struct cu_table {
    void *dev, *host; /* the device copy and the bytes it holds */
    size_t bytes, cap;
} cu_table;
enum { TAB_ADAMW, TAB_ZERO, TAB_COUNT };
typedef struct optim_cache {
    cu_table t[TAB_COUNT];
} optim_cache;

void cu_optim_cache_free(gk_backend *be)
{
    optim_cache *oc = (optim_cache *)CU(be)->optim_cache;
    if (!oc) return;
    for (int i = 0; i < TAB_COUNT; i++) {
        cudaFree(oc->t[i].dev);
        free(oc->t[i].host);
    }
    free(oc);
    CU(be)->optim_cache = NULL;
}

/* The device copy of the table host (bytes) for slot, uploaded (in stream order) only when it
 * differs from that slot's last one; NULL with the sticky error set. */
static const void *cu_table_of(gk_backend *be, int slot, const void *host, size_t bytes,
                               const char *op)
{
    cu_ctx *c = CU(be);
    optim_cache *oc = (optim_cache *)c->optim_cache;
    if (!oc && !(c->optim_cache = oc = (optim_cache *)calloc(1, sizeof *oc))) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "cuda %s: out of memory for its table", op);
        return NULL;
    }
    cu_table *t = &oc->t[slot];
    if (t->dev && t->bytes == bytes && memcmp(t->host, host, bytes) == 0) return t->dev;
    if (bytes > t->cap) {
        void *h = malloc(bytes), *d = NULL;
        if (!h) {
            GK_BACKEND_FAIL(be, GK_ENOMEM, "cuda %s: out of memory for %zu bytes of table", op,
                            bytes);
            return NULL;
        }
        /* the old table may still be read by a kernel in flight */
        if (CU_CHECK(be, cudaStreamSynchronize(c->stream)) || CU_CHECK(be, cudaMalloc(&d, bytes))) {
            free(h);
            return NULL;
        }
        cudaFree(t->dev);
        free(t->host);
        t->dev = d, t->host = h, t->cap = bytes;
    }
    memcpy(t->host, host, bytes);
    t->bytes = 0; /* valid once uploaded */
    if (CU_CHECK(be, cudaMemcpyAsync(t->dev, t->host, bytes, cudaMemcpyHostToDevice, c->stream)))
        return NULL;
    t->bytes = bytes;
    return t->dev;
}

/* The entry that holds chunk c: the last one whose first chunk is <= c (each holds at least
 * one). */
template <typename Ent>
static __device__ __forceinline__ const Ent &entry_of(const Ent *tab, int count, size_t c)
{
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tab[mid].chunk0 <= c) lo = mid;
        else hi = mid - 1;
    }
    return tab[lo];
}

/* ---- AdamW on a table of tensors, one launch ---- */

#define AW_CHUNK 4096 /* elements: 4 packs of 4 for each of 256 threads */

typedef struct aw_entry {
    float *param;
    const float *grad;
    float *m, *v;
    void *copy;
    size_t n, chunk0; /* elements; the entry's first chunk */
    int decay, vec;   /* weight decay applies; packs of 4 (every pointer aligned to one) */
} aw_entry;

/* Chunks in a grid-stride loop; P::T is the copies' type. k.decay is that of the tensors with
 * weight decay; the others get 1, which is what adamw computes for wd = 0. */
template <class P>
static __global__ void adamw_multi_kernel(const aw_entry *tab, int count, size_t chunks, adamw_k k)
{
    typedef typename P::T E;
    for (size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        const aw_entry &e = entry_of(tab, count, c);
        adamw_k ke = k;
        ke.decay = e.decay ? k.decay : 1.0f;
        size_t a = (c - e.chunk0) * AW_CHUNK, b = a + AW_CHUNK < e.n ? a + AW_CHUNK : e.n;
        size_t packed = e.vec ? a + (b - a) / 4 * 4 : a;
        E *copy = (E *)e.copy;
        for (size_t i = a + 4 * threadIdx.x; i < packed; i += 4 * blockDim.x)
            adamw_at<4>(e.param, e.grad, e.m, e.v, copy, ke, i);
        for (size_t i = packed + threadIdx.x; i < b; i += blockDim.x)
            adamw_at<1>(e.param, e.grad, e.m, e.v, copy, ke, i);
    }
}

void cu_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int count, float lr, float beta1,
                    float beta2, float eps, float wd, int t, float grad_scale, gk_elt tcopy)
{
    CU_BEGIN(be);
    /* padding zero: memcmp */
    aw_entry *tab = (aw_entry *)calloc(count > 0 ? (size_t)count : 1, sizeof *tab);
    if (!tab) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "cuda adamw_multi: out of memory for %d tensors", count);
        return;
    }
    size_t esz = tcopy == GK_BF16 ? 2 : 4, chunks = 0;
    int n = 0;
    for (int i = 0; i < count; i++) {
        const gk_adamw_tensor *s = &ts[i];
        if (s->copy && tcopy != GK_F32 && tcopy != GK_BF16) {
            GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda adamw_multi: copy type %d", (int)tcopy);
            break;
        }
        if (s->n == 0) continue;
        aw_entry *e = &tab[n++];
        e->param = s->param, e->grad = s->grad, e->m = s->m, e->v = s->v, e->copy = s->copy;
        e->n = s->n, e->chunk0 = chunks, e->decay = s->decay != 0;
        e->vec = aligned16(s->param) && aligned16(s->grad) && aligned16(s->m) && aligned16(s->v) &&
                 ((uintptr_t)s->copy & (4 * esz - 1)) == 0;
        chunks += (s->n + AW_CHUNK - 1) / AW_CHUNK;
    }
    const aw_entry *d = n && !be->err.code
                            ? (const aw_entry *)cu_table_of(be, TAB_ADAMW, tab,
                                                            (size_t)n * sizeof *tab, "adamw_multi")
                            : NULL;
    free(tab);
    if (!d) return;
    adamw_k k = adamw_consts(lr, beta1, beta2, eps, wd, t, grad_scale);
    unsigned grid = grid_for(be, chunks * EW_THREADS, EW_THREADS);
    typedef op_cfg<bf16, 4> PB;
    typedef op_cfg<float, 4> PF;
    if (tcopy == GK_BF16)
        CU_LAUNCH(be, adamw_multi_kernel<PB>, grid, EW_THREADS, 0, d, n, chunks, k);
    else CU_LAUNCH(be, adamw_multi_kernel<PF>, grid, EW_THREADS, 0, d, n, chunks, k);
}

/* ---- zeroing a table of ranges, one launch ---- */

#define ZR_CHUNK 16384 /* bytes: 4 stores of 16 for each of 256 threads */

typedef struct zr_entry {
    unsigned char *p;
    size_t n, chunk0; /* bytes; the entry's first chunk */
    int vec, pad;     /* p 16-byte aligned */
} zr_entry;

static __global__ void zero_multi_kernel(const zr_entry *tab, int count, size_t chunks)
{
    for (size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        const zr_entry &e = entry_of(tab, count, c);
        size_t a = (c - e.chunk0) * ZR_CHUNK, b = a + ZR_CHUNK < e.n ? a + ZR_CHUNK : e.n;
        size_t packed = e.vec ? a + (b - a) / 16 * 16 : a;
        for (size_t i = a + 16 * threadIdx.x; i < packed; i += 16 * blockDim.x)
            *reinterpret_cast<uint4 *>(e.p + i) = make_uint4(0, 0, 0, 0);
        for (size_t i = packed + threadIdx.x; i < b; i += blockDim.x) e.p[i] = 0;
    }
}

void cu_zero_multi(gk_backend *be, const gk_span *sp, int count)
{
    CU_BEGIN(be);
    zr_entry *tab = (zr_entry *)calloc(count > 0 ? (size_t)count : 1, sizeof *tab);
    if (!tab) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "cuda zero_multi: out of memory for %d ranges", count);
        return;
    }
    size_t chunks = 0;
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (sp[i].n == 0) continue;
        zr_entry *e = &tab[n++];
        e->p = (unsigned char *)sp[i].p, e->n = sp[i].n, e->chunk0 = chunks,
        e->vec = aligned16(sp[i].p);
        chunks += (sp[i].n + ZR_CHUNK - 1) / ZR_CHUNK;
    }
    const zr_entry *d =
        n ? (const zr_entry *)cu_table_of(be, TAB_ZERO, tab, (size_t)n * sizeof *tab, "zero_multi")
          : NULL;
    free(tab);
    if (d)
        CU_LAUNCH(be, zero_multi_kernel, grid_for(be, chunks * EW_THREADS, EW_THREADS), EW_THREADS,
                  0, d, n, chunks);
}
