/* cuda_peak.h: the dense bf16 tensor-core peak of a GPU from its name (cudaDeviceProp.name),
 * datasheet figures, for gk_backend_props.bf16_peak_flops (the MFU column of gpt-train).
 * Plain C, header-only: the CUDA backend fills props with it and tests check the table. */
#ifndef GK_CUDA_PEAK_H
#define GK_CUDA_PEAK_H

#include <string.h>

/* FLOP/s of the GPU name names; the first entry found in name wins, so the more specific names
 * come first (an H100 PCIe is not an SXM H100; an L40S not an L4). 0 for a GPU not in the
 * table (and the emulator, "gptkit CUDA emulator"). */
static inline double gk_cuda_peak_bf16_flops(const char *name)
{
    static const struct { const char *name; double tflops; } gpus[] = {
        {"H100 PCIe", 756}, {"H100 NVL", 835}, {"H100", 989.5}, {"H200", 989.5}, {"H800", 989.5},
        {"B200", 2250},     {"A100", 312},     {"A800", 312},   {"L40S", 362},   {"L40", 181},
        {"L4", 121},        {"RTX 4090", 165.2}, {"RTX 3090", 71},
    };
    for (size_t i = 0; name && i < sizeof gpus / sizeof *gpus; i++)
        if (strstr(name, gpus[i].name)) return gpus[i].tflops * 1e12;
    return 0;
}

#endif
