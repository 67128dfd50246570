/* emu_warp.cpp: what a warp collective computes once its lanes have met (emu_sched.cpp brings
 * them together), and nvcuda::wmma on top of that.
 * Owns: shuffle and vote semantics (lanes = linear thread id % 32; a shuffle from a lane outside
 * the mask returns the caller's own value, as does one past its width segment for up/down/xor),
 * and the wmma fragment mapping: lane l = 4g + t holds, for element e, the tile entry
 *   accumulator and matrix_a: row g + 8*((e>>1)&1), column 2t + (e&1) + 8*(e>>2)
 *   matrix_b:                 row 2t + (e&1) + 8*((e>>1)&1), column g + 8*(e>>2)
 * (matrix_a is M x K, matrix_b K x N, the accumulator M x N; memory layout is a load's
 * business). */
#include <stdio.h>

#include "kernels/emu/emu_internal.h"

namespace gk_emu {

const char *collective_name(int kind)
{
    static const char *const names[] = {
        "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
        "__ballot_sync", "__any_sync", "__all_sync", "wmma::load_matrix_sync",
        "wmma::store_matrix_sync", "wmma::mma_sync", "__activemask", "mma.h warp primitive",
    };
    return kind >= 0 && kind <= WOP_WARP_FN ? names[kind] : "?";
}

static int shuffle_source(const WarpSlot *s, int lane)
{
    int width = s->width, base = lane & ~(width - 1), src = lane;
    switch (s->kind) {
    case WOP_SHFL: src = base + (s->param & (width - 1)); break;
    case WOP_SHFL_UP: src = lane - s->param >= base ? lane - s->param : lane; break;
    case WOP_SHFL_DOWN: src = lane + s->param < base + width ? lane + s->param : lane; break;
    case WOP_SHFL_XOR: src = (lane ^ s->param) < base + width ? lane ^ s->param : lane; break;
    }
    return src;
}

static void wmma_mma_complete(WarpSlot *const slots[32]);

void complete_collective(WarpSlot *const slots[32], unsigned mask)
{
    int kind = slots[__builtin_ctz(mask)]->kind;
    if (kind >= WOP_SHFL && kind <= WOP_SHFL_XOR) {
        for (int l = 0; l < 32; l++) {
            if (!(mask >> l & 1)) continue;
            int width = slots[l]->width;
            if (width < 1 || width > 32 || (width & (width - 1)))
                fail_thread(kernel_worker(), "%s with width %d (not a power of two up to 32)",
                            collective_name(kind), width);
        }
        uint64_t value[32];
        for (int l = 0; l < 32; l++) value[l] = mask >> l & 1 ? slots[l]->value : 0;
        for (int l = 0; l < 32; l++) {
            if (!(mask >> l & 1)) continue;
            int src = shuffle_source(slots[l], l);
            slots[l]->result =
                src >= 0 && src < 32 && (mask >> src & 1) ? value[src] : slots[l]->value;
        }
        return;
    }
    unsigned ballot = 0;
    for (int l = 0; l < 32; l++)
        if ((mask >> l & 1) && slots[l]->value) ballot |= 1u << l;
    uint64_t result = 0;
    switch (kind) {
    case WOP_BALLOT: result = ballot; break;
    case WOP_ANY: result = ballot != 0; break;
    case WOP_ALL: result = ballot == mask; break;
    case WOP_WMMA_LOAD:
    case WOP_WMMA_STORE:
        for (int l = 1; l < 32; l++)
            if (slots[l]->ptr[0] != slots[0]->ptr[0] || slots[l]->param != slots[0]->param)
                fail_thread(kernel_worker(),
                            "%s: lane %d passed pointer %p ldm %d, lane 0 pointer %p ldm %d",
                            collective_name(kind), l, slots[l]->ptr[0], slots[l]->param,
                            slots[0]->ptr[0], slots[0]->param);
        break;
    case WOP_WMMA_MMA: wmma_mma_complete(slots); return;
    case WOP_WARP_FN: reinterpret_cast<WarpFn>(slots[__builtin_ctz(mask)]->value)(slots); return;
    }
    for (int l = 0; l < 32; l++)
        if (mask >> l & 1) slots[l]->result = result;
}

/* ---- wmma ---- */

static void frag_coord(int use, int lane, int e, int *row, int *col)
{
    int g = lane >> 2, t = lane & 3;
    if (use == WMMA_B) {
        *row = 2 * t + (e & 1) + 8 * ((e >> 1) & 1);
        *col = g + 8 * (e >> 2);
    } else {
        *row = g + 8 * ((e >> 1) & 1);
        *col = 2 * t + (e & 1) + 8 * (e >> 2);
    }
}

static Worker *wmma_worker(const char *op, const void *p, unsigned ldm, size_t elem)
{
    Worker *w = kernel_worker();
    if (!w) return nullptr;
    if ((uintptr_t)p % 32)
        fail_thread(w, "wmma::%s: pointer %p is not 32-byte aligned", op, p);
    if (ldm * elem % 16) fail_thread(w, "wmma::%s: ldm %u is not a multiple of 16 bytes", op, ldm);
    return w;
}

static void wmma_rendezvous(int kind, const void *p, unsigned ldm)
{
    WarpSlot s{kind, 0xffffffffu, 0, (int)ldm, 32, {const_cast<void *>(p)}, 0};
    warp_collective(&s);
}

void wmma_load(int use, bool col_major, void *x, const void *p, unsigned ldm)
{
    size_t elem = use == WMMA_ACC ? sizeof(float) : sizeof(__nv_bfloat16);
    Worker *w = wmma_worker("load_matrix_sync", p, ldm, elem);
    if (!w) return;
    int lane = lane_id(w);
    for (int e = 0; e < 8; e++) {
        int r, c;
        frag_coord(use, lane, e, &r, &c);
        size_t at = col_major ? (size_t)c * ldm + r : (size_t)r * ldm + c;
        race_access(static_cast<const char *>(p) + at * elem, elem, false);
        if (use == WMMA_ACC) static_cast<float *>(x)[e] = static_cast<const float *>(p)[at];
        else static_cast<__nv_bfloat16 *>(x)[e] = static_cast<const __nv_bfloat16 *>(p)[at];
    }
    wmma_rendezvous(WOP_WMMA_LOAD, p, ldm);
}

void wmma_store(float *p, const float *x, unsigned ldm, bool col_major)
{
    Worker *w = wmma_worker("store_matrix_sync", p, ldm, sizeof(float));
    if (!w) return;
    wmma_rendezvous(WOP_WMMA_STORE, p, ldm);
    int lane = lane_id(w);
    for (int e = 0; e < 8; e++) {
        int r, c;
        frag_coord(WMMA_ACC, lane, e, &r, &c);
        float *at = p + (col_major ? (size_t)c * ldm + r : (size_t)r * ldm + c);
        race_access(at, sizeof *at, true);
        *at = x[e];
    }
}

void wmma_mma(float *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c)
{
    WarpSlot s{WOP_WMMA_MMA,
               0xffffffffu,
               0,
               0,
               32,
               {d, const_cast<__nv_bfloat16 *>(a), const_cast<__nv_bfloat16 *>(b),
                const_cast<float *>(c)},
               0};
    warp_collective(&s);
}

static void wmma_mma_complete(WarpSlot *const slots[32])
{
    float A[16][16], B[16][16], C[16][16];
    for (int l = 0; l < 32; l++)
        for (int e = 0; e < 8; e++) {
            int r, c;
            frag_coord(WMMA_A, l, e, &r, &c);
            A[r][c] = (float)static_cast<const __nv_bfloat16 *>(slots[l]->ptr[1])[e];
            frag_coord(WMMA_B, l, e, &r, &c);
            B[r][c] = (float)static_cast<const __nv_bfloat16 *>(slots[l]->ptr[2])[e];
            frag_coord(WMMA_ACC, l, e, &r, &c);
            C[r][c] = static_cast<const float *>(slots[l]->ptr[3])[e];
        }
    for (int l = 0; l < 32; l++) /* every c is read before any d is written: d may be c */
        for (int e = 0; e < 8; e++) {
            int r, c;
            frag_coord(WMMA_ACC, l, e, &r, &c);
            float acc = C[r][c];
            for (int k = 0; k < 16; k++) acc += A[r][k] * B[k][c];
            static_cast<float *>(slots[l]->ptr[0])[e] = acc;
        }
}

} // namespace gk_emu
