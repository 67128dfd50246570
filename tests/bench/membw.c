/* membw.c: memory bandwidth of this machine, for the sampling benchmark's bound: read (sum of a
 * 1 GB buffer of floats) and copy (0.5 GB to 0.5 GB, counted as read + write bytes), on the
 * given number of threads (default 2), best of 5 passes. Prints one line:
 *   read GB/s R copy GB/s C threads T
 * Usage: membw [threads] [MB] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* sum of x[0..n), 64 independent partial sums (4 AVX-512 registers) so the loop vectorizes without -ffast-math */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static float sum(const float *restrict x, size_t n)
{
    float acc[64] = {0};
    for (size_t i = 0; i + 64 <= n; i += 64)
        for (int j = 0; j < 64; j++) acc[j] += x[i + j];
    float s = 0;
    for (int j = 0; j < 64; j++) s += acc[j];
    return s;
}

int main(int argc, char **argv)
{
    int nt = argc > 1 ? atoi(argv[1]) : 2;
    size_t mb = argc > 2 ? (size_t)atol(argv[2]) : 1024;
    size_t n = mb * 1024 * 1024 / sizeof(float), half = n / 2;
    if (nt < 1 || n < (size_t)64 * nt) {
        fprintf(stderr, "usage: membw [threads] [MB]\n");
        return 2;
    }
    float *buf = aligned_alloc(64, n * sizeof(float));
    if (!buf) {
        fprintf(stderr, "membw: out of memory for %zu MB\n", mb);
        return 1;
    }
    size_t per = n / nt / 64 * 64, hper = half / nt / 16 * 16;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++)
        for (size_t i = t * per; i < (t + 1) * per; i++) buf[i] = (float)(i & 1023);
    double best_r = 1e9, best_c = 1e9, sink = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = now();
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : sink)
        for (int t = 0; t < nt; t++) sink += sum(buf + t * per, per);
        double t1 = now();
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int t = 0; t < nt; t++)
            memcpy(buf + half + t * hper, buf + t * hper, hper * sizeof(float));
        double t2 = now();
        if (t1 - t0 < best_r) best_r = t1 - t0;
        if (t2 - t1 < best_c) best_c = t2 - t1;
    }
    double rbytes = (double)per * nt * sizeof(float), cbytes = 2.0 * hper * nt * sizeof(float);
    printf("read GB/s %.1f copy GB/s %.1f threads %d%s\n", rbytes / best_r / 1e9, cbytes / best_c / 1e9,
           nt, sink == 42 ? " " : "");
    free(buf);
    return 0;
}
