/* test_emu_order.cu: GPT_EMU_ORDER (kernels/emu/README.md), the emulator's other thread and block
 * orders, against hand-checked tickets: the order threads start in and leave a barrier in, per
 * order; a racy broadcast (a missing __syncthreads) reads differently in forward and reverse;
 * race-free kernels give the same bits in every order, including one that an order-blind deadlock
 * check rejected;
 * a bad value is a launch error naming it. Emulator-only: under nvcc it is an empty test. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/emu/emu_test.h"

#if defined(GK_CUDA_EMU)

/* start[b*n+t]: the order thread t of block b started in (all blocks share the counter);
 * after[t]: the order it left the barrier in, within its block. */
__global__ void tickets(int *counter, int *start, int *after)
{
    __shared__ int released;
    int t = threadIdx.x, n = blockDim.x;
    start[blockIdx.x * n + t] = atomicAdd(counter, 1);
    if (t == 0) released = 0;
    __syncthreads();
    after[blockIdx.x * n + t] = atomicAdd(&released, 1);
}

/* A broadcast through shared memory without the barrier between the write and the reads. */
__global__ void racy_broadcast(int *out)
{
    __shared__ int v;
    if (threadIdx.x == 0) v = 0;
    __syncthreads();
    if (threadIdx.x == 0) v = 7;
    out[threadIdx.x] = v; /* the race: a __syncthreads() is missing above */
}

/* Lanes 2-31 swap among themselves before all 32 do: legal in any order in which lanes 0 and 1
 * reach the second shuffle before the others leave the first. */
__global__ void chained_shuffles(int *out)
{
    int lane = threadIdx.x % 32, v = lane;
    if (lane >= 2) v = __shfl_sync(0xfffffffcu, v, 31);
    out[threadIdx.x] = __shfl_sync(0xffffffffu, v, 2) + lane;
}

static int racy_zeros(const char *order)
{
    enum { n = 64 };
    int h[n], zeros = 0;
    setenv("GPT_EMU_ORDER", order, 1);
    /* its race is the point here (test_emu_race: the checker's) */
    setenv("GPT_EMU_RACECHECK", "0", 1);
    int *out = to_dev<int>(NULL, n);
    GK_LAUNCH(racy_broadcast, 1, n, 0, 0, out);
    CUDA_OK(cudaGetLastError());
    unsetenv("GPT_EMU_RACECHECK");
    to_host(h, out, n);
    cudaFree(out);
    for (int i = 0; i < n; i++) zeros += h[i] == 0;
    return zeros;
}

/* out[0] = the sum of in[0..255]: shuffles within each warp, then the warps' sums through shared
 * memory after a barrier (race-free: its bits cannot depend on the order). */
__global__ void warp_sums(const float *in, float *out)
{
    __shared__ float part[8];
    float v = in[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int w = 0; w < 8; w++) s += part[w];
        out[0] = s;
    }
}

static unsigned warp_sums_bits(void)
{
    float h[256], sum = 0;
    for (int i = 0; i < 256; i++) h[i] = 1.0f / (float)(i + 3);
    float *in = to_dev(h, 256), *out = to_dev<float>(NULL, 1);
    GK_LAUNCH(warp_sums, 1, 256, 0, 0, in, out);
    CUDA_OK(cudaGetLastError());
    to_host(&sum, out, 1);
    cudaFree(in), cudaFree(out);
    unsigned bits;
    memcpy(&bits, &sum, sizeof bits);
    return bits;
}

static void test_orders(void)
{
    enum { blocks = 4, n = 32 };
    int start[blocks * n], after[blocks * n];
    const char *orders[] = {"forward", "reverse", "shuffle"};
    for (int o = 0; o < 3; o++) {
        setenv("GPT_EMU_ORDER", orders[o], 1);
        int *counter = to_dev<int>(NULL, 1), *d_start = to_dev<int>(NULL, blocks * n),
            *d_after = to_dev<int>(NULL, blocks * n);
        CUDA_OK(cudaMemset(counter, 0, sizeof(int)));
        /* 128 threads: one host thread */
        GK_LAUNCH(tickets, blocks, n, 0, 0, counter, d_start, d_after);
        CUDA_OK(cudaGetLastError());
        to_host(start, d_start, blocks * n);
        to_host(after, d_after, blocks * n);
        int fwd = 0, rev = 0, seen[blocks * n] = {0}, last_at_barrier_first = 0;
        for (int b = 0; b < blocks; b++)
            for (int t = 0; t < n; t++) {
                int i = b * n + t, k = start[i];
                fwd += k == i;
                rev += k == blocks * n - 1 - i;
                if (k >= 0 && k < blocks * n) seen[k]++;
                /* the thread that reached the barrier last goes on first */
                last_at_barrier_first += (k % n == n - 1) == (after[i] == 0);
            }
        int perm = 0;
        for (int k = 0; k < blocks * n; k++) perm += seen[k] == 1;
        CHECKF(perm == blocks * n, "%s: start tickets are not a permutation", orders[o]);
        CHECKF(last_at_barrier_first == blocks * n, "%s: barrier release order", orders[o]);
        if (o == 0)
            CHECKF(fwd == blocks * n, "forward: %d of %d threads in id order", fwd, blocks * n);
        if (o == 1)
            CHECKF(rev == blocks * n, "reverse: %d of %d threads in reverse order", rev,
                   blocks * n);
        if (o == 2) CHECKF(fwd < n && rev < n, "shuffle: %d in id order, %d reversed", fwd, rev);
        cudaFree(counter);
        cudaFree(d_start);
        cudaFree(d_after);
    }
    /* the race: forward lets the last thread read before thread 0 writes; reverse runs thread 0
     * first */
    int zeros_forward = racy_zeros("forward"), zeros_reverse = racy_zeros("reverse");
    CHECKF(zeros_forward == 1, "forward: %d threads read 0", zeros_forward);
    CHECKF(zeros_reverse == 0, "reverse: %d threads read 0", zeros_reverse);
    /* shuffle exposes it too (the op tests run in shuffled order only, ops_harness.h):
     * each launch draws another permutation, and those that start thread 0 after a reader differ
     * from forward */
    int exposed = 0;
    for (int rep = 0; rep < 10; rep++) exposed += racy_zeros("shuffle") != zeros_forward;
    CHECKF(exposed >= 5, "shuffle: %d of 10 launches read what forward reads", 10 - exposed);
    /* a race-free kernel gives the same bits in every order */
    setenv("GPT_EMU_ORDER", "shuffle", 1);
    for (int rep = 0; rep < 20; rep++) { /* another permutation each launch */
        int h[64], *d = to_dev<int>(NULL, 64), bad = 0;
        GK_LAUNCH(chained_shuffles, 1, 64, 0, 0, d);
        CUDA_OK(cudaGetLastError());
        to_host(h, d, 64);
        for (int i = 0; i < 64; i++) bad += h[i] != 31 + i % 32;
        CHECKF(bad == 0, "chained shuffles, launch %d: %d wrong", rep, bad);
        cudaFree(d);
    }
    const char *same[] = {"forward", "reverse", "shuffle"};
    unsigned first = 0;
    for (int o = 0; o < 3; o++) {
        setenv("GPT_EMU_ORDER", same[o], 1);
        unsigned bits = warp_sums_bits();
        if (o == 0) first = bits;
        CHECKF(bits == first, "%s: sums %08x, forward %08x", same[o], bits, first);
    }
    setenv("GPT_EMU_ORDER", "sideways", 1);
    int *out = to_dev<int>(NULL, 64);
    GK_LAUNCH(racy_broadcast, 1, 64, 0, 0, out);
    const char *words[] = {"racy_broadcast", "GPT_EMU_ORDER='sideways'",
                           "forward, reverse or shuffle"};
    CHECK(launch_failed_with(cudaErrorInvalidValue, words, 3));
    unsetenv("GPT_EMU_ORDER");
    cudaFree(out);
}
#endif

int main(void)
{
#if defined(GK_CUDA_EMU)
    RUN(test_orders);
#endif
    return TEST_END();
}
