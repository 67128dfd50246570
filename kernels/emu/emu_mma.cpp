/* emu_mma.cpp: the warp-level tensor-core primitives of kernels/cuda/mma.h under the emulator.
 * Owns their lane layouts, as the PTX ISA documents them ("Matrix Fragments for mma.m16n8k16 with
 * floating point type", "Warp-level matrix load instruction: ldmatrix"). Lane l = 4g + t (g =
 * groupID = l/4, t = threadID_in_group = l%4); a b32 register holds two b16, the one with the lower
 * index in its low half:
 *   A (16x16, row): register i, half h: row g + 8*(i&1), column 2t + h + 8*(i>>1)
 *   B (16x8, col):  register i, half h: row (k) 2t + h + 8*i, column (n) g
 *   C, D (16x8 f32): element i: row g + 8*(i>>1), column 2t + (i&1)
 *   ldmatrix: matrix i (register i) has its 8 rows at the addresses of lanes 8i..8i+7; lane l gets
 *   row l/4, elements 2t and 2t+1 of each, or with .trans column l/4, rows 2t and 2t+1.
 * So the accumulators of two adjacent n8 tiles are, packed to bf16 in pairs, the A fragment of a
 * 16-wide k slice (register 0, 1 from the first tile's c0c1, c2c3; 2, 3 from the second's).
 * mma accumulates in fp32 in k order (bf16 products are exact in fp32); ldmatrix reads the lane's
 * own rows when the lane gets there (as wmma loads do: the __syncwarp that orders other lanes'
 * writes before it is never hidden) and exchanges them once all 32 lanes are there.
 * cp.async reads its source when the thread issues it but writes the destination only at the
 * thread's wait_group that covers its group (commit_group closes one), so that a read of the
 * destination before that wait (or by another thread before a barrier after it) sees what was
 * there before: a missing wait shows. Copies never committed, or not yet waited for when the
 * block ends, are dropped. */
#include <string.h>

#include <unordered_map>
#include <vector>

#include "kernels/emu/emu_internal.h"
#include "kernels/emu/emu_mma.h"

namespace gk_emu {

enum { OP_MMA = 1, OP_LDMATRIX = 2 };

static const char *op_name(int param)
{
    return param == OP_MMA ? "mma.m16n8k16" : "ldmatrix";
}

/* Every lane of a WOP_WARP_FN group must be at the same primitive with the same shape. */
static void check_same(WarpSlot *const slots[32])
{
    for (int l = 1; l < 32; l++)
        if (slots[l]->value != slots[0]->value || slots[l]->param != slots[0]->param)
            fail_thread(kernel_worker(),
                        "warp primitives do not match: lane 0 at %s (0x%x), lane %d at %s (0x%x)",
                        op_name(slots[0]->param & 15), slots[0]->param, l,
                        op_name(slots[l]->param & 15), slots[l]->param);
}

static float lo_bf16(uint32_t r, int h)
{
    return bf16_bits_to_float((unsigned short)(r >> (16 * h)));
}

static void mma_complete(WarpSlot *const slots[32])
{
    check_same(slots);
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        const uint32_t *a = static_cast<const uint32_t *>(slots[l]->ptr[1]);
        const uint32_t *b = static_cast<const uint32_t *>(slots[l]->ptr[2]);
        const float *c = static_cast<const float *>(slots[l]->ptr[3]);
        for (int i = 0; i < 4; i++)
            for (int h = 0; h < 2; h++)
                A[g + 8 * (i & 1)][2 * t + h + 8 * (i >> 1)] = lo_bf16(a[i], h);
        for (int i = 0; i < 2; i++)
            for (int h = 0; h < 2; h++) B[2 * t + h + 8 * i][g] = lo_bf16(b[i], h);
        for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = c[i];
    }
    for (int l = 0; l < 32; l++) { /* every c was read before any d is written: d may be c */
        int g = l >> 2, t = l & 3;
        float *d = static_cast<float *>(slots[l]->ptr[0]);
        for (int i = 0; i < 4; i++) {
            int r = g + 8 * (i >> 1), n = 2 * t + (i & 1);
            float acc = C[r][n];
            for (int k = 0; k < 16; k++) acc += A[r][k] * B[k][n];
            d[i] = acc;
        }
    }
}

void mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c)
{
    WarpSlot s{WOP_WARP_FN,
               0xffffffffu,
               (uint64_t)(uintptr_t)&mma_complete,
               OP_MMA,
               32,
               {d, const_cast<uint32_t *>(a), const_cast<uint32_t *>(b), const_cast<float *>(c)},
               0};
    warp_collective(&s);
}

static void ldmatrix_complete(WarpSlot *const slots[32])
{
    check_same(slots);
    int n = slots[0]->param >> 4 & 7;
    bool trans = slots[0]->param >> 8 & 1;
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        uint32_t *r = static_cast<uint32_t *>(slots[l]->ptr[0]);
        for (int i = 0; i < n; i++) {
            unsigned short lo, hi;
            if (trans) {
                lo = static_cast<const unsigned short *>(slots[8 * i + 2 * t]->ptr[1])[g];
                hi = static_cast<const unsigned short *>(slots[8 * i + 2 * t + 1]->ptr[1])[g];
            } else {
                const unsigned short *row =
                    static_cast<const unsigned short *>(slots[8 * i + g]->ptr[1]);
                lo = row[2 * t], hi = row[2 * t + 1];
            }
            r[i] = (uint32_t)lo | (uint32_t)hi << 16;
        }
    }
}

void ldmatrix(int n, bool trans, uint32_t *r, const void *row)
{
    Worker *w = kernel_worker();
    if (!w) return;
    int lane = lane_id(w);
    unsigned short mine[8] = {0};
    if (lane < 8 * n) {
        if ((uintptr_t)row % 16)
            fail_thread(w, "ldmatrix.x%d: lane %d's row address %p is not 16-byte aligned", n, lane,
                        row);
        memcpy(mine, row, sizeof mine);
        race_access(row, sizeof mine, false);
    }
    WarpSlot s{WOP_WARP_FN,
               0xffffffffu,
               (uint64_t)(uintptr_t)&ldmatrix_complete,
               OP_LDMATRIX | n << 4 | (int)trans << 8,
               32,
               {r, mine},
               0};
    warp_collective(&s);
}

/* ---- cp.async ---- */

struct AsyncCopy {
    void *dst;
    unsigned char bytes[16]; /* the source, read at issue, zero-filled past src-size */
};
struct AsyncQueue {          /* one kernel thread's copies in flight */
    uint64_t launch = ~(uint64_t)0, block = 0;
    std::vector<AsyncCopy> copies;
    std::vector<size_t> groups; /* the end (in copies) of each committed group, oldest first */
};
/* by kernel thread (a block runs on one host thread); reset when it runs another block */
static thread_local std::unordered_map<const Thread *, AsyncQueue> async_queues;

static AsyncQueue &async_queue(Worker *w)
{
    AsyncQueue &q = async_queues[w->cur];
    if (q.launch != w->grid->seq || q.block != w->block) {
        q.copies.clear(), q.groups.clear();
        q.launch = w->grid->seq, q.block = w->block;
    }
    return q;
}

void cp_async16(void *dst, const void *src, int src_bytes)
{
    Worker *w = kernel_worker();
    if (w && ((uintptr_t)dst % 16 || (uintptr_t)src % 16))
        fail_thread(w, "cp.async 16 bytes from %p to %p: not 16-byte aligned", src, dst);
    if (w && (src_bytes < 0 || src_bytes > 16))
        fail_thread(w, "cp.async with src-size %d (0..16)", src_bytes);
    AsyncCopy c{dst, {0}};
    if (src_bytes > 0) memcpy(c.bytes, src, (size_t)src_bytes);
    if (!w) {
        memcpy(dst, c.bytes, sizeof c.bytes);
        return;
    }
    race_access(dst, sizeof c.bytes, true); /* the copy lands between issue and wait: both count */
    async_queue(w).copies.push_back(c);
}

void cp_async_commit()
{
    Worker *w = kernel_worker();
    if (!w) return;
    AsyncQueue &q = async_queue(w);
    q.groups.push_back(q.copies.size());
}

void cp_async_wait(int n)
{
    Worker *w = kernel_worker();
    if (!w) return;
    AsyncQueue &q = async_queue(w);
    if ((int)q.groups.size() <= n) return;
    size_t done = q.groups[q.groups.size() - 1 - n]; /* the copies of all but the n newest groups */
    for (size_t i = 0; i < done; i++) {
        race_access(q.copies[i].dst, sizeof q.copies[i].bytes, true);
        memcpy(q.copies[i].dst, q.copies[i].bytes, sizeof q.copies[i].bytes);
    }
    q.copies.erase(q.copies.begin(), q.copies.begin() + (ptrdiff_t)done);
    q.groups.erase(q.groups.begin(), q.groups.end() - n);
    for (size_t &g : q.groups) g -= done;
}

} // namespace gk_emu
