/* cpu_internal.h: what every file of the CPU backend shares, below all of them (not the API).
 * Owns: gk_cpu_impl (thread count, ISA path, scratch; one per backend, created by cpu.c), the ISA
 * clones, the row reductions (cpu_lanes_*) and gk_vexpf. The op files, one per op family
 * (encoder.c, layernorm.c, matmul*.c, attention.c, elementwise.c, classifier.c, optimizer.c,
 * cast.c, as in kernels/ref/ and kernels/cuda/), declare their ops in cpu_ops.h and matmul.h;
 * cpu.c, above them, points the vtable at them.
 * Thread safety: scratch belongs to the op running on the backend. */
#ifndef GK_CPU_INTERNAL_H
#define GK_CPU_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/bf16.h"

/* Hot loops are compiled for AVX-512, AVX2+FMA and baseline x86-64; the loader picks one (ifunc).
 * Each clone computes the same operations in the same order (no contraction: -std=c11). */
#if defined(__x86_64__) && !defined(GK_NO_CLONES)
#define GK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GK_CLONES
#endif

/* An OpenMP pragma's team: the backend's thread count. */
#define NT(be) num_threads(CPU(be)->nthreads)
/* The forward row ops a decoding step runs on one row (batch 1) run it on the calling thread:
 * waking the team for one row of a few microseconds' work cost more than the work (a token runs
 * about 50 of them), and under load a descheduled thread held the whole step at the barrier. */
#define ROWS(N) if ((N) > 1)

/* Reductions over rows use this many fixed chunks, whatever the thread count (determinism). */
#define GK_NCHUNK 16

/* The instruction sets the hand-written kernels (matmul_f16.c, matmul_q8.c) have a path for, in
 * order: each machine runs the best it has (cpu.c: cpu_isa_best, from CPUID), tests may pick a
 * lower one (gk_cpu_set_isa). SCALAR is portable C; AVX2 is AVX2 + FMA + F16C (x86-64-v3);
 * AVX512VNNI adds AVX-512 F, VL and VNNI (matmul_q8.c's dot products; fp16 takes the AVX2 path). */
enum { CPU_ISA_SCALAR = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512VNNI = 2 };

typedef struct gk_cpu_impl {
    int nthreads;
    int isa;          /* CPU_ISA_*: the path the hand-written kernels take */
    int ncores;       /* processors of the machine (fixed per machine; never the thread count) */
    float *scratch;   /* reserve()d (cpu.c): max(GK_NCHUNK*2*cols,
                       * nthreads*gk_cpu_attn_scratch(T,head_size), nthreads*CPU_BF16_PANEL*cols),
                       * or more where an op grew it (gk_cpu_scratch_need) */
    size_t scratch_n; /* in floats */
} gk_cpu_impl;

#define CPU(be) ((gk_cpu_impl *)(be)->impl)

/* Scratch of n floats, or NULL when reserve() did not provide that much: for an op with a path
 * that needs none (the few-row gemms' K split), which it then takes. */
static inline float *cpu_scratch(gk_backend *be, size_t n)
{
    return CPU(be)->scratch_n >= n ? CPU(be)->scratch : NULL;
}
/* Scratch of n floats for an op that needs it (op names it in the error): reserve()'s, or, when a
 * caller asks more than it reserved (a shape past the graph's, a test's own backend), grown to n
 * once and kept, so that the op runs its own code at the same speed and with the same bits as if
 * reserved (it once ran the reference backend's instead: a hidden speed cliff). NULL with
 * GK_ENOMEM recorded in be when that allocation fails. cpu.c. */
float *gk_cpu_scratch_need(gk_backend *be, size_t n, const char *op);

/* Row reductions (softmax, layernorm, log-sum-exp, dot products) keep CPU_LANES partial results in
 * an array, lane j taking elements j mod CPU_LANES, which stays in vector registers on every
 * clone, and combine them in a fixed tree: `omp simd reduction` ended each row in 16 dependent
 * scalar adds through memory (GCC 12), a third of the attention softmax's time on rows of 64. */
#define CPU_LANES 16
static inline float cpu_lanes_sum(float *a)
{
    for (int i = 0; i < 8; i++) a[i] += a[i + 8];
    for (int i = 0; i < 4; i++) a[i] += a[i + 4];
    return (a[0] + a[2]) + (a[1] + a[3]);
}
static inline float cpu_lanes_max(float *a)
{
    for (int i = 0; i < 8; i++) a[i] = a[i] > a[i + 8] ? a[i] : a[i + 8];
    for (int i = 0; i < 4; i++) a[i] = a[i] > a[i + 4] ? a[i] : a[i + 4];
    float x = a[0] > a[2] ? a[0] : a[2], y = a[1] > a[3] ? a[1] : a[3];
    return x > y ? x : y;
}
/* max of x[0..n) (-inf for n = 0; NaNs are passed over) */
static inline float cpu_row_max(const float *restrict x, int n)
{
    float l[CPU_LANES];
    for (int j = 0; j < CPU_LANES; j++) l[j] = -__builtin_inff();
    int n16 = n / CPU_LANES * CPU_LANES;
    for (int i0 = 0; i0 < n16; i0 += CPU_LANES)
#pragma omp simd
        for (int j = 0; j < CPU_LANES; j++) l[j] = x[i0 + j] > l[j] ? x[i0 + j] : l[j];
    for (int i = n16; i < n; i++) l[i - n16] = x[i] > l[i - n16] ? x[i] : l[i - n16];
    return cpu_lanes_max(l);
}

/* The few-row gemms' dot products over K (matmul.c, matmul_bf16.c) keep four sums of 16 lanes:
 * lane i of sum q takes the products k = 64 m + 16 q + i, so the loop runs in a few vector
 * registers on every clone (one array of 64 lanes was kept in memory, and its tree of adds
 * compiled to scalar code: half the speed), then cpu_sum4x16 adds them in a fixed order. */
static inline float cpu_sum4x16(float *restrict s0, const float *restrict s1,
                                const float *restrict s2, const float *restrict s3)
{
    for (int i = 0; i < 16; i++) s0[i] = (s0[i] + s1[i]) + (s2[i] + s3[i]);
    return cpu_lanes_sum(s0);
}

/* gk_vexpf's clamp, {-87.3, 88.3}, defined in cpu.c, out of the callers' sight: with constant
 * bounds GCC folds the clamped lanes' exp into a constant and then computes the caller's own
 * arithmetic once more for them (GELU's division twice over: its forward 3.3x slower). */
extern const float gk_vexpf_lim[2];

/* exp(x) for x in [-87.3, 88.3] (clamped outside), branch-free so loops vectorize: Cephes' expf
 * polynomial after range reduction by ln 2; max relative error ~2 ulp. */
static inline float gk_vexpf(float x)
{
    x = x < gk_vexpf_lim[0] ? gk_vexpf_lim[0] : x;
    x = x > gk_vexpf_lim[1] ? gk_vexpf_lim[1] : x;
    float t = x * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: round to nearest */
    float n = t - 12582912.0f;
    uint32_t ni;
    memcpy(&ni, &t, 4);
    ni -= 0x4B400000u;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t b;
    memcpy(&b, &p, 4);
    b += ni << 23;
    memcpy(&p, &b, 4);
    return p;
}

#endif
