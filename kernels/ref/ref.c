/* ref.c: the reference backend (see ref.h): its context and op table. The ops are in this
 * folder, one file per op family (ref_internal.h); host memory is kernels/cpu/host_mem.c's. */
#include "kernels/ref/ref.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/comm/comm.h"
#include "kernels/cpu/host_mem.h"
#include "kernels/ref/ref_internal.h"

static int ref_reserve(gk_backend *be, size_t rows, size_t cols, int head_size, int T, gk_err *err)
{
    (void)be, (void)rows, (void)cols, (void)head_size, (void)T, (void)err;
    return 0;
}

const gk_ops gk_ref_ops = { /* by gk_ops's groups (backend.h) */
    .name = "ref",
    .alloc = gk_host_alloc, .free = gk_host_free,
    .to_device = gk_host_copy, .to_host = gk_host_copy,
    .copy = gk_host_copy, .zero = gk_host_zero, .sync = gk_host_sync, .reserve = ref_reserve,
    .mem_info = gk_host_mem_info,
    .cast = gk_ref_cast,
    .gemm = gk_ref_gemm, .gemm_bwd = gk_gemm_bwd_apart,
    .bias_bwd = gk_ref_bias_bwd, .gelu_fwd = gk_ref_gelu_fwd, .gelu_bwd = gk_ref_gelu_bwd,
    .dropout_bwd = gk_ref_dropout_bwd,
    .encoder_fwd = gk_ref_encoder_fwd, .encoder_bwd = gk_ref_encoder_bwd,
    .layernorm_fwd = gk_ref_layernorm_fwd, .layernorm_bwd = gk_ref_layernorm_bwd,
    .residual_layernorm_fwd = gk_ref_residual_layernorm_fwd,
    .attention_fwd = gk_ref_attention_fwd, .attention_bwd = gk_ref_attention_bwd,
    .attention_fwd_at = gk_ref_attention_fwd_at,
    .xent_fwd = gk_ref_xent_fwd, .xent_bwd = gk_ref_xent_bwd,
    .sumsq = gk_ref_sumsq, .scale = gk_ref_scale, .adamw = gk_ref_adamw,
    .adamw_multi = gk_ref_adamw_multi, .zero_multi = gk_ref_zero_multi,
    .add = gk_ref_add,
    .comm_open = gk_comm_gloo_open, /* Gloo: kernels/comm/comm_gloo.cc */
};

static void ref_destroy(gk_backend *be) { free(be); }

int gk_ref_create(gk_backend **out, gk_err *err)
{
    gk_backend *be = calloc(1, sizeof *be);
    if (!be) return gk_errf(err, GK_ENOMEM, "reference backend: out of memory");
    be->ops = &gk_ref_ops;
    be->act = GK_F32;
    snprintf(be->what, sizeof be->what, "ref");
    gk_host_props(be, GK_KIND_REF);
    be->destroy = ref_destroy;
    *out = be;
    return 0;
}
