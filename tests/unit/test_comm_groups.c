/* test_comm_groups.c: comm groups (gk_comm_open_group, kernels/comm/comm.c and comm_gloo.cc)
 * across processes on loopback, as tensor parallel x data parallel lays them out (the ranks:
 * comm_harness.h; the whole run's comm: test_comm.c; NCCL's groups: test_nccl_emu.c). */
#include "comm_harness.h"

/* Groups of a run of 4 (gk_comm_open_group through the cpu backend), as tensor parallel x data
 * parallel lays them out: "tp0" {0, 1} and "tp1" {2, 3} opened at once, then "dp0" {0, 2} and
 * "dp1" {1, 3}, beside the whole run's comm: each sums over its own members only (each rank adds
 * 10^rank), and a name out of bounds is refused. */
static void groups_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_backend *be = NULL;
    gk_comm *tp = NULL, *dp = NULL, *all = NULL;
    gk_err e = {0};
    gk_backend_opts o = {.device = "cpu", .threads = 1};
    CHECK_OK(gk_backend_open(&be, &o, &e), &e);
    char name[2][16];
    snprintf(name[0], sizeof name[0], "tp%d", rank / 2);
    snprintf(name[1], sizeof name[1], "dp%d", rank % 2);
    if (s && be) {
        CHECK_OK(gk_comm_open_group(be, s, name[0], rank % 2, 2, 10, NULL, &tp, &e), &e);
        CHECK_OK(gk_comm_open_group(be, s, name[1], rank / 2, 2, 10, NULL, &dp, &e), &e);
        CHECK_OK(gk_comm_open(be, s, rank, world, 10, NULL, &all, &e), &e);
        gk_comm *bad = NULL;
        CHECK(gk_comm_open_group(be, s, "tp/0", 0, 2, 10, NULL, &bad, &e) == GK_EUSAGE && !bad &&
              strstr(e.msg, "comm group 'tp/0': 1 to 24 of"));
    }
    static const float pow10[4] = {1, 10, 100, 1000};
    float v[3] = {pow10[rank], pow10[rank], pow10[rank]};
    gk_comm *c[3] = {tp, dp, all};
    for (int k = 0; k < 3; k++)
        if (c[k]) CHECK_OK(c[k]->ops->allreduce(c[k], &v[k], 1, &e), &e);
    float want_tp = rank < 2 ? 11 : 1100, want_dp = rank % 2 ? 1010 : 101;
    CHECKF(v[0] == want_tp && v[1] == want_dp && v[2] == 1111, "rank %d: tp %g, dp %g, all %g",
           rank, v[0], v[1], v[2]);
    for (int k = 0; k < 3; k++) gk_comm_close(c[k]);
    gk_backend_free(be);
    gk_store_close(s);
}

static void test_gloo_groups(void) { run_ranks(4, groups_rank); }

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* the store must not need SIGPIPE ignored */
    RUN(test_gloo_groups);
    return TEST_END();
}
