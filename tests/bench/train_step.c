/* train_step.c: median ms per training step (forward + backward + AdamW) of kernels/model/ on any
 * backend (gk_backend_open), with tokens/s, nanoGPT's MFU estimate and the device memory the
 * model allocated; with "prof" also the time of every op (gemms by shape, types and epilogue).
 * Configs: S (4 layers, 4 heads, 128 wide, vocab 65, B=12, T=64), M (GPT-2 124M, B=4, T=64),
 * G (GPT-2 124M, T=1024, B=16). Links the real libgptkernels.a; the CUDA backends are loaded
 * at run time as by the tools.
 * Usage: train_step [--device cpu|ref|cuda|cuda-emu|auto] [--dtype float32|bfloat16] [--batch N]
 *                   [--peak-tflops F] S|M|G [steps] [threads] [prof]
 * GPT_CUDA_FUSED_GRADS=1: cuda's gemm_bwd with cuBLASLt's backward epilogues (one gemm row each).
 * Benchmark with OpenBLAS unpinned: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./train_step S
 * Side by side: tests/bench/torch_step.py S (CPU), tests/bench/torch_gpu_step.py (GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/env.h"
#include "common/opt.h"
#include "kernels/model/gpt2.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The calling thread's CPU time: per-op times of a 1-thread CPU profile, unaffected by other
 * load. */
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

/* ---- the wrapper backend: forwards every op to the real one (in), counts the device memory
 * allocated through it and, when timing, times each op (gemms told apart by shape, types and
 * epilogue). On an asynchronous device (not cpu/ref) a timed op is followed by a sync, so each
 * op is timed alone. The real backend's sticky error is copied into the wrapper after every
 * op, so that gk_backend_status/sync on the wrapper (and the model's entry points) see it. ---- */
enum { P_GEMM, P_BIAS_BWD, P_ENC_FWD, P_ENC_BWD, P_LN_FWD, P_LN_BWD, P_ATT_FWD, P_ATT_BWD,
       P_ATT_AT, P_GELU_FWD, P_GELU_BWD, P_RES_LN_FWD, P_DROP_BWD, P_XENT_FWD, P_XENT_BWD, P_ZERO,
       P_SUMSQ, P_SCALE, P_ADAMW, P_ADAMW_MULTI, P_ZERO_MULTI, P_CAST, P_COPY, P_N };
static const char *p_names[P_N] = {"gemm", "bias_bwd", "encoder_fwd", "encoder_bwd",
    "layernorm_fwd", "layernorm_bwd", "attention_fwd", "attention_bwd", "attention_fwd_at",
    "gelu_fwd", "gelu_bwd", "residual_layernorm_fwd", "dropout_bwd", "xent_fwd", "xent_bwd", "zero",
    "sumsq", "scale", "adamw", "adamw_multi", "zero_multi", "cast", "copy"};
#define PROF_SHAPES 48
#define MEM_BLOCKS 64
typedef struct prof {
    gk_backend *in;
    double (*clock)(void); /* now_ms, or cpu_ms for a 1-thread CPU backend */
    int timing, async;
    int fused; /* the real backend fuses gemm_bwd's epilogues (cuda_fused_grads): one gemm row */
    gk_ops ops;
    double ms[P_N];
    long calls[P_N];
    int nshape, shape[PROF_SHAPES][9]; /* ta tb M N K types(a,b,c) bias gelu */
    double shape_ms[PROF_SHAPES];
    long shape_calls[PROF_SHAPES];
    void *blk[MEM_BLOCKS];             /* live allocations (for frees), in allocation order */
    size_t blk_n[MEM_BLOCKS];
    size_t live, peak, total;          /* bytes */
    int nblk, untracked;
} prof;
#define PR(be) ((prof *)(be)->impl)
#define IN(be) (PR(be)->in)

/* Copies the real backend's first error into the wrapper's (the one the model reads). */
static void take_err(gk_backend *be)
{
    if (IN(be)->err.code && !be->err.code) be->err = IN(be)->err;
}

#define FWD(slot, call)                                                   \
    do {                                                                  \
        prof *p_ = PR(be);                                                \
        double t0_ = p_->timing ? p_->clock() : 0;                        \
        call;                                                             \
        if (p_->timing) {                                                 \
            if (p_->async) p_->in->ops->sync(p_->in);                     \
            p_->ms[slot] += p_->clock() - t0_;                            \
            p_->calls[slot]++;                                            \
        }                                                                 \
        take_err(be);                                                     \
    } while (0)

static void *p_alloc(gk_backend *be, size_t n)
{
    prof *p = PR(be);
    void *ptr = p->in->ops->alloc(p->in, n);
    take_err(be);
    if (!ptr) return NULL;
    p->total += n, p->live += n;
    if (p->live > p->peak) p->peak = p->live;
    if (p->nblk < MEM_BLOCKS) p->blk[p->nblk] = ptr, p->blk_n[p->nblk++] = n;
    else p->untracked++;
    return ptr;
}
static void p_free(gk_backend *be, void *ptr)
{
    prof *p = PR(be);
    for (int i = 0; ptr && i < p->nblk; i++)
        if (p->blk[i] == ptr) {
            p->live -= p->blk_n[i];
            p->blk[i] = NULL;
            break;
        }
    p->in->ops->free(p->in, ptr);
    take_err(be);
}
static void p_to_device(gk_backend *be, void *d, const void *s, size_t n)
{
    FWD(P_COPY, IN(be)->ops->to_device(IN(be), d, s, n));
}
static void p_to_host(gk_backend *be, void *d, const void *s, size_t n)
{
    FWD(P_COPY, IN(be)->ops->to_host(IN(be), d, s, n));
}
static void p_copy(gk_backend *be, void *d, const void *s, size_t n)
{
    FWD(P_COPY, IN(be)->ops->copy(IN(be), d, s, n));
}
static void p_zero(gk_backend *be, void *ptr, size_t n)
{
    FWD(P_ZERO, IN(be)->ops->zero(IN(be), ptr, n));
}
static void p_sync(gk_backend *be) { IN(be)->ops->sync(IN(be)); take_err(be); }
static int p_reserve(gk_backend *be, size_t r, size_t c, int hs, int T, gk_err *err)
{
    int rc = IN(be)->ops->reserve(IN(be), r, c, hs, T, err);
    take_err(be);
    return rc;
}
static void p_cast(gk_backend *be, void *d, gk_elt dt, const void *s, gk_elt st, size_t n)
{
    FWD(P_CAST, IN(be)->ops->cast(IN(be), d, dt, s, st, n));
}

/* The shape slot of a gemm (-1 when the table is full). */
static int gemm_slot(prof *p, const int key[9])
{
    int s;
    for (s = 0; s < p->nshape && memcmp(p->shape[s], key, sizeof p->shape[s]); s++) {}
    if (s == p->nshape) {
        if (s == PROF_SHAPES) return -1;
        memcpy(p->shape[p->nshape++], key, sizeof p->shape[s]);
    }
    return s;
}
/* Runs call as a gemm (P_GEMM), timed also under its shape slot for key. */
#define GEMM_TIMED(key, call)                                                 \
    do {                                                                      \
        prof *pg_ = PR(be);                                                   \
        int s_ = pg_->timing ? gemm_slot(pg_, key) : -1;                      \
        double t_ = pg_->timing ? pg_->clock() : 0;                           \
        FWD(P_GEMM, call);                                                    \
        if (s_ >= 0) pg_->shape_ms[s_] += pg_->clock() - t_, pg_->shape_calls[s_]++; \
    } while (0)
static void p_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha, const void *A,
                   gk_elt tA, int lda, const void *B, gk_elt tB, int ldb, float beta, void *C,
                   gk_elt tC, int ldc, const float *bias, void *pre_gelu)
{
    int key[9] = {ta, tb, M, N, K, tA, tB, tC, (bias != NULL) | (pre_gelu != NULL) << 1};
    GEMM_TIMED(key, IN(be)->ops->gemm(IN(be), ta, tb, M, N, K, alpha, A, tA, lda, B, tB, ldb, beta,
                                      C, tC, ldc, bias, pre_gelu));
}
/* gemm_bwd: apart through the wrapper (each op timed), or fused: one gemm row, +dgelu/+dbias */
static void p_gemm_bwd(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                       const void *A, gk_elt tA, int lda, const void *B, gk_elt tB, int ldb,
                       float beta, void *C, gk_elt tC, int ldc, const void *pre_gelu, float *dbias)
{
    if (!PR(be)->fused) {
        gk_gemm_bwd_apart(be, ta, tb, M, N, K, alpha, A, tA, lda, B, tB, ldb, beta, C, tC, ldc,
                          pre_gelu, dbias);
        return;
    }
    int key[9] = {ta, tb, M, N, K, tA, tB, tC, (pre_gelu != NULL) << 2 | (dbias != NULL) << 3};
    GEMM_TIMED(key, IN(be)->ops->gemm_bwd(IN(be), ta, tb, M, N, K, alpha, A, tA, lda, B, tB, ldb,
                                          beta, C, tC, ldc, pre_gelu, dbias));
}
static void p_bias_bwd(gk_backend *be, float *db, const void *d, int N, int C)
{
    FWD(P_BIAS_BWD, IN(be)->ops->bias_bwd(IN(be), db, d, N, C));
}
static void p_enc_fwd(gk_backend *be, void *o, const int *t, const void *wte, gk_elt tw,
                      const float *wpe, const int *t0, int B, int T, int C, float pr, uint64_t k)
{
    FWD(P_ENC_FWD, IN(be)->ops->encoder_fwd(IN(be), o, t, wte, tw, wpe, t0, B, T, C, pr, k));
}
static void p_enc_bwd(gk_backend *be, float *dwte, float *dwpe, const void *d, const int *t, int B,
                      int T, int C, float pr, uint64_t k)
{
    FWD(P_ENC_BWD, IN(be)->ops->encoder_bwd(IN(be), dwte, dwpe, d, t, B, T, C, pr, k));
}
static void p_ln_fwd(gk_backend *be, void *o, float *mu, float *rs, const void *x, const float *w,
                     const float *b, int N, int C)
{
    FWD(P_LN_FWD, IN(be)->ops->layernorm_fwd(IN(be), o, mu, rs, x, w, b, N, C));
}
static void p_ln_bwd(gk_backend *be, void *dx, float *dw, float *db, const void *d, const void *x,
                     const float *w, const float *mu, const float *rs, int N, int C)
{
    FWD(P_LN_BWD, IN(be)->ops->layernorm_bwd(IN(be), dx, dw, db, d, x, w, mu, rs, N, C));
}
static void p_att_fwd(gk_backend *be, void *o, float *lse, const void *qkv, int B, int T, int C,
                      int NH, float pr, uint64_t k)
{
    FWD(P_ATT_FWD, IN(be)->ops->attention_fwd(IN(be), o, lse, qkv, B, T, C, NH, pr, k));
}
static void p_att_bwd(gk_backend *be, void *dqkv, const void *d, const void *qkv, const void *o,
                      const float *lse, int B, int T, int C, int NH, float pr, uint64_t k)
{
    FWD(P_ATT_BWD, IN(be)->ops->attention_bwd(IN(be), dqkv, d, qkv, o, lse, B, T, C, NH, pr, k));
}
static void p_att_at(gk_backend *be, void *o, void *qkv, const void *qn, int B, int Tc,
                     const int *t0, int n, int C, int NH)
{
    FWD(P_ATT_AT, IN(be)->ops->attention_fwd_at(IN(be), o, qkv, qn, B, Tc, t0, n, C, NH));
}
static void p_gelu_fwd(gk_backend *be, void *o, const void *x, int N, int C)
{
    FWD(P_GELU_FWD, IN(be)->ops->gelu_fwd(IN(be), o, x, N, C));
}
static void p_gelu_bwd(gk_backend *be, void *dx, const void *x, const void *d, int N, int C)
{
    FWD(P_GELU_BWD, IN(be)->ops->gelu_bwd(IN(be), dx, x, d, N, C));
}
static void p_res_ln_fwd(gk_backend *be, void *ro, void *lo, float *mu, float *rs, const void *r,
                         const void *x, const float *b, float pr, uint64_t k, const float *lw,
                         const float *lb, int N, int C)
{
    FWD(P_RES_LN_FWD,
        IN(be)->ops->residual_layernorm_fwd(IN(be), ro, lo, mu, rs, r, x, b, pr, k, lw, lb, N, C));
}
static void p_drop_bwd(gk_backend *be, void *dx, const void *d, size_t n, float pr, uint64_t k)
{
    FWD(P_DROP_BWD, IN(be)->ops->dropout_bwd(IN(be), dx, d, n, pr, k));
}
static void p_xent_fwd(gk_backend *be, float *l, float *lse, const void *lg, const int *t, int N,
                       int V, int Vp)
{
    FWD(P_XENT_FWD, IN(be)->ops->xent_fwd(IN(be), l, lse, lg, t, N, V, Vp));
}
static void p_xent_bwd(gk_backend *be, void *dl, const void *lg, const float *lse, const int *t,
                       float d, int N, int V, int Vp)
{
    FWD(P_XENT_BWD, IN(be)->ops->xent_bwd(IN(be), dl, lg, lse, t, d, N, V, Vp));
}
static void p_sumsq(gk_backend *be, double *o, const float *x, size_t n)
{
    FWD(P_SUMSQ, IN(be)->ops->sumsq(IN(be), o, x, n));
}
static void p_scale(gk_backend *be, float *x, float s, size_t n)
{
    FWD(P_SCALE, IN(be)->ops->scale(IN(be), x, s, n));
}
static void p_adamw(gk_backend *be, float *pa, const float *g, float *m, float *v, size_t n,
                    float lr, float b1, float b2, float eps, float wd, int t, float gs, void *copy,
                    gk_elt tc)
{
    FWD(P_ADAMW, IN(be)->ops->adamw(IN(be), pa, g, m, v, n, lr, b1, b2, eps, wd, t, gs, copy, tc));
}
static void p_adamw_multi(gk_backend *be, const gk_adamw_tensor *ts, int cnt, float lr, float b1,
                          float b2, float eps, float wd, int t, float gs, gk_elt tc)
{
    FWD(P_ADAMW_MULTI, IN(be)->ops->adamw_multi(IN(be), ts, cnt, lr, b1, b2, eps, wd, t, gs, tc));
}
static void p_zero_multi(gk_backend *be, const gk_span *sp, int cnt)
{
    FWD(P_ZERO_MULTI, IN(be)->ops->zero_multi(IN(be), sp, cnt));
}

static int p_mem_info(gk_backend *be, size_t *f, size_t *t, gk_err *e)
{
    int rc = IN(be)->ops->mem_info(IN(be), f, t, e);
    take_err(be);
    return rc;
}

static void prof_destroy(gk_backend *be) { free(be->impl); free(be); }

/* A wrapper around in (borrowed: free it after the wrapper); times by CPU time when
 * cpu_clock. 0 or GK_ENOMEM. */
static int prof_wrap(gk_backend **out, gk_backend *in, int cpu_clock, gk_err *err)
{
    gk_backend *be = calloc(1, sizeof *be);
    prof *p = calloc(1, sizeof *p);
    if (!be || !p) {
        free(be), free(p);
        return gk_errf(err, GK_ENOMEM, "out of memory");
    }
    p->in = in;
    p->clock = cpu_clock ? cpu_ms : now_ms;
    p->async = strcmp(in->ops->name, "cpu") != 0 && strcmp(in->ops->name, "ref") != 0;
    /* no recording (the profiler times each op) and no collectives: those slots stay NULL */
    p->ops = (gk_ops){.name = in->ops->name, .alloc = p_alloc, .free = p_free,
        .to_device = p_to_device, .to_host = p_to_host, .copy = p_copy, .zero = p_zero,
        .sync = p_sync, .reserve = p_reserve, .cast = p_cast, .gemm = p_gemm,
        .gemm_bwd = p_gemm_bwd, .bias_bwd = p_bias_bwd, .encoder_fwd = p_enc_fwd,
        .encoder_bwd = p_enc_bwd,
        .layernorm_fwd = p_ln_fwd, .layernorm_bwd = p_ln_bwd, .attention_fwd = p_att_fwd,
        .attention_bwd = p_att_bwd, .gelu_fwd = p_gelu_fwd, .gelu_bwd = p_gelu_bwd,
        .residual_layernorm_fwd = p_res_ln_fwd, .dropout_bwd = p_drop_bwd, .xent_fwd = p_xent_fwd,
        .xent_bwd = p_xent_bwd, .sumsq = p_sumsq, .scale = p_scale, .adamw = p_adamw,
        .adamw_multi = p_adamw_multi, .zero_multi = p_zero_multi, .attention_fwd_at = p_att_at,
        .mem_info = p_mem_info};
    be->ops = &p->ops;
    be->act = in->act;
    be->props = in->props;
    be->impl = p;
    be->destroy = prof_destroy;
    memcpy(be->what, in->what, sizeof be->what);
    *out = be;
    return 0;
}

static void prof_start(gk_backend *be)
{
    prof *p = PR(be);
    memset(p->ms, 0, sizeof p->ms), memset(p->calls, 0, sizeof p->calls);
    memset(p->shape_ms, 0, sizeof p->shape_ms), memset(p->shape_calls, 0, sizeof p->shape_calls);
    p->timing = 1;
}

static const char *elt_name(int t) { return t == GK_BF16 ? "bf16" : "f32"; }

static void prof_print(gk_backend *be, int steps, double step_ms)
{
    prof *p = PR(be);
    double tot = 0;
    for (int i = 0; i < P_N; i++) tot += p->ms[i];
    printf("per-op times, per step (mean of %d): ops %.2f ms (%s) of %.2f ms (wall, median)\n",
           steps, tot / steps, p->clock == cpu_ms ? "CPU time" : "wall", step_ms);
    if (p->async)
        printf("  (%s is asynchronous: each op is followed by a sync and timed alone, so the\n"
               "   steps above ran with those syncs and the sum exceeds an overlapped step)\n",
               p->ops.name);
    for (int i = 0; i < P_N; i++)
        if (p->calls[i])
            printf("  %-22s %9.3f ms %5.1f%%  %5ld calls\n", p_names[i], p->ms[i] / steps,
                   100 * p->ms[i] / tot, p->calls[i] / steps);
    for (int s = 0; s < p->nshape; s++) {
        int *k = p->shape[s];
        double tf = 2.0 * k[2] * k[3] * k[4] * p->shape_calls[s] / (p->shape_ms[s] * 1e9);
        printf("    gemm %c%c M=%-6d N=%-6d K=%-6d %s,%s->%-4s %-9s %8.3f ms %4ld calls %8.3f "
               "TFLOP/s\n", k[0] ? 'T' : 'N', k[1] ? 'T' : 'N', k[2], k[3], k[4], elt_name(k[5]),
               elt_name(k[6]), elt_name(k[7]),
               k[8] == 3 ? "+bias+gelu" : k[8] == 2 ? "+gelu" : k[8] == 1 ? "+bias"
               : k[8] == 4 ? "+dgelu" : k[8] == 8 ? "+dbias" : k[8] == 12 ? "+dgelu+dbias" : "",
               p->shape_ms[s] / steps, p->shape_calls[s] / steps, tf);
    }
}

/* The device memory the model allocated through the wrapper. */
static void mem_print(gk_backend *be)
{
    prof *p = PR(be);
    printf("device memory allocated by the model: %.1f MiB peak live, %.1f MiB in all, blocks (MiB,"
           " in order):", p->peak / 1048576.0, p->total / 1048576.0);
    for (int i = 0; i < p->nblk; i++) printf(" %.1f", p->blk_n[i] / 1048576.0);
    printf("%s\n  (not counted: the backend's own scratch sized by reserve and its workspace)\n",
           p->untracked ? " ..." : "");
}

/* ---- command line ---- */
typedef struct options {
    const char *device, *dtype, *config, *recompute, *attention;
    int64_t batch;
    double peak_tflops;
    int steps, threads, profile;
} options;

static const char usage[] =
    "train_step [--device NAME] [--dtype float32|bfloat16] [--batch N] [--peak-tflops F]\n"
    "                  [--recompute false|gelu|gelu+ln] "
    "[--attention PATH] CONFIG [steps] [threads] [prof]\n"
    "Times training steps (forward, backward, AdamW) of GPT-2 on one backend.";
static const char footer[] =
    "Configs: S 4 layers, 4 heads, 128 wide, vocab 65, B=12, T=64; M GPT-2 124M, B=4, T=64;\n"
    "G GPT-2 124M, B=16, T=1024; gpt2-medium (350M), gpt2-large (774M), gpt2-xl (1.5B): B=8,\n"
    "T=1024. steps: timed steps after 2 warm-up ones (default 30, 8, 20; 10 for the big ones);\n"
    "threads: CPU threads (default 2); prof: also time every op.\n";

/* The model and batch of a config name; batch > 0 overrides B. 0, or -1 for an unknown name. */
static int config_of(const char *name, int64_t batch, gk_gpt2_config *c, int *B, int *T)
{
    static const struct { const char *name; int layers, heads, embd; } big[] = {
        {"gpt2-medium", 24, 16, 1024}, {"gpt2-large", 36, 20, 1280}, {"gpt2-xl", 48, 25, 1600}};
    *c = (gk_gpt2_config){12, 12, 768, 1024, 50257, 1, 0.0f}, *B = 4, *T = 64;
    if (!strcmp(name, "S"))
        *c = (gk_gpt2_config){4, 4, 128, 64, 65, 1, 0.0f}, *B = 12;
    else if (!strcmp(name, "G"))
        *B = 16, *T = 1024;
    else if (strcmp(name, "M")) {
        size_t i = 0;
        while (i < sizeof big / sizeof *big && strcmp(name, big[i].name)) i++;
        if (i == sizeof big / sizeof *big) return -1;
        c->n_layer = big[i].layers, c->n_head = big[i].heads, c->n_embd = big[i].embd;
        *B = 8, *T = 1024;
    }
    if (batch > 0) *B = (int)batch;
    return 0;
}

/* 0, 1 (help shown) or GK_EUSAGE. */
static int parse(options *o, int argc, char **argv, gk_err *e)
{
    const gk_opt tab[] = {
        {0, "device", GK_OPT_STR, &o->device, "NAME",
         "cpu, ref, cuda, cuda-emu or auto (default cpu)", 0, 0},
        {0, "dtype", GK_OPT_STR, &o->dtype, "DTYPE",
         "activations: float32 or bfloat16 (default: the device's)", 0, 0},
        {0, "batch", GK_OPT_INT, &o->batch, "N", "batch size B (default: the config's)", 1,
         1 << 20},
        {0, "peak-tflops", GK_OPT_DOUBLE, &o->peak_tflops, "F",
         "peak for MFU (default 989.5: H100 SXM bf16 dense)", 1e-6, 1e9},
        {0, "attention", GK_OPT_STR, &o->attention, "PATH",
         "cuda: auto (default), cudnn, flash, fa2 or plain (gpt-train's attention)", 0, 0},
        {0, "recompute", GK_OPT_STR, &o->recompute, "WHAT",
         "false (default), gelu or gelu+ln: what the backward recomputes (gpt-train's recompute)",
         0, 0},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    int first = 0, rc = gk_opt_parse_main(tab, "train_step", usage, footer, argc, argv, &first, e);
    if (rc == GK_OPT_HELP || rc == GK_OPT_VERSION) return 1;
    if (rc) return rc;
    int n = argc - first;
    char **a = argv + first;
    if (n > 4) return gk_errf(e, GK_EUSAGE, "too many operands");
    o->config = n > 0 ? a[0] : "S";
    gk_gpt2_config c;
    int B, T;
    if (config_of(o->config, 0, &c, &B, &T))
        return gk_errf(e, GK_EUSAGE, "config '%s': not S, M, G, gpt2-medium, gpt2-large or gpt2-xl",
                       o->config);
    o->steps = n > 1 ? atoi(a[1]) : !strcmp(o->config, "S") ? 30 : !strcmp(o->config, "M") ? 8
                                  : !strcmp(o->config, "G") ? 20 : 10;
    o->threads = n > 2 ? atoi(a[2]) : 2;
    o->profile = n > 3 && !strcmp(a[3], "prof");
    if (n > 3 && !o->profile) return gk_errf(e, GK_EUSAGE, "'%s': not prof", a[3]);
    if (o->steps < 1 || o->threads < 1)
        return gk_errf(e, GK_EUSAGE, "steps and threads must be positive integers");
    if (o->recompute && strcmp(o->recompute, "false") && strcmp(o->recompute, "gelu") &&
        strcmp(o->recompute, "gelu+ln"))
        return gk_errf(e, GK_EUSAGE, "--recompute '%s': not false, gelu or gelu+ln", o->recompute);
    return 0;
}


/* nanoGPT's estimate_mfu: 6N + 12 L H Q T flops per token, N the parameters but wpe (the
 * position embedding does no matmul) with wte over the padded vocab (as nanoGPT's 50304 and
 * torch_gpu_step.py: the lm_head matmul runs over it), Q the head size, T the sequence length. */
static double flops_per_token(const gk_gpt2 *m, int T)
{
    const gk_gpt2_config *c = gk_gpt2_cfg(m);
    double pad = (double)(gk_gpt2_padded_vocab(m) - c->vocab_size) * c->n_embd;
    double N = (double)gk_gpt2_num_scalars(m) + pad - (double)c->block_size * c->n_embd;
    return 6 * N + 12.0 * c->n_layer * c->n_head * (c->n_embd / c->n_head) * T;
}

/* warmup + steps training steps on fixed tokens: ms[s] per step, each timed between two syncs
 * (asynchronous devices); the timing of the ops starts after the warm-up when profile.
 * *sleeps = voluntary context switches of the timed steps (waits that slept). */
static int run_steps(gk_gpt2 *m, gk_backend *be, const int *x, const int *y, int B, int T,
                     int warmup, int steps, int profile, double *ms, float *loss, long *sleeps,
                     gk_err *err)
{
    gk_adamw h = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0};
    struct rusage ru;
    int rc = gk_backend_sync(be, err);
    for (int s = 0; !rc && s < warmup + steps; s++) {
        if (profile && s == warmup) prof_start(be);
        if (s == warmup) getrusage(RUSAGE_SELF, &ru), *sleeps = -ru.ru_nvcsw;
        double t0 = now_ms();
        gk_gpt2_zero_grad(m);
        rc = gk_gpt2_forward(m, x, y, B, T, loss, err);
        if (!rc) rc = gk_gpt2_backward(m, 1.0f, err);
        if (!rc) rc = gk_gpt2_update(m, &h, 1e-4f, NULL, err);
        if (!rc) rc = gk_backend_sync(be, err);
        ms[s] = now_ms() - t0;
    }
    getrusage(RUSAGE_SELF, &ru);
    *sleeps += ru.ru_nvcsw;
    return rc;
}

/* Random tokens in [0, V): x (inputs) and y (targets), n of each; 0 or GK_ENOMEM. */
static int make_tokens(int **x, int **y, int n, int V, gk_err *err)
{
    *x = malloc(sizeof(int) * (size_t)n), *y = malloc(sizeof(int) * (size_t)n);
    if (!*x || !*y) return gk_errf(err, GK_ENOMEM, "out of memory (%d tokens)", n);
    unsigned r = 1;
    for (int i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        (*x)[i] = (int)((r >> 8) % (unsigned)V);
        (*y)[i] = (int)((r >> 4) % (unsigned)V);
    }
    return 0;
}

static void report(const options *o, gk_gpt2 *m, gk_backend *be, int B, int T, double *ms,
                   int warmup, float loss, long sleeps)
{
    struct rusage ru;
    char what[128];
    int steps = o->steps;
    double sum = 0, med = ms[warmup + steps / 2];
    for (int s = warmup; s < warmup + steps; s++) sum += ms[s];
    getrusage(RUSAGE_SELF, &ru);
    printf("gptkit %s: %zu params, B=%d T=%d, %s, %d threads: median %.2f ms/step (min %.2f), "
           "loss %.4f, peak RSS %ld MB, %.1f sleeps/step\n", o->config, gk_gpt2_num_scalars(m),
           B, T, gk_backend_describe(PR(be)->in, what, sizeof what), o->threads, med,
           ms[warmup], loss, ru.ru_maxrss / 1024, (double)sleeps / steps);
    double tps = B * T / (med / 1e3), fpt = flops_per_token(m, T);
    printf("tokens/s %.0f, MFU %.3g%% (nanoGPT's estimate: %.3g flops/token = 6N + 12 L H Q T, "
           "against %.1f TFLOP/s%s)\n", tps, 100 * tps * fpt / (o->peak_tflops * 1e12), fpt,
           o->peak_tflops, o->peak_tflops == 989.5 ? ": H100 SXM bf16 dense" : "");
    mem_print(be);
    if (o->profile) prof_print(be, steps, sum / steps);
}

/* Opens the device and the model, runs the steps, prints; 0 or the error. */
static int bench(const options *o, gk_err *err)
{
    gk_gpt2_config c;
    int B, T, bf16 = -1, warmup = 2, *x = NULL, *y = NULL;
    config_of(o->config, o->batch, &c, &B, &T);
    gk_backend *dev = NULL, *be = NULL;
    gk_gpt2 *m = NULL;
    double *ms = malloc(sizeof(double) * (size_t)(o->steps + warmup));
    float loss = 0;
    long sleeps = 0;
    int rc = ms ? gk_opt_dtype(o->dtype, &bf16, err) : gk_errf(err, GK_ENOMEM, "out of memory");
    gk_env env;
    gk_env_read(&env);
    gk_backend_opts bo = {.device = o->device ? o->device : "cpu", .threads = o->threads,
                          .bf16 = bf16, .attention = GK_ATTN_AUTO, .cuda_sync = env.cuda_sync,
                          .cuda_no_graphs = env.cuda_no_graphs,
                          .cuda_fused_grads = env.cuda_fused_grads, .cuda_lib = env.cuda_lib};
    if (!rc && o->attention)
        rc = gk_attention_parse(o->attention, "--attention", &bo.attention, err);
    if (!rc) rc = gk_backend_open(&dev, &bo, err);
    if (!rc) {
        int single_cpu = !strcmp(dev->ops->name, "cpu") && o->threads == 1;
        rc = prof_wrap(&be, dev, single_cpu || !strcmp(dev->ops->name, "ref"), err);
        if (!rc) /* cuda's gemm_bwd fuses with GPT_CUDA_FUSED_GRADS=1; cpu's and ref's never */
            PR(be)->fused = bo.cuda_fused_grads && PR(be)->async;
    }
    const char *rcp = o->recompute ? o->recompute : "false";
    int flags = !strcmp(rcp, "gelu") ? GK_GPT2_RECOMPUTE
                : !strcmp(rcp, "gelu+ln") ? GK_GPT2_RECOMPUTE | GK_GPT2_RECOMPUTE_LN : 0;
    if (!rc) rc = gk_gpt2_create_ex(&m, &c, be, B, T, flags, err);
    if (!rc) rc = gk_gpt2_init(m, 1337, err);
    if (!rc) rc = make_tokens(&x, &y, B * T, c.vocab_size, err);
    if (!rc)
        rc = run_steps(m, be, x, y, B, T, warmup, o->steps, o->profile, ms, &loss, &sleeps, err);
    if (!rc && !isfinite(loss)) rc = gk_errf(err, GK_EFORMAT, "the loss is %g", loss);
    if (!rc) {
        qsort(ms + warmup, (size_t)o->steps, sizeof(double), cmp);
        report(o, m, be, B, T, ms, warmup, loss, sleeps);
    }
    if (dev && dev->note[0]) fprintf(stderr, "note: %s\n", dev->note); /* e.g. cuDNN declined */
    gk_gpt2_free(m);
    gk_backend_free(be);
    gk_backend_free(dev);
    free(x), free(y), free(ms);
    return rc;
}

int main(int argc, char **argv)
{
    options o = {0};
    o.peak_tflops = 989.5;
    gk_err err = {0};
    int rc = parse(&o, argc, argv, &err);
    if (rc == 1) return 0;
    if (rc) {
        fprintf(stderr, "train_step: %s\n", err.msg);
        fprintf(stderr, "usage: %s\n", usage);
        return 2;
    }
    if ((rc = bench(&o, &err))) fprintf(stderr, "train_step: %s\n", err.msg);
    return gk_exit_status(rc);
}
