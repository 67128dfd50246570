/* runner.c: a checkpoint opened to run (see runner.h). */
#include "kernels/infer/runner.h"

#include <stdio.h>
#include <string.h>

#include "common/io/ckpt_src.h"
#include "common/opt.h"
#include "kernels/model/gpt2_load.h"

/* gk_gpt2_create_ex's flags for enum gk_weights */
static int runner_flags(int weights)
{
    return GK_GPT2_INFERENCE | (weights == GK_WEIGHTS_BF16 ? GK_GPT2_BF16 : 0) |
           (weights == GK_WEIGHTS_F16 ? GK_GPT2_F16 : 0) |
           (weights == GK_WEIGHTS_INT8 ? GK_GPT2_Q8 : 0);
}

int gk_gpt2_runner_check(gk_gpt2_runner *r, int max_B, int max_T, int weights, const char *hint,
                         gk_err *e)
{
    if (r->mem_check == 2) return 0;
    gk_gpt2_mem need;
    int flags = runner_flags(weights);
    int rc = gk_gpt2_mem_estimate(&r->cfg, r->be->act, max_B, max_T, flags, &need, e);
    return rc ? rc : gk_gpt2_mem_check(r->be, &need, 0, NULL, hint, e);
}

int gk_gpt2_runner_open(gk_gpt2_runner *r, const gk_device_args *dev, int weights,
                        const char *model, const char *vocab, int required, const gk_env *env,
                        gk_err *e)
{
    gk_backend_opts bo;
    gk_ckpt_src src = {.fd = -1};
    memset(r, 0, sizeof *r);
    r->mem_check = env->mem_check;
    int rc = gk_device_backend_opts(&bo, dev->device, dev->attention, "--attention",
                                    gk_opt_weights_bf16(weights), env, e);
    if (!rc) rc = gk_ckpt_src_open(&src, gk_opt_model_path(model, env->model), env, e);
    snprintf(r->where, sizeof r->where, "%s", src.where);
    r->retries = src.retries;
    if (!rc) rc = gk_backend_open(&r->be, &bo, e);
    if (!rc) rc = src.fd >= 0 ? gk_ckpt_open_fd(&r->ckpt, src.fd, src.where, e)
                              : gk_ckpt_open(&r->ckpt, src.where, e);
    gk_ckpt_src_close(&src); /* the checkpoint maps what it reads */
    if (!rc) rc = gk_gpt2_ckpt_config(r->ckpt, &r->cfg, e);
    if (!rc) rc = gk_gpt2_vocab(r->ckpt, &r->cfg, vocab, required, &r->vocab, e);
    r->cfg.dropout = 0;
    return rc;
}

int gk_gpt2_runner_load(gk_gpt2_runner *r, int max_B, int max_T, int weights, gk_err *e)
{
    int flags = runner_flags(weights);
    int rc = gk_gpt2_create_ex(&r->model, &r->cfg, r->be, max_B, max_T, flags, e);
    if (!rc) rc = gk_gpt2_load(r->model, r->ckpt, e);
    gk_ckpt_close(r->ckpt);
    r->ckpt = NULL;
    return rc;
}

void gk_gpt2_runner_close(gk_gpt2_runner *r)
{
    gk_gpt2_free(r->model);
    gk_vocab_free(r->vocab);
    gk_ckpt_close(r->ckpt);
    gk_backend_free(r->be);
    memset(r, 0, sizeof *r);
}
