/* test_xent_split.c: the cross-entropy of logits split by vocabulary (kernels/model/xent_split.c)
 * on 2 and 3 ranks (processes over Gloo on loopback: comm_harness.h), each with a CPU backend:
 * every rank's losses and log-sum-exps, and its columns' gradient, against the unsplit
 * xent_fwd / xent_bwd of the whole rows on the same backend, at vocabularies that do and do not
 * divide by the ranks (and one where the last rank holds no column), with targets on every rank's
 * columns and ignored ones (-1).
 * Tolerance: the split lse is the log of a sum of the slices' exp(lse) (in double) where the op
 * sums the row's exponentials in float: both within a few float roundings of the row's lse (|lse|
 * under 8 here: 1e-5 absolute is about 16 of them); a loss is lse less the target's logit, the
 * same bound; a gradient is exp(logit - lse) * dloss, whose relative error is lse's absolute one
 * (1e-5 of values at most dloss = 1/3). */
#include "comm_harness.h"
#include "kernels/cpu/cpu.h"
#include "kernels/model/xent_split.h"

#include <math.h>

enum { N = 13 };

static int case_V; /* the vocabulary of the case that run_ranks runs */

/* logit (i, j) of the whole rows: the same on every rank */
static float logit_at(int i, int j) { return 3.0f * sinf(0.7f * (float)i + 1.3f * (float)j); }

/* Row i's target: spread over the whole vocabulary, every fourth ignored. */
static int target_at(int i, int V) { return i % 4 == 2 ? -1 : (i * 7 + 3) % V; }

static void split_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = NULL;
    gk_backend *be = NULL;
    gk_xent_split *x = NULL;
    gk_err e = {0};
    int V = case_V, lo = 0, n = 0;
    if (s) CHECK_OK(gk_comm_open_gloo(&c, s, rank, world, 10, NULL, &e), &e);
    CHECK_OK(gk_cpu_create(&be, 1, &e), &e);
    if (c && be) CHECK_OK(gk_xent_split_new(&x, be, c, V, N, &e), &e);
    if (!x) goto done;
    gk_xent_split_cols(x, &lo, &n);
    int Vp = n + 3; /* (padded) */
    float *whole = malloc(sizeof(float) * N * (size_t)V), *mine = calloc((size_t)N * Vp, 4);
    float loss[2][N], lse[2][N], dl = 1.0f / 3, *dwhole = malloc(sizeof(float) * N * (size_t)V);
    int t[N];
    for (int i = 0; i < N; i++) {
        t[i] = target_at(i, V);
        for (int j = 0; j < V; j++) whole[(size_t)i * V + j] = logit_at(i, j);
        for (int j = 0; j < n; j++) mine[(size_t)i * Vp + j] = logit_at(i, lo + j);
    }
    /* the unsplit ops on the whole rows (cpu: device memory is host memory) */
    be->ops->xent_fwd(be, loss[0], lse[0], whole, t, N, V, V);
    be->ops->xent_bwd(be, dwhole, whole, lse[0], t, dl, N, V, V);
    CHECK_OK(gk_xent_split_fwd(x, loss[1], lse[1], mine, t, N, Vp, &e), &e);
    CHECK_OK(gk_xent_split_bwd(x, mine, mine, lse[1], t, dl, N, Vp, &e), &e);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bad += fabsf(loss[1][i] - loss[0][i]) > 1e-5f || fabsf(lse[1][i] - lse[0][i]) > 1e-5f;
        bad += t[i] < 0 && loss[1][i] != 0.0f;
        for (int j = 0; j < Vp; j++) {
            float want = j < n ? dwhole[(size_t)i * V + lo + j] : 0.0f;
            bad += fabsf(mine[(size_t)i * Vp + j] - want) > 1e-5f * dl + 1e-7f;
        }
    }
    CHECKF(bad == 0, "V %d, rank %d of %d (columns %d..%d): %d values differ; loss 0: %g vs %g",
           V, rank, world, lo, lo + n, bad, loss[1][0], loss[0][0]);
    free(whole), free(mine), free(dwhole);
done:
    gk_xent_split_free(x);
    gk_comm_close(c);
    gk_backend_free(be);
    gk_store_close(s);
}

/* V 50 over 2 ranks (25 each) and 3 (17, 17, 16); V 4 over 3 (2, 2 and none). */
static void test_split_vocab(void)
{
    static const int cases[][2] = {{50, 2}, {50, 3}, {4, 3}};
    for (int k = 0; k < 3; k++) {
        case_V = cases[k][0];
        run_ranks(cases[k][1], split_rank);
    }
}

/* Settings it cannot take. */
static void test_split_bad(void)
{
    gk_comm *c = NULL;
    gk_backend *be = NULL;
    gk_xent_split *x = NULL;
    gk_err e = {0};
    CHECK_OK(gk_comm_open_single(&c, &e), &e);
    CHECK_OK(gk_cpu_create(&be, 1, &e), &e);
    CHECK(c && be && gk_xent_split_new(&x, be, c, 0, 4, &e) == GK_EUSAGE && !x);
    CHECK_OK(gk_xent_split_new(&x, be, c, 10, 4, &e), &e);
    float f[5 * 10] = {0}, l[5];
    int t[5] = {0};
    CHECK(x && gk_xent_split_fwd(x, l, l, f, t, 5, 10, &e) == GK_EUSAGE &&
          strstr(e.msg, "5 rows of 10 (at most 4"));
    gk_xent_split_free(x);
    gk_comm_close(c);
    gk_backend_free(be);
}

int main(void)
{
    RUN(test_split_vocab);
    RUN(test_split_bad);
    return TEST_END();
}
