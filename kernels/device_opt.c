/* device_opt.c: gk_device_backend_opts (see device_opt.h). */
#include "kernels/device_opt.h"

int gk_device_backend_opts(gk_backend_opts *bo, const char *device, const char *attention,
                           const char *setting, int bf16, const gk_env *env, gk_err *e)
{
    *bo = (gk_backend_opts){.device = device ? device : "auto", .bf16 = bf16,
                            .attention = GK_ATTN_AUTO, .cuda_sync = env->cuda_sync,
                            .cuda_no_graphs = env->cuda_no_graphs,
                            .cuda_fused_grads = env->cuda_fused_grads, .cuda_lib = env->cuda_lib};
    return attention ? gk_attention_parse(attention, setting, &bo->attention, e) : 0;
}
