/* ceilings.c: what make bench measures its CPU rows against: the instruction-set path the CPU
 * backend's dispatcher picks on this machine (gk_cpu_isa of a fresh backend: scalar, avx2 or
 * avx512vnni), and OpenBLAS's sgemm rate on the given number of threads, best of 5 calls of a
 * square product of side n (default 1536; the training rows' gemms reach this size's rate).
 * Prints one line:
 *   isa I sgemm GFLOP/s G threads T n N
 * Usage: ceilings [threads] [n] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/cpu.h"

void openblas_set_num_threads(int num_threads);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int nt = argc > 1 ? atoi(argv[1]) : 2, n = argc > 2 ? atoi(argv[2]) : 1536;
    if (nt < 1 || n < 64 || n > 8192) {
        fprintf(stderr, "usage: ceilings [threads] [n: 64..8192]\n");
        return 2;
    }
    gk_backend *be = NULL;
    gk_err e = {0};
    if (gk_cpu_create(&be, nt, &e)) {
        fprintf(stderr, "ceilings: %s\n", e.msg);
        return 1;
    }
    const char *isa = gk_cpu_isa_name(gk_cpu_isa(be));
    gk_backend_free(be);
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)),
          *c = malloc(nn * sizeof(float));
    if (!a || !b || !c) {
        fprintf(stderr, "ceilings: out of memory for n = %d\n", n);
        return 1;
    }
    for (size_t i = 0; i < nn; i++)
        a[i] = (float)(i % 13) / 13, b[i] = (float)(i % 7) / 7, c[i] = 0;
    openblas_set_num_threads(nt);
    double best = 1e30;
    for (int pass = 0; pass < 6; pass++) { /* the first warms the threads and pages */
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double t = now() - t0;
        if (pass && t < best) best = t;
    }
    printf("isa %s sgemm GFLOP/s %.1f threads %d n %d\n", isa, 2.0 * n * nn / best / 1e9, nt, n);
    free(a);
    free(b);
    free(c);
    return 0;
}
