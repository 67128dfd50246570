/* safetensors.h: reading and writing safetensors files (gptkit checkpoints), fp16/bf16 helpers.
 * Owns: a gk_st_file (the mapped file; every pointer it returns lives until gk_st_close) and a
 * gk_st_writer (borrows tensor data until its write). Each object belongs to one thread at a time;
 * the dtype helpers are pure and thread-safe.
 *
 * The format, byte by byte (https://github.com/huggingface/safetensors):
 *   bytes 0..7      N, the header length: unsigned 64-bit little-endian
 *   bytes 8..8+N-1  header: a UTF-8 JSON object, possibly followed by spaces (0x20) as padding.
 *                   Starts with '{'. Keys are tensor names, plus an optional "__metadata__":
 *                     "__metadata__": {"key": "value", ...}    string values only
 *                     "NAME": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [B, E]}
 *                   dtype one of BOOL U8 I8 F8_E5M2 F8_E4M3 I16 U16 F16 BF16 I32 U32 F32 F64 I64
 *                   U64; shape [] is a scalar; B <= E are byte offsets into the data section.
 *   bytes 8+N..     the data section: every tensor's elements, row-major (C order), little-endian.
 * Rules the reader enforces (as the reference Rust library does): N <= 100,000,000 and
 * 8 + N <= file size; the header is valid JSON without duplicate keys; every tensor has a known
 * dtype and non-negative dims whose product * dtype size == E - B; tensors do not overlap, leave
 * no gaps, and together cover the data section exactly (it is file size - 8 - N bytes long).
 * The writer pads the header with spaces so that the data section starts at a multiple of 8, and
 * orders tensors by decreasing element size (then as added), so every tensor is aligned to its
 * element size; the reader guarantees that alignment to its callers (copying the tensors into
 * aligned buffers when a foreign file's layout does not give it). */
#ifndef GK_SAFETENSORS_H
#define GK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum gk_dtype {
    GK_DT_BOOL, GK_DT_U8, GK_DT_I8, GK_DT_F8_E5M2, GK_DT_F8_E4M3, GK_DT_I16, GK_DT_U16,
    GK_DT_F16, GK_DT_BF16, GK_DT_I32, GK_DT_U32, GK_DT_F32, GK_DT_F64, GK_DT_I64, GK_DT_U64,
    GK_DT_COUNT
};

/* "F32" etc., or NULL for a value out of range. */
const char *gk_dtype_name(enum gk_dtype dt);
/* Bytes per element (0 for a value out of range). */
size_t gk_dtype_size(enum gk_dtype dt);
/* Parses "F32" etc.; returns 0 or -1. */
int gk_dtype_parse(const char *name, enum gk_dtype *out);
/* A user's spelling of a floating-point dtype (options, config keys): nanoGPT's names float32,
 * bfloat16 and float16, with fp32, bf16 and fp16 accepted everywhere as aliases. 0 or -1. */
int gk_dtype_from_user(const char *text, enum gk_dtype *out);
/* nanoGPT's name for F32, BF16 or F16 ("float32", ...); NULL for any other dtype. */
const char *gk_dtype_user_name(enum gk_dtype dt);
/* What gk_dtype_from_user accepts, for messages and --help. */
#define GK_DTYPE_USER_CHOICES "float32, bfloat16 or float16 (or fp32, bf16, fp16)"

#define GK_ST_MAX_DIMS 8

typedef struct gk_st_tensor {
    const char *name;
    enum gk_dtype dtype;
    int ndim;
    int64_t shape[GK_ST_MAX_DIMS];
    int64_t numel;      /* product of shape (1 for a scalar) */
    const void *data;   /* aligned to the element size; read-only */
    size_t nbytes;
    uint64_t offset;    /* data_offsets[0] as in the file */
} gk_st_tensor;

/* ---- reader ---------------------------------------------------------------------------- */

typedef struct gk_st_file gk_st_file;

/* Opens and validates path (see the rules above). Errors name the file and the problem:
 * GK_EFORMAT for a bad file, GK_EIO / GK_ENOTFOUND for system errors. */
int gk_st_open(gk_st_file **out, const char *path, gk_err *err);
/* The same for a regular file open on fd (kept open by the caller; the mapping outlives it),
 * named name in messages and by gk_st_path (a download's URL). */
int gk_st_open_fd(gk_st_file **out, int fd, const char *name, gk_err *err);
void gk_st_close(gk_st_file *f); /* NULL-safe */

/* Tensors in file order (by data offset). */
size_t gk_st_count(const gk_st_file *f);
const gk_st_tensor *gk_st_at(const gk_st_file *f, size_t i);
/* The tensor called name, or NULL. */
const gk_st_tensor *gk_st_find(const gk_st_file *f, const char *name);
/* A __metadata__ value, or NULL if absent. */
const char *gk_st_meta(const gk_st_file *f, const char *key);
/* __metadata__ entries in header order. */
size_t gk_st_meta_count(const gk_st_file *f);
void gk_st_meta_at(const gk_st_file *f, size_t i, const char **key, const char **value);
/* The path given to gk_st_open (for messages). */
const char *gk_st_path(const gk_st_file *f);

/* ---- writer ---------------------------------------------------------------------------- */

typedef struct gk_st_writer gk_st_writer;

/* Fills buf with n bytes of the tensor's little-endian data starting at byte offset off
 * (called in order, in chunks). Returns 0 or a GK_E* code with err filled. */
typedef int (*gk_st_fill_fn)(void *ctx, uint64_t off, void *buf, size_t n, gk_err *err);

int gk_st_writer_create(gk_st_writer **out, gk_err *err);
void gk_st_writer_free(gk_st_writer *w); /* NULL-safe */
/* Adds a tensor whose bytes are at data (borrowed until gk_st_writer_write returns). Names must
 * be unique, non-empty and not "__metadata__"; ndim <= GK_ST_MAX_DIMS; dims >= 0. */
int gk_st_writer_add(gk_st_writer *w, const char *name, enum gk_dtype dt, int ndim,
                     const int64_t *shape, const void *data, gk_err *err);
/* Adds a tensor whose bytes come from fill(ctx, ...) at write time (conversion, device copies). */
int gk_st_writer_add_fill(gk_st_writer *w, const char *name, enum gk_dtype dt, int ndim,
                          const int64_t *shape, gk_st_fill_fn fill, void *ctx, gk_err *err);
/* Sets a __metadata__ entry (replacing an earlier value for key). */
int gk_st_writer_meta(gk_st_writer *w, const char *key, const char *value, gk_err *err);
/* Writes the file atomically: PATH.tmp.XXXXXX in the same directory, fsync, rename, fsync of the
 * directory. On error nothing is left behind and err names path (e.g. disk full). The writer can
 * be written again or freed afterwards. */
int gk_st_writer_write(gk_st_writer *w, const char *path, gk_err *err);

/* ---- checksums (safetensors_sum.c) ---------------------------------------------------- */

/* The writer stores a CRC-32 (zlib's polynomial) of every tensor's data bytes in __metadata__
 * under this key: a JSON object, in the file's tensor order, {"NAME": "1a2b3c4d", ...} (8
 * lowercase hex digits, one entry per tensor), replacing any value set with gk_st_writer_meta. */
#define GK_ST_CHECKSUMS_KEY "gptkit.checksums"

/* zlib's crc32 of n bytes continuing crc (0 to start); buffers of 16 MB and more are split
 * over threads (gk_crc32_parts with k = n / 8 MB, at most the CPUs online and 8). */
uint32_t gk_crc32(uint32_t crc, const void *data, size_t n);
/* The same, with the buffer split into k parts (k clamped to 1..8) summed on k threads, the last
 * part taking the remainder, joined with crc32_combine. Exposed for the tests, which compare it
 * with zlib's crc32 on every split. */
uint32_t gk_crc32_parts(uint32_t crc, const void *data, size_t n, size_t k);
/* Checks every tensor's bytes against the stored checksums: 0 with *verified = 1 when all match,
 * 0 with *verified = 0 when the file has none (not written by gptkit, or before checksums);
 * GK_EFORMAT on a mismatch ("FILE: tensor NAME: checksum mismatch (the file is damaged)"), a
 * tensor without a checksum or a malformed key. Reads every byte of the data section. */
int gk_st_verify(const gk_st_file *f, int *verified, gk_err *err);

/* ---- fp16 / bf16 ----------------------------------------------------------------------- */

/* Round to nearest even; NaN stays NaN (quiet), +-inf stay inf. */
uint16_t gk_f32_to_bf16(float f);
float gk_bf16_to_f32(uint16_t h);
/* IEEE binary16: round to nearest even, overflow to inf, gradual underflow to subnormals. */
uint16_t gk_f32_to_f16(float f);
float gk_f16_to_f32(uint16_t h);
/* Array forms (dst and src must not overlap). */
void gk_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n);
void gk_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void gk_f32_to_f16_n(uint16_t *dst, const float *src, size_t n);
void gk_f16_to_f32_n(float *dst, const uint16_t *src, size_t n);

#endif
