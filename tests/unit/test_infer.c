/* test_infer.c: inference with a KV cache (gk_gpt2_forward_at, the attention_fwd_at op) and the
 * CPU backend's few-row gemm: the incremental logits of a prompt and several single-token steps
 * equal the full forward's logits at the same positions (batch 2, CPU and reference backends);
 * the op equals attention_fwd when it covers the whole sequence; gk_cpu_gemm_rows equals sgemm. On
 * cuda-emu (or $GPT_TEST_CUDA), the recorded and replayed one-row step (a CUDA graph) gives the
 * same as unrecorded.
 * Errors are normalized: ||a - b|| / ||b|| per row, bounded by a small multiple of fp32 epsilon
 * times the depth of the sums (the two paths add in different orders).
 * Inference models (GK_GPT2_INFERENCE) give the training model's logits bit for bit and refuse
 * backward/update; bf16 weights (GK_GPT2_BF16): the ops equal the reference, and the logits are
 * within bf16 rounding of fp32's (bound derived in test_bf16_logits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer_harness.h"
#include "kernels/cpu/matmul.h"

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
    gk_gpt2_logits_host(full, 0, B * T, Vp, want, NULL);
    // prompt: positions 0..P-1 of both sequences
    int in[B * P];
    for (int b = 0; b < B; b++) memcpy(in + b * P, tokens + b * T, sizeof(int) * P);
    CHECK_OK(gk_gpt2_forward_at(inc, in, B, 0, P, &e), &e);
    for (int b = 0; b < B; b++)
        gk_gpt2_logits_host(inc, b * P, P, Vp, got + (size_t)b * T * Vp, NULL);
    // then one position at a time; the last two steps take two positions at once
    for (int t = P; t < T;) {
        int n = t + 2 == T ? 2 : 1, step[B * 2];
        for (int b = 0; b < B; b++) memcpy(step + b * n, tokens + b * T + t, sizeof(int) * n);
        CHECK_OK(gk_gpt2_forward_at(inc, step, B, t, n, &e), &e);
        for (int b = 0; b < B; b++)
            gk_gpt2_logits_host(inc, b * n, n, Vp, got + ((size_t)b * T + t) * Vp, NULL);
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

/* $GPT_TEST_CUDA (default cuda-emu): the one-row steps are recorded once and replayed (a CUDA
 * graph; the position is read from device memory by the replay), and give the full forward's
 * logits as the unrecorded steps do (cuda_no_graphs: GPT_CUDA_GRAPHS=0). A step whose recording a
 * call breaks (a sync inside a capture, as an op the device may not capture would) runs unrecorded
 * instead, with no error and a note saying why. Replays are counted through the backend's own
 * table. */
static const gk_ops *emu_ops;
static int replays;
static void counted_replay(gk_backend *be, void *rec)
{
    replays++;
    emu_ops->replay(be, rec);
}
static void syncing_encoder(gk_backend *be, void *out, const int *tokens, const void *wte,
                            gk_elt tw, const float *wpe, const int *t0, int B, int T, int C,
                            float p, uint64_t key)
{
    emu_ops->sync(be); /* may not be captured: it would wait for work that is only recorded */
    emu_ops->encoder_fwd(be, out, tokens, wte, tw, wpe, t0, B, T, C, p, key);
}

static void test_incremental_recorded(void)
{
    for (int mode = 0; mode < 3; mode++) { /* recorded, cuda_no_graphs, a broken capture */
        gk_backend *be = NULL;
        gk_err e = {0};
        const char *name = getenv("GPT_TEST_CUDA"); /* "cuda" on a GPU */
        gk_backend_opts o = {.device = name && *name ? name : "cuda-emu", .bf16 = 0,
                             .attention = GK_ATTN_AUTO, .cuda_no_graphs = mode == 1};
        if (gk_backend_open(&be, &o, &e) != 0)
            SKIP(e.msg);
        static gk_ops counted;
        emu_ops = be->ops;
        CHECK(emu_ops->replay != NULL && emu_ops->record_begin != NULL);
        counted = *emu_ops;
        counted.replay = counted_replay;
        if (mode == 2) counted.encoder_fwd = syncing_encoder;
        be->ops = &counted;
        replays = 0;
        check_incremental(be, 1, 1e-5);
        /* 12 one-row steps of batch 2 (positions 6..17), all replays of one recording */
        CHECKF(replays == (mode == 0 ? 12 : 0), "mode %d: %d replays (%s)", mode, replays,
               be->note);
        CHECK(gk_backend_status(be, NULL) == 0);
        if (mode == 2)
            CHECKF(strstr(be->note, "CUDA graphs off") && strstr(be->note, "cudaStreamSynchronize"),
                   "note: '%s'", be->note);
        else
            CHECKF(be->note[0] == 0, "mode %d: note '%s'", mode, be->note);
        be->ops = emu_ops;
        gk_backend_free(be);
    }
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
        be->ops->attention_fwd_at(be, got, qkv, NULL, B, T, &(int){0}, T, C, NH);
        double d = rel_err(got, want, (size_t)B * T * C);
        CHECKF(d < 1e-6, "%s: whole sequence: %.3e", be->ops->name, d);
        int t0 = 5, n = T - t0;
        be->ops->attention_fwd_at(be, part, qkv, NULL, B, T, &t0, n, C, NH);
        double worst = 0;
        for (int b = 0; b < B; b++) {
            double r =
                rel_err(part + (size_t)b * n * C, want + ((size_t)b * T + t0) * C, (size_t)n * C);
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

/* gk_cpu_gemm_rows (few rows) = the reference backend's gemm, both weight layouts, beta 0 and 1;
 * K = 70: the dot products' lanes (CPU_DOT_LANES) and a tail. */
static void test_gemm_rows(void)
{
    gk_backend *be = NULL, *ref = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    CHECK_OK(gk_ref_create(&ref, &e), &e);
    if (!be || !ref) goto out;
    int K = 70, N = 133;
    CHECK_OK(be->ops->reserve(be, 8, N, 16, 16, &e), &e); /* the K-split's partial sums */
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
                CHECK(gk_cpu_gemm_rows(be, 0, tb, M, N, K, 0.5f, A, K, W, ldb, beta, c1, N) == 1);
                ref->ops->gemm(ref, 0, tb, M, N, K, 0.5f, A, GK_F32, K, W, GK_F32, ldb, beta, c2,
                               GK_F32, N, NULL, NULL);
                double d = rel_err(c1, c2, (size_t)M * N);
                CHECKF(d < 1e-6, "M=%d tb=%d beta=%d: %.3e", M, tb, beta, d);
            }
    CHECK(gk_cpu_gemm_rows(be, 0, 0, 9, N, K, 1.0f, A, K, W, N, 0.0f, c1, N) == 0);
    CHECK(gk_cpu_gemm_rows(be, 1, 0, 1, N, K, 1.0f, A, K, W, N, 0.0f, c1, N) == 0);
    free(A);
    free(W);
    free(c1);
    free(c2);
out:
    gk_backend_free(be);
    gk_backend_free(ref);
}

/* An inference model's forward = a training model's, bit for bit; no backward, no update. */
static void test_inference_model(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    gk_gpt2_config cfg = {3, 4, 64, 24, 100, 1, 0.1f};
    enum { B = 2, T = 12 };
    gk_gpt2 *tr = NULL, *inf = NULL;
    CHECK_OK(gk_gpt2_create(&tr, &cfg, be, B, T, &e), &e);
    CHECK_OK(gk_gpt2_create_ex(&inf, &cfg, be, B, T, GK_GPT2_INFERENCE, &e), &e);
    if (!tr || !inf) goto out;
    CHECK_OK(gk_gpt2_init(tr, 5, &e), &e);
    CHECK_OK(gk_gpt2_init(inf, 5, &e), &e);
    int tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++)
        tokens[i] = (i * 37) % cfg.vocab_size, targets[i] = (i * 11) % cfg.vocab_size;
    float l1, l2;
    CHECK_OK(gk_gpt2_forward(tr, tokens, targets, B, T, &l1, &e), &e);
    gk_gpt2_set_training(inf, 1); /* ignored: no dropout */
    CHECK_OK(gk_gpt2_forward(inf, tokens, targets, B, T, &l2, &e), &e);
    size_t n = (size_t)B * T * gk_gpt2_padded_vocab(tr);
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    gk_gpt2_logits_host(tr, 0, B * T, gk_gpt2_padded_vocab(tr), a, NULL);
    gk_gpt2_logits_host(inf, 0, B * T, gk_gpt2_padded_vocab(inf), b, NULL);
    CHECK(memcmp(a, b, sizeof(float) * n) == 0);
    CHECK(l1 == l2);
    CHECK(gk_gpt2_backward(inf, 1.0f, &e) == GK_EUSAGE);
    gk_adamw h = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0};
    CHECK(gk_gpt2_update(inf, &h, 1e-3f, NULL, &e) == GK_EUSAGE);
    CHECK(gk_gpt2_grad_norm(inf) == 0.0);
    gk_gpt2_zero_grad(inf);
    CHECK(gk_gpt2_param(inf, 0)->grad == NULL && gk_gpt2_param(inf, 0)->m == NULL);
    free(a);
    free(b);
out:
    gk_gpt2_free(tr);
    gk_gpt2_free(inf);
    gk_backend_free(be);
}

static uint16_t to_bf16(float f) /* truncation is enough for test inputs */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* gemm with bf16 weights and encoder_fwd with a bf16 wte: CPU = reference, every path (few rows,
 * panels; both layouts). */
static void test_bf16_ops(void) { check_ops16(GK_BF16, to_bf16, -1, "bf16"); }

/* bf16 weights vs fp32 weights, same init: logits of a prompt and of single steps. Bound: RNE
 * rounding moves each weight by at most 2^-9 relative; a logit passes through 4 matrices per layer
 * and the lm_head (13 here), whose independent errors add in quadrature: sqrt(13) 2^-9 = 7e-3
 * relative; twice that as margin: 2^-6. Greedy decoding then picks the same tokens unless two
 * logits are closer than that error (checked: any difference must be such a near-tie). */
static void test_bf16_logits(void) { check_narrow_logits(GK_GPT2_BF16, 8, 0x1p-6, -1, "bf16"); }

int main(void)
{
    RUN(test_incremental_cpu);
    RUN(test_incremental_ref);
    RUN(test_incremental_recorded);
    RUN(test_attention_op);
    RUN(test_gemm_rows);
    RUN(test_inference_model);
    RUN(test_bf16_ops);
    RUN(test_bf16_logits);
    return TEST_END();
}
