/* settings.c: gpt-train's key table (see settings.h). */
#include "settings.h"

#include <stddef.h>
#include <string.h>

#define S tr_settings
const gk_config_key tr_settings_keys[] = {
    GK_CK_STR(S, train_data, "data/train.bin", "training shards: paths or globs, comma-separated"),
    GK_CK_STR(S, val_data, "data/val.bin", "validation shards (empty: no validation)"),
    GK_CK_STR(S, out_dir, "out", "where checkpoints, metrics.jsonl and loss.svg go"),
    GK_CK_STR(S, init_from, "scratch", "scratch, resume (out_dir/latest), auto (resume if present), or a checkpoint path"),
    GK_CK_STR(S, vocab, "", "vocabulary to embed in checkpoints (empty: the data's, when found)"),
    GK_CK_INT_R(S, eval_interval, "2000", 1, 1e12, "evaluate (and checkpoint) every N steps"),
    GK_CK_INT_R(S, log_interval, "1", 1, 1e12, "print a log line every N steps"),
    GK_CK_INT_R(S, eval_iters, "200", 1, 1e9, "batches per evaluation of train and val loss"),
    GK_CK_INT_R(S, keep_last, "2", 1, 1e6, "step checkpoints kept in out_dir (latest always kept)"),
    GK_CK_INT_R(S, sample_tokens, "0", 0, 1e6, "print a sample of N tokens at each eval (0: none)"),
    GK_CK_BOOL(S, eval_only, "false", "evaluate once and exit"),
    GK_CK_BOOL(S, always_save_checkpoint, "true", "checkpoint at every eval, not only when val loss improves"),
    GK_CK_INT_R(S, n_layer, "12", 1, 1024, "transformer blocks"),
    GK_CK_INT_R(S, n_head, "12", 1, 1024, "attention heads"),
    GK_CK_INT_R(S, n_embd, "768", 1, 65536, "embedding width (a multiple of n_head)"),
    GK_CK_INT_R(S, block_size, "1024", 1, 1 << 20, "context length T"),
    GK_CK_INT_R(S, vocab_size, "0", 0, 1 << 24, "vocabulary size (0: from the data's shard header)"),
    GK_CK_DOUBLE_R(S, dropout, "0.0", 0, 0.99, "dropout on embeddings, attention and residuals"),
    GK_CK_BOOL(S, bias, "false", "biases in linear layers and layernorms"),
    GK_CK_INT_R(S, batch_size, "12", 1, 1 << 20, "micro-batch size B (sequences per forward pass)"),
    GK_CK_INT_R(S, gradient_accumulation_steps, "40", 1, 1 << 20, "micro-batches per optimizer step (all ranks together)"),
    GK_CK_INT_R(S, max_iters, "600000", 0, 1e12, "optimizer steps in all"),
    GK_CK_INT_R(S, warmup_iters, "2000", 0, 1e12, "linear warmup steps"),
    GK_CK_INT_R(S, lr_decay_iters, "600000", 1, 1e12, "cosine decay reaches min_lr here"),
    GK_CK_DOUBLE_R(S, learning_rate, "6e-4", 0, 10, "peak learning rate"),
    GK_CK_DOUBLE_R(S, weight_decay, "1e-1", 0, 10, "AdamW weight decay (2-D weights only)"),
    GK_CK_DOUBLE_R(S, beta1, "0.9", 0, 0.999999, "AdamW beta1"),
    GK_CK_DOUBLE_R(S, beta2, "0.95", 0, 0.999999, "AdamW beta2"),
    GK_CK_DOUBLE_R(S, grad_clip, "1.0", 0, 1e9, "clip the global gradient norm to this (0: off)"),
    GK_CK_DOUBLE_R(S, min_lr, "6e-5", 0, 10, "learning rate at the end of the decay"),
    GK_CK_BOOL(S, decay_lr, "true", "warmup + cosine decay; false: constant learning_rate"),
    GK_CK_CHOICE(S, device, "cpu", "cpu", "compute device"),
    GK_CK_CHOICE(S, dtype, "float32", "float32", "compute precision"),
    GK_CK_INT_R(S, seed, "1337", 0, 9.2e18, "seed of initialization, data order and dropout"),
    GK_CK_INT_R(S, threads, "0", 0, 4096, "CPU threads (0: all cores)"),
    GK_CK_DOUBLE_R(S, peak_tflops, "0", 0, 1e9, "device peak TFLOP/s for the MFU column (0: no MFU)"),
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
