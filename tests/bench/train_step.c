/* train_step.c: median ms per training step (forward + backward + AdamW) of kernels/gpt2 on the
 * CPU backend, for config S (4 layers, 4 heads, 128 wide, vocab 65, B=12, T=64) or M (GPT-2 124M,
 * B=4, T=64), plus peak RSS. Links the real libgptkernels.a.
 * Usage: train_step S|M [steps] [threads] [prof]   (prof: also time every op, gemms by shape)
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

/* The calling thread's CPU time: per-op times of a 1-thread profile, unaffected by other load. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- per-op profile (argument "prof"): a backend that forwards every op to the real one and
 * times it; gemms are told apart by shape. Ops are synchronous on the CPU. ---- */
enum { P_GEMM, P_BIAS_ADD, P_BIAS_BWD, P_ENC_FWD, P_ENC_BWD, P_LN_FWD, P_LN_BWD, P_ATT_FWD,
       P_ATT_BWD, P_GELU_FWD, P_GELU_BWD, P_RES_FWD, P_DROP_BWD, P_XENT_FWD, P_XENT_BWD, P_ZERO,
       P_SUMSQ, P_SCALE, P_ADAMW, P_COPY, P_N };
static const char *p_names[P_N] = {"gemm", "bias_add", "bias_bwd", "encoder_fwd", "encoder_bwd",
    "layernorm_fwd", "layernorm_bwd", "attention_fwd", "attention_bwd", "gelu_fwd", "gelu_bwd",
    "residual_fwd", "dropout_bwd", "xent_fwd", "xent_bwd", "zero", "sumsq", "scale", "adamw",
    "copy"};
#define PROF_SHAPES 48
typedef struct prof {
    gk_backend *in;
    double (*clock)(void); /* now_ms, or cpu_ms with 1 thread */
    gk_ops ops;
    double ms[P_N];
    long calls[P_N];
    int nshape, shape[PROF_SHAPES][5];
    double shape_ms[PROF_SHAPES];
    long shape_calls[PROF_SHAPES];
} prof;
#define PR(be) ((prof *)(be)->impl)
#define IN(be) (PR(be)->in)
#define TIMED(slot, call)                                            \
    do {                                                             \
        double t0_ = PR(be)->clock();                                \
        call;                                                        \
        PR(be)->ms[slot] += PR(be)->clock() - t0_;                   \
        PR(be)->calls[slot]++;                                       \
    } while (0)

static void *p_alloc(gk_backend *be, size_t n) { return IN(be)->ops->alloc(IN(be), n); }
static void p_free(gk_backend *be, void *p) { IN(be)->ops->free(IN(be), p); }
static void p_to_device(gk_backend *be, void *d, const void *s, size_t n) { TIMED(P_COPY, IN(be)->ops->to_device(IN(be), d, s, n)); }
static void p_to_host(gk_backend *be, void *d, const void *s, size_t n) { TIMED(P_COPY, IN(be)->ops->to_host(IN(be), d, s, n)); }
static void p_copy(gk_backend *be, void *d, const void *s, size_t n) { TIMED(P_COPY, IN(be)->ops->copy(IN(be), d, s, n)); }
static void p_zero(gk_backend *be, void *p, size_t n) { TIMED(P_ZERO, IN(be)->ops->zero(IN(be), p, n)); }
static void p_sync(gk_backend *be) { IN(be)->ops->sync(IN(be)); }
static int p_reserve(gk_backend *be, size_t r, size_t c, int hs, int T, gk_err *err) { return IN(be)->ops->reserve(IN(be), r, c, hs, T, err); }
static void p_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    prof *p = PR(be);
    int key[5] = {ta, tb, M, N, K}, s;
    for (s = 0; s < p->nshape && memcmp(p->shape[s], key, sizeof key); s++) {}
    if (s == p->nshape && s < PROF_SHAPES) memcpy(p->shape[p->nshape++], key, sizeof key);
    double t0 = p->clock();
    TIMED(P_GEMM, IN(be)->ops->gemm(IN(be), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
    if (s < PROF_SHAPES) p->shape_ms[s] += p->clock() - t0, p->shape_calls[s]++;
}
static void p_bias_add(gk_backend *be, float *x, const float *b, int N, int C) { TIMED(P_BIAS_ADD, IN(be)->ops->bias_add(IN(be), x, b, N, C)); }
static void p_bias_bwd(gk_backend *be, float *db, const float *d, int N, int C) { TIMED(P_BIAS_BWD, IN(be)->ops->bias_bwd(IN(be), db, d, N, C)); }
static void p_enc_fwd(gk_backend *be, float *o, const int *t, const float *wte, const float *wpe, int B, int T, int C, float pr, uint64_t k) { TIMED(P_ENC_FWD, IN(be)->ops->encoder_fwd(IN(be), o, t, wte, wpe, B, T, C, pr, k)); }
static void p_enc_bwd(gk_backend *be, float *dwte, float *dwpe, const float *d, const int *t, int B, int T, int C, float pr, uint64_t k) { TIMED(P_ENC_BWD, IN(be)->ops->encoder_bwd(IN(be), dwte, dwpe, d, t, B, T, C, pr, k)); }
static void p_ln_fwd(gk_backend *be, float *o, float *mu, float *rs, const float *x, const float *w, const float *b, int N, int C) { TIMED(P_LN_FWD, IN(be)->ops->layernorm_fwd(IN(be), o, mu, rs, x, w, b, N, C)); }
static void p_ln_bwd(gk_backend *be, float *dx, float *dw, float *db, const float *d, const float *x, const float *w, const float *mu, const float *rs, int N, int C) { TIMED(P_LN_BWD, IN(be)->ops->layernorm_bwd(IN(be), dx, dw, db, d, x, w, mu, rs, N, C)); }
static void p_att_fwd(gk_backend *be, float *o, float *lse, const float *qkv, int B, int T, int C, int NH, float pr, uint64_t k) { TIMED(P_ATT_FWD, IN(be)->ops->attention_fwd(IN(be), o, lse, qkv, B, T, C, NH, pr, k)); }
static void p_att_bwd(gk_backend *be, float *dqkv, const float *d, const float *qkv, const float *o, const float *lse, int B, int T, int C, int NH, float pr, uint64_t k) { TIMED(P_ATT_BWD, IN(be)->ops->attention_bwd(IN(be), dqkv, d, qkv, o, lse, B, T, C, NH, pr, k)); }
static void p_gelu_fwd(gk_backend *be, float *o, float *x, const float *b, int N, int C) { TIMED(P_GELU_FWD, IN(be)->ops->gelu_fwd(IN(be), o, x, b, N, C)); }
static void p_gelu_bwd(gk_backend *be, float *dx, const float *x, const float *d, int N, int C) { TIMED(P_GELU_BWD, IN(be)->ops->gelu_bwd(IN(be), dx, x, d, N, C)); }
static void p_res_fwd(gk_backend *be, float *o, const float *r, const float *x, const float *b, int N, int C, float pr, uint64_t k) { TIMED(P_RES_FWD, IN(be)->ops->residual_fwd(IN(be), o, r, x, b, N, C, pr, k)); }
static void p_drop_bwd(gk_backend *be, float *dx, const float *d, size_t n, float pr, uint64_t k) { TIMED(P_DROP_BWD, IN(be)->ops->dropout_bwd(IN(be), dx, d, n, pr, k)); }
static void p_xent_fwd(gk_backend *be, float *l, float *lse, const float *lg, const int *t, int N, int V, int Vp) { TIMED(P_XENT_FWD, IN(be)->ops->xent_fwd(IN(be), l, lse, lg, t, N, V, Vp)); }
static void p_xent_bwd(gk_backend *be, float *dl, const float *lg, const float *lse, const int *t, float d, int N, int V, int Vp) { TIMED(P_XENT_BWD, IN(be)->ops->xent_bwd(IN(be), dl, lg, lse, t, d, N, V, Vp)); }
static void p_sumsq(gk_backend *be, double *o, const float *x, size_t n) { TIMED(P_SUMSQ, IN(be)->ops->sumsq(IN(be), o, x, n)); }
static void p_scale(gk_backend *be, float *x, float s, size_t n) { TIMED(P_SCALE, IN(be)->ops->scale(IN(be), x, s, n)); }
static void p_adamw(gk_backend *be, float *pa, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps, float wd, int t, float gs) { TIMED(P_ADAMW, IN(be)->ops->adamw(IN(be), pa, g, m, v, n, lr, b1, b2, eps, wd, t, gs)); }

static void prof_destroy(gk_backend *be) { free(be->impl); free(be); }

/* A profiling backend around in (borrowed); with 1 thread it times by CPU time. */
static gk_backend *prof_wrap(gk_backend *in, int threads)
{
    gk_backend *be = calloc(1, sizeof *be);
    prof *p = calloc(1, sizeof *p);
    if (!be || !p) exit(1);
    p->in = in;
    p->clock = threads == 1 ? cpu_ms : now_ms;
    p->ops = *in->ops;
    p->ops.alloc = p_alloc, p->ops.free = p_free, p->ops.to_device = p_to_device;
    p->ops.to_host = p_to_host, p->ops.copy = p_copy, p->ops.zero = p_zero, p->ops.sync = p_sync;
    p->ops.reserve = p_reserve, p->ops.gemm = p_gemm, p->ops.bias_add = p_bias_add;
    p->ops.bias_bwd = p_bias_bwd, p->ops.encoder_fwd = p_enc_fwd, p->ops.encoder_bwd = p_enc_bwd;
    p->ops.layernorm_fwd = p_ln_fwd, p->ops.layernorm_bwd = p_ln_bwd;
    p->ops.attention_fwd = p_att_fwd, p->ops.attention_bwd = p_att_bwd;
    p->ops.gelu_fwd = p_gelu_fwd, p->ops.gelu_bwd = p_gelu_bwd, p->ops.residual_fwd = p_res_fwd;
    p->ops.dropout_bwd = p_drop_bwd, p->ops.xent_fwd = p_xent_fwd, p->ops.xent_bwd = p_xent_bwd;
    p->ops.sumsq = p_sumsq, p->ops.scale = p_scale, p->ops.adamw = p_adamw;
    be->ops = &p->ops;
    be->impl = p;
    be->destroy = prof_destroy;
    return be;
}

static void prof_reset(gk_backend *be)
{
    prof *p = PR(be);
    memset(p->ms, 0, sizeof p->ms), memset(p->calls, 0, sizeof p->calls);
    memset(p->shape_ms, 0, sizeof p->shape_ms), memset(p->shape_calls, 0, sizeof p->shape_calls);
}

static void prof_print(gk_backend *be, int steps, double step_ms)
{
    prof *p = PR(be);
    double tot = 0;
    for (int i = 0; i < P_N; i++) tot += p->ms[i];
    printf("per step (mean of %d): ops %.2f ms (%s) of %.2f ms (wall)\n", steps, tot / steps,
           p->clock == cpu_ms ? "CPU time" : "wall", step_ms);
    for (int i = 0; i < P_N; i++)
        if (p->calls[i])
            printf("  %-14s %8.3f ms %5.1f%%  %4ld calls\n", p_names[i], p->ms[i] / steps,
                   100 * p->ms[i] / tot, p->calls[i] / steps);
    for (int s = 0; s < p->nshape; s++) {
        int *k = p->shape[s];
        double gf = 2.0 * k[2] * k[3] * k[4] * p->shape_calls[s] / (p->shape_ms[s] * 1e6);
        printf("    gemm %c%c M=%-6d N=%-6d K=%-6d %8.3f ms %4ld calls %6.1f GFLOP/s\n",
               k[0] ? 'T' : 'N', k[1] ? 'T' : 'N', k[2], k[3], k[4], p->shape_ms[s] / steps,
               p->shape_calls[s] / steps, gf);
    }
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "S";
    int S = strcmp(which, "M") != 0;
    int steps = argc > 2 ? atoi(argv[2]) : (S ? 30 : 8), threads = argc > 3 ? atoi(argv[3]) : 2;
    int profile = argc > 4 && !strcmp(argv[4], "prof");
    if (steps < 1 || threads < 1) {
        fprintf(stderr, "usage: train_step S|M [steps] [threads] [prof]\n");
        return 2;
    }
    gk_gpt2_config c = S ? (gk_gpt2_config){4, 4, 128, 64, 65, 1, 0.0f}
                         : (gk_gpt2_config){12, 12, 768, 1024, 50257, 1, 0.0f};
    int B = S ? 12 : 4, T = 64;
    gk_err err;
    gk_backend *be = NULL, *cpu = NULL;
    gk_gpt2 *m = NULL;
    if (gk_cpu_create(&cpu, threads, &err)) {
        fprintf(stderr, "train_step: %s\n", err.msg);
        return 1;
    }
    be = profile ? prof_wrap(cpu, threads) : cpu;
    if (gk_gpt2_create(&m, &c, be, B, T, &err) || gk_gpt2_init(m, 1337, &err)) {
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
    long sleeps = 0; /* voluntary context switches of the timed steps: waits that slept */
    struct rusage ru;
    for (int s = 0; s < steps + 2; s++) { /* 2 warm-up steps */
        if (profile && s == 2) prof_reset(be);
        if (s == 2) getrusage(RUSAGE_SELF, &ru), sleeps = -ru.ru_nvcsw;
        double t0 = now_ms();
        gk_gpt2_zero_grad(m);
        gk_gpt2_forward(m, x, y, B, T, &loss, &err);
        gk_gpt2_backward(m, 1.0f, &err);
        gk_gpt2_update(m, &h, 1e-4f, NULL, &err);
        ms[s] = now_ms() - t0;
    }
    getrusage(RUSAGE_SELF, &ru);
    sleeps += ru.ru_nvcsw;
    qsort(ms + 2, steps, sizeof(double), cmp);
    printf("gptkit %s: %zu params, B=%d T=%d, %d threads: median %.2f ms/step (min %.2f), "
           "loss %.4f, peak RSS %ld MB, %.1f sleeps/step\n",
           which, gk_gpt2_num_scalars(m), B, T, threads, ms[2 + steps / 2], ms[2], loss,
           ru.ru_maxrss / 1024, (double)sleeps / steps);
    if (profile) {
        double sum = 0;
        for (int s = 2; s < steps + 2; s++) sum += ms[s];
        prof_print(be, steps, sum / steps);
    }
    gk_gpt2_free(m);
    if (profile) gk_backend_free(be);
    gk_backend_free(cpu);
    free(x), free(y), free(ms);
    return 0;
}
