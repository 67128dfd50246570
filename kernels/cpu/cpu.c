/* cpu.c: the CPU backend's context, scratch, instruction-set paths, idle-thread policy and
 * vtable, above the op files (one per op family: cpu_ops.h, matmul.h), which depend only on
 * cpu_internal.h; their plain references are kernels/ref/'s files of the same names. */
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
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/host_mem.h"

/* ---- memory ---- */


/* c's scratch grown to need floats (kept as it is when large enough); 0, or -1 out of memory. */
static int scratch_grow(gk_cpu_impl *c, size_t need)
{
    if (need <= c->scratch_n) return 0;
    float *s = aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
    if (!s) return -1;
    free(c->scratch);
    c->scratch = s;
    c->scratch_n = need;
    return 0;
}

static int cpu_reserve(gk_backend *be, size_t rows, size_t cols, int head_size, int T, gk_err *err)
{
    (void)rows;
    gk_cpu_impl *c = CPU(be);
    size_t need = (size_t)GK_NCHUNK * 2 * cols;
    size_t att = (size_t)c->nthreads * gk_cpu_attn_scratch(T, head_size);
    size_t panels = (size_t)c->nthreads * CPU_BF16_PANEL * cols;
    if (att > need) need = att;
    if (panels > need) need = panels;
    if (scratch_grow(c, need))
        return gk_errf(err, GK_ENOMEM, "cpu backend: out of memory for %zu floats of scratch",
                       need);
    return 0;
}

float *gk_cpu_scratch_need(gk_backend *be, size_t n, const char *op)
{
    if (scratch_grow(CPU(be), n)) {
        GK_BACKEND_FAIL(be, GK_ENOMEM, "cpu %s: out of memory for %zu floats of scratch", op, n);
        return NULL;
    }
    return CPU(be)->scratch;
}

/* ---- how idle threads wait ----
 * libgomp keeps a thread that waits (for the next parallel region, at a barrier) spinning for
 * GOMP_SPINCOUNT rounds of `pause` before it sleeps on a futex: 300000 by default, milliseconds
 * of spinning. Processes whose teams share cores then spin against each other's descheduled
 * threads, and each runs many times slower than alone. CPU_SPINCOUNT, the bound libgomp itself
 * uses once it sees more threads than cores (it cannot see other processes), is tens of
 * microseconds: two at once then run at about their fair share, and one alone on few threads as
 * fast as before (a little slower on many threads for the tiny S model, whose parallel regions
 * are that close; passive waiting, 0, costs far more there). Figures: tests/bench/cpu-results.md;
 * make bench: BENCH=shared.
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

const float gk_vexpf_lim[2] = {-87.3f, 88.3f}; /* cpu_internal.h says why it lives here */

static const gk_ops cpu_ops = { /* by gk_ops's groups (backend.h) */
    .name = "cpu",
    .alloc = gk_host_alloc, .free = gk_host_free,
    .to_device = gk_host_copy, .to_host = gk_host_copy,
    .copy = gk_host_copy, .zero = gk_host_zero, .sync = gk_host_sync, .reserve = cpu_reserve,
    .mem_info = gk_host_mem_info,
    .cast = gk_cpu_cast,
    .gemm = gk_cpu_gemm, .gemm_bwd = gk_gemm_bwd_apart, /* this gemm, gelu_bwd, bias_bwd in turn */
    .bias_bwd = gk_cpu_bias_bwd, .gelu_fwd = gk_cpu_gelu_fwd, .gelu_bwd = gk_cpu_gelu_bwd,
    .dropout_bwd = gk_cpu_dropout_bwd,
    .encoder_fwd = gk_cpu_encoder_fwd, .encoder_bwd = gk_cpu_encoder_bwd,
    .layernorm_fwd = gk_cpu_layernorm_fwd, .layernorm_bwd = gk_cpu_layernorm_bwd,
    .residual_layernorm_fwd = gk_cpu_residual_layernorm_fwd,
    .attention_fwd = gk_cpu_attention_fwd, .attention_bwd = gk_cpu_attention_bwd,
    .attention_fwd_at = gk_cpu_attention_fwd_at,
    .xent_fwd = gk_cpu_xent_fwd, .xent_bwd = gk_cpu_xent_bwd,
    .sumsq = gk_cpu_sumsq, .scale = gk_cpu_scale, .adamw = gk_cpu_adamw,
    .adamw_multi = gk_cpu_adamw_multi, .zero_multi = gk_cpu_zero_multi,
    .add = gk_cpu_add,
    .comm_open = gk_comm_gloo_open, /* Gloo: kernels/comm/comm_gloo.cc */
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
    gk_cpu_impl *c = calloc(1, sizeof *c);
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
    snprintf(be->what, sizeof be->what, "cpu (%d thread%s)", c->nthreads,
             c->nthreads == 1 ? "" : "s");
    gk_host_props(be, GK_KIND_CPU);
    be->destroy = cpu_destroy;
    *out = be;
    return 0;
}
