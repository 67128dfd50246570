/* cpu.c: the CPU backend's context, memory, gemm, instruction-set paths, idle-thread policy and
 * vtable, above the op files (cpu_ops.c, cpu_attn.c, cpu_optim.c, cpu_infer.c, cpu_bf16.c,
 * cpu_f16.c, cpu_q8.c), which depend only on cpu_internal.h; their plain references are in
 * ref.c. */
#include "kernels/cpu/cpu.h"

#include <cblas.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/comm/comm.h"
#include "kernels/cpu/cpu_attn.h"
#include "kernels/cpu/cpu_bf16.h"
#include "kernels/cpu/cpu_f16.h"
#include "kernels/cpu/cpu_q8.h"
#include "kernels/cpu/cpu_infer.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_optim.h"
#include "kernels/cpu/host_mem.h"
#include "kernels/ref/ref.h"

/* ---- memory ---- */


static int cpu_reserve(gk_backend *be, size_t rows, size_t cols, int head_size, int T, gk_err *err)
{
    (void)rows;
    cpu_impl *c = CPU(be);
    size_t need = (size_t)GK_NCHUNK * 2 * cols;
    size_t att = (size_t)c->nthreads * cpu_attn_scratch(T, head_size);
    size_t panels = (size_t)c->nthreads * CPU_BF16_PANEL * cols;
    if (att > need) need = att;
    if (panels > need) need = panels;
    if (need <= c->scratch_n) return 0;
    float *s = aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
    if (!s) return gk_errf(err, GK_ENOMEM, "cpu backend: out of memory for %zu floats of scratch", need);
    free(c->scratch);
    c->scratch = s;
    c->scratch_n = need;
    return 0;
}

/* ---- gemm ----
 * OpenBLAS runs single-threaded inside our OpenMP team. The larger of M and N (M on a tie) is cut
 * into slabs whose number comes from the shape and the machine's core count (cpu_impl.ncores),
 * never from the thread count, and K is never cut; the threads share out the same slab calls, so
 * results are bit-identical for any thread count (OpenBLAS itself picks different kernels for
 * different sizes, e.g. its small-matrix path, so cutting by thread count would not be). Each
 * slab packs only its own part of the weight matrix. One slab per core (measured on 2 cores:
 * 8 slabs per call lost 10-25% to repacking and short panels), fewer when a slab would be under
 * 64 wide or 1 MFLOP. One thread pool: no spinning OpenBLAS threads competing with OpenMP ones. */
static int gemm_slabs(int M, int N, int K, int ncores)
{
    int dim = M > N ? M : N, n = 1;
    while (n < ncores && n < 8 && dim / (2 * n) >= 64 && 2.0 * M * N * K / (2 * n) >= 1e6) n *= 2;
    return n;
}

static void sgemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    /* A few rows (decoding one token per sample): sgemm would pack all of B for each call. */
    if (M <= CPU_GEMM_ROWS_MAX && cpu_gemm_rows(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    int ns = gemm_slabs(M, N, K, CPU(be)->ncores);
    if (ns == 1) {
        cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int split_n = N > M, dim = split_n ? N : M;
    int per = ((dim + ns - 1) / ns + 15) / 16 * 16;
#pragma omp parallel for num_threads(CPU(be)->nthreads) schedule(static)
    for (int s = 0; s < ns; s++) {
        int lo = s * per, hi = lo + per < dim ? lo + per : dim;
        if (lo >= hi) continue;
        if (split_n) {
            const float *Bs = tb ? B + (size_t)lo * ldb : B + lo;
            cblas_sgemm(CblasRowMajor, TA, TB, M, hi - lo, K, alpha, A, lda, Bs, ldb, beta,
                        C + lo, ldc);
        } else {
            const float *As = ta ? A + lo : A + (size_t)lo * lda;
            cblas_sgemm(CblasRowMajor, TA, TB, hi - lo, N, K, alpha, As, lda, B, ldb, beta,
                        C + (size_t)lo * ldc, ldc);
        }
    }
}

/* backend.h's gemm: fp32 activations with fp32 (sgemm), bf16 (cpu_bf16.c), fp16 (cpu_f16.c) or
 * int8 weights (cpu_q8.c), then the epilogue in one more pass over C (bias; or bias + GELU). */
static void cpu_gemm(gk_backend *be, int ta, int tb, int M, int N, int K, float alpha,
                     const void *A, gk_elt tA, int lda, const void *B, gk_elt tB, int ldb,
                     float beta, void *C, gk_elt tC, int ldc, const float *bias, void *pre_gelu)
{
    if (tA != GK_F32 || tC != GK_F32 || (tB != GK_F32 && ta) ||
        (tB == GK_Q8 && (!tb || ldb != K || K % GK_Q8_BLOCK))) {
        static const char *names[] = {"f32", "bf16", "f16", "q8"};
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cpu gemm: types %s x %s -> %s%s: not implemented",
                        names[tA & 3], names[tB & 3], names[tC & 3],
                        ta ? " with A transposed"
                           : tB == GK_Q8 ? " (q8: B transposed, K % 32 == 0)" : "");
        return;
    }
    if (pre_gelu && beta != 0.0f) {
        GK_BACKEND_FAIL(be, GK_EUSAGE, "cpu gemm: the GELU epilogue needs beta 0");
        return;
    }
    float *out = pre_gelu ? pre_gelu : C;
    if (tB == GK_BF16)
        cpu_gemm_bf16(be, tb, M, N, K, alpha, A, lda, B, ldb, beta, out, ldc);
    else if (tB == GK_F16)
        cpu_gemm_f16(be, tb, M, N, K, alpha, A, lda, B, ldb, beta, out, ldc);
    else if (tB == GK_Q8)
        cpu_gemm_q8(be, M, N, K, alpha, A, lda, B, beta, out, ldc);
    else
        sgemm(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, out, ldc);
    if (!bias && !pre_gelu) return;
    /* the epilogue helpers take contiguous rows: one call for the block, or one per row */
    int rows = ldc == N ? M : 1;
    for (int i = 0; i < M; i += rows) {
        float *c = (float *)C + (size_t)i * ldc, *o = out + (size_t)i * ldc;
        if (pre_gelu) cpu_bias_gelu(be, c, o, bias, rows, N);
        else cpu_bias_add(be, c, bias, rows, N);
    }
}

/* ---- how idle threads wait ----
 * libgomp keeps a thread that waits (for the next parallel region, at a barrier) spinning for
 * GOMP_SPINCOUNT rounds of `pause` before it sleeps on a futex: 300000 by default, 7-8 ms at the
 * 24-27 ns a round of current x86 cores. Processes whose teams share cores then spin against
 * each other's descheduled threads: two train_step S on 2 cores ran 23-33x slower than alone.
 * CPU_SPINCOUNT, the bound libgomp itself uses once it sees more threads than cores (it cannot
 * see other processes), is 25-40 us: two at once then run 1.5-2.4x slower than alone, and one
 * alone on 2 threads as fast as before (on 16 threads ~10% slower on the tiny S model, whose
 * regions are ~50 us apart; passive waiting, 0, cost 45% there). make bench: BENCH=shared.
 * libgomp reads the setting once, from the environment, in its constructor; it is linked into
 * the executable (Makefile: static libgomp), so this constructor, of a higher priority, runs
 * first. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is. */
#define CPU_SPINCOUNT "1000"

__attribute__((constructor(101))) static void cpu_bound_spin(void)
{
    /* the one getenv in library code: it must run before main, when libgomp reads its settings */
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
        setenv("GOMP_SPINCOUNT", CPU_SPINCOUNT, 0);
}

static const gk_ops cpu_ops = {
    .name = "cpu",
    .alloc = host_alloc, .free = host_free, .to_device = host_copy, .to_host = host_copy,
    .copy = host_copy, .zero = host_zero, .sync = host_sync, .reserve = cpu_reserve,
    .cast = cpu_cast, .gemm = cpu_gemm, .bias_bwd = cpu_bias_bwd,
    .encoder_fwd = cpu_encoder_fwd, .encoder_bwd = cpu_encoder_bwd,
    .layernorm_fwd = cpu_layernorm_fwd, .layernorm_bwd = cpu_layernorm_bwd,
    .attention_fwd = cpu_attention_fwd, .attention_bwd = cpu_attention_bwd,
    .gelu_fwd = cpu_gelu_fwd, .gelu_bwd = cpu_gelu_bwd,
    .residual_layernorm_fwd = cpu_residual_layernorm_fwd, .dropout_bwd = cpu_dropout_bwd,
    .xent_fwd = cpu_xent_fwd, .xent_bwd = cpu_xent_bwd,
    .sumsq = cpu_sumsq, .scale = cpu_scale, .adamw = cpu_adamw,
    .adamw_multi = cpu_adamw_multi, .zero_multi = cpu_zero_multi,
    .attention_fwd_at = cpu_attention_fwd_at,
    .comm_open = gk_comm_gloo_open, /* Gloo: kernels/comm/comm_gloo.cc */
    .mem_info = host_mem_info,
};

/* ---- instruction-set paths ---- */

/* The best CPU_ISA_* this machine runs (CPUID through the compiler's builtins). */
static int cpu_isa_best(void)
{
#if defined(__x86_64__) && !defined(GK_NO_CLONES)
    __builtin_cpu_init();
    unsigned a, b, c = 0, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C); /* clang's builtin lacks it */
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni"))
        return CPU_ISA_AVX512VNNI;
    if (avx2)
        return CPU_ISA_AVX2;
#endif
    return CPU_ISA_SCALAR;
}

const char *gk_cpu_isa_name(int isa)
{
    static const char *names[] = {"scalar", "avx2", "avx512vnni"};
    return isa >= CPU_ISA_SCALAR && isa <= CPU_ISA_AVX512VNNI ? names[isa] : "?";
}

int gk_cpu_isa(const gk_backend *be) { return CPU(be)->isa; }

int gk_cpu_set_isa(gk_backend *be, int isa, gk_err *err)
{
    if (strcmp(be->ops->name, "cpu"))
        return gk_errf(err, GK_EUSAGE, "isa: %s is not the cpu backend", be->ops->name);
    if (isa < CPU_ISA_SCALAR || isa > cpu_isa_best())
        return gk_errf(err, GK_EUSAGE, "isa %d (%s): this machine runs up to %s", isa,
                       gk_cpu_isa_name(isa), gk_cpu_isa_name(cpu_isa_best()));
    CPU(be)->isa = isa;
    return 0;
}

static void cpu_destroy(gk_backend *be)
{
    if (!be) return;
    if (be->impl) free(CPU(be)->scratch);
    free(be->impl);
    free(be);
}

int gk_cpu_create(gk_backend **out, int nthreads, gk_err *err)
{
    gk_backend *be = calloc(1, sizeof *be);
    cpu_impl *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return gk_errf(err, GK_ENOMEM, "cpu backend: out of memory");
    }
    c->nthreads = nthreads > 0 ? nthreads : omp_get_max_threads();
    c->ncores = omp_get_num_procs();
    c->isa = cpu_isa_best();
    /* OpenBLAS is called from inside our threads; its own pool would only oversubscribe. This
     * is process-wide OpenBLAS state, set to the same value by every CPU backend. */
    openblas_set_num_threads(1);
    be->ops = &cpu_ops;
    be->act = GK_F32;
    be->impl = c;
    snprintf(be->what, sizeof be->what, "cpu (%d thread%s)", c->nthreads, c->nthreads == 1 ? "" : "s");
    host_props(be, GK_KIND_CPU);
    be->destroy = cpu_destroy;
    *out = be;
    return 0;
}
