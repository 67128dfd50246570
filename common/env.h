/* env.h: the environment variables that set library behaviour, read once by a tool's main.
 * Owns: gk_env (the settings) and gk_env_read, the one place outside a main that calls getenv
 * for them; the tools copy the fields into the options and arguments of the library calls
 * (gk_backend_opts, ...), so that library code reads no environment. */
#ifndef GK_ENV_H
#define GK_ENV_H

typedef struct gk_env {
    int cuda_sync;      /* GPT_CUDA_SYNC=1: the CUDA backend waits for every op */
    int cuda_no_graphs; /* GPT_CUDA_GRAPHS=0: the CUDA backend records no steps */
} gk_env;

/* Fills *env from the process's environment (a flag unset or other than the value named above:
 * 0). */
void gk_env_read(gk_env *env);

#endif
