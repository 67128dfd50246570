/* env.c: gk_env_read (see env.h). */
#include "common/env.h"

#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

/* Whether variable name is set to exactly value. */
static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

/* Variable name's value, or NULL when unset or empty. */
static const char *env_str(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void gk_env_read(gk_env *env)
{
    env->cuda_sync = env_is("GPT_CUDA_SYNC", "1");
    env->cuda_no_graphs = env_is("GPT_CUDA_GRAPHS", "0");
    env->cuda_fused_grads = env_is("GPT_CUDA_FUSED_GRADS", "1");
    env->cuda_lib = env_str("GPT_CUDA_LIB");
    env->gloo_ifname = env_str("GLOO_SOCKET_IFNAME");
    env->config_dir = env_str("GPT_CONFIG_DIR");
    if (!env->config_dir)
        env->config_dir = env_str("GPTKIT_CONFIG_DIR"); /* the old name, still read */
    env->model = env_str("GPT_MODEL");
    env->mem_check = gk_mem_check_mode(getenv("GPT_MEM_CHECK"));
    env->vocab = env_str("GPT_VOCAB");
    env->hf_hub_cache = env_str("HF_HUB_CACHE");
    env->hf_home = env_str("HF_HOME");
    env->home = env_str("HOME");
    const char *off = env_str("HF_HUB_OFFLINE");
    env->hf_offline = off && strcmp(off, "0") != 0;
    env->hf_endpoint = env_str("HF_ENDPOINT");
    env->hf_token = env_str("HF_TOKEN");
    const char *stall = env_str("GPT_HUB_STALL_S");
    char *end = NULL;
    env->hub_stall_s = stall ? strtod(stall, &end) : 0;
    if (!stall || *end || !(env->hub_stall_s > 0 && env->hub_stall_s < 1e7))
        env->hub_stall_s = 0;
}
