/* train_step.c: median ms per training step (forward + backward + AdamW) of kernels/gpt2 on the
 * CPU backend, for config S (4 layers, 4 heads, 128 wide, vocab 65, B=12, T=64) or M (GPT-2 124M,
 * B=4, T=64), plus peak RSS. Links the real libgptkernels.a. Usage: train_step S|M [steps] [threads]
 * Benchmark with OpenBLAS unpinned: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./train_step S
 * Side by side: tests/bench/torch_step.py S (the same config in PyTorch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kernels/cpu/cpu.h"
#include "kernels/gpt2.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "S";
    int S = strcmp(which, "M") != 0;
    int steps = argc > 2 ? atoi(argv[2]) : (S ? 30 : 8), threads = argc > 3 ? atoi(argv[3]) : 2;
    gk_gpt2_config c = S ? (gk_gpt2_config){4, 4, 128, 64, 65, 1, 0.0f}
                         : (gk_gpt2_config){12, 12, 768, 1024, 50257, 1, 0.0f};
    int B = S ? 12 : 4, T = 64;
    gk_err err;
    gk_backend *be = NULL;
    gk_gpt2 *m = NULL;
    if (gk_cpu_create(&be, threads, &err) || gk_gpt2_create(&m, &c, be, B, T, &err) ||
        gk_gpt2_init(m, 1337, &err)) {
        fprintf(stderr, "train_step: %s\n", err.msg);
        return 1;
    }
    int *x = malloc(sizeof(int) * B * T), *y = malloc(sizeof(int) * B * T);
    unsigned r = 1;
    for (int i = 0; i < B * T; i++) {
        r = r * 1103515245u + 12345u;
        x[i] = (int)((r >> 8) % (unsigned)c.vocab_size);
        y[i] = (int)((r >> 4) % (unsigned)c.vocab_size);
    }
    gk_adamw h = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    double *ms = malloc(sizeof(double) * (steps + 2));
    float loss = 0;
    for (int s = 0; s < steps + 2; s++) { /* 2 warm-up steps */
        double t0 = now_ms();
        gk_gpt2_zero_grad(m);
        gk_gpt2_forward(m, x, y, B, T, &loss, &err);
        gk_gpt2_backward(m, 1.0f, &err);
        gk_gpt2_update(m, &h, 1e-4f, NULL, &err);
        ms[s] = now_ms() - t0;
    }
    qsort(ms + 2, steps, sizeof(double), cmp);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("gptkit %s: %zu params, B=%d T=%d, %d threads: median %.2f ms/step (min %.2f), "
           "loss %.4f, peak RSS %ld MB\n",
           which, gk_gpt2_num_scalars(m), B, T, threads, ms[2 + steps / 2], ms[2], loss,
           ru.ru_maxrss / 1024);
    gk_gpt2_free(m);
    gk_backend_free(be);
    free(x), free(y), free(ms);
    return 0;
}
