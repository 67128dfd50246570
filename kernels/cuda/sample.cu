/* sample.cu: backend.h's sample, kernels/infer/sampler.h's chain on the device (temperature ->
 * top-k -> softmax -> top-p -> pick, or greedy at temperature 0), a block a row, so that a
 * decoded token needs no logits on the host: the recorded decode step ends with its draw.
 * No sort: a candidate's rank is (its scaled logit descending, its id ascending), and each cut
 * (top-k's k-th candidate, top-p's and the pick's crossing of a running weight) is the first
 * candidate in rank order whose running weight reaches a target, found by a radix descent over
 * the logits' order-preserving 32-bit keys (a byte a pass: the weight of each of 256 bins among
 * the candidates that share the bytes found so far) and then a scan of the found key's ties in
 * id order. Weights are integers, 1 for top-k and the probability as exp(s - max) 2^32 rounded
 * down for the rest, so their sums are exact in any order: the same draw every run, and the
 * host's but for the rounding of its sums. Without top-k and top-p the pick walks the ids in
 * order, as the host's does. Each pass reads the row again (from L2: the lm_head wrote it), until
 * top-k has kept at most SP_CAND candidates: those go to shared memory, in id order, and the
 * passes after it read them there. */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/reduce.h"

#include <limits.h>

#define SP_THREADS 512
#define SP_WARPS (SP_THREADS / 32)
#define SP_ONE 4294967296.0f /* the weight of the most likely candidate, 2^32 */
#define SP_CAND 1024         /* top-k's candidates kept in shared memory, at most */

typedef unsigned long long u64;

/* What the block shares: the descent's bins and the scans' and reductions' words. */
struct sp_shared {
    float cs[SP_CAND]; /* top-k's candidates: scaled logits and ids, in id order */
    int cid[SP_CAND];
    u64 hist[256];
    u64 wsum[SP_WARPS];
    u64 above;
    float fred[SP_WARPS];
    int bin, found;
    unsigned last;
};

/* The order-preserving key of a float: a larger float, a larger key. */
__device__ __forceinline__ unsigned sp_key(float f)
{
    unsigned u = __float_as_uint(f);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* A prefix of the rank order: the candidates up to (key, id); {0, INT_MAX} holds them all. */
struct sp_cut {
    unsigned key;
    int id;
    __device__ bool holds(unsigned k, int i) const { return k > key || (k == key && i <= id); }
};

/* The candidates of a row: its logits (n of type E) scaled by inv, or (cs not NULL) n of them
 * scaled already, whose ids are cid's; a NaN as -inf; within the top-k and top-p cuts (on their
 * positions i, in id order); their weights, 1 (count) or exp(s - mx) 2^32 rounded down. */
template <typename E> struct sp_row {
    const E *x;
    const float *cs;
    const int *cid;
    int n;
    float inv, mx;
    sp_cut k, p;
    bool count;
    __device__ float s(int i) const { return cs ? cs[i] : cu_f(x[i]) * inv; }
    __device__ int id(int i) const { return cid ? cid[i] : i; }
    /* i's weight, 0 when not a candidate; *key its key */
    __device__ u64 weight(int i, unsigned *key) const
    {
        float v = s(i);
        v = v == v ? v : -INFINITY; /* a NaN as -inf (gk_fill's) */
        *key = sp_key(v);
        if (!k.holds(*key, i) || !p.holds(*key, i)) return 0;
        if (count) return 1;
        float e = expf(v - mx);
        return e > 0.0f ? (u64)(fminf(e, 1.0f) * SP_ONE) : 0;
    }
};

/* Inclusive sum of v over the block's threads in order; *total the block's. */
__device__ u64 sp_scan_block(u64 v, sp_shared *sh, u64 *total)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int o = 1; o < 32; o <<= 1) {
        u64 t = __shfl_up_sync(CU_FULL_MASK, v, o);
        if (lane >= o) v += t;
    }
    __syncthreads(); /* wsum may still be read by a previous call */
    if (lane == 31) sh->wsum[warp] = v;
    __syncthreads();
    u64 before = 0, all = 0;
    for (int w = 0; w < SP_WARPS; w++) {
        before += w < warp ? sh->wsum[w] : 0;
        all += sh->wsum[w];
    }
    *total = all;
    return before + v;
}

/* The first candidate in id order (with key K, when by_key) at which run plus the running
 * weight reaches G: its position (-1: none), *cum the running weight there. Thread t sums its
 * contiguous range of positions, a scan over the threads finds the range the target falls in,
 * and its thread walks it. */
template <typename E>
__device__ int sp_scan_ids(const sp_row<E> &r, bool by_key, unsigned K, u64 run, u64 G,
                           u64 *cum, sp_shared *sh)
{
    int per = (r.n + SP_THREADS - 1) / SP_THREADS, i0 = (int)threadIdx.x * per;
    int i1 = i0 + per < r.n ? i0 + per : r.n;
    unsigned key;
    u64 mine = 0, total;
    for (int i = i0; i < i1; i++) {
        u64 v = r.weight(i, &key);
        mine += !by_key || key == K ? v : 0;
    }
    u64 before = run + sp_scan_block(mine, sh, &total) - mine;
    if (threadIdx.x == 0) sh->found = -1;
    __syncthreads();
    if (before < G && before + mine >= G)
        for (int i = i0; i < i1; i++) {
            u64 v = r.weight(i, &key);
            before += !by_key || key == K ? v : 0;
            if (before >= G) {
                sh->found = i;
                sh->above = before;
                break;
            }
        }
    __syncthreads();
    int found = sh->found;
    *cum = sh->above;
    return found;
}

/* Moves the candidates of r (at most SP_CAND) into shared memory in id order, and r onto them. */
template <typename E> __device__ void sp_compact(sp_row<E> *r, sp_shared *sh)
{
    int per = (r->n + SP_THREADS - 1) / SP_THREADS, i0 = (int)threadIdx.x * per;
    int i1 = i0 + per < r->n ? i0 + per : r->n;
    unsigned key;
    u64 mine = 0, total;
    for (int i = i0; i < i1; i++) mine += r->weight(i, &key) ? 1 : 0;
    int at = (int)(sp_scan_block(mine, sh, &total) - mine);
    for (int i = i0; i < i1; i++)
        if (r->weight(i, &key)) {
            float v = r->s(i);
            sh->cs[at] = v == v ? v : -INFINITY;
            sh->cid[at++] = i;
        }
    __syncthreads();
    r->cs = sh->cs, r->cid = sh->cid, r->n = (int)total;
    r->k = {0, INT_MAX};
}

/* Warp 0 picks the descent's bin: the first, from bin 255 down, at which above plus the bins'
 * running weight reaches G (sh->bin, -1: none; sh->above the weight of the bins before it). */
__device__ void sp_pick_bin(sp_shared *sh, u64 above, u64 G)
{
    int lane = threadIdx.x % 32, top = 255 - 8 * lane;
    u64 sum = 0;
    for (int j = 0; j < 8; j++) sum += sh->hist[top - j];
    u64 incl = sum;
    for (int o = 1; o < 32; o <<= 1) {
        u64 t = __shfl_up_sync(CU_FULL_MASK, incl, o);
        if (lane >= o) incl += t;
    }
    unsigned ball = __ballot_sync(CU_FULL_MASK, above + incl >= G);
    if (!ball) {
        if (lane == 0) sh->bin = -1;
        return;
    }
    if (lane != __ffs((int)ball) - 1) return;
    u64 a = above + incl - sum;
    int j = 0;
    while (j < 7 && a + sh->hist[top - j] < G) a += sh->hist[top - j++];
    sh->bin = top - j;
    sh->above = a;
}

/* The first candidate in rank order at which the running weight reaches G: *cut ends there,
 * *cum the running weight; false when the candidates' weights sum to less than G. */
template <typename E>
__device__ bool sp_find(const sp_row<E> &r, u64 G, sp_cut *cut, u64 *cum, sp_shared *sh)
{
    unsigned prefix = 0, mask = 0;
    u64 above = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += SP_THREADS) sh->hist[b] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < r.n; i += SP_THREADS) {
            unsigned key;
            u64 v = r.weight(i, &key);
            if (v && (key & mask) == prefix) atomicAdd(&sh->hist[(key >> shift) & 255u], v);
        }
        __syncthreads();
        if (threadIdx.x < 32) sp_pick_bin(sh, above, G);
        __syncthreads();
        int bin = sh->bin;
        if (bin < 0) return false;
        prefix |= (unsigned)bin << shift;
        mask |= 255u << shift;
        above = sh->above;
        __syncthreads(); /* bin and above are read before a later pass writes them */
    }
    int id = sp_scan_ids(r, true, prefix, above, G, cum, sh);
    if (id < 0) return false;
    *cut = {prefix, id};
    return true;
}

/* The block's largest non-NaN s (-inf: none). */
template <typename E> __device__ float sp_max(const sp_row<E> &r, sp_shared *sh)
{
    float m = -INFINITY;
    for (int i = threadIdx.x; i < r.n; i += SP_THREADS) m = fmaxf(m, r.s(i));
    return block_max<SP_WARPS>(m, sh->fred);
}

/* gk_greedy's token of the n logits x: 0 where the first is NaN, else the first that equals
 * the largest. */
template <typename E> __device__ int sp_greedy(const E *x, int n, sp_shared *sh)
{
    sp_row<E> r = {x, NULL, NULL, n, 1.0f, 0.0f, {0, INT_MAX}, {0, INT_MAX}, false};
    if (r.s(0) != r.s(0)) return 0;
    float m = sp_max(r, sh);
    if (threadIdx.x == 0) sh->found = INT_MAX;
    __syncthreads();
    for (int i = threadIdx.x; i < r.n; i += SP_THREADS)
        if (r.s(i) == m) {
            atomicMin(&sh->found, i);
            break;
        }
    __syncthreads();
    return sh->found;
}

/* The draw of gk_sample (temperature > 0) from row r for the u of sample b at step. */
template <typename E>
__device__ int sp_draw(sp_row<E> r, const gk_params &p, int b, int step, sp_shared *sh)
{
    const E *x = r.x;
    int nx = r.n, n = r.n;
    r.inv = 1.0f / p.temperature;
    r.mx = sp_max(r, sh);
    if (r.mx == -INFINITY || r.mx == INFINITY) return sp_greedy(x, nx, sh);
    u64 cum = 0, total, t;
    bool sorted = false;
    if (p.top_k > 0 && p.top_k < r.n) { /* the k best */
        r.count = true;
        if (sp_find(r, (u64)p.top_k, &r.k, &cum, sh)) n = p.top_k;
        if (n <= SP_CAND) sp_compact(&r, sh);
        r.count = false;
        sorted = true;
    }
    total = 0;
    for (int i = threadIdx.x; i < r.n; i += SP_THREADS) {
        unsigned key;
        total += r.weight(i, &key);
    }
    sp_scan_block(total, sh, &total);
    if (!total) return sp_greedy(x, nx, sh);
    if (p.top_p < 1.0f && n > 1) { /* the fewest best that hold top_p of the weight */
        t = (u64)ceil((double)p.top_p * (double)total);
        if (sp_find(r, t < 1 ? 1 : t > total ? total : t, &r.p, &cum, sh)) total = cum;
        sorted = true;
    }
    t = (u64)((double)gk_sample_uniform(p.seed, (uint32_t)b, (uint64_t)step) * (double)total) + 1;
    t = t > total ? total : t;
    int at;
    if (!sorted) {
        at = sp_scan_ids(r, false, 0, 0, t, &cum, sh);
    } else {
        sp_cut cut;
        at = sp_find(r, t, &cut, &cum, sh) ? cut.id : -1;
    }
    return at >= 0 ? r.id(at) : sp_greedy(x, nx, sh);
}

/* grid B: row b's token to ids[b]; the last block to arrive at count moves st on. */
template <typename E>
__global__ void __launch_bounds__(SP_THREADS)
    sample_rows(int *ids, const E *logits, size_t ld, int n, gk_params p, int *st,
                unsigned *count)
{
    __shared__ sp_shared sh;
    int b = blockIdx.x;
    const E *x = logits + (size_t)b * ld;
    sp_row<E> r = {x, NULL, NULL, n, 1.0f, 0.0f, {0, INT_MAX}, {0, INT_MAX}, false};
    int id = p.temperature > 0.0f ? sp_draw(r, p, b, st[1], &sh) : sp_greedy(x, n, &sh);
    if (threadIdx.x == 0) ids[b] = id;
    if (!block_arrive_last(count, gridDim.x, &sh.last) || threadIdx.x) return;
    st[0] += 1;
    st[1] += 1;
    *count = 0;
}

void cu_sample(gk_backend *be, int *ids, const void *logits, size_t ld, int B, int n,
               const gk_params *p, int *st)
{
    CU_BEGIN(be);
    if (B < 1 || B > 65535 || n < 1 || ld < (size_t)n || !(p->temperature >= 0.0f) ||
        !(p->top_p > 0.0f && p->top_p <= 1.0f) || p->top_k < 0) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cuda sample: %d rows of %d (row stride %zu), "
                        "temperature %g, top-k %d, top-p %g out of its reach", B, n, ld,
                        (double)p->temperature, p->top_k, (double)p->top_p);
        return;
    }
    unsigned *count = cu_col_counters(be, 1);
    if (!count) return;
    if (be->act == GK_BF16)
        CU_LAUNCH(be, sample_rows<bf16>, dim3((unsigned)B), SP_THREADS, 0, ids,
                  (const bf16 *)logits, ld, n, *p, st, count);
    else
        CU_LAUNCH(be, sample_rows<float>, dim3((unsigned)B), SP_THREADS, 0, ids,
                  (const float *)logits, ld, n, *p, st, count);
}
