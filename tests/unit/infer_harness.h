/* infer_harness.h: what test_infer.c, test_infer_f16.c and test_infer_q8.c share (header-only,
 * like test.h: each is its binary's main).
 * Owns: the normalized error ||a - b|| / ||b||, the seeded test inputs, putting the CPU backend
 * on one instruction-set path, the 16-bit weight ops check (gemm with either layout and
 * encoder_fwd against the reference backend, each path) and the comparison of a model with
 * narrow weights against the same model in fp32 (logits within a bound, greedy decoding the same
 * unless two logits are within it; each path). Not thread-safe: one test binary, one thread. */
#ifndef GK_INFER_HARNESS_H
#define GK_INFER_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/ref/ref.h"
#include "kernels/model/gpt2.h"
#include "kernels/rng.h"
#include "test.h"

static inline double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0 ? s : 1));
}

static inline void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t key = gk_rng_key(seed, 0, 0, 7);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * gk_rng_uniform(key, i) - 1.0f;
}

/* Puts be on path isa; 0 when this machine cannot run it (said on stderr). */
static inline int use_isa(gk_backend *be, int isa)
{
    gk_err e = {0};
    if (gk_cpu_set_isa(be, isa, &e) == 0) return 1;
    fprintf(stderr, "%s: path %s not checked here: %s\n", t_cur_name, gk_cpu_isa_name(isa), e.msg);
    return 0;
}

/* gemm with 16-bit weights H (K = 70 x N = 300, type t, from W rounded by round: as (K, N) or
 * transposed; M = 1, 3, 8 (few rows) and 20 (panels); beta 0 and 1) and encoder_fwd with the
 * first 10 rows of 30 of H as a table: the CPU backend = the reference backend, normalized error
 * per call below 1e-6 (1e-7 for the embedding), on paths 0..isa_max (gk_cpu_set_isa; isa_max < 0:
 * the default path only). K and N are not multiples of 8: the vector tails run. */
static inline void check_ops16(gk_elt t, uint16_t (*round)(float), int isa_max, const char *what)
{
    gk_backend *be = NULL, *ref = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    CHECK_OK(gk_ref_create(&ref, &e), &e);
    if (!be || !ref) goto out;
    int K = 70, N = 300, Mmax = 20, Ms[] = {1, 3, 8, 20};
    CHECK_OK(be->ops->reserve(be, Mmax, K > N ? K : N, 16, 16, &e), &e);
    float *A = malloc(sizeof(float) * Mmax * K), *W = malloc(sizeof(float) * K * N);
    uint16_t *H = malloc(sizeof(uint16_t) * K * N);
    float *c1 = malloc(sizeof(float) * Mmax * N), *c2 = malloc(sizeof(float) * Mmax * N);
    fill(A, (size_t)Mmax * K, 1);
    fill(W, (size_t)K * N, 2);
    for (int i = 0; i < K * N; i++) H[i] = round(W[i]);
    for (int isa = isa_max < 0 ? -1 : 0; isa <= isa_max; isa++) {
        if (isa >= 0 && !use_isa(be, isa)) continue;
        const char *path = isa >= 0 ? gk_cpu_isa_name(isa) : "default";
        for (int mi = 0; mi < 4; mi++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    int M = Ms[mi], ldb = tb ? K : N;
                    fill(c1, (size_t)Mmax * N, 5);
                    fill(c2, (size_t)Mmax * N, 5);
                    be->ops->gemm(be, 0, tb, M, N, K, 0.5f, A, GK_F32, K, H, t, ldb, (float)beta,
                                  c1, GK_F32, N, NULL, NULL);
                    ref->ops->gemm(ref, 0, tb, M, N, K, 0.5f, A, GK_F32, K, H, t, ldb, (float)beta,
                                   c2, GK_F32, N, NULL, NULL);
                    double d = rel_err(c1, c2, (size_t)M * N);
                    CHECKF(d < 1e-6, "gemm %s %s M=%d tb=%d beta=%d: %.3e", what, path, M, tb, beta,
                           d);
                }
        int tokens[6] = {0, 9, 3, 3, 7, 1};
        float wpe[3 * 30];
        fill(wpe, 90, 8);
        be->ops->encoder_fwd(be, c1, tokens, H, t, wpe, NULL, 2, 3, 30, 0.0f, 0);
        ref->ops->encoder_fwd(ref, c2, tokens, H, t, wpe, NULL, 2, 3, 30, 0.0f, 0);
        CHECKF(rel_err(c1, c2, 180) < 1e-7, "encoder %s %s", what, path);
        fprintf(stderr, "%s ops: path %s checked\n", what, path);
    }
    CHECK_OK(gk_backend_status(be, &e), &e);
    free(A);
    free(W);
    free(H);
    free(c1);
    free(c2);
out:
    gk_backend_free(be);
    gk_backend_free(ref);
}

/* A model with weights of kind flags (GK_GPT2_BF16, _F16, _Q8) against the same init in fp32 on
 * be: a prompt of P tokens, then single greedy steps to 20. Each row's logits within bound
 * (normalized) of fp32's; where the greedy tokens differ, the two logits must be within bound
 * of each other (a near-tie), and the comparison stops there. what names the run on stderr. */
static inline void narrow_logits_on(gk_backend *be, int flags, int P, double bound,
                                    const char *what)
{
    gk_err e = {0};
    gk_gpt2_config cfg = {3, 4, 64, 32, 100, 1, 0.0f};
    gk_gpt2 *f = NULL, *h = NULL;
    CHECK_OK(gk_gpt2_create_ex(&f, &cfg, be, 1, cfg.block_size, GK_GPT2_INFERENCE, &e), &e);
    CHECK_OK(gk_gpt2_create_ex(&h, &cfg, be, 1, cfg.block_size, flags, &e), &e);
    if (!f || !h) goto out;
    CHECK_OK(gk_gpt2_init(f, 3, &e), &e);
    CHECK_OK(gk_gpt2_init(h, 3, &e), &e);
    CHECK(gk_gpt2_param(h, 0)->data == NULL && gk_gpt2_param(h, 0)->copy != NULL);
    int Vp = gk_gpt2_padded_vocab(f), V = cfg.vocab_size;
    float *lf = malloc(sizeof(float) * P * Vp), *lh = malloc(sizeof(float) * P * Vp);
    int prompt[16] = {5, 17, 42, 99, 0, 63, 7, 21, 3, 3, 50, 1, 8, 80, 2, 33}, tf = 0, th = 0,
        diverged = 0;
    double worst = 0;
    for (int t = 0; t < 20 && !diverged; t++) {
        int n = t == 0 ? P : 1, pos = t == 0 ? 0 : P - 1 + t;
        CHECK_OK(gk_gpt2_forward_at(f, t == 0 ? prompt : &tf, 1, pos, n, &e), &e);
        CHECK_OK(gk_gpt2_forward_at(h, t == 0 ? prompt : &th, 1, pos, n, &e), &e);
        gk_gpt2_logits_host(f, 0, n, Vp, lf, NULL);
        gk_gpt2_logits_host(h, 0, n, Vp, lh, NULL);
        for (int r = 0; r < n; r++) {
            double d = rel_err(lh + (size_t)r * Vp, lf + (size_t)r * Vp, V);
            if (d > worst) worst = d;
        }
        const float *a = lf + (size_t)(n - 1) * Vp, *b = lh + (size_t)(n - 1) * Vp;
        tf = th = 0; /* greedy: the argmax of the last row of each */
        for (int j = 1; j < V; j++) {
            if (a[j] > a[tf]) tf = j;
            if (b[j] > b[th]) th = j;
        }
        if (tf != th) {
            double norm = 0;
            for (int j = 0; j < V; j++) norm += (double)a[j] * a[j];
            CHECKF(fabs(a[tf] - a[th]) < bound * sqrt(norm),
                   "%s greedy step %d: %d vs %d, gap %.3e", what, t, tf, th, fabs(a[tf] - a[th]));
            fprintf(stderr, "%s greedy: near-tie at step %d (%d vs %d)\n", what, t, tf, th);
            diverged = 1;
        }
    }
    if (!diverged) fprintf(stderr, "%s greedy: 20 steps equal to fp32\n", what);
    fprintf(stderr, "%s vs fp32 logits: worst row relative error %.2e (bound %.2e)\n", what, worst,
            bound);
    CHECKF(worst < bound, "%s logits: relative error %.3e", what, worst);
    free(lf);
    free(lh);
out:
    gk_gpt2_free(f);
    gk_gpt2_free(h);
}

/* narrow_logits_on the CPU backend on paths 0..isa_max (isa_max < 0: the default path only) */
static inline void check_narrow_logits(int flags, int P, double bound, int isa_max,
                                       const char *what)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    for (int isa = isa_max < 0 ? -1 : 0; be && isa <= isa_max; isa++) {
        if (isa >= 0 && !use_isa(be, isa)) continue;
        char name[48];
        snprintf(name, sizeof name, "%s (%s)", what, isa >= 0 ? gk_cpu_isa_name(isa) : "default");
        narrow_logits_on(be, flags, P, bound, name);
    }
    gk_backend_free(be);
}

#endif
