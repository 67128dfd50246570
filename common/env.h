/* env.h: the environment variables that set library behaviour, read once by a tool's main.
 * Owns: gk_env (the settings) and gk_env_read, the one place outside a main that calls getenv
 * for them; the tools copy the fields into the options and arguments of the library calls
 * (gk_backend_opts, ...), so that library code reads no environment. */
#ifndef GK_ENV_H
#define GK_ENV_H

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
    const char *vocab;       /* GPT_VOCAB: the vocabulary without -V (gk_vocab_set_search), or NULL */
    const char *hf_hub_cache; /* HF_HUB_CACHE: the HuggingFace cache (gk_hub_cache_dir), or NULL */
    const char *hf_home;     /* HF_HOME: HuggingFace's folder, the cache under hub/, or NULL */
    const char *home;        /* HOME: ~/.cache/huggingface/hub without the two above, or NULL */
    int hf_offline;          /* HF_HUB_OFFLINE set, not empty and not 0: no network (gk_hub_conf) */
    const char *hf_endpoint; /* HF_ENDPOINT: the hub's address (gk_hub_conf), or NULL */
    const char *hf_token;    /* HF_TOKEN: sent to the hub (gk_hub_conf), or NULL */
    double hub_stall_s;      /* GPT_HUB_STALL_S: seconds a hub download may go without data, its
                              * retries together (gk_hub_conf.stall_s); 0 unset or not a number */
} gk_env;

/* Fills *env from the process's environment (a flag unset or other than the value named above:
 * 0; a string unset or empty: NULL). The strings are the environment's own (getenv). */
void gk_env_read(gk_env *env);

#endif
