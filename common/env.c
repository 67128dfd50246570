/* env.c: gk_env_read (see env.h). */
#include "common/env.h"

#include <stdlib.h>
#include <string.h>

/* Whether variable name is set to exactly value. */
static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

void gk_env_read(gk_env *env)
{
    env->cuda_sync = env_is("GPT_CUDA_SYNC", "1");
    env->cuda_no_graphs = env_is("GPT_CUDA_GRAPHS", "0");
}
