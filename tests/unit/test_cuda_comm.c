/* test_cuda_comm.c: the CUDA backend's collectives ($GPT_TEST_CUDA, default cuda-emu; "cuda" on a
 * GPU): one rank's, on the device's stream (its op tests against the reference are test_ops's
 * and test_ops_fused's, on every backend: ops_harness.h; the ranks of the emulator's NCCL,
 * test_nccl_emu's). The device is skipped when its library is absent. */
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/comm/comm.h"
#include "kernels/comm/store.h"
#include "kernels/rng.h"
#include "test.h"

static gk_backend *dev;

static float *rnd(size_t n)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = gk_rng_uniform(7, i) * 2.0f - 1.0f;
    return x;
}

/* One rank through the device's NCCL (on a GPU the real library; test_nccl_emu has the ranks):
 * gk_comm_open (the comm_open slot) of a world of 1 through a store of its own, an allreduce
 * between two ops on the device's stream (it must see the first and the second must see it: x * 2,
 * sum of one rank, * 0.5 is x again), allreduce_host and barrier, close. */
static void test_comm_one_rank(void)
{
    gk_backend *be = dev;
    if (!be) SKIP("no CUDA device library");
    size_t len = 1001;
    gk_err e = {0};
    gk_comm *c = NULL;
    gk_store *s = NULL;
    CHECK_OK(gk_store_open(&s, "127.0.0.1", 0, 1, 0, 60, &e), &e);
    if (s) CHECK_OK(gk_comm_open(be, s, 0, 1, 60, NULL, &c, &e), &e);
    if (!c) {
        if (s) gk_store_close(s);
        return;
    }
    float *x = rnd(len), *y = malloc(len * sizeof(float)),
          *d = be->ops->alloc(be, len * sizeof(float));
    be->ops->to_device(be, d, x, len * sizeof(float));
    be->ops->scale(be, d, 2.0f, len);
    CHECK_OK(c->ops->allreduce(c, d, len, &e), &e);
    be->ops->scale(be, d, 0.5f, len);
    be->ops->to_host(be, y, d, len * sizeof(float));
    CHECK(memcmp(x, y, len * sizeof(float)) == 0);
    double v[2] = {1.5, -2};
    CHECK_OK(c->ops->allreduce_host(c, v, 2, &e), &e);
    CHECK(v[0] == 1.5 && v[1] == -2);
    CHECK_OK(c->ops->barrier(c, &e), &e);
    gk_comm_close(c);
    gk_store_close(s);
    CHECK_OK(gk_backend_status(be, &e), &e);
    be->ops->free(be, d);
    free(x), free(y);
}

int main(void)
{
    const char *name = getenv("GPT_TEST_CUDA");
    gk_backend_opts o = {.device = name && *name ? name : "cuda-emu",
                         .threads = 1,
                         .attention = GK_ATTN_AUTO};
    gk_err e = {0};
    setenv("GPT_EMU_ORDER", "shuffle", 0); /* as the op tests run (ops_harness.h) */
    if (gk_backend_open(&dev, &o, &e)) fprintf(stderr, "note: %s\n", e.msg), dev = NULL;
    RUN(test_comm_one_rank);
    gk_backend_free(dev);
    return TEST_END();
}
