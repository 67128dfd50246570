/* test_zero.c: ZeRO in the GPT-2 model (kernels/model/gpt2_shard.c, gpt2_optim.c, gpt2_bwd.c)
 * as rank 0 of 2 beside a comm that plays the other rank adding zeros: ZeRO-1's sums in the
 * backward against the reduce-scatter after it, ZeRO-2's shards against the one-process update,
 * ZeRO-3's contract, a checkpoint's slices and optimizer offload with each stage, on the tiny
 * fixture (gpt2_fixture.h); ZeRO-3's training is checked against stage 2's bits by
 * cli/train_dist (2 real ranks). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_fixture.h"
#include "kernels/comm/comm.h"
#include "kernels/cpu/cpu.h"
#include "test.h"

/* ZeRO-1 with the gradients summed during the backward (gk_gpt2_reduce_in_next_backward): each
 * layer's sum is started as it is written and update reduce-scatters nothing more; without the
 * call update reduce-scatters them. Rank 0 of 2 here, the other rank played by a comm that adds
 * zeros (and leaves the other shard's weights as they were), so both ways give the same bits. */
static int zc_starts, zc_scatters, zc_gathers;
static int zc_sum(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    (void)c, (void)buf, (void)n, (void)e;
    return 0;
}
static int zc_start(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    zc_starts++;
    return zc_sum(c, buf, n, e);
}
static int zc_wait(gk_comm *c, gk_err *e) { (void)c, (void)e; return 0; }
static int zc_wait_some(gk_comm *c, int keep, gk_err *e) { (void)keep; return zc_wait(c, e); }
static int zc_host(gk_comm *c, double *v, int n, gk_err *e)
{
    (void)c, (void)v, (void)n, (void)e;
    return 0;
}
static int zc_scatter(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    (void)e;
    zc_scatters++;
    if (out != in + (size_t)c->rank * count)
        memmove(out, in + (size_t)c->rank * count, count * sizeof *out);
    return 0;
}
static int zc_gather(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    (void)e;
    zc_gathers++;
    if (in != out + (size_t)c->rank * count)
        memmove(out + (size_t)c->rank * count, in, count * sizeof *out);
    return 0;
}

static const gk_comm_ops zeros_ops = {
    .name = "zeros", .allreduce = zc_sum, .allreduce_host = zc_host, .reduce_scatter = zc_scatter,
    .all_gather = zc_gather, .allreduce_start = zc_start, .allreduce_wait = zc_wait,
    .reduce_scatter_start = zc_scatter, .started_wait = zc_wait_some};

/* The ZeRO tests' start: the tiny fixture, a CPU backend and two models of it (0: no fixture). */
static gk_backend *zero_setup(fixture *f, gk_gpt2 *m[2])
{
    gk_err err;
    gk_backend *be = NULL;
    if (load_tiny(f)) return NULL;
    CHECK_OK(gk_cpu_create(&be, 2, &err), &err);
    m[0] = model_from(f, be, 0.0f), m[1] = model_from(f, be, 0.0f);
    return be;
}

/* ... and their end. */
static void zero_teardown(fixture *f, gk_gpt2 *m[2], gk_backend *be)
{
    gk_gpt2_free(m[0]);
    gk_gpt2_free(m[1]);
    gk_backend_free(be);
    free(f->buf);
}

static void test_zero1_sums_in_backward(void)
{
    fixture f;
    gk_gpt2 *m[2];
    gk_backend *be = zero_setup(&f, m);
    if (!be) return;
    gk_comm comm = {&zeros_ops, 0, 2, NULL, GK_F32};
    gk_err err;
    gk_adamw h = {f.b1, f.b2, f.eps, f.wd, f.clip, 0};
    int starts[2], scatters[2];
    for (int k = 0; k < 2 && m[0] && m[1]; k++) { /* k = 0: sums in the backward */
        float loss;
        CHECK_OK(gk_gpt2_set_comm(m[k], &comm, 1, &err), &err);
        zc_starts = zc_scatters = 0;
        gk_gpt2_zero_grad(m[k]);
        CHECK_OK(gk_gpt2_forward(m[k], f.inputs, f.targets, f.B, f.T, &loss, &err), &err);
        if (k == 0) gk_gpt2_reduce_in_next_backward(m[k]);
        CHECK_OK(gk_gpt2_backward(m[k], 1.0f, &err), &err);
        CHECK_OK(gk_gpt2_update(m[k], &h, f.lr, NULL, &err), &err);
        starts[k] = zc_starts, scatters[k] = zc_scatters;
    }
    CHECKF(starts[0] == f.cfg.n_layer + 1 && scatters[0] == 0,
           "in the backward: %d sums started, %d reduce-scatters",
           starts[0], scatters[0]);
    CHECKF(starts[1] == 0 && scatters[1] == 1, "after it: %d sums started, %d reduce-scatters",
           starts[1], scatters[1]);
    size_t differ = 0;
    for (int i = 0; m[0] && m[1] && i < gk_gpt2_n_params(m[0]); i++) {
        const gk_param *a = gk_gpt2_param(m[0], i), *b = gk_gpt2_param(m[1], i);
        differ += memcmp(a->data, b->data, a->numel * sizeof(float)) != 0;
    }
    CHECKF(differ == 0, "%zu tensors differ", differ);
    zero_teardown(&f, m, be);
}

/* Whether float o of the parameter block is rank 0's of 2 under ZeRO-2: in the first piece of its
 * bucket (wte and wpe; each layer, the last with ln_f) or the bucket's tail (gpt2_shard.c). The
 * head's pieces are whole rows of wte: a multiple of 16 rows of the padded vocabulary (Vp, wpe's
 * offset over n_embd) each. */
static int zero2_rank0(const gk_gpt2 *m, size_t o)
{
    int L = gk_gpt2_cfg(m)->n_layer, n = gk_gpt2_n_params(m);
    const gk_param *last = gk_gpt2_param(m, n - 1);
    size_t lo = 0, hi = (last->offset + last->numel + 15) / 16 * 16;
    for (int l = 0; l <= L; l++) { /* bucket l ends where layer l starts */
        char name[64];
        snprintf(name, sizeof name, "transformer.h.%d.ln_1.weight", l);
        for (int i = 0; i < n && l < L; i++)
            if (strcmp(gk_gpt2_param(m, i)->name, name) == 0 && gk_gpt2_param(m, i)->offset <= o)
                lo = gk_gpt2_param(m, i)->offset;
    }
    for (int l = 0; l < L; l++) /* the next bucket's start, if any */
        for (int i = 0; i < n; i++) {
            const gk_param *p = gk_gpt2_param(m, i);
            if (strstr(p->name, "ln_1.weight") && p->offset > o && p->offset < hi) hi = p->offset;
        }
    size_t piece = (hi - lo) / 2 / 16 * 16;
    if (lo == 0) { /* the head */
        size_t C = (size_t)gk_gpt2_cfg(m)->n_embd, Vp = gk_gpt2_param(m, 1)->offset / C;
        piece = Vp / 2 / 16 * 16 * C;
    }
    return o < lo + piece || o >= lo + 2 * piece;
}

/* ZeRO-2 as rank 0 of 2 beside a rank that adds zeros (the comm above), two micro-steps of other
 * targets: the backward reduce-scatters each layer's bucket into the shard and adds the second
 * micro-step's there, so the update moves exactly rank 0's pieces (and the tails) as the
 * one-process run does (within the order of a gemm's accumulation and the shard's add; no
 * clipping, so each float's step is its own) and leaves the rest; gradients are not readable. */
static void test_zero2_shards(void)
{
    fixture f;
    gk_gpt2 *m[2];
    gk_backend *be = zero_setup(&f, m);
    if (!be) return;
    gk_comm comm = {&zeros_ops, 0, 2, NULL, GK_F32};
    gk_err err;
    gk_adamw h = {f.b1, f.b2, f.eps, f.wd, 0, 0};
    int N = f.B * f.T, *other = malloc(sizeof *other * (size_t)N);
    for (int i = 0; i < N; i++) other[i] = f.targets[(i + 1) % N];
    for (int k = 0; k < 2 && m[0] && m[1]; k++) { /* k = 1: ZeRO-2 */
        float loss;
        if (k) CHECK_OK(gk_gpt2_set_comm(m[k], &comm, 2, &err), &err);
        gk_gpt2_zero_grad(m[k]);
        for (int s = 0; s < 2; s++) {
            CHECK_OK(gk_gpt2_forward(m[k], f.inputs, s ? other : f.targets, f.B, f.T, &loss, &err),
                     &err);
            CHECK_OK(gk_gpt2_backward(m[k], 0.5f, &err), &err);
        }
        CHECK_OK(gk_gpt2_update(m[k], &h, f.lr, NULL, &err), &err);
    }
    size_t mine = 0, theirs = 0, wrong = 0, off = 0, max = 0;
    for (int i = 0; m[0] && m[1] && i < gk_gpt2_n_params(m[0]); i++) {
        const gk_param *a = gk_gpt2_param(m[0], i), *b = gk_gpt2_param(m[1], i);
        max = a->numel > max ? a->numel : max;
        for (size_t j = 0; j < a->numel; j++) {
            int own = zero2_rank0(m[1], b->offset + j);
            mine += own, theirs += !own;
            wrong += own ? fabsf(b->data[j] - a->data[j]) > 1e-6f
                         : memcmp(&b->data[j], &f.params[off + j], 4) != 0;
        }
        off += a->numel;
    }
    CHECKF(wrong == 0 && mine > theirs / 2 && theirs > mine / 2,
           "%zu of %zu floats wrong (%zu rank 0's)", wrong, mine + theirs, mine);
    float *g = malloc(sizeof *g * (max ? max : 1));
    CHECK(m[1] && gk_gpt2_tensor_get(m[1], 0, GK_TENSOR_GRAD, g, &err) == GK_EUSAGE &&
          strstr(err.msg, "sharded across ranks (zero_stage 2)"));
    free(g), free(other);
    zero_teardown(&f, m, be);
}

/* ZeRO-3's contract as rank 0 of 2 (the comm above: the other rank's pieces are not brought):
 * one rank cannot shard; after set_comm the parameters are not readable one by one, nor
 * initialized anew, and the packed gather brings this rank's pieces and the tails as they were
 * (the whole block's values) and, after a tensor_set, the values set; a backward without targets
 * gathers as one with them (the gathered weights made stale by a set between, so that it gathers
 * every layer's). */
static void test_zero3_contract(void)
{
    fixture f;
    gk_gpt2 *m[2];
    gk_backend *be = zero_setup(&f, m);
    if (!be) return;
    gk_comm one = {&zeros_ops, 0, 1, NULL, GK_F32}, comm = {&zeros_ops, 0, 2, NULL, GK_F32};
    gk_err err;
    CHECK(gk_gpt2_set_comm(m[0], &one, 3, &err) == GK_EUSAGE &&
          strstr(err.msg, "zero_stage 3 shards the parameters over the ranks"));
    CHECK_OK(gk_gpt2_set_comm(m[1], &comm, 3, &err), &err);
    CHECK(gk_gpt2_params_sharded(m[1]) && !gk_gpt2_params_sharded(m[0]));
    size_t n = gk_gpt2_num_scalars(m[1]), mine = 0, wrong = 0;
    float *all = calloc(n, sizeof *all);
    CHECK(gk_gpt2_tensor_get(m[1], 0, GK_TENSOR_PARAM, all, &err) == GK_EUSAGE &&
          strstr(err.msg, "sharded across ranks (zero_stage 3"));
    CHECK(gk_gpt2_init(m[1], 1, &err) == GK_EUSAGE);
    const gk_param *wpe = gk_gpt2_param(m[1], 1);
    float *set = malloc(wpe->numel * sizeof *set);
    for (size_t j = 0; j < wpe->numel; j++) set[j] = (float)j;
    for (int round = 0; round < 2; round++) { /* 0: as loaded; 1: wpe set */
        if (round) CHECK_OK(gk_gpt2_tensor_set(m[1], 1, GK_TENSOR_PARAM, set, &err), &err);
        CHECK_OK(gk_gpt2_shards_gather_packed(m[1], all, NULL, NULL, &err), &err);
        size_t off = 0;
        for (int i = 0; i < gk_gpt2_n_params(m[1]); i++) {
            const gk_param *p = gk_gpt2_param(m[1], i);
            for (size_t j = 0; j < p->numel; j++) {
                if (!zero2_rank0(m[1], p->offset + j)) continue;
                float want = round && i == 1 ? set[j] : f.params[off + j];
                mine++, wrong += memcmp(&all[off + j], &want, 4) != 0;
            }
            off += p->numel;
        }
    }
    CHECKF(wrong == 0 && mine > n / 2, "%zu of rank 0's %zu floats wrong", wrong, mine);
    /* a backward with no target to learn from makes the gathers of one with targets (every
     * rank must make the same collectives) */
    int N = f.B * f.T, *none = malloc(sizeof *none * (size_t)N), gathers[2];
    for (int i = 0; i < N; i++) none[i] = -1;
    for (int k = 0; k < 2; k++) {
        float loss;
        gk_gpt2_zero_grad(m[1]);
        CHECK_OK(gk_gpt2_forward(m[1], f.inputs, k ? none : f.targets, f.B, f.T, &loss, &err),
                 &err);
        CHECK_OK(gk_gpt2_tensor_set(m[1], 1, GK_TENSOR_PARAM, set, &err), &err); /* (stale) */
        zc_gathers = 0;
        CHECK_OK(gk_gpt2_backward(m[1], 1.0f, &err), &err);
        gathers[k] = zc_gathers;
    }
    CHECKF(gathers[0] == gathers[1] && gathers[0] > 0, "backward gathers: %d with targets, %d "
           "without", gathers[0], gathers[1]);
    free(all), free(set), free(none);
    zero_teardown(&f, m, be);
}

/* A checkpoint's slices as rank 0 of 2 (the comm above), without sharding and at stages 2 and 3:
 * every float of the parameter block has one owner; rank 0's are its slice's floats, each where
 * gk_gpt2_slice_owner says and holding the block's value, in runs that do not cross an owner. */
static void test_slices(void)
{
    static const int stages[3] = {0, 2, 3};
    for (int t = 0; t < 3; t++) {
        fixture f;
        gk_gpt2 *m[2];
        gk_backend *be = zero_setup(&f, m);
        if (!be) return;
        gk_comm comm = {&zeros_ops, 0, 2, NULL, GK_F32};
        gk_err err;
        CHECK_OK(gk_gpt2_set_comm(m[1], &comm, stages[t], &err), &err);
        gk_gpt2_slices *sl = gk_gpt2_slices_new(m[1]);
        size_t n0 = sl ? gk_gpt2_slice_floats(sl, 0) : 0, n1 = sl ? gk_gpt2_slice_floats(sl, 1) : 0;
        float *mine = malloc((n0 ? n0 : 1) * sizeof *mine);
        CHECK(sl && mine && gk_gpt2_slices_world(sl) == 2);
        if (sl && mine) CHECK_OK(gk_gpt2_slice_get(m[1], sl, GK_TENSOR_PARAM, mine, &err), &err);
        size_t owned[2] = {0, 0}, wrong = 0, off = 0;
        for (int i = 0; sl && mine && i < gk_gpt2_n_params(m[1]); i++) {
            const gk_param *p = gk_gpt2_param(m[1], i);
            for (size_t j = 0; j < p->numel;) {
                int r, r2;
                size_t at, run, at2, run2;
                gk_gpt2_slice_owner(sl, p->offset + j, &r, &at, &run);
                size_t len = run < p->numel - j ? run : p->numel - j;
                gk_gpt2_slice_owner(sl, p->offset + j + len - 1, &r2, &at2, &run2);
                wrong += r2 != r || at2 != at + len - 1 || at + len > (r ? n1 : n0);
                for (size_t q = 0; !r && q < len && at + len <= n0; q++)
                    wrong += memcmp(&mine[at + q], &f.params[off + j + q], 4) != 0;
                owned[r] += len, j += len;
            }
            off += p->numel;
        }
        CHECKF(wrong == 0 && owned[0] > 0 && owned[1] > 0 && owned[0] <= n0 && owned[1] <= n1,
               "stage %d: %zu wrong, rank 0 owns %zu of %zu, rank 1 %zu of %zu", stages[t], wrong,
               owned[0], n0, owned[1], n1);
        free(mine);
        gk_gpt2_slices_free(sl);
        zero_teardown(&f, m, be);
    }
}

/* Rank 0's floats of kind in m's checkpoint slice (sl), into a new buffer of *n. */
static float *slice_of(gk_gpt2 *m, const gk_gpt2_slices *sl, enum gk_tensor_kind kind, size_t *n)
{
    gk_err err;
    *n = gk_gpt2_slice_floats(sl, 0);
    float *v = malloc((*n ? *n : 1) * sizeof *v);
    if (v) CHECK_OK(gk_gpt2_slice_get(m, sl, kind, v, &err), &err);
    return v;
}

/* Optimizer offload with ZeRO as rank 0 of 2 (the comm above), at stages 1, 2 and 3: beside the
 * same stage without offload, two micro-steps and an update leave the same bits in rank 0's
 * slice of the parameters and of both moments (the same AdamW, with the moments in host memory
 * and the weights staged through it), and the moments' gather (from the host) brings them. */
static void test_offload_sharded(void)
{
    for (int stage = 1; stage <= 3; stage++) {
        fixture f;
        gk_gpt2 *m[2];
        gk_backend *be = zero_setup(&f, m);
        if (!be) return;
        gk_comm comm = {&zeros_ops, 0, 2, NULL, GK_F32};
        gk_err err;
        gk_adamw h = {f.b1, f.b2, f.eps, f.wd, f.clip, 0};
        gk_backend *host = NULL; /* (as gpt-train's: a CPU backend of its own) */
        CHECK_OK(gk_cpu_create(&host, 1, &err), &err);
        CHECK_OK(gk_gpt2_set_offload(m[1], host, &err), &err);
        size_t differ = 0, n[2], total = 0;
        float *mom[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            float loss;
            CHECK_OK(gk_gpt2_set_comm(m[k], &comm, stage, &err), &err);
            gk_gpt2_zero_grad(m[k]);
            for (int s = 0; s < 2; s++) {
                CHECK_OK(gk_gpt2_forward(m[k], f.inputs, f.targets, f.B, f.T, &loss, &err), &err);
                CHECK_OK(gk_gpt2_backward(m[k], 0.5f, &err), &err);
            }
            CHECK_OK(gk_gpt2_update(m[k], &h, f.lr, NULL, &err), &err);
            total = gk_gpt2_num_scalars(m[k]);
            mom[k] = calloc(total, sizeof(float));
            CHECK_OK(gk_gpt2_shards_gather_packed(m[k], NULL, mom[k], NULL, &err), &err);
        }
        gk_gpt2_slices *sl = gk_gpt2_slices_new(m[1]);
        static const enum gk_tensor_kind kinds[3] = {GK_TENSOR_PARAM, GK_TENSOR_ADAM_M,
                                                     GK_TENSOR_ADAM_V};
        for (int t = 0; sl && t < 3; t++) {
            float *a = slice_of(m[0], sl, kinds[t], &n[0]);
            float *b = slice_of(m[1], sl, kinds[t], &n[1]);
            differ += !a || !b || n[0] != n[1] || memcmp(a, b, n[0] * sizeof *a) != 0;
            free(a), free(b);
        }
        size_t off = 0, gathered = 0;
        for (int i = 0; sl && mom[0] && mom[1] && i < gk_gpt2_n_params(m[1]); i++) {
            const gk_param *p = gk_gpt2_param(m[1], i);
            for (size_t j = 0; j < p->numel; j++) {
                int r;
                size_t at, run;
                gk_gpt2_slice_owner(sl, p->offset + j, &r, &at, &run);
                if (r) continue; /* (the other rank's: this comm does not bring them) */
                gathered++, differ += memcmp(&mom[0][off + j], &mom[1][off + j], 4) != 0;
            }
            off += p->numel;
        }
        CHECKF(differ == 0 && gathered > total / 3, "stage %d: %zu differ (%zu gathered)", stage,
               differ, gathered);
        free(mom[0]), free(mom[1]);
        gk_gpt2_slices_free(sl);
        zero_teardown(&f, m, be);
        gk_backend_free(host);
    }
}

int main(void)
{
    RUN(test_zero1_sums_in_backward);
    RUN(test_zero2_shards);
    RUN(test_zero3_contract);
    RUN(test_slices);
    RUN(test_offload_sharded);
    return TEST_END();
}
