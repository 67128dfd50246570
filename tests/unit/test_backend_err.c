/* test_backend_err.c: the sticky backend error (backend.h): the first failure of any op is kept,
 * with its call and file:line, and comes back from gk_backend_sync and from the GPT-2 graph's
 * entry points. Ops are made to fail by a copy of the reference vtable whose layernorm_fwd,
 * residual_layernorm_fwd and adamw record a failure, as a device op would on a fault. */
#include <string.h>

#include "kernels/backend.h"
#include "kernels/ref/ref.h"
#include "kernels/model/gpt2.h"
#include "test.h"

static int fail_on, n_calls;
static int ln_line, adamw_line; /* __LINE__ of the GK_BACKEND_FAIL calls below */

static void failing_layernorm_fwd(gk_backend *be, void *out, float *mean, float *rstd,
                                  const void *inp, const float *weight, const float *bias, int N,
                                  int C)
{
    if (fail_on) {
        n_calls++;
        ln_line = __LINE__ + 1;
        GK_BACKEND_FAIL(be, GK_ENOMEM, "test layernorm_fwd: call %d", n_calls);
        return;
    }
    gk_ref_ops.layernorm_fwd(be, out, mean, rstd, inp, weight, bias, N, C);
}

/* The fused residual + layernorm fails the same way (every later layernorm of the graph is one). */
static void failing_res_ln(gk_backend *be, void *res_out, void *ln_out, float *mean, float *rstd,
                           const void *res, const void *x, const float *bias, float p, uint64_t key,
                           const float *w, const float *b, int N, int C)
{
    if (fail_on) {
        n_calls++;
        GK_BACKEND_FAIL(be, GK_ENOMEM, "test residual_layernorm_fwd: call %d", n_calls);
        return;
    }
    gk_ref_ops.residual_layernorm_fwd(be, res_out, ln_out, mean, rstd, res, x, bias, p, key, w, b,
                                      N, C);
}

static void failing_adamw(gk_backend *be, float *param, const float *grad, float *m, float *v,
                          size_t n, float lr, float b1, float b2, float eps, float wd, int t,
                          float gs, void *copy, gk_elt tc)
{
    if (fail_on) {
        adamw_line = __LINE__ + 1;
        GK_BACKEND_FAIL(be, GK_EIO, "test adamw: device fault");
        return;
    }
    gk_ref_ops.adamw(be, param, grad, m, v, n, lr, b1, b2, eps, wd, t, gs, copy, tc);
}

static gk_ops failing_ops;

static gk_backend *failing_backend(void)
{
    gk_backend *be = NULL;
    gk_err err = {0};
    if (gk_ref_create(&be, &err)) return NULL;
    failing_ops = gk_ref_ops;
    failing_ops.layernorm_fwd = failing_layernorm_fwd;
    failing_ops.residual_layernorm_fwd = failing_res_ln;
    failing_ops.adamw = failing_adamw;
    be->ops = &failing_ops;
    fail_on = n_calls = 0;
    return be;
}

static int has(const char *msg, const char *what) { return strstr(msg, what) != NULL; }

/* The helper itself: nothing recorded -> 0; the first of two failures is kept. */
static void test_first_error_kept(void)
{
    gk_backend *be = failing_backend();
    CHECK(be != NULL);
    if (!be) return;
    gk_err err = {0};
    CHECK(gk_backend_sync(be, &err) == 0 && err.code == 0);
    int line = __LINE__ + 1;
    CHECK(GK_BACKEND_FAIL(be, GK_EIO, "first op: %s", "cudaMemcpy failed") == GK_EIO);
    CHECK(GK_BACKEND_FAIL(be, GK_ENOMEM, "second op") == GK_ENOMEM);
    char where[64];
    snprintf(where, sizeof where, "test_backend_err.c:%d)", line);
    CHECK(gk_backend_status(be, &err) == GK_EIO);
    CHECK(gk_backend_sync(be, &err) == GK_EIO && err.code == GK_EIO);
    CHECKF(has(err.msg, "first op: cudaMemcpy failed (") && has(err.msg, where), "%s", err.msg);
    CHECKF(!has(err.msg, "second op"), "%s", err.msg);
    CHECK(gk_backend_sync(be, NULL) == GK_EIO); /* sticky */
    gk_backend_free(be);
}

/* An op failing inside the graph: forward returns the first op's error, with its file:line;
 * backward and forward_at return it too (the backend stays failed). */
static void test_graph_returns_op_error(void)
{
    gk_backend *be = failing_backend();
    CHECK(be != NULL);
    if (!be) return;
    gk_gpt2 *m = NULL;
    gk_err err = {0};
    gk_gpt2_config c = {2, 2, 8, 16, 65, 1, 0.0f};
    CHECK_OK(gk_gpt2_create(&m, &c, be, 1, 4, &err), &err);
    if (!m) goto out;
    CHECK_OK(gk_gpt2_init(m, 7, &err), &err);
    int in[4] = {1, 2, 3, 4}, tg[4] = {2, 3, 4, 5};
    float loss = -1;
    CHECK_OK(gk_gpt2_forward(m, in, tg, 1, 4, &loss, &err), &err); /* works until an op fails */
    CHECK(loss > 0);

    fail_on = 1;
    err = (gk_err){0};
    CHECK(gk_gpt2_forward(m, in, tg, 1, 4, &loss, &err) == GK_ENOMEM);
    CHECK(n_calls == 2 * c.n_layer + 1); /* every layernorm failed; the first is reported */
    char where[64];
    snprintf(where, sizeof where, "test_backend_err.c:%d)", ln_line);
    CHECKF(has(err.msg, "test layernorm_fwd: call 1 (") && has(err.msg, where), "%s", err.msg);
    err = (gk_err){0};
    CHECK(gk_gpt2_backward(m, 1.0f, &err) == GK_ENOMEM && has(err.msg, "call 1 ("));
    err = (gk_err){0};
    CHECK(gk_gpt2_forward_at(m, in, 1, 0, 2, &err) == GK_ENOMEM && has(err.msg, "call 1 ("));
    CHECK(gk_backend_sync(be, &err) == GK_ENOMEM);
out:
    gk_gpt2_free(m);
    gk_backend_free(be);
}

/* update returns an optimizer op's failure. */
static void test_update_returns_op_error(void)
{
    gk_backend *be = failing_backend();
    CHECK(be != NULL);
    if (!be) return;
    gk_gpt2 *m = NULL;
    gk_err err = {0};
    gk_gpt2_config c = {1, 2, 8, 16, 65, 1, 0.0f};
    CHECK_OK(gk_gpt2_create(&m, &c, be, 1, 4, &err), &err);
    if (!m) goto out;
    CHECK_OK(gk_gpt2_init(m, 7, &err), &err);
    int in[4] = {1, 2, 3, 4}, tg[4] = {2, 3, 4, 5};
    gk_adamw h = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0};
    CHECK_OK(gk_gpt2_forward(m, in, tg, 1, 4, NULL, &err), &err);
    CHECK_OK(gk_gpt2_backward(m, 1.0f, &err), &err);
    CHECK_OK(gk_gpt2_update(m, &h, 1e-3f, NULL, &err), &err);
    fail_on = 1;
    char where[64];
    CHECK(gk_gpt2_update(m, &h, 1e-3f, NULL, &err) == GK_EIO);
    snprintf(where, sizeof where, "test_backend_err.c:%d)", adamw_line);
    CHECKF(has(err.msg, "test adamw: device fault (") && has(err.msg, where), "%s", err.msg);
out:
    gk_gpt2_free(m);
    gk_backend_free(be);
}

int main(void)
{
    RUN(test_first_error_kept);
    RUN(test_graph_returns_op_error);
    RUN(test_update_returns_op_error);
    return TEST_END();
}
