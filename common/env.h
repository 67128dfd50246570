/* env.h: the tools' edge with the environment: the variables that set library behaviour, read
 * once by a tool's main (gk_env_read, or gk_env_tool_start with a tool's other first steps) and
 * passed down as plain values and options.
 * Owns: gk_env (the settings) and the only getenv calls of the tools and libraries: gk_env_read
 * and gk_env_getenv, the getenv the S3 client's discovery (gk_s3_conf_discover: AWS's variables)
 * and gpt-train's launcher (tr_launch_from_env: torchrun's, MPI's, Slurm's) are handed. Library
 * code reads no environment: it gets the fields as options (gk_backend_opts through
 * gk_device_backend_opts, gk_hub_conf, ...) or a gk_env. gk_env's strings are the environment's
 * own: read it before starting threads, and change no variable after. */
#ifndef GK_ENV_H
#define GK_ENV_H

#include "common/err.h"

struct gk_s3_conf; /* common/s3/s3.h */

/* A getenv: variable name's value or NULL (ud: the caller's). gk_s3_getenv's type. */
typedef const char *(*gk_getenv_fn)(const char *name, void *ud);

typedef struct gk_env {
    int cuda_sync;           /* GPT_CUDA_SYNC=1: the CUDA backend waits for every op */
    int cuda_no_graphs;      /* GPT_CUDA_GRAPHS=0: the CUDA backend records no steps */
    int cuda_fused_grads;    /* GPT_CUDA_FUSED_GRADS=1: gemm_bwd takes cuBLASLt's epilogues */
    const char *cuda_lib;    /* GPT_CUDA_LIB: the CUDA backend library to load, or NULL */
    const char *gloo_ifname; /* GLOO_SOCKET_IFNAME: the Gloo collectives' interface(s), or NULL */
    const char *config_dir;  /* GPT_CONFIG_DIR, else GPTKIT_CONFIG_DIR (its old name, deprecated):
                              * the presets searched first (gk_config_set_dir), or NULL */
    int mem_check;           /* GPT_MEM_CHECK: gk_mem_check_mode's 0 check, 1 warn, 2 off */
    const char *model;       /* GPT_MODEL: the checkpoint without -m (gk_opt_model_path), or NULL */
    const char *vocab;       /* GPT_VOCAB: the vocabulary without -V
                              * (gk_vocab_set_search), or NULL */
    const char *hf_hub_cache; /* HF_HUB_CACHE: the HuggingFace cache (gk_hub_cache_dir), or NULL */
    const char *hf_home;     /* HF_HOME: HuggingFace's folder, the cache under hub/, or NULL */
    const char *home;        /* HOME: ~/.cache/huggingface/hub without the two above, or NULL */
    int hf_offline;          /* HF_HUB_OFFLINE set, not empty and not 0: no network (gk_hub_conf) */
    const char *hf_endpoint; /* HF_ENDPOINT: the hub's address (gk_hub_conf), or NULL */
    const char *hf_token;    /* HF_TOKEN: sent to the hub (gk_hub_conf), or NULL */
    double hub_stall_s;      /* GPT_HUB_STALL_S: seconds a hub download may go without data, its
                              * retries together (gk_hub_conf.stall_s); 0 unset or not a number */
    const char *tmpdir;      /* TMPDIR, else "/tmp": where temporaries and downloads go */
    const char *s3_part_size; /* GPT_S3_PART_SIZE: bytes a multipart part (gk_env_s3_conf checks
                               * it), or NULL */
    int no_grad_overlap;     /* GPT_GRAD_OVERLAP=0: gpt-train sums gradients after the backward */
    gk_getenv_fn getenv_fn;  /* gk_env_getenv: for the variables read by name where they are used
                              * (AWS's, by gk_s3_conf_discover): library code that is handed a
                              * gk_env reads them through it */
} gk_env;

/* Fills *env from the process's environment (a flag unset or other than the value named above:
 * 0; a string unset or empty: NULL). The strings are the environment's own (getenv). */
void gk_env_read(gk_env *env);

/* getenv(name), as a gk_s3_getenv (ud unused): what the tools hand to the S3 client's discovery
 * (AWS_* variables and ~/.aws) and to the launcher's reading (train/launch.h). */
const char *gk_env_getenv(const char *name, void *ud);

/* An S3 client's settings from the environment and ~/.aws (gk_s3_conf_discover with
 * gk_env_getenv), the multipart part size from env->s3_part_size: GK_EUSAGE
 * "GPT_S3_PART_SIZE=X: not a part size in bytes from 5 MiB (5242880) to 5 GiB" when it is not. */
int gk_env_s3_conf(const gk_env *env, struct gk_s3_conf *conf, gk_err *e);

/* A tool's first steps: standard descriptors 0-2 open (gk_std_fds_open, before anything opens a
 * file), *env read, the vocabulary search set from it (gk_vocab_set_search: -V's defaults), the
 * presets' directory (gk_config_set_dir) and logging as prog (GK_LOG_NORMAL). */
void gk_env_tool_start(gk_env *env, const char *prog);

#endif
