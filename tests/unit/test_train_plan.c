/* test_train_plan.c: the memory plan (train/plan.c, kernels/model/gpt2_mem.c's rows) on a device
 * whose memory is not the host's (the fake GPU): a run refused at ZeRO-0 is explained with the
 * table (device and host peaks apart) and the settings that alone would fit (recompute, and
 * zero_stage = 1 over 2 ranks, which halves the moments); gk_gpt2_mem_max_batch is the largest
 * batch whose estimate fits; the plan's rows add up to the estimate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_gpu.h"
#include "test.h"
#include "train/run.h"

static gk_gpt2_config cfg = {2, 4, 256, 32, 50000, 1, 0.0f}; /* the embedding is most of it */

/* The rows of a plan add up to its estimate's total. */
static void test_rows_sum(void)
{
    gk_err e = {0};
    gk_gpt2_mem m, m2;
    gk_gpt2_plan p;
    CHECK_OK(gk_gpt2_mem_plan(&cfg, GK_BF16, 2, 32, GK_GPT2_RECOMPUTE, 3, 1, 1, &m, &p, &e), &e);
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_BF16, 2, 32, GK_GPT2_RECOMPUTE, &m2, &e), &e);
    gk_gpt2_mem_shard(&m2, 3);
    size_t dev, host;
    gk_gpt2_plan_add(&p, "host row", 1000, 1);
    gk_gpt2_plan_sum(&p, 0, &dev, &host);
    CHECKF(dev == m.total && m.total == m2.total && host == 1000, "%zu %zu %zu", dev, m.total,
           m2.total);
    CHECK(p.row[1].bytes > 0 && strcmp(p.row[1].name, "weights, bf16 copy") == 0);
    gk_gpt2_plan_sum(&p, 1, &dev, &host);
    CHECK(dev == m.total + 1000 && host == 0);
}

/* zero_stage 2 over 3 ranks, by hand: the table's floats are wte 50048 x 256 and wpe 32 x 256
 * (the head bucket, 12820480), 789760 a layer (the last bucket with ln_f's 512: 790272); pieces of
 * 16672 rows of wte (4268032; tail 16384: wte's last 32 rows and wpe), 263248 (tail 16) and
 * 263424 (no tail): a shard of 4811104 floats, for the moments (twice) and the gradients, which
 * add two stripes of the head's (1360 rows of each rank's and a spare: 1044736 each), its tail
 * (and a spare row: 16640) and two of the last bucket's. */
static void test_zero2_rows(void)
{
    gk_err e = {0};
    gk_gpt2_mem m;
    gk_gpt2_plan p;
    CHECK_OK(gk_gpt2_mem_plan(&cfg, GK_F32, 2, 32, 0, 3, 2, 1, &m, &p, &e), &e);
    size_t shard = 4811104, grads = (shard + 2 * 1044736 + 16640 + 2 * 790272) * 4;
    CHECKF(m.optimizer == 2 * shard * 4 && m.grads == grads, "optimizer %zu, gradients %zu",
           m.optimizer, m.grads);
    CHECKF(strcmp(p.row[2].name, "gradients, fp32") == 0 && p.row[2].bytes == grads, "%s %zu",
           p.row[2].name, p.row[2].bytes);
    CHECK(m.master == 14400512 * 4);
    /* one rank: nothing sharded */
    gk_gpt2_mem one;
    CHECK_OK(gk_gpt2_mem_plan(&cfg, GK_F32, 2, 32, 0, 1, 2, 1, &one, &p, &e), &e);
    CHECK(one.grads == m.master && one.optimizer == 2 * m.master);
}

/* The largest batch: its estimate fits, one more does not; none when even 1 does not. */
static void test_max_batch(void)
{
    gk_err e = {0};
    gk_gpt2_mem a, b;
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_F32, 7, 32, 0, &a, &e), &e);
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_F32, 8, 32, 0, &b, &e), &e);
    int B = -1;
    CHECK_OK(gk_gpt2_mem_max_batch(&cfg, GK_F32, 32, 0, 1, 0, 1, 100, a.total + 100, &B, &e), &e);
    CHECKF(B == 7, "%d", B);
    CHECK_OK(gk_gpt2_mem_max_batch(&cfg, GK_F32, 32, 0, 1, 0, 1, 0, b.total - 1, &B, &e), &e);
    CHECKF(B == 7, "%d", B);
    CHECK_OK(gk_gpt2_mem_max_batch(&cfg, GK_F32, 32, 0, 1, 0, 1, 0, 1000, &B, &e), &e);
    CHECK(B == 0);
}

static void test_explain(void)
{
    gk_err e = {0};
    gk_backend *be = fake_gpu_open(&e);
    CHECKF(be != NULL, "%s", e.msg);
    if (!be) return;
    unsetenv("GPT_MEM_CHECK");
    tr_run r;
    memset(&r, 0, sizeof r);
    r.be = be, r.s.batch_size = 1, r.s.recompute = "false", r.dist.world = 1;
    gk_gpt2_mem m;
    CHECK_OK(gk_gpt2_mem_estimate(&cfg, GK_F32, 1, 32, 0, &m, &e), &e);
    fake_gpu_free = m.total - 1; /* the moments halved (50 MB) fit, as recompute's 0.3 MB */
    int flags = -1;
    CHECK(tr_model_flags(&r, &cfg, &flags, &e) == GK_ENOMEM && r.unfit);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    tr_plan_explain(&r, f);
    fclose(f);
    CHECKF(strstr(text, "\npeak, device ") && strstr(text, "\npeak, host ") &&
               strstr(text, "\navailable (device) ") && strstr(text, "\nfits ") &&
               strstr(text, "  recompute = gelu\n") &&
               strstr(text, "  zero_stage = 1 over 2 ranks (a device each)\n") &&
               !strstr(text, "batch_size ="),
           "%s", text);
    free(text);
    gk_backend_free(be);
}

int main(void)
{
    RUN(test_rows_sum);
    RUN(test_zero2_rows);
    RUN(test_max_batch);
    RUN(test_explain);
    return TEST_END();
}
