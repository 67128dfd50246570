/* emu_test.h: what the emulator's tests share (they compile with g++ -DGK_CUDA_EMU and with nvcc).
 * Owns: CUDA_OK (a runtime call must succeed), device buffer helpers, and the error-text check.
 * Tests of emulator-only behaviour (errors a GPU would hang on, injected faults) are compiled
 * only under GK_CUDA_EMU. */
#ifndef GK_EMU_TEST_H
#define GK_EMU_TEST_H

#include <string.h>

#include "kernels/cuda/dialect.h"
#include "tests/unit/test.h"

#define CUDA_OK(expr)                                                                           \
    do {                                                                                        \
        cudaError_t e_ = (expr);                                                                \
        CHECKF(e_ == cudaSuccess, "%s -> %d: %s", #expr, (int)e_, cudaGetErrorString(e_));      \
    } while (0)

/* A device copy of n elements of host (NULL: left as allocated). */
template <class T> static T *to_dev(const T *host, size_t n)
{
    void *d = NULL;
    if (cudaMalloc(&d, n * sizeof(T)) != cudaSuccess) return NULL;
    if (host) cudaMemcpy(d, host, n * sizeof(T), cudaMemcpyHostToDevice);
    return static_cast<T *>(d);
}

template <class T> static void to_host(T *host, const T *dev, size_t n)
{
    cudaMemcpy(host, dev, n * sizeof(T), cudaMemcpyDeviceToHost);
}

/* True when the last launch failed with code and its message holds every one of words. */
static inline bool launch_failed_with(cudaError_t code, const char *const *words, int nwords)
{
    cudaError_t e = cudaGetLastError();
    const char *msg = cudaGetErrorString(e);
    bool ok = e == code;
    for (int i = 0; i < nwords; i++) ok = ok && strstr(msg, words[i]);
    if (!ok) fprintf(stderr, "  launch error %d: %s\n", (int)e, msg);
    return ok;
}

#endif
