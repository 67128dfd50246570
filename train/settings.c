/* settings.c: gpt-train's key table and the checks across keys (see settings.h). */
#include "settings.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/safetensors.h"
#include "kernels/device_opt.h"

#define S tr_settings
const gk_config_key tr_settings_keys[] = {
    GK_CK_STR(S, train_data, "data/train.bin",
              "training shards: paths or globs, comma-separated "
              "(s3://BUCKET/KEYGLOB: read in place, by ranged GETs)"),
    GK_CK_STR(S, val_data, "data/val.bin",
              "validation shards, as train_data (empty: no validation)"),
    GK_CK_INT_R(S, data_readahead, "64", 1, 1e6,
                "MiB of windows read ahead for each stream "
                "(training, each evaluation) of shards in a bucket"),
    GK_CK_STR(S, out_dir, "out",
              "where checkpoints, metrics.jsonl and loss.svg go: a directory, or "
              "s3://BUCKET/PREFIX (staged in TMPDIR, then uploaded)"),
    GK_CK_STR(S, init_from, "scratch",
              "scratch, resume (out_dir/latest), auto (resume if present), or a checkpoint path"),
    GK_CK_STR(S, vocab, "", "vocabulary to embed in checkpoints (empty: the data's, when found)"),
    GK_CK_INT_R(S, eval_interval, "2000", 1, 1e12, "evaluate (and checkpoint) every N steps"),
    GK_CK_INT_R(S, log_interval, "1", 1, 1e12, "print a log line every N steps"),
    GK_CK_INT_R(S, checkpoint_interval, "0", 0, 1e12,
                "also checkpoint every N steps, whatever the val loss, without evaluating (0: at "
                "evaluations only; llm.c's -n)"),
    GK_CK_INT_R(S, eval_iters, "200", 1, 1e9, "batches per evaluation of train and val loss"),
    GK_CK_INT_R(S, keep_last, "2", 1, 1e6, "step checkpoints kept in out_dir (latest always kept)"),
    GK_CK_INT_R(S, keep_every, "0", 0, 1e12,
                "step checkpoints at multiples of N steps are kept for good, apart from "
                "keep_last's (0: none; llm.c's -nm)"),
    GK_CK_BOOL(S, checkpoint_copy, "false",
               "copy the state into host memory at a checkpoint, to write it while training "
               "goes on (false: what lies in host memory, the CPU's state or an offloaded "
               "optimizer's, is written from where it is, and the next update waits for it)"),
    GK_CK_INT_R(S, sample_tokens, "0", 0, 1e6, "print a sample of N tokens at each eval (0: none)"),
    GK_CK_STR(S, hellaswag, "",
              "HellaSwag items (.jsonl) scored at each eval: "
              "acc_norm in the log and metrics (empty: none)"),
    GK_CK_BOOL(S, eval_only, "false", "evaluate once and exit"),
    GK_CK_BOOL(S, always_save_checkpoint, "true",
               "checkpoint at every eval, not only when val loss improves"),
    GK_CK_INT_R(S, n_layer, "12", 1, 1000, "transformer blocks"),
    GK_CK_INT_R(S, n_head, "12", 1, 1024, "attention heads"),
    GK_CK_INT_R(S, n_embd, "768", 1, 65536, "embedding width (a multiple of n_head)"),
    GK_CK_INT_R(S, block_size, "1024", 1, 1 << 20, "context length T"),
    GK_CK_INT_R(S, vocab_size, "0", 0, 1 << 24,
                "vocabulary size (0: from the data's shard header)"),
    GK_CK_DOUBLE_R(S, dropout, "0.0", 0, 0.99, "dropout on embeddings, attention and residuals"),
    GK_CK_BOOL(S, bias, "false", "biases in linear layers and layernorms"),
    GK_CK_INT_R(S, batch_size, "12", 1, 1 << 20, "micro-batch size B (sequences per forward pass)"),
    GK_CK_INT_R(S, gradient_accumulation_steps, "40", 1, 1 << 20,
                "micro-batches per optimizer step (all ranks together)"),
    GK_CK_INT_R(S, max_iters, "600000", 0, 1e12, "optimizer steps in all"),
    GK_CK_INT_R(S, warmup_iters, "2000", 0, 1e12, "linear warmup steps"),
    GK_CK_INT_R(S, lr_decay_iters, "600000", 1, 1e12, "the decay reaches min_lr here"),
    GK_CK_DOUBLE_R(S, learning_rate, "6e-4", 0, 10, "peak learning rate"),
    GK_CK_DOUBLE_R(S, weight_decay, "1e-1", 0, 10, "AdamW weight decay (2-D weights only)"),
    GK_CK_DOUBLE_R(S, beta1, "0.9", 0, 0.999999, "AdamW beta1"),
    GK_CK_DOUBLE_R(S, beta2, "0.95", 0, 0.999999, "AdamW beta2"),
    GK_CK_DOUBLE_R(S, grad_clip, "1.0", 0, 1e9, "clip the global gradient norm to this (0: off)"),
    GK_CK_DOUBLE_R(S, min_lr, "6e-5", 0, 10, "learning rate at the end of the decay"),
    GK_CK_BOOL(S, decay_lr, "true", "warmup + the lr_schedule; false: constant learning_rate"),
    GK_CK_CHOICE(S, lr_schedule, "cosine", "cosine|linear|wsd|constant",
                 "after warmup: a cosine (nanoGPT's) or a straight line from "
                 "learning_rate down to min_lr at lr_decay_iters; wsd: learning_rate, "
                 "then 1 - sqrt down to min_lr over the last wsd_decay_frac of "
                 "lr_decay_iters; constant: learning_rate throughout (llm.c's -k)"),
    GK_CK_DOUBLE_R(S, wsd_decay_frac, "0.2", 0, 1,
                   "lr_schedule = wsd: the part of lr_decay_iters "
                   "that the decay takes (llm.c: 0.2)"),
    GK_CK_BOOL(S, skip_nonfinite, "false",
               "skip a step whose loss or gradient norm is NaN/Inf (default: stop there)"),
    GK_CK_DOUBLE_R(S, skip_loss_z, "0", 0, 1e6,
                   "skip the update of a step whose loss is more than this many standard "
                   "deviations above the mean of the last 128 steps' (0: never; llm.c's -sl)"),
    GK_CK_DOUBLE_R(S, skip_grad_z, "0", 0, 1e6,
                   "skip the update of a step whose gradient norm is more than this many standard "
                   "deviations above the mean of the last 128 steps' (0: never; llm.c's -sg)"),
    GK_CK_CHOICE(S, device, "auto", "cpu|ref|cuda|cuda-emu|auto",
                 "compute device (auto: cuda when a GPU is found, else cpu)"),
    GK_CK_STR(S, dtype, "auto",
              "compute precision: auto (bfloat16 on cuda, else float32), float32 or bfloat16 (or "
              "fp32, bf16); the CPU trains in float32"),
    GK_CK_INT_R(S, seed, "1337", 0, 9.2e18, "seed of initialization, data order and dropout"),
    GK_CK_INT_R(S, threads, "0", 0, 4096, "CPU threads (0: all cores)"),
    GK_CK_CHOICE(S, recompute, "auto", "auto|true|false|gelu|gelu+ln",
                 "recompute in the backward instead of keeping: gelu (or true) the "
                 "GELU outputs, a quarter less activation memory; gelu+ln also the "
                 "LayerNorm outputs, another eighth (llm.c's -r 1, -r 2; auto: gelu "
                 "on cuda, false on the CPU, more when the batch would not fit)"),
    GK_CK_CHOICE(S, attention, "auto", GK_ATTENTION_CHOICES, GK_ATTENTION_KEY_HELP),
    GK_CK_DOUBLE_R(S, peak_tflops, "0", 0, 1e9,
                   "device peak TFLOP/s for the MFU column (0: the GPU's bf16 peak when gptkit "
                   "knows it: H100, H200, A100, L4, L40S, RTX 4090, ...; else no MFU)"),
    GK_CK_INT_R(S, total_batch_size, "0", 0, 1e15,
                "tokens per optimizer step over all ranks (0: batch_size x block_size x "
                "gradient_accumulation_steps); sets gradient_accumulation_steps"),
    GK_CK_INT_R(S, nproc_per_node, "1", 1, 1024,
                "ranks to start on this machine (as torchrun --nproc_per_node)"),
    GK_CK_INT_R(S, zero_stage, "0", 0, 3,
                "1: shard the AdamW moments across ranks (ZeRO-1); 2: the gradients too (ZeRO-2); "
                "3: the parameters too (ZeRO-3, gathered layer by layer)"),
    GK_CK_INT_R(S, tensor_parallel, "1", 1, 1024,
                "ranks of a node that split each layer between them (Megatron's tensor "
                "parallel: attention by heads, the MLP by hidden units, the vocabulary by rows); "
                "data parallel across the groups"),
    GK_CK_BOOL(S, optimizer_offload, "false",
               "fp32 master weights and AdamW moments in host memory, updated there by the CPU "
               "(ZeRO-Offload; cuda)"),
    GK_CK_STR(S, reduce_dtype, "float32",
              "type of the gradient sums across ranks: float32, or bfloat16 (or fp32, bf16): half "
              "the bytes, rounded to bf16"),
    GK_CK_DOUBLE_R(S, dist_timeout, "300", 0.1, 1e6,
                   "seconds a rank waits for the others "
                   "(rendezvous, collectives) before giving up"),
    GK_CK_END,
};
#undef S

int tr_settings_is_model_key(const char *key)
{
    static const char *model[] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size",
                                  "bias", "dropout", NULL};
    for (int i = 0; model[i]; i++)
        if (strcmp(model[i], key) == 0)
            return 1;
    return 0;
}

/* ---- the command line ----------------------------------------------------------------- */

int tr_settings_load_config(void *cfg, const char *name, gk_err *e)
{
    char path[4096];
    int rc = gk_config_resolve_path(name, path, sizeof path, e);
    return rc ? rc : gk_config_load_file(cfg, path, e);
}

static int set_setting(void *cfg, const char *arg, gk_err *e)
{
    return gk_config_set_arg(cfg, arg, e);
}

void tr_cli_init(tr_cli *c, gk_config *cfg, tr_cli_load_fn load)
{
    memset(c, 0, sizeof *c);
    c->load = (gk_opt_call){load, cfg};
    c->set = (gk_opt_call){set_setting, cfg};
    const gk_opt tab[] = {
        {'c', "config", GK_OPT_CALL, &c->load, "FILE", "config file or preset name", 0, 0},
        {0, "KEY=VALUE", GK_OPT_KEYVAL, &c->set, NULL, "set one setting (listed below)", 0, 0},
        {'q', "quiet", GK_OPT_FLAG, &c->quiet, NULL,
         "no messages but errors (the training log still goes to stdout)", 0, 0},
        {'v', "verbose", GK_OPT_FLAG, &c->verbose, NULL, "more messages", 0, 0},
        {0, "print-config", GK_OPT_FLAG, &c->print_only, NULL,
         "print the effective config and exit", 0, 0},
        {0, "plan", GK_OPT_FLAG, &c->plan, NULL,
         "print the memory plan per rank (what fits) and exit", 0, 0},
        {0, "plan-memory", GK_OPT_INT, &c->plan_memory, "SIZE",
         "--plan for devices of SIZE bytes each (24G, 80Gi) instead of this machine's", 1, 1e18},
        {0, "plan-host-memory", GK_OPT_INT, &c->plan_host_memory, "SIZE",
         "--plan for hosts of SIZE bytes each (64G) instead of this machine's", 1, 1e18},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    _Static_assert(sizeof tab == sizeof c->tab, "tr_cli.tab holds the whole table");
    memcpy(c->tab, tab, sizeof tab);
}

/* ---- checks across keys ---------------------------------------------------------------- */

/* Where key's value came from: FILE:LINE, --key, or "default". */
static const char *origin(const gk_config *cfg, const char *key)
{
    const char *o = gk_config_origin(cfg, key);
    return o ? o : "default";
}

/* An error about keys a and b: led by the origin of a (of b when only b was set), ending with
 * the other key's origin: "x.conf:3: n_head = 3 does not divide n_embd = 32 (n_embd: x.conf:2)". */
static int pair_error(const gk_config *cfg, const char *a, const char *b, gk_err *e,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int pair_error(const gk_config *cfg, const char *a, const char *b, gk_err *e,
                      const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int b_leads = !gk_config_origin(cfg, a) && gk_config_origin(cfg, b);
    const char *lead = b_leads ? b : a, *other = b_leads ? a : b;
    return gk_errf(e, GK_EUSAGE, "%s: %s (%s: %s)", origin(cfg, lead), msg, other,
                   origin(cfg, other));
}

/* A dtype key's value, a spelling gk_dtype_from_user knows, as float32 or bfloat16 (written back
 * under nanoGPT's name, keeping its origin: the printout says where it was set). */
static int check_dtype_value(gk_config *cfg, const char *key, const char **value, enum gk_dtype *dt,
                             gk_err *e)
{
    int model = strcmp(key, "dtype") == 0; /* else the sums' */
    if (gk_dtype_from_user(*value, dt) != 0 || (!model && *dt != GK_DT_F32 && *dt != GK_DT_BF16))
        return gk_errf(e, GK_EUSAGE,
                       "%s: %s: '%s' is not one of %sfloat32, bfloat16 (or fp32, bf16)",
                       origin(cfg, key), key, *value, model ? "auto, " : "");
    if (*dt != GK_DT_F32 && *dt != GK_DT_BF16)
        return gk_errf(e, GK_EUSAGE, "%s: %s = %s: gptkit trains in float32 or bfloat16 "
                       "(float16 would need loss scaling)", origin(cfg, key), key, *value);
    const char *name = gk_dtype_user_name(*dt);
    if (strcmp(name, *value) == 0)
        return 0;
    char *from = strdup(origin(cfg, key));
    int rc = from ? gk_config_set(cfg, key, name, from, e) : gk_errf(e, GK_ENOMEM, "out of memory");
    free(from);
    return rc;
}

/* dtype: auto, or float32 or bfloat16 (activations and matmul inputs; master weights, gradients
 * and AdamW stay float32); the CPU does float32. reduce_dtype: float32 or bfloat16 on any
 * device. */
static int check_dtype(tr_settings *s, gk_config *cfg, gk_err *e)
{
    enum gk_dtype dt;
    int rc = check_dtype_value(cfg, "reduce_dtype", &s->reduce_dtype, &dt, e);
    if (rc || strcmp(s->dtype, "auto") == 0)
        return rc;
    if ((rc = check_dtype_value(cfg, "dtype", &s->dtype, &dt, e)))
        return rc;
    if (dt != GK_DT_F32 && (strcmp(s->device, "cpu") == 0 || strcmp(s->device, "ref") == 0))
        return pair_error(cfg, "dtype", "device", e,
                          "dtype = %s: device = %s trains in float32 only", s->dtype, s->device);
    return 0;
}

static int check_nonempty(const tr_settings *s, const gk_config *cfg, gk_err *e)
{
    const struct { const char *key, *value, *what; } need[] = {
        {"train_data", s->train_data, "training shards"},
        {"out_dir", s->out_dir, "a directory"},
        {"init_from", s->init_from, "scratch, resume, auto or a checkpoint path"},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i].value[0])
            return gk_errf(e, GK_EUSAGE, "%s: %s is empty (needs %s)", origin(cfg, need[i].key),
                           need[i].key, need[i].what);
    return 0;
}

/* The model's shape. When starting from a checkpoint, it has the shape: a key left at its default
 * says nothing, and setup checks the keys given against the checkpoint. */
static int check_shape(const tr_settings *s, const gk_config *cfg, gk_err *e)
{
    int scratch = strcmp(s->init_from, "scratch") == 0;
    int both_set = gk_config_origin(cfg, "n_head") && gk_config_origin(cfg, "n_embd");
    if ((scratch || both_set) && s->n_embd % s->n_head != 0)
        return pair_error(cfg, "n_head", "n_embd", e, "n_head = %lld does not divide n_embd = %lld",
                          (long long)s->n_head, (long long)s->n_embd);
    if (s->batch_size * s->block_size > INT_MAX)
        return pair_error(cfg, "batch_size", "block_size", e,
                          "batch_size = %lld x block_size = %lld "
                          "is above %d tokens per micro-batch",
                          (long long)s->batch_size, (long long)s->block_size, INT_MAX);
    return 0;
}

int64_t tr_wsd_decay_start(const tr_settings *s)
{
    return s->lr_decay_iters - (int64_t)llround(s->wsd_decay_frac * (double)s->lr_decay_iters);
}

/* The schedule (tr_learning_rate): warmup to learning_rate, then the decay down to min_lr, which
 * must have steps of its own and must go down. */
static int check_schedule(const tr_settings *s, const gk_config *cfg, gk_err *e)
{
    if (!s->decay_lr || strcmp(s->lr_schedule, "constant") == 0)
        return 0;
    if (s->lr_decay_iters <= s->warmup_iters)
        return pair_error(cfg, "lr_decay_iters", "warmup_iters", e,
                          "lr_decay_iters = %lld is not above warmup_iters = %lld: no steps "
                          "left for the decay",
                          (long long)s->lr_decay_iters, (long long)s->warmup_iters);
    int64_t start = tr_wsd_decay_start(s);
    int wsd = strcmp(s->lr_schedule, "wsd") == 0;
    if (wsd && start >= s->lr_decay_iters)
        return pair_error(cfg, "wsd_decay_frac", "lr_decay_iters", e,
                          "wsd_decay_frac = %g of lr_decay_iters = %lld leaves the decay no step",
                          s->wsd_decay_frac, (long long)s->lr_decay_iters);
    if (wsd && start < s->warmup_iters)
        return pair_error(cfg, "wsd_decay_frac", "warmup_iters", e,
                          "wsd_decay_frac = %g of lr_decay_iters = %lld starts the decay at step "
                          "%lld, before warmup_iters = %lld",
                          s->wsd_decay_frac, (long long)s->lr_decay_iters, (long long)start,
                          (long long)s->warmup_iters);
    if (s->min_lr > s->learning_rate)
        return pair_error(cfg, "min_lr", "learning_rate", e,
                          "min_lr = %g is above learning_rate = %g: the decay would raise it",
                          s->min_lr, s->learning_rate);
    return 0;
}

int tr_settings_check(tr_settings *s, gk_config *cfg, gk_err *e)
{
    int rc = check_nonempty(s, cfg, e);
    if (!rc)
        rc = check_dtype(s, cfg, e);
    if (!rc)
        rc = check_shape(s, cfg, e);
    if (!rc)
        rc = check_schedule(s, cfg, e);
    return rc;
}
