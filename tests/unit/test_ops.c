/* test_ops.c: the op tests on every backend (and on each CUDA attention path: cuda-emu:fa2 and the
 * like) against the reference backend (kernels/ref/ref.c), on the driver and the one tolerance
 * model of ops_harness.h (its header comment states both). One file per op family in
 * tests/unit/ops/, included here to make one binary (each binary adds link time): matmul,
 * elementwise, layernorm, encoder, classifier, attention, optimizer, cast. The fused and
 * recompute ops are in test_ops_fused.c (the same driver, a binary of its own). */
#include "ops_harness.h"

static const int CS[] = {1, 24, 100}; /* columns: not multiples of tiles */

/* n random ints in [lo, hi) (token ids, targets). */
static int *rand_ints(size_t n, int lo, int hi)
{
    int *x = malloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) x[i] = lo + (int)(gk_rng_uniform(seed, i) * (float)(hi - lo));
    seed++;
    return x;
}

#include "ops/attention.c"
#include "ops/cast.c"
#include "ops/classifier.c"
#include "ops/elementwise.c"
#include "ops/encoder.c"
#include "ops/layernorm.c"
#include "ops/matmul.c"
#include "ops/optimizer.c"

int main(int argc, char **argv)
{
    static const ops_test tests[] = {
        OPS_TEST(test_cast),      OPS_TEST(test_gemm),    OPS_TEST(test_elementwise), OPS_TEST(test_layernorm),
        OPS_TEST(test_encoder),   OPS_TEST(test_xent),    OPS_TEST_ATTN(test_attention), OPS_TEST(test_attention_at),
        OPS_TEST(test_optimizer), OPS_TEST(test_multi), OPS_TEST_FUSED(test_gemm_bwd),
    };
    return ops_main(argc, argv, tests, (int)(sizeof tests / sizeof *tests));
}
