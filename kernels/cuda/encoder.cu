/* encoder.cu: the CUDA backend's token + position embedding: forward (with the embedding
 * dropout), and backward through a deterministic sort of the tokens (each token's rows summed by
 * one block in position order, so no atomics and the same bits every run).
 * Kernels are templates on one parameter P (an op_cfg: activation type T, weight type W, pack
 * width V; see cuda_pack.h), packs are 16-byte loads, V = 1 when a row or pointer is not
 * aligned. */
#include "kernels/cuda/cuda_pack.h"
#include "kernels/cuda/reduce.h"

#define EW_THREADS 256

/* out (B*T rows of C) = dropout(wte[token] + wpe[t0 + t]), t0 = *t0p (0 when NULL); packs never
 * cross a row. */
template <class P>
static __global__ void encoder_fwd_kernel(typename P::T *out, const int *tokens,
                                          const typename P::W *wte, const float *wpe,
                                          const int *t0p, int BT, int T, int C, float p,
                                          uint64_t key)
{
    constexpr int V = P::V;
    size_t row_packs = (size_t)(C / V);
    if (t0p) wpe += (size_t)*t0p * C;
    GRID_STRIDE(k, (size_t)BT * row_packs)
    {
        size_t bt = k / row_packs, c = (k - bt * row_packs) * V, i = bt * C + c;
        float a[V], b[V];
        load_f<V>(a, wte + (size_t)tokens[bt] * C + c);
        load_f<V>(b, wpe + (bt % (size_t)T) * C + c);
        for (int j = 0; j < V; j++) a[j] = (a[j] + b[j]) * dropout_of(key, i + j, p);
        store_f<V>(out + i, a);
    }
}

template <typename T, typename W>
static void encoder_fwd_run(gk_backend *be, T *out, const int *tokens, const W *wte,
                            const float *wpe, const int *t0, int B, int Tn, int C, float p,
                            uint64_t key)
{
    constexpr int VW = 16 / sizeof(T);
    size_t n = (size_t)B * Tn * C;
    if (C % VW == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe)) {
        typedef enc_cfg<T, W, VW> P;
        CU_LAUNCH(be, encoder_fwd_kernel<P>, grid_for(be, n / VW, EW_THREADS), EW_THREADS, 0, out,
                  tokens, wte, wpe, t0, B * Tn, Tn, C, p, key);
    } else {
        typedef enc_cfg<T, W, 1> P;
        CU_LAUNCH(be, encoder_fwd_kernel<P>, grid_for(be, n, EW_THREADS), EW_THREADS, 0, out,
                  tokens, wte, wpe, t0, B * Tn, Tn, C, p, key);
    }
}

void cu_encoder_fwd(gk_backend *be, void *out, const int *tokens, const void *wte, gk_elt tw,
                    const float *wpe, const int *t0, int B, int T, int C, float p, uint64_t key)
{
    CU_BEGIN(be);
    if (tw != GK_F32 && tw != GK_BF16) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda encoder_fwd: wte type %d", (int)tw);
        return;
    }
    if (B <= 0 || T <= 0 || C <= 0) return;
    if (be->act == GK_BF16) {
        if (tw == GK_BF16)
            encoder_fwd_run(be, (bf16 *)out, tokens, (const bf16 *)wte, wpe, t0, B, T, C, p, key);
        else encoder_fwd_run(be, (bf16 *)out, tokens, (const float *)wte, wpe, t0, B, T, C, p, key);
    } else {
        if (tw == GK_BF16)
            encoder_fwd_run(be, (float *)out, tokens, (const bf16 *)wte, wpe, t0, B, T, C, p, key);
        else
            encoder_fwd_run(be, (float *)out, tokens, (const float *)wte, wpe, t0, B, T, C, p, key);
    }
}

/* Backward. dwpe: for each (t, c), the sum over b in order. dwte: the keys (token << 32 | position)
 * are sorted (bitonic tiles of 1024 in shared memory, then merge passes by binary search: keys are
 * unique, so the result does not depend on scheduling); the first position of each token's run
 * then sums its run in position order (rows split over SEG_TY fixed row groups, added in order)
 * and adds the sum to that token's row of dwte, which no other block touches. */

#define SORT_TILE 1024
#define SORT_THREADS 512
#define SEG_TX 32
#define SEG_TY 8

static __global__ void sort_tiles_kernel(uint64_t *keys, const int *tokens, int N)
{
    __shared__ uint64_t s[SORT_TILE];
    int base = blockIdx.x * SORT_TILE;
    for (int i = threadIdx.x; i < SORT_TILE; i += blockDim.x)
        s[i] = base + i < N ? (uint64_t)(uint32_t)tokens[base + i] << 32 | (uint32_t)(base + i)
                            : ~(uint64_t)0;
    __syncthreads();
    for (int k = 2; k <= SORT_TILE; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < SORT_TILE; i += blockDim.x) {
                int l = i ^ j;
                if (l <= i) continue; /* the pair (l, i) belongs to l's thread */
                uint64_t a = s[i], b = s[l];
                if ((a > b) == ((i & k) == 0)) s[i] = b, s[l] = a;
            }
            __syncthreads();
        }
    for (int i = threadIdx.x; i < SORT_TILE && base + i < N; i += blockDim.x) keys[base + i] = s[i];
}

/* Merges the sorted runs of w keys pairwise: each key's place is its rank in its own run plus the
 * count of smaller keys in the partner run. */
static __global__ void merge_runs_kernel(uint64_t *out, const uint64_t *in, int N, int w)
{
    GRID_STRIDE(k, (size_t)N)
    {
        int i = (int)k, r = i / w, ps = (r ^ 1) * w;
        uint64_t key = in[i];
        if (ps >= N) {
            out[i] = key;
            continue;
        }
        int lo = ps, hi = ps + w < N ? ps + w : N;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (in[mid] < key) lo = mid + 1;
            else hi = mid;
        }
        out[(r & ~1) * w + (i - r * w) + (lo - ps)] = key;
    }
}

template <class P>
static __global__ void encoder_dwte_kernel(float *dwte, const typename P::T *dout,
                                           const uint64_t *sorted, int N, int C, float p,
                                           uint64_t key)
{
    constexpr int V = P::V;
    __shared__ float red[SEG_TY][V][SEG_TX];
    int k = blockIdx.x, tx = threadIdx.x, ty = threadIdx.y, row_packs = C / V;
    uint32_t tok = (uint32_t)(sorted[k] >> 32);
    if (k > 0 && (uint32_t)(sorted[k - 1] >> 32) == tok) return; /* not the first of its run */
    int e = k + 1;
    while (e < N && (uint32_t)(sorted[e] >> 32) == tok) e++;
    for (int base = 0; base < row_packs; base += SEG_TX) {
        int cp = base + tx;
        float acc[V] = {};
        if (cp < row_packs)
            for (int r = k + ty; r < e; r += SEG_TY) {
                size_t i = (size_t)(uint32_t)sorted[r] * C + (size_t)cp * V;
                float d[V];
                load_f<V>(d, dout + i);
                for (int j = 0; j < V; j++) acc[j] += d[j] * dropout_of(key, i + j, p);
            }
        for (int j = 0; j < V; j++) red[ty][j][tx] = acc[j];
        __syncthreads();
        if (ty == 0 && cp < row_packs) {
            float *w = dwte + (size_t)tok * C + (size_t)cp * V, cur[V];
            load_f<V>(cur, w);
            for (int j = 0; j < V; j++) cur[j] += strided_sum(&red[0][j][tx], SEG_TY, V * SEG_TX);
            store_f<V>(w, cur);
        }
        __syncthreads();
    }
}

/* dwpe (T,C) += sum over b of dropout'd dout[b][t]; V divides C. */
template <class P>
static __global__ void encoder_dwpe_kernel(float *dwpe, const typename P::T *dout, int B, int T,
                                           int C, float p, uint64_t key)
{
    constexpr int V = P::V;
    size_t tc = (size_t)T * C;
    GRID_STRIDE(k, tc / V)
    {
        size_t i = k * V;
        float acc[V] = {}, d[V];
        for (int b = 0; b < B; b++) {
            load_f<V>(d, dout + b * tc + i);
            for (int j = 0; j < V; j++) acc[j] += d[j] * dropout_of(key, b * tc + i + j, p);
        }
        load_f<V>(d, dwpe + i);
        for (int j = 0; j < V; j++) d[j] += acc[j];
        store_f<V>(dwpe + i, d);
    }
}

template <typename T, int V>
static void encoder_bwd_run(gk_backend *be, float *dwte, float *dwpe, const T *dout,
                            const int *tokens, int B, int Tn, int C, float p, uint64_t key)
{
    typedef op_cfg<T, V> P;
    int N = B * Tn;
    uint64_t *a = (uint64_t *)cu_scratch(be, cu_encoder_scratch((size_t)N, (size_t)C),
                                         "encoder_bwd"),
             *b = a + N;
    if (!a) return;
    CU_LAUNCH(be, sort_tiles_kernel, cu_blocks((size_t)N, SORT_TILE), SORT_THREADS, 0, a, tokens,
              N);
    for (int w = SORT_TILE; w < N; w *= 2) {
        CU_LAUNCH(be, merge_runs_kernel, cu_blocks((size_t)N, EW_THREADS), EW_THREADS, 0, b, a, N,
                  w);
        uint64_t *t = a;
        a = b, b = t;
    }
    CU_LAUNCH(be, encoder_dwte_kernel<P>, (unsigned)N, dim3(SEG_TX, SEG_TY), 0, dwte, dout, a, N, C,
              p, key);
    CU_LAUNCH(be, encoder_dwpe_kernel<P>, grid_for(be, (size_t)Tn * C / V, EW_THREADS), EW_THREADS,
              0, dwpe, dout, B, Tn, C, p, key);
}

/* The backward's sort keys: two buffers of one uint64 a row (encoder_bwd_run's). */
size_t cu_encoder_scratch(size_t rows, size_t cols)
{
    (void)cols;
    return 2 * rows * sizeof(uint64_t);
}

void cu_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens,
                    int B, int T, int C, float p, uint64_t key)
{
    CU_BEGIN(be);
    if (B <= 0 || T <= 0 || C <= 0) return;
    bool ok = aligned16(dwte) && aligned16(dwpe) && aligned16(dout);
    if (be->act == GK_BF16) {
        if (ok && C % 8 == 0)
            encoder_bwd_run<bf16, 8>(be, dwte, dwpe, (const bf16 *)dout, tokens, B, T, C, p, key);
        else encoder_bwd_run<bf16, 1>(be, dwte, dwpe, (const bf16 *)dout, tokens, B, T, C, p, key);
    } else {
        if (ok && C % 4 == 0)
            encoder_bwd_run<float, 4>(be, dwte, dwpe, (const float *)dout, tokens, B, T, C, p, key);
        else
            encoder_bwd_run<float, 1>(be, dwte, dwpe, (const float *)dout, tokens, B, T, C, p, key);
    }
}
