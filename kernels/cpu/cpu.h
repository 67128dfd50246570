/* cpu.h: the CPU backend: fp32, OpenMP threads, CBLAS (OpenBLAS) sgemm, fused loops.
 * Owns: a gk_backend with a thread count and scratch sized by ops->reserve.
 * Lifetime: gk_cpu_create / gk_backend_free. Thread safety: one host thread drives a backend. */
#ifndef GK_CPU_H
#define GK_CPU_H

#include "kernels/backend.h"

/* Creates the CPU backend using nthreads threads (<= 0: omp_get_max_threads()). 0 or GK_ENOMEM. */
int gk_cpu_create(gk_backend **out, int nthreads, gk_err *err);
/* The instruction-set paths of the hand-written kernels (fp16 and int8 weights): 0 portable C, 1
 * AVX2 + FMA + F16C, 2 that and AVX-512 VNNI (int8 dot products). A backend takes the best its
 * machine runs; gk_cpu_isa says which, gk_cpu_set_isa picks another (tests, benchmarks): 0, or
 * GK_EUSAGE (be unchanged) when the machine cannot run it or be is not a cpu backend. */
int gk_cpu_isa(const gk_backend *be);
int gk_cpu_set_isa(gk_backend *be, int isa, gk_err *err);
const char *gk_cpu_isa_name(int isa);

#endif
