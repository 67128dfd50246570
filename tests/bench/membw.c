/* membw.c: memory bandwidth of this machine, for the sampling benchmark's bound: read (a sum over
 * a buffer of floats, 512 MB by default: 16x a 32 MB LLC) and copy (half the buffer to the other
 * half, counted as read + write bytes), on the given number of threads (default 2), each thread
 * streaming its own contiguous slab as the decoding kernels do. Repeated (default 9 passes); prints
 * the best, the median and the worst pass's rate, so a run shows how much the machine moved:
 *   read GB/s R copy GB/s C threads T passes N read-median M read-min W
 * The read loop keeps 8 independent accumulators in registers (an accumulator array in memory
 * turns the loop into a chain of store-to-load forwards that caps a core near 25 GB/s, below what
 * memory gives). The buffer is on huge pages where the kernel gives them.
 * Usage: membw [threads] [MB] [passes] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef float v8f __attribute__((vector_size(32)));

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* sum of x[0..n), n a multiple of 64, x 32-byte aligned: 8 vector accumulators, 256 bytes an
 * iteration */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static float sum(const float *restrict x, size_t n)
{
    const v8f *v = (const v8f *)x;
    v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    for (size_t i = 0; i < n / 8; i += 8) {
        a0 += v[i], a1 += v[i + 1], a2 += v[i + 2], a3 += v[i + 3];
        a4 += v[i + 4], a5 += v[i + 5], a6 += v[i + 6], a7 += v[i + 7];
    }
    v8f a = (a0 + a1) + (a2 + a3) + (a4 + a5) + (a6 + a7);
    float s = 0;
    for (int j = 0; j < 8; j++) s += a[j];
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int nt = argc > 1 ? atoi(argv[1]) : 2;
    size_t mb = argc > 2 ? (size_t)atol(argv[2]) : 512;
    int passes = argc > 3 ? atoi(argv[3]) : 9;
    size_t n = mb * 1024 * 1024 / sizeof(float), half = n / 2;
    if (nt < 1 || passes < 1 || passes > 1000 || n < (size_t)128 * nt) {
        fprintf(stderr, "usage: membw [threads] [MB] [passes]\n");
        return 2;
    }
    /* on huge pages where the kernel gives them, as gptkit's weights are (kernels/cpu/host_mem.c):
     * the ceiling is the best this machine's memory gives, not one slowed by 4 KB TLB misses */
    size_t bytes = (n * sizeof(float) + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    float *buf = aligned_alloc((size_t)2 << 20, bytes);
#ifdef MADV_HUGEPAGE
    if (buf)
        madvise(buf, bytes, MADV_HUGEPAGE);
#endif
    double *tr = malloc(passes * sizeof(double));
    if (!buf || !tr) {
        fprintf(stderr, "membw: out of memory for %zu MB\n", mb);
        return 1;
    }
    size_t per = n / nt / 64 * 64, hper = half / nt / 16 * 16;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++)
        for (size_t i = t * per; i < (t + 1) * per; i++) buf[i] = (float)(i & 1023);
    double best_c = 1e9, sink = 0;
    for (int pass = 0; pass < passes; pass++) {
        double t0 = now();
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : sink)
        for (int t = 0; t < nt; t++) sink += sum(buf + t * per, per);
        double t1 = now();
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int t = 0; t < nt; t++)
            memcpy(buf + half + t * hper, buf + t * hper, hper * sizeof(float));
        double t2 = now();
        tr[pass] = t1 - t0;
        if (t2 - t1 < best_c) best_c = t2 - t1;
    }
    qsort(tr, passes, sizeof(double), cmp_double);
    double rbytes = (double)per * nt * sizeof(float), cbytes = 2.0 * hper * nt * sizeof(float);
    printf("read GB/s %.1f copy GB/s %.1f threads %d passes %d read-median %.1f read-min %.1f%s\n",
           rbytes / tr[0] / 1e9, cbytes / best_c / 1e9, nt, passes, rbytes / tr[passes / 2] / 1e9,
           rbytes / tr[passes - 1] / 1e9, sink == 42 ? " " : "");
    free(tr);
    free(buf);
    return 0;
}
