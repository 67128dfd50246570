/* device_opt.h: the device settings the tools share: gpt-sample's and gpt-evalppl's options
 * --dtype, --device and --attention (one option-table fragment, GK_DEVICE_OPTS) and gpt-train's
 * keys device and attention (their help), the attention help built from the backend's one list
 * of paths (GK_ATTENTION_CHOICES), and the gk_backend_opts a tool opens its backend with, from
 * those settings and the environment's (gk_env, read once by the tool's main: GPT_CUDA_*).
 * Owns nothing: constants and a pure function. Thread-safe. */
#ifndef GK_DEVICE_OPT_H
#define GK_DEVICE_OPT_H

#include "common/env.h"
#include "common/err.h"
#include "common/opt.h"
#include "kernels/backend.h"

/* What each attention path takes (kernels/backend.h's gk_attention; man/gpt-train.1 says more). */
#define GK_ATTENTION_PATHS                                                                     \
    "auto and fa2: the FlashAttention-2 kernels where they apply (bf16, head sizes 16, 32, 64, " \
    "128), else plain; cudnn: cuDNN's fused attention (an error where it is absent); flash: "   \
    "the wmma flash kernels; plain: the row kernels; the CPU ignores it"
/* gpt-train's key `attention` (the key table shows the choices and the default beside it). */
#define GK_ATTENTION_KEY_HELP "cuda's attention path: " GK_ATTENTION_PATHS
/* --attention PATH */
#define GK_ATTENTION_OPT_HELP \
    "cuda's attention path, " GK_ATTENTION_CHOICES " (default auto): " GK_ATTENTION_PATHS
/* --device NAME */
#define GK_DEVICE_OPT_HELP \
    "cpu, ref, cuda, cuda-emu or auto (default auto: cuda when a GPU is found, else cpu)"

/* The device settings of a tool's command line, as given (NULL: not given). */
typedef struct gk_device_args {
    const char *device;    /* --device: NULL is auto */
    const char *dtype;     /* --dtype: the tool parses it (gk_opt_weights) */
    const char *attention; /* --attention: NULL is auto */
} gk_device_args;

/* The entries --dtype (help: the tool's), --device and --attention of a gk_opt table, storing
 * into the gk_device_args a. */
#define GK_DEVICE_OPTS(a, dtype_help)                                                  \
    {0, "dtype", GK_OPT_STR, &(a).dtype, "DTYPE", dtype_help, 0, 0},                  \
    {0, "device", GK_OPT_STR, &(a).device, "NAME", GK_DEVICE_OPT_HELP, 0, 0},         \
    {0, "attention", GK_OPT_STR, &(a).attention, "PATH", GK_ATTENTION_OPT_HELP, 0, 0}

/* *bo for gk_backend_open: device (NULL: "auto"), attention (NULL: auto; else the path it names,
 * or GK_EUSAGE from gk_attention_parse naming setting, e.g. "--attention"), activations bf16
 * (1, 0, or -1: the device's default), and the environment's CUDA settings (GPT_CUDA_SYNC,
 * GPT_CUDA_GRAPHS, GPT_CUDA_FUSED_GRADS, GPT_CUDA_LIB); threads and gpu 0 (the tool sets them). */
int gk_device_backend_opts(gk_backend_opts *bo, const char *device, const char *attention,
                           const char *setting, int bf16, const gk_env *env, gk_err *e);

#endif
