/* env.c: gk_env_read, the getenv callback, the S3 settings and a tool's first steps (see env.h). */
#include "common/env.h"

#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/proc.h"
#include "common/s3/s3.h"
#include "common/text/vocab.h"

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
    env->tmpdir = env_str("TMPDIR");
    if (!env->tmpdir)
        env->tmpdir = "/tmp";
    env->s3_part_size = env_str("GPT_S3_PART_SIZE");
    env->no_grad_overlap = env_is("GPT_GRAD_OVERLAP", "0");
    env->getenv_fn = gk_env_getenv;
}

const char *gk_env_getenv(const char *name, void *ud)
{
    (void)ud;
    return getenv(name);
}

int gk_env_s3_conf(const gk_env *env, gk_s3_conf *conf, gk_err *e)
{
    int rc = gk_s3_conf_discover(conf, env->getenv_fn, NULL, e);
    const char *part = env->s3_part_size; /* bytes a multipart part (tests: 5 MiB) */
    char *end = NULL;
    if (!rc && part) {
        unsigned long long v = strtoull(part, &end, 10);
        if (*end || v < (5u << 20) || v > (5ull << 30))
            return gk_errf(e, GK_EUSAGE, "GPT_S3_PART_SIZE=%s: not a part size in bytes from 5 MiB "
                           "(5242880) to 5 GiB", part);
        conf->part_size = (size_t)v;
    }
    return rc;
}

void gk_env_tool_start(gk_env *env, const char *prog)
{
    gk_std_fds_open(); /* before anything opens a file: none may land on fd 0-2 */
    gk_env_read(env);
    gk_vocab_set_search(env->vocab, env->hf_home, env->home); /* -V's defaults */
    gk_config_set_dir(env->config_dir); /* $GPT_CONFIG_DIR: presets searched first */
    gk_log_setup(prog, GK_LOG_NORMAL);
}
