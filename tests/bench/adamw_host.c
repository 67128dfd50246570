/* adamw_host.c: what optimizer_offload's update costs the host (make bench BENCH=zero): the CPU
 * backend's AdamW, as kernels/model/gpt2_offload.c runs it, over N fp32 parameters (default GPT-2
 * 124M's 124,475,904 floats) in 16M-float chunks, writing their bf16 copies, on T threads
 * (default 2). Prints the median of 5 steps (after one to warm up) and the bytes a float moves
 * (param, grad, m, v read and written but the grad, a bf16 copy written: 30 bytes) per second:
 *   adamw_host floats N threads T ms M GB/s B
 * Usage: adamw_host [floats] [threads] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu.h"

#define CHUNK ((size_t)1 << 24)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)atoll(argv[1]) : 124475904;
    int nt = argc > 2 ? atoi(argv[2]) : 2;
    gk_backend *be = NULL;
    gk_err e = {0};
    if (n < 1 || nt < 1 || gk_cpu_create(&be, nt, &e)) {
        fprintf(stderr, "usage: adamw_host [floats] [threads]%s%s\n", e.msg[0] ? ": " : "", e.msg);
        return 2;
    }
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *m = calloc(n, sizeof *m),
          *v = calloc(n, sizeof *v);
    unsigned short *copy = malloc(n * sizeof *copy);
    if (!p || !g || !m || !v || !copy) {
        fprintf(stderr, "adamw_host: out of memory for %zu floats\n", n);
        return 1;
    }
    for (size_t i = 0; i < n; i++) p[i] = 0.02f * (float)((i * 2654435761u) % 1000) / 1000.0f;
    for (size_t i = 0; i < n; i++) g[i] = 1e-3f * (float)((i * 40503u) % 1000) / 1000.0f - 5e-4f;
    double t[6];
    for (int step = 1; step <= 6; step++) {
        double t0 = now();
        for (size_t a = 0; a < n; a += CHUNK) {
            size_t k = n - a < CHUNK ? n - a : CHUNK;
            gk_adamw_tensor ts = {p + a, g + a, m + a, v + a, copy + a, k, 1};
            be->ops->adamw_multi(be, &ts, 1, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 1.0f, GK_BF16);
        }
        t[step - 1] = now() - t0;
    }
    qsort(t + 1, 5, sizeof *t, cmp_double);
    double ms = t[3] * 1e3;
    printf("adamw_host floats %zu threads %d ms %.1f GB/s %.1f\n", n, nt, ms,
           30.0 * (double)n / (ms * 1e-3) / 1e9);
    free(p), free(g), free(m), free(v), free(copy);
    gk_backend_free(be);
    return 0;
}
