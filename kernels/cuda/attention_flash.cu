/* attention_flash.cu: fused causal flash attention for bf16 activations on tensor cores
 * (nvcuda::wmma 16x16x16 bf16 -> fp32), forward and backward; attention.cu decides when it runs.
 * Tiles of 64 query rows x 64 keys; a block is 4 warps, each owning 16 rows of its tile.
 * Forward (FlashAttention-2): per query tile, loop over the key tiles up to the diagonal (causal
 * blocks skipped): S = Q K^T on tensor cores, online softmax in fp32 (running max and sum per
 * row), O = diag(alpha) O + P V with O in accumulator fragments; the (T,T) matrix is never
 * stored; lse = m + log(l) is kept for the backward. Backward: from D = rowsum(dO * O)
 * (attention.cu's), one pass per key tile accumulating dK and dV over the query tiles, and one
 * pass per query tile for dQ, so every output is summed by one warp in a fixed order
 * (deterministic, no atomics).
 * wmma fragments hide which lane holds which element; elementwise row scaling of an accumulator
 * works through a second accumulator loaded from a (16,16) tile of the row factors: fragments
 * of one type share the element mapping, so x[e] of both refer to the same (row, column). */
#include "kernels/cuda/attention.h"
#include "kernels/cuda/reduce.h"

#include <stdint.h>

#include "kernels/rng.h"

using namespace nvcuda;

#define FL_TILE 64               /* query rows and keys per tile */
#define FL_WARPS 4
#define FL_THREADS (32 * FL_WARPS)
#define FL_LDS (FL_TILE + 4)     /* fp32 row stride of a warp's score tiles */
#define FL_LDP (FL_TILE + 8)     /* bf16 row stride of a warp's probability tiles */

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_acc;

/* 16 bytes, for 128-bit copies of 8 bf16 (plain C++ so that both compilers take it). */
struct alignas(16) vec8 {
    uint32_t w[4];
};

static __host__ __device__ constexpr int ld_tile(int D) { return D + 8; }
static __host__ __device__ constexpr size_t align128(size_t n) { return (n + 127) / 128 * 128; }
static __host__ __device__ constexpr size_t tile_bytes(int D)
{
    return align128((size_t)FL_TILE * ld_tile(D) * sizeof(bf16));
}
/* Per warp: `nf` (16,FL_LDS) fp32 tiles, `nb` (16,FL_LDP) bf16 tiles, one (16,16) fp32 tile. */
static __host__ __device__ constexpr size_t warp_bytes(int nf, int nb)
{
    return align128(nf * 16 * FL_LDS * sizeof(float)) + align128(nb * 16 * FL_LDP * sizeof(bf16)) +
           16 * 16 * sizeof(float);
}

/* The dynamic shared memory rounded up to 128 bytes (wmma wants 32-byte aligned tiles; the
 * dialect promises 16): every launch asks for FL_SMEM_SLACK bytes more than its layout. */
#define FL_SMEM_SLACK 128
__device__ __forceinline__ unsigned char *align_smem(unsigned char *p)
{
    return (unsigned char *)(((uintptr_t)p + FL_SMEM_SLACK - 1) & ~(uintptr_t)(FL_SMEM_SLACK - 1));
}

/* dst (FL_TILE, ld_tile(D)) = rows row0.. of src (row stride ld elements); rows >= T are zeros.
 * Every thread of the block takes part. */
template <int D>
__device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, size_t ld, int row0, int T)
{
    constexpr int per_row = D / 8;
    for (int c = threadIdx.x; c < FL_TILE * per_row; c += FL_THREADS) {
        int r = c / per_row, k = (c % per_row) * 8;
        vec8 v = {{0, 0, 0, 0}};
        if (row0 + r < T) v = *(const vec8 *)(src + (size_t)(row0 + r) * ld + k);
        *(vec8 *)(dst + r * ld_tile(D) + k) = v;
    }
}

/* Knobs for measuring on a GPU (tests/bench/gpu_session.sh builds variants; the defaults are
 * the kernels as first measured): FL_PREFETCH 1 issues the next tile's global load
 * one iteration ahead, into registers, so that its latency hides behind the current tile's math;
 * FL_FWD_BLOCKS, FL_BWD_KV_BLOCKS, FL_BWD_Q_BLOCKS ask ptxas for that many blocks per SM (fewer
 * registers a thread; shared memory allows 4, 2 and 3 at D = 64). */
#ifndef FL_PREFETCH
#define FL_PREFETCH 0
#endif
/* unset: no minimum (not the same as 1: ptxas then takes more registers) */
#ifdef FL_FWD_BLOCKS
#define FL_FWD_BOUNDS __launch_bounds__(FL_THREADS, FL_FWD_BLOCKS)
#else
#define FL_FWD_BOUNDS __launch_bounds__(FL_THREADS)
#endif
#ifdef FL_BWD_KV_BLOCKS
#define FL_BWD_KV_BOUNDS __launch_bounds__(FL_THREADS, FL_BWD_KV_BLOCKS)
#else
#define FL_BWD_KV_BOUNDS __launch_bounds__(FL_THREADS)
#endif
#ifdef FL_BWD_Q_BLOCKS
#define FL_BWD_Q_BOUNDS __launch_bounds__(FL_THREADS, FL_BWD_Q_BLOCKS)
#else
#define FL_BWD_Q_BOUNDS __launch_bounds__(FL_THREADS)
#endif

/* A tile on its way to shared memory: fetch_tile starts its global load, put_tile stores it. With
 * FL_PREFETCH 0 fetch_tile does nothing and put_tile is load_tile (the arguments say which
 * tile), so that the kernels compile as without these. The same element-to-thread map as
 * load_tile. */
template <int D> struct tile_fetch {
#if FL_PREFETCH
    static constexpr int per_thread = (FL_TILE * D / 8 + FL_THREADS - 1) / FL_THREADS;
    vec8 v[per_thread];
#endif
};
template <int D>
__device__ __forceinline__ void fetch_tile(tile_fetch<D> &f, const bf16 *src, size_t ld, int row0,
                                           int T)
{
#if FL_PREFETCH
    constexpr int per_row = D / 8;
    for (int i = 0; i < f.per_thread; i++) {
        int c = threadIdx.x + i * FL_THREADS, r = c / per_row, k = (c % per_row) * 8;
        vec8 v = {{0, 0, 0, 0}};
        if (c < FL_TILE * per_row && row0 + r < T)
            v = *(const vec8 *)(src + (size_t)(row0 + r) * ld + k);
        f.v[i] = v;
    }
#else
    (void)f, (void)src, (void)ld, (void)row0, (void)T;
#endif
}
/* dst = the tile fetch_tile(f, src, ld, row0, T) started. */
template <int D>
__device__ __forceinline__ void put_tile(bf16 *dst, const tile_fetch<D> &f, const bf16 *src,
                                         size_t ld, int row0, int T)
{
#if FL_PREFETCH
    constexpr int per_row = D / 8;
    (void)src, (void)ld, (void)row0, (void)T;
    for (int i = 0; i < f.per_thread; i++) {
        int c = threadIdx.x + i * FL_THREADS, r = c / per_row, k = (c % per_row) * 8;
        if (c < FL_TILE * per_row) *(vec8 *)(dst + r * ld_tile(D) + k) = f.v[i];
    }
#else
    (void)f;
    load_tile<D>(dst, src, ld, row0, T);
#endif
}

/* The K and V tiles of key tile kt (rows kt * FL_TILE.. of the qkv block qb's K at + C, V at + 2C),
 * walked by the forward and the dQ pass: kv_fetch starts tile kt; kv_step stores the tile started
 * into ks and vs and starts tile kt + 1 unless kt is the last. */
template <int D> struct kv_fetch_t {
    tile_fetch<D> k, v;
};
template <int D>
__device__ __forceinline__ void kv_fetch(kv_fetch_t<D> &f, const bf16 *qb, size_t ld, int C, int kt,
                                         int T)
{
    fetch_tile<D>(f.k, qb + C, ld, kt * FL_TILE, T);
    fetch_tile<D>(f.v, qb + 2 * C, ld, kt * FL_TILE, T);
}
template <int D>
__device__ __forceinline__ void kv_step(bf16 *ks, bf16 *vs, kv_fetch_t<D> &f, const bf16 *qb,
                                        size_t ld, int C, int kt, int last, int T)
{
    put_tile<D>(ks, f.k, qb + C, ld, kt * FL_TILE, T);
    put_tile<D>(vs, f.v, qb + 2 * C, ld, kt * FL_TILE, T);
    if (kt < last) kv_fetch<D>(f, qb, ld, C, kt + 1, T);
}

/* A (16,16) fp32 tile whose row r is f (the caller's lane holds row lane/2; both lanes of a row
 * write half), loaded as an accumulator fragment. */
__device__ __forceinline__ void row_factor_frag(frag_acc &f, float *tile, float x)
{
    int lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    __syncwarp();
    for (int c = 0; c < 8; c++) tile[r * 16 + half * 8 + c] = x;
    __syncwarp();
    wmma::load_matrix_sync(f, tile, 16, wmma::mem_row_major);
}

/* acc[j] *= the row factors in f, j < n */
template <int n>
__device__ __forceinline__ void scale_rows(frag_acc (&acc)[n], const frag_acc &f)
{
    for (int j = 0; j < n; j++)
        for (int e = 0; e < f.num_elements; e++) acc[j].x[e] *= f.x[e];
}

/* 8 bf16 for one 128-bit store */
struct alignas(16) bf16x8 {
    bf16 h[8];
};

/* Writes the warp's 16 rows (row0 + r < T) of acc[0..D/16) to dst (row stride ld, 16-byte
 * aligned rows) as bf16, staging each (16,16) piece through tile. */
template <int D>
__device__ void store_rows(bf16 *dst, size_t ld, int row0, int T, frag_acc (&acc)[D / 16],
                           float *tile)
{
    int lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    for (int j = 0; j < D / 16; j++) {
        __syncwarp();
        wmma::store_matrix_sync(tile, acc[j], 16, wmma::mem_row_major);
        __syncwarp();
        if (row0 + r < T) {
            bf16x8 v;
            for (int c = 0; c < 8; c++) v.h[c] = __float2bfloat16(tile[r * 16 + half * 8 + c]);
            *(bf16x8 *)(dst + (size_t)(row0 + r) * ld + j * 16 + half * 8) = v;
        }
    }
}

/* out (16, FL_LDS) fp32 = a (16, D) [the warp's rows, as fragments] times the transpose of the
 * FL_TILE rows of bt (stride ld_tile(D)): scores of 16 rows against a whole tile. */
template <int D>
__device__ __forceinline__ void rows_times_tile_t(float *out, const frag_a (&a)[D / 16],
                                                  const bf16 *bt)
{
    for (int c = 0; c < FL_TILE / 16; c++) {
        frag_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int k = 0; k < D / 16; k++) {
            frag_b_col b;
            wmma::load_matrix_sync(b, bt + c * 16 * ld_tile(D) + k * 16, ld_tile(D));
            wmma::mma_sync(acc, a[k], b, acc);
        }
        wmma::store_matrix_sync(out + c * 16, acc, FL_LDS, wmma::mem_row_major);
    }
}

/* acc[j] += p (16, FL_TILE) bf16 [stride FL_LDP] times x (FL_TILE, D) [stride ld_tile(D)]. */
template <int D>
__device__ __forceinline__ void accumulate_pv(frag_acc (&acc)[D / 16], const bf16 *p, const bf16 *x)
{
    for (int c = 0; c < FL_TILE / 16; c++) {
        frag_a a;
        wmma::load_matrix_sync(a, p + c * 16, FL_LDP);
        for (int j = 0; j < D / 16; j++) {
            frag_b_row b;
            wmma::load_matrix_sync(b, x + c * 16 * ld_tile(D) + j * 16, ld_tile(D));
            wmma::mma_sync(acc[j], a, b, acc[j]);
        }
    }
}

/* The warp's rows of a tile (16, D) from shared memory into matrix_a fragments. */
template <int D>
__device__ __forceinline__ void load_rows(frag_a (&f)[D / 16], const bf16 *tile)
{
    int warp = threadIdx.x / 32;
    for (int k = 0; k < D / 16; k++)
        wmma::load_matrix_sync(f[k], tile + warp * 16 * ld_tile(D) + k * 16, ld_tile(D));
}

/* ---- forward ---- */

template <int D> static constexpr size_t fwd_smem()
{
    return FL_SMEM_SLACK + 2 * tile_bytes(D) + FL_WARPS * warp_bytes(1, 1);
}

/* grid (query tiles, NH, B), FL_THREADS. qkv (B,T,3C) -> out (B,T,C), lse (B,NH,T). */
template <int D>
__global__ void FL_FWD_BOUNDS
    flash_fwd(bf16 *out, float *lse, const bf16 *qkv, int T, int C, int NH, float p, uint64_t key)
{
    GK_DYN_SMEM(unsigned char, raw);
    unsigned char *sm = align_smem(raw);
    int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z; /* long rows first */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    size_t ld = 3 * (size_t)C, bh = (size_t)b * NH + h;
    const bf16 *qb = qkv + (size_t)b * T * ld + (size_t)h * D;
    bf16 *ks = (bf16 *)sm, *vs = (bf16 *)(sm + tile_bytes(D));
    unsigned char *wb = sm + 2 * tile_bytes(D) + warp * warp_bytes(1, 1);
    float *ss = (float *)wb, *tile = (float *)(wb + warp_bytes(1, 1) - 16 * 16 * sizeof(float));
    bf16 *ps = (bf16 *)(wb + align128(16 * FL_LDS * sizeof(float)));
    float scale = 1.0f / sqrtf((float)D);
    int t = qt * FL_TILE + warp * 16 + r; /* this lane's query row */

    frag_a qf[D / 16];
    frag_acc of[D / 16], fac;
    kv_fetch_t<D> kv; /* the next key tile's K and V */
    kv_fetch<D>(kv, qb, ld, C, 0, T);
    load_tile<D>(ks, qb, ld, qt * FL_TILE, T);
    __syncthreads();
    load_rows<D>(qf, ks);
    for (int j = 0; j < D / 16; j++) wmma::fill_fragment(of[j], 0.0f);
    float m = -INFINITY, l = 0.0f;
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads(); /* every warp is done with ks, vs */
        kv_step<D>(ks, vs, kv, qb, ld, C, kt, qt, T);
        __syncthreads();
        rows_times_tile_t<D>(ss, qf, ks);
        __syncwarp();
        /* online softmax of row r over this tile's columns half*32 .. +32 */
        const float *srow = ss + r * FL_LDS + half * 32;
        int u0 = kt * FL_TILE + half * 32;
        float mx = -INFINITY;
        for (int c = 0; c < 32; c++)
            if (u0 + c <= t && u0 + c < T) mx = fmaxf(mx, srow[c] * scale);
        mx = xor_reduce<1, 1>(mx, cu_fmax()); /* the row's other half */
        float mnew = fmaxf(m, mx), sum = 0.0f; /* finite: key 0 is in every row's first tile */
        bf16 *prow = ps + r * FL_LDP + half * 32;
        for (int c = 0; c < 32; c++) {
            int u = u0 + c;
            float e = u <= t && u < T ? __expf(srow[c] * scale - mnew) : 0.0f;
            sum += e;
            if (p > 0.0f && e != 0.0f) e *= gk_rng_dropout(key, (bh * T + t) * T + u, p);
            prow[c] = __float2bfloat16(e);
        }
        sum = xor_reduce<1, 1>(sum, cu_add());
        float alpha = __expf(m - mnew);
        l = l * alpha + sum;
        m = mnew;
        row_factor_frag(fac, tile, alpha); /* its __syncwarp also publishes ps */
        scale_rows(of, fac);
        accumulate_pv<D>(of, ps, vs);
    }
    row_factor_frag(fac, tile, 1.0f / l);
    scale_rows(of, fac);
    if (half == 0 && t < T) lse[bh * T + t] = m + logf(l);
    store_rows<D>(out + (size_t)b * T * C + (size_t)h * D, (size_t)C, qt * FL_TILE + warp * 16, T,
                  of, tile);
}

/* ---- backward ---- */

template <int D> static constexpr size_t bwd_kv_smem()
{
    return FL_SMEM_SLACK + 2 * tile_bytes(D) + 2 * FL_TILE * sizeof(float) +
           FL_WARPS * warp_bytes(2, 2);
}

/* grid (key tiles, NH, B), FL_THREADS: dK, dV of one key tile, over the query tiles from the
 * diagonal on. Warp w owns keys w*16..+16 of the tile; its scores are computed transposed
 * (S^T = K Q^T, dP^T = V dO^T) so that dV += P^T dO and dK += dS^T Q read them as row-major A. */
template <int D>
__global__ void FL_BWD_KV_BOUNDS
    flash_bwd_kv(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
                 const float *dsum, int T, int C, int NH, float p, uint64_t key)
{
    GK_DYN_SMEM(unsigned char, raw);
    unsigned char *sm = align_smem(raw);
    int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z, nt = gridDim.x;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    size_t ld = 3 * (size_t)C, bh = (size_t)b * NH + h;
    const bf16 *qb = qkv + (size_t)b * T * ld + (size_t)h * D;
    const bf16 *gb = dout + (size_t)b * T * C + (size_t)h * D;
    bf16 *qs = (bf16 *)sm, *gs = (bf16 *)(sm + tile_bytes(D));
    float *zs = (float *)(sm + 2 * tile_bytes(D)), *ds = zs + FL_TILE;
    unsigned char *wb =
        sm + 2 * tile_bytes(D) + 2 * FL_TILE * sizeof(float) + warp * warp_bytes(2, 2);
    float *st = (float *)wb, *gt = st + 16 * FL_LDS;
    bf16 *pt = (bf16 *)(wb + align128(2 * 16 * FL_LDS * sizeof(float))), *dst = pt + 16 * FL_LDP;
    float *tile = (float *)(wb + warp_bytes(2, 2) - 16 * 16 * sizeof(float));
    float scale = 1.0f / sqrtf((float)D);
    int u = kt * FL_TILE + warp * 16 + r; /* this lane's key row */

    frag_a kf[D / 16], vf[D / 16];
    frag_acc dk[D / 16], dv[D / 16];
    load_tile<D>(qs, qb + C, ld, kt * FL_TILE, T);
    load_tile<D>(gs, qb + 2 * C, ld, kt * FL_TILE, T);
    __syncthreads();
    load_rows<D>(kf, qs);
    load_rows<D>(vf, gs);
    for (int j = 0; j < D / 16; j++)
        wmma::fill_fragment(dk[j], 0.0f), wmma::fill_fragment(dv[j], 0.0f);
    tile_fetch<D> qn, gn; /* the next query tile's Q and dO */
    fetch_tile<D>(qn, qb, ld, kt * FL_TILE, T);
    fetch_tile<D>(gn, gb, (size_t)C, kt * FL_TILE, T);
    for (int qt = kt; qt < nt; qt++) {
        __syncthreads();
        put_tile<D>(qs, qn, qb, ld, qt * FL_TILE, T);
        put_tile<D>(gs, gn, gb, (size_t)C, qt * FL_TILE, T);
        if (qt + 1 < nt) {
            fetch_tile<D>(qn, qb, ld, (qt + 1) * FL_TILE, T);
            fetch_tile<D>(gn, gb, (size_t)C, (qt + 1) * FL_TILE, T);
        }
        for (int i = threadIdx.x; i < FL_TILE; i += FL_THREADS) {
            int t = qt * FL_TILE + i;
            zs[i] = t < T ? lse[bh * T + t] : 0.0f;
            ds[i] = t < T ? dsum[bh * T + t] : 0.0f;
        }
        __syncthreads();
        rows_times_tile_t<D>(st, kf, qs);
        rows_times_tile_t<D>(gt, vf, gs);
        __syncwarp();
        for (int c = 0; c < 32; c++) {
            int i = half * 32 + c, t = qt * FL_TILE + i, e = r * FL_LDS + i;
            float P = 0.0f, dS = 0.0f;
            if (u <= t && t < T && u < T) {
                float mk = p > 0.0f ? gk_rng_dropout(key, (bh * T + t) * T + u, p) : 1.0f;
                float pr = __expf(st[e] * scale - zs[i]);
                P = pr * mk;
                dS = pr * (gt[e] * mk - ds[i]) * scale;
            }
            pt[r * FL_LDP + i] = __float2bfloat16(P);
            dst[r * FL_LDP + i] = __float2bfloat16(dS);
        }
        __syncwarp();
        accumulate_pv<D>(dv, pt, gs);
        accumulate_pv<D>(dk, dst, qs);
    }
    bf16 *du = dqkv + (size_t)b * T * ld + (size_t)h * D;
    store_rows<D>(du + C, ld, kt * FL_TILE + warp * 16, T, dk, tile);
    store_rows<D>(du + 2 * C, ld, kt * FL_TILE + warp * 16, T, dv, tile);
}

template <int D> static constexpr size_t bwd_q_smem()
{
    return FL_SMEM_SLACK + 2 * tile_bytes(D) + FL_WARPS * warp_bytes(2, 1);
}

/* grid (query tiles, NH, B), FL_THREADS: dQ of one query tile, over the key tiles up to the
 * diagonal. */
template <int D>
__global__ void FL_BWD_Q_BOUNDS
    flash_bwd_q(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
                const float *dsum, int T, int C, int NH, float p, uint64_t key)
{
    GK_DYN_SMEM(unsigned char, raw);
    unsigned char *sm = align_smem(raw);
    int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    size_t ld = 3 * (size_t)C, bh = (size_t)b * NH + h;
    const bf16 *qb = qkv + (size_t)b * T * ld + (size_t)h * D;
    bf16 *ks = (bf16 *)sm, *vs = (bf16 *)(sm + tile_bytes(D));
    unsigned char *wb = sm + 2 * tile_bytes(D) + warp * warp_bytes(2, 1);
    float *ss = (float *)wb, *gs = ss + 16 * FL_LDS;
    bf16 *dss = (bf16 *)(wb + align128(2 * 16 * FL_LDS * sizeof(float)));
    float *tile = (float *)(wb + warp_bytes(2, 1) - 16 * 16 * sizeof(float));
    float scale = 1.0f / sqrtf((float)D);
    int t = qt * FL_TILE + warp * 16 + r; /* this lane's query row */
    float z = t < T ? lse[bh * T + t] : 0.0f, dd = t < T ? dsum[bh * T + t] : 0.0f;

    frag_a qf[D / 16], gf[D / 16];
    frag_acc dq[D / 16];
    load_tile<D>(ks, qb, ld, qt * FL_TILE, T);
    load_tile<D>(vs, dout + (size_t)b * T * C + (size_t)h * D, (size_t)C, qt * FL_TILE, T);
    __syncthreads();
    load_rows<D>(qf, ks);
    load_rows<D>(gf, vs);
    for (int j = 0; j < D / 16; j++) wmma::fill_fragment(dq[j], 0.0f);
    kv_fetch_t<D> kv; /* the next key tile's K and V */
    kv_fetch<D>(kv, qb, ld, C, 0, T);
    for (int kt = 0; kt <= qt; kt++) {
        __syncthreads();
        kv_step<D>(ks, vs, kv, qb, ld, C, kt, qt, T);
        __syncthreads();
        rows_times_tile_t<D>(ss, qf, ks);
        rows_times_tile_t<D>(gs, gf, vs);
        __syncwarp();
        for (int c = 0; c < 32; c++) {
            int i = half * 32 + c, u = kt * FL_TILE + i, e = r * FL_LDS + i;
            float dS = 0.0f;
            if (u <= t && u < T && t < T) {
                float mk = p > 0.0f ? gk_rng_dropout(key, (bh * T + t) * T + u, p) : 1.0f;
                dS = __expf(ss[e] * scale - z) * (gs[e] * mk - dd) * scale;
            }
            dss[r * FL_LDP + i] = __float2bfloat16(dS);
        }
        __syncwarp();
        accumulate_pv<D>(dq, dss, ks);
    }
    store_rows<D>(dqkv + (size_t)b * T * ld + (size_t)h * D, ld, qt * FL_TILE + warp * 16, T, dq,
                  tile);
}

/* ---- host side ---- */

template <int D>
static void fwd(gk_backend *be, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C,
                int NH, float p, uint64_t key)
{
    if (cu_attn_smem_optin(be, flash_fwd<D>, fwd_smem<D>(), "flash attention")) return;
    dim3 grid((unsigned)((T + FL_TILE - 1) / FL_TILE), (unsigned)NH, (unsigned)B);
    CU_LAUNCH(be, flash_fwd<D>, grid, FL_THREADS, fwd_smem<D>(), out, lse, qkv, T, C, NH, p, key);
}

void cu_flash_attn_fwd(gk_backend *be, bf16 *out, float *lse, const bf16 *qkv, int B, int T,
                       int C, int NH, float p, uint64_t key)
{
    if (cu_attn_by_head(C / NH, [&](auto d) {
            fwd<decltype(d)::value>(be, out, lse, qkv, B, T, C, NH, p, key);
        }))
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda flash attention: head size %d", C / NH);
}

template <int D>
static void bwd(gk_backend *be, bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse,
                const float *dsum, int B, int T, int C, int NH, float p, uint64_t key)
{
    if (cu_attn_smem_optin(be, flash_bwd_kv<D>, bwd_kv_smem<D>(), "flash attention") ||
        cu_attn_smem_optin(be, flash_bwd_q<D>, bwd_q_smem<D>(), "flash attention"))
        return;
    dim3 grid((unsigned)((T + FL_TILE - 1) / FL_TILE), (unsigned)NH, (unsigned)B);
    CU_LAUNCH(be, flash_bwd_kv<D>, grid, FL_THREADS, bwd_kv_smem<D>(), dqkv, dout, qkv, lse, dsum,
              T, C, NH, p, key);
    CU_LAUNCH(be, flash_bwd_q<D>, grid, FL_THREADS, bwd_q_smem<D>(), dqkv, dout, qkv, lse, dsum,
              T, C, NH, p, key);
}

/* dsum: D = rowsum(dO * O), computed by attention.cu. */
void cu_flash_attn_bwd(gk_backend *be, bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                       const float *lse, const float *dsum, int B, int T, int C, int NH, float p,
                       uint64_t key)
{
    if (cu_attn_by_head(C / NH, [&](auto d) {
            bwd<decltype(d)::value>(be, dqkv, dout, qkv, lse, dsum, B, T, C, NH, p, key);
        }))
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda flash attention: head size %d", C / NH);
}
