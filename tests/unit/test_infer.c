/* test_infer.c: inference with a KV cache (gk_gpt2_forward_at, the attention_fwd_at op) and the
 * CPU backend's few-row gemm: the incremental logits of a prompt and several single-token steps
 * equal the full forward's logits at the same positions (batch 2, CPU and reference backends);
 * the op equals attention_fwd when it covers the whole sequence; cpu_gemm_rows equals sgemm.
 * Errors are normalized: ||a - b|| / ||b|| per row, bounded by a small multiple of fp32 epsilon
 * times the depth of the sums (the two paths add in different orders). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/ref.h"
#include "kernels/gpt2.h"
#include "kernels/rng.h"
#include "test.h"

static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0 ? s : 1));
}

static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t key = gk_rng_key(seed, 0, 0, 7);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * gk_rng_uniform(key, i) - 1.0f;
}

/* Full forward of (B,T) tokens vs forward_at: prompt of P tokens, then single steps to T. */
static void check_incremental(gk_backend *be, int bias, double tol)
{
    gk_err e = {0};
    gk_gpt2_config cfg = {3, 4, 64, 24, 100, bias, 0.1f};
    enum { B = 2, T = 20, P = 6 };
    gk_gpt2 *full = NULL, *inc = NULL;
    CHECK_OK(gk_gpt2_create(&full, &cfg, be, B, T, &e), &e);
    CHECK_OK(gk_gpt2_create(&inc, &cfg, be, B, cfg.block_size, &e), &e);
    if (!full || !inc) goto out;
    CHECK_OK(gk_gpt2_init(full, 42, &e), &e);
    CHECK_OK(gk_gpt2_init(inc, 42, &e), &e);
    int tokens[B * T];
    uint64_t key = gk_rng_key(9, 0, 0, 1);
    for (int i = 0; i < B * T; i++) tokens[i] = (int)(gk_rng_uniform(key, i) * cfg.vocab_size);
    CHECK_OK(gk_gpt2_forward(full, tokens, NULL, B, T, NULL, &e), &e);
    int Vp = gk_gpt2_padded_vocab(full), V = cfg.vocab_size;
    float *want = malloc(sizeof(float) * B * T * Vp), *got = malloc(sizeof(float) * B * T * Vp);
    be->ops->to_host(be, want, gk_gpt2_logits(full), sizeof(float) * B * T * Vp);
    // prompt: positions 0..P-1 of both sequences
    int in[B * P];
    for (int b = 0; b < B; b++) memcpy(in + b * P, tokens + b * T, sizeof(int) * P);
    CHECK_OK(gk_gpt2_forward_at(inc, in, B, 0, P, &e), &e);
    for (int b = 0; b < B; b++)
        be->ops->to_host(be, got + (size_t)b * T * Vp, gk_gpt2_logits(inc) + (size_t)b * P * Vp,
                         sizeof(float) * P * Vp);
    // then one position at a time; the last two steps take two positions at once
    for (int t = P; t < T;) {
        int n = t + 2 == T ? 2 : 1, step[B * 2];
        for (int b = 0; b < B; b++) memcpy(step + b * n, tokens + b * T + t, sizeof(int) * n);
        CHECK_OK(gk_gpt2_forward_at(inc, step, B, t, n, &e), &e);
        for (int b = 0; b < B; b++)
            be->ops->to_host(be, got + ((size_t)b * T + t) * Vp,
                             gk_gpt2_logits(inc) + (size_t)b * n * Vp, sizeof(float) * n * Vp);
        t += n;
    }
    double worst = 0;
    for (int r = 0; r < B * T; r++) {
        double d = rel_err(got + (size_t)r * Vp, want + (size_t)r * Vp, V);
        if (d > worst) worst = d;
    }
    fprintf(stderr, "%s bias=%d: incremental vs full logits, worst row relative error %.2e\n",
            be->ops->name, bias, worst);
    CHECKF(worst < tol, "relative error %.3e >= %.1e", worst, tol);
    // bad calls
    CHECK(gk_gpt2_forward_at(inc, in, B, cfg.block_size - 1, 2, &e) == GK_EUSAGE);
    CHECK(gk_gpt2_forward_at(inc, in, B + 1, 0, 1, &e) == GK_EUSAGE);
    in[0] = V;
    CHECK(gk_gpt2_forward_at(inc, in, 1, 0, 1, &e) == GK_EUSAGE);
    free(want);
    free(got);
out:
    gk_gpt2_free(full);
    gk_gpt2_free(inc);
}

static void test_incremental_cpu(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    check_incremental(be, 1, 1e-5);
    check_incremental(be, 0, 1e-5);
    gk_backend_free(be);
}

static void test_incremental_ref(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK_OK(gk_ref_create(&be, &e), &e);
    check_incremental(be, 1, 1e-6);
    gk_backend_free(be);
}

/* attention_fwd_at over the whole sequence = attention_fwd; a split at t0 gives the same rows. */
static void test_attention_op(void)
{
    enum { B = 2, T = 13, C = 48, NH = 3 };
    gk_backend *cpu = NULL, *ref = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&cpu, 2, &e), &e);
    CHECK_OK(gk_ref_create(&ref, &e), &e);
    CHECK_OK(cpu->ops->reserve(cpu, B * T, 4 * C, C / NH, T, &e), &e);
    float *qkv = malloc(sizeof(float) * B * T * 3 * C), *lse = malloc(sizeof(float) * B * NH * T);
    float *want = malloc(sizeof(float) * B * T * C), *got = malloc(sizeof(float) * B * T * C);
    float *part = malloc(sizeof(float) * B * T * C);
    fill(qkv, (size_t)B * T * 3 * C, 3);
    gk_backend *bes[2] = {cpu, ref};
    for (int k = 0; k < 2; k++) {
        gk_backend *be = bes[k];
        be->ops->attention_fwd(be, want, lse, qkv, B, T, C, NH, 0.0f, 0);
        be->ops->attention_fwd_at(be, got, qkv, B, T, 0, T, C, NH);
        double d = rel_err(got, want, (size_t)B * T * C);
        CHECKF(d < 1e-6, "%s: whole sequence: %.3e", be->ops->name, d);
        int t0 = 5, n = T - t0;
        be->ops->attention_fwd_at(be, part, qkv, B, T, t0, n, C, NH);
        double worst = 0;
        for (int b = 0; b < B; b++) {
            double r = rel_err(part + (size_t)b * n * C, want + ((size_t)b * T + t0) * C, (size_t)n * C);
            if (r > worst) worst = r;
        }
        CHECKF(worst < 1e-6, "%s: rows %d..: %.3e", be->ops->name, t0, worst);
    }
    free(qkv);
    free(lse);
    free(want);
    free(got);
    free(part);
    gk_backend_free(cpu);
    gk_backend_free(ref);
}

/* cpu_gemm_rows (few rows) = the backend's gemm, both weight layouts, beta 0 and 1. */
static void test_gemm_rows(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    int K = 70, N = 133;
    float *A = malloc(sizeof(float) * 8 * K), *W = malloc(sizeof(float) * K * N);
    float *c1 = malloc(sizeof(float) * 8 * N), *c2 = malloc(sizeof(float) * 8 * N);
    fill(A, 8 * K, 1);
    fill(W, (size_t)K * N, 2);
    for (int M = 1; M <= 8; M += 3)
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                fill(c1, 8 * N, 5);
                fill(c2, 8 * N, 5);
                int ldb = tb ? K : N;
                CHECK(cpu_gemm_rows(be, 0, tb, M, N, K, 0.5f, A, K, W, ldb, beta, c1, N) == 1);
                be->ops->gemm(be, 0, tb, M, N, K, 0.5f, A, K, W, ldb, beta, c2, N);
                double d = rel_err(c1, c2, (size_t)M * N);
                CHECKF(d < 1e-6, "M=%d tb=%d beta=%d: %.3e", M, tb, beta, d);
            }
    CHECK(cpu_gemm_rows(be, 0, 0, 9, N, K, 1.0f, A, K, W, N, 0.0f, c1, N) == 0);
    CHECK(cpu_gemm_rows(be, 1, 0, 1, N, K, 1.0f, A, K, W, N, 0.0f, c1, N) == 0);
    free(A);
    free(W);
    free(c1);
    free(c2);
    gk_backend_free(be);
}

int main(void)
{
    RUN(test_incremental_cpu);
    RUN(test_incremental_ref);
    RUN(test_attention_op);
    RUN(test_gemm_rows);
    return TEST_END();
}
