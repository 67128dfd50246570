/* cpu.h: the CPU backend: fp32, OpenMP threads, CBLAS (OpenBLAS) sgemm, fused loops.
 * Owns: a gk_backend with a thread count and scratch sized by ops->reserve.
 * Lifetime: gk_cpu_create / gk_backend_free. Thread safety: one host thread drives a backend. */
#ifndef GK_CPU_H
#define GK_CPU_H

#include "kernels/backend.h"

/* Creates the CPU backend using nthreads threads (<= 0: omp_get_max_threads()). 0 or GK_ENOMEM. */
int gk_cpu_create(gk_backend **out, int nthreads, gk_err *err);

#endif
