/* test_vocab_split.c: the vocabulary split across ranks (kernels/model/vocab_split.c) on 2 and 3
 * ranks (processes over Gloo on loopback: comm_harness.h), each with a CPU backend, at
 * vocabularies that do and do not divide by the ranks (and one where the last rank holds none):
 * - the embedding: the output the unsplit encoder_fwd's bit for bit without dropout (each float
 *   one rank's row plus wpe, or wpe, plus zeros) and within one rounding with it (each rank's
 *   part is masked and scaled before the sum: 1e-6 relative); with dropout the gradients of this
 *   rank's wte rows and of wpe the unsplit encoder_bwd's bit for bit (the same adds in the same
 *   order), its zero row zero;
 * - the cross-entropy: every rank's losses and log-sum-exps, and its columns' gradient, against
 *   the unsplit xent_fwd / xent_bwd of the whole rows on the same backend, with targets on every
 *   rank's columns and ignored ones (-1).
 * Tolerance: the split lse is the log of a sum of the slices' exp(lse) (in double) where the op
 * sums the row's exponentials in float: both within a few float roundings of the row's lse (|lse|
 * under 8 here: 1e-5 absolute is about 16 of them); a loss is lse less the target's logit, the
 * same bound; a gradient is exp(logit - lse) * dloss, whose relative error is lse's absolute one
 * (1e-5 of values at most dloss = 1/3). */
#include "comm_harness.h"
#include "kernels/cpu/cpu.h"
#include "kernels/model/vocab_split.h"

#include <math.h>

enum { N = 13, C = 8 };

static int case_V; /* the vocabulary of the case that run_ranks runs */

/* logit (i, j) of the whole rows: the same on every rank */
static float logit_at(int i, int j) { return 3.0f * sinf(0.7f * (float)i + 1.3f * (float)j); }

/* Row i's target: spread over the whole vocabulary, every fourth ignored. */
static int target_at(int i, int V) { return i % 4 == 2 ? -1 : (i * 7 + 3) % V; }

/* The embedding of this rank's rows (x's) beside the unsplit ops': a count of floats that
 * differ. */
static int check_embedding(gk_backend *be, gk_vocab_split *x, int V, int lo, int n)
{
    gk_err e = {0};
    size_t NC = (size_t)N * C;
    float *wte = malloc(sizeof(float) * (size_t)V * C), *wpe = malloc(sizeof(float) * NC);
    float *mine = calloc((size_t)(n + 1) * C, sizeof(float)), *out[2], *dout = malloc(NC * 4);
    float *dwte[2] = {calloc((size_t)V * C, 4), calloc((size_t)(n + 1) * C, 4)};
    float *dwpe[2] = {calloc(NC, 4), calloc(NC, 4)};
    int tok[N], bad = 0;
    out[0] = malloc(NC * 4), out[1] = malloc(NC * 4);
    for (size_t i = 0; i < (size_t)V * C; i++) wte[i] = logit_at((int)(i / C), (int)(i % C));
    for (size_t i = 0; i < NC; i++) wpe[i] = 0.1f * logit_at(5, (int)i), dout[i] = wpe[i] * 3;
    memcpy(mine, wte + (size_t)lo * C, (size_t)n * C * sizeof(float)); /* (row n zero) */
    for (int i = 0; i < N; i++) tok[i] = (i * 5 + 1) % V;
    for (int k = 0; k < 2; k++) { /* without dropout, then with it */
        float p = k ? 0.1f : 0.0f;
        be->ops->encoder_fwd(be, out[0], tok, wte, GK_F32, wpe, NULL, 1, N, C, p, 77);
        CHECK_OK(gk_vocab_embed_fwd(x, out[1], tok, mine, wpe, 1, N, p, 77, &e), &e);
        for (size_t i = 0; i < NC; i++) /* with dropout: m wte + m wpe against m (wte + wpe) */
            bad += k ? fabsf(out[1][i] - out[0][i]) > 1e-6f * fabsf(out[0][i]) + 1e-30f
                     : memcmp(&out[1][i], &out[0][i], 4) != 0;
    }
    be->ops->encoder_bwd(be, dwte[0], dwpe[0], dout, tok, 1, N, C, 0.1f, 77);
    CHECK_OK(gk_vocab_embed_bwd(x, dwte[1], dwpe[1], dout, tok, 1, N, 0.1f, 77, &e), &e);
    bad += memcmp(dwte[0] + (size_t)lo * C, dwte[1], (size_t)n * C * 4) != 0;
    bad += memcmp(dwpe[0], dwpe[1], NC * 4) != 0;
    for (int c = 0; c < C; c++) bad += dwte[1][(size_t)n * C + c] != 0.0f;
    free(wte), free(wpe), free(mine), free(out[0]), free(out[1]), free(dout);
    free(dwte[0]), free(dwte[1]), free(dwpe[0]), free(dwpe[1]);
    return bad;
}

static void split_rank(int rank, int world)
{
    gk_store *s = join(rank, world, 10);
    gk_comm *c = NULL;
    gk_backend *be = NULL;
    gk_vocab_split *x = NULL;
    gk_err e = {0};
    int V = case_V, lo = 0, n = 0;
    if (s) CHECK_OK(gk_comm_open_gloo(&c, s, rank, world, 10, NULL, &e), &e);
    CHECK_OK(gk_cpu_create(&be, 1, &e), &e);
    if (c && be) CHECK_OK(gk_vocab_split_new(&x, be, c, V, C, N, N, &e), &e);
    if (!x) goto done;
    gk_vocab_split_cols(x, &lo, &n);
    int embed_bad = check_embedding(be, x, V, lo, n);
    CHECKF(embed_bad == 0, "V %d, rank %d of %d: the embedding differs in %d ways", V, rank,
           world, embed_bad);
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
    CHECK_OK(gk_vocab_xent_fwd(x, loss[1], lse[1], mine, t, N, Vp, &e), &e);
    CHECK_OK(gk_vocab_xent_bwd(x, mine, mine, lse[1], t, dl, N, Vp, &e), &e);
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
    gk_vocab_split_free(x);
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
    gk_vocab_split *x = NULL;
    gk_err e = {0};
    CHECK_OK(gk_comm_open_single(&c, &e), &e);
    CHECK_OK(gk_cpu_create(&be, 1, &e), &e);
    CHECK(c && be && gk_vocab_split_new(&x, be, c, 0, 4, 4, 4, &e) == GK_EUSAGE && !x);
    CHECK_OK(gk_vocab_split_new(&x, be, c, 10, 4, 4, 4, &e), &e);
    float f[5 * 10] = {0}, l[5];
    int t[5] = {0}, big[2] = {3, 10};
    CHECK(x && gk_vocab_xent_fwd(x, l, l, f, t, 5, 10, &e) == GK_EUSAGE &&
          strstr(e.msg, "5 rows of 10 (at most 4"));
    CHECK(x && gk_vocab_xent_fwd(x, l, l, f, big, 2, 10, &e) == GK_EUSAGE &&
          strstr(e.msg, "target 10 of a vocabulary of 10"));
    CHECK(x && gk_vocab_embed_fwd(x, f, big, f, f, 1, 2, 0, 0, &e) == GK_EUSAGE &&
          strstr(e.msg, "token 10 of a vocabulary of 10"));
    CHECK(x && gk_vocab_embed_fwd(x, f, t, f, f, 1, 5, 0, 0, &e) == GK_EUSAGE &&
          strstr(e.msg, "1 x 5 tokens (at most 4"));
    gk_vocab_split_free(x);
    gk_comm_close(c);
    gk_backend_free(be);
}

int main(void)
{
    RUN(test_split_vocab);
    RUN(test_split_bad);
    return TEST_END();
}
