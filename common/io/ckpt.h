/* ckpt.h: gptkit checkpoints: one safetensors file (see safetensors.h for the bytes) holding
 *   - the parameters under HuggingFace GPT-2 names (F32 master weights; BF16/F16 copies are
 *     read too, converted to fp32),
 *   - for training checkpoints, the AdamW moments as F32 "optimizer.m.<name>",
 *     "optimizer.v.<name>",
 *   - the vocabulary as U8 tensors "tokenizer.vocab" (HF vocab.json text, or the char-level JSON
 *     array) and "tokenizer.merges" (merges.txt text; absent for char-level),
 *   - __metadata__: "gptkit.config" (model config JSON, nanoGPT key names), "gptkit.train"
 *     (trainer state JSON), "gptkit.tokenizer" ({"type": "gpt2-bpe"|"char", "fingerprint": N}),
 *     "gptkit.checksums" (a CRC-32 of every tensor's bytes, written and checked by the
 *     safetensors layer: see safetensors.h), and "format": "pt" so transformers loads the file
 *     as it is.
 * Owns: an open checkpoint (the mapped file) until gk_ckpt_close; saving borrows its inputs.
 * Thread safety: one gk_ckpt per thread; loading into distinct buffers may run in parallel. */
#ifndef GK_CKPT_H
#define GK_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/vocab.h"

struct gk_st_file;

typedef struct gk_ckpt_param {
    const char *name;     /* HuggingFace name, e.g. "transformer.h.0.attn.c_attn.weight" */
    int ndim;
    int64_t shape[2];
    const float *data;    /* fp32 values, row-major */
    const float *m, *v;   /* AdamW moments, or NULL */
} gk_ckpt_param;

typedef struct gk_ckpt_info {
    const char *config_json; /* required */
    const char *train_json;  /* NULL: not a training checkpoint */
    const gk_vocab *vocab;   /* NULL: no embedded vocabulary */
    int dtype;               /* storage of parameters: GK_DT_F32 (default
                              * 0 means F32), GK_DT_BF16, GK_DT_F16 */
    /* NULL: the tensors' floats are at each entry's data, m and v. Else (dtype F32 only) they
     * come from fill, asked in the file's order, entry by entry: its parameter (kind 0), then
     * 'm' and 'v' where those pointers are not NULL (they only say which are present); bytes
     * [off, off + n) of that tensor into buf. 0 or a GK_E* code with e filled. */
    int (*fill)(void *ctx, size_t entry, int kind, uint64_t off, void *buf, size_t n, gk_err *e);
    void *fill_ctx;
} gk_ckpt_info;

/* Writes path atomically (temp file, fsync, rename). Moments are written when present. */
int gk_ckpt_save(const char *path, const gk_ckpt_param *params, size_t n, const gk_ckpt_info *info,
                 gk_err *e);

typedef struct gk_ckpt gk_ckpt;

/* The checkpoint format this gptkit writes and the newest it reads: "gptkit.format_version" in
 * __metadata__ (a decimal integer; files without it, from before it existed, are version 1).
 * Bump it on any change older readers would misread. */
#define GK_CKPT_FORMAT_VERSION 2
/* GK_EFORMAT "FILE: format version 3 is newer than this gptkit reads (2): upgrade gptkit" for a
 * newer (or unreadable) format version; 0 otherwise. gk_ckpt_open checks it first. */
int gk_ckpt_check_version(const struct gk_st_file *f, gk_err *e);

/* Opens and validates path, and verifies every tensor's checksum (gk_ckpt_verify): a damaged
 * file is GK_EFORMAT naming the file and the tensor. */
int gk_ckpt_open(gk_ckpt **out, const char *path, gk_err *e);
/* The same for a file open on fd (kept open by the caller), named name in messages. */
int gk_ckpt_open_fd(gk_ckpt **out, int fd, const char *name, gk_err *e);
/* Verifies an open safetensors file's checksums (gk_st_verify, on threads: about as long as
 * gk_ckpt_read of every parameter takes); a file without them (written before checksums)
 * passes, with a note at verbose level. */
int gk_ckpt_verify(const struct gk_st_file *f, gk_err *e);
void gk_ckpt_close(gk_ckpt *c); /* NULL-safe */
const char *gk_ckpt_path(const gk_ckpt *c);
/* __metadata__ values, or NULL when absent. */
const char *gk_ckpt_config_json(const gk_ckpt *c);
const char *gk_ckpt_train_json(const gk_ckpt *c);
/* Copies tensor name into dst as fp32 after checking its shape; errors name file and tensor.
 * A parameter may be F32, BF16, F16 or int8 (I8 with "q8_0.NAME" scales, widened: common/io/q8.h).
 * Every value must be finite: a NaN or infinity is GK_EFORMAT naming the element (checked in
 * the same pass as the copy, where it costs a small part of the read).
 * kind: 0 = parameter, 'm' / 'v' = AdamW moment. GK_ENOTFOUND when absent. */
int gk_ckpt_read(const gk_ckpt *c, int kind, const char *name, int ndim, const int64_t *shape,
                 float *dst, gk_err *e);
/* Whether the checkpoint holds AdamW moments. */
int gk_ckpt_has_optimizer(const gk_ckpt *c);
/* The embedded vocabulary; GK_ENOTFOUND when the checkpoint has none. */
int gk_ckpt_vocab(const gk_ckpt *c, gk_vocab **out, gk_err *e);
/* The underlying safetensors file, for tools that list tensors (gpt-ckpt info). */
const struct gk_st_file *gk_ckpt_file(const gk_ckpt *c);

#endif
