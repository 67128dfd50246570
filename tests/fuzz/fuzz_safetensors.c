/* fuzz_safetensors.c: the safetensors reader (gk_st_open: header length, JSON header, tensor
 * table, __metadata__) and gk_ckpt_open's reading of a file (gptkit.checksums, parameters, the
 * model config, the embedded vocabulary) on arbitrary bytes. Properties: whatever opens has
 * every tensor inside the data section, tiling it in offset order, aligned to its element size,
 * holding exactly the file's bytes and found by its name; a checkpoint's tensors read back.
 * Each input also runs with its header length set to where its JSON ends (mutations of the
 * header would otherwise mostly stop at the length check). */
#include <jansson.h>
#include <string.h>

#include "common/io/ckpt.h"
#include "common/io/safetensors.h"
#include "common/le.h"
#include "kernels/model/gpt2_load.h"
#include "tests/fuzz/fuzz.h"

/* What gk_st_open promises about an open file of the bytes data[0..size). */
static void check_table(const gk_st_file *f, const uint8_t *data, size_t size)
{
    uint64_t hlen = gk_le64(data), at = 0;
    FZ_ASSERT(size >= 8 && hlen <= size - 8, "opened with header length %llu of %zu bytes",
              (unsigned long long)hlen, size);
    const uint8_t *section = data + 8 + hlen;
    uint64_t len = size - 8 - hlen;
    for (size_t i = 0; i < gk_st_count(f); i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        size_t el = gk_dtype_size(t->dtype);
        FZ_ASSERT(el > 0 && t->ndim >= 0 && t->ndim <= GK_ST_MAX_DIMS,
                  "tensor %s: dtype %d, ndim %d", t->name, (int)t->dtype, t->ndim);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= t->shape[d];
        FZ_ASSERT(numel == t->numel && (uint64_t)t->numel * el == t->nbytes,
                  "tensor %s: numel %lld, %zu bytes", t->name, (long long)t->numel, t->nbytes);
        FZ_ASSERT(t->offset == at && t->offset + t->nbytes <= len,
                  "tensor %s at %llu, %zu bytes, data %llu", t->name, (unsigned long long)t->offset,
                  t->nbytes, (unsigned long long)len);
        FZ_ASSERT(!t->nbytes || (uintptr_t)t->data % el == 0, "tensor %s misaligned", t->name);
        FZ_ASSERT(!t->nbytes || memcmp(t->data, section + t->offset, t->nbytes) == 0,
                  "tensor %s: not the file's bytes", t->name);
        FZ_ASSERT(gk_st_find(f, t->name) == t, "tensor %s not found by name", t->name);
        at += t->nbytes;
    }
    FZ_ASSERT(at == len, "tensors cover %llu of %llu bytes", (unsigned long long)at,
              (unsigned long long)len);
    for (size_t i = 0; i < gk_st_meta_count(f); i++) {
        const char *k, *v;
        gk_st_meta_at(f, i, &k, &v);
        FZ_ASSERT(k && v && gk_st_meta(f, k), "metadata %zu", i);
    }
    gk_err e = {0};
    int verified = 0;
    gk_st_verify(f, &verified, &e);
}

/* Reads every floating-point tensor as a parameter of its own shape, and the rest. */
static void read_ckpt(const gk_ckpt *c)
{
    const gk_st_file *f = gk_ckpt_file(c);
    for (size_t i = 0; i < gk_st_count(f); i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        if (t->ndim > 2 ||
            (t->dtype != GK_DT_F32 && t->dtype != GK_DT_BF16 && t->dtype != GK_DT_F16))
            continue;
        float *dst = malloc((size_t)t->numel * sizeof *dst + 1);
        gk_err e = {0};
        int kind = strncmp(t->name, "optimizer.m.", 12) == 0 ? 'm'
                   : strncmp(t->name, "optimizer.v.", 12) == 0 ? 'v' : 0;
        const char *name = kind ? t->name + 12 : t->name;
        int rc = dst ? gk_ckpt_read(c, kind, name, t->ndim, t->shape, dst, &e) : 0;
        FZ_ASSERT(rc == 0 || rc == GK_EFORMAT, "reading %s: %d %s", t->name, rc, e.msg);
        free(dst);
    }
    gk_ckpt_has_optimizer(c);
    gk_gpt2_config cfg;
    gk_err e = {0};
    gk_gpt2_ckpt_config(c, &cfg, &e);
    gk_vocab *v = NULL;
    if (gk_ckpt_vocab(c, &v, &e) == 0)
        gk_vocab_free(v);
}

static void run(const uint8_t *data, size_t size)
{
    const char *path = fz_file(0, data, size);
    if (!path)
        return;
    gk_err e = {0};
    gk_st_file *f = NULL;
    if (gk_st_open(&f, path, &e) == 0) {
        check_table(f, data, size);
        gk_st_close(f);
    } else {
        FZ_ASSERT(e.code == GK_EFORMAT && e.msg[0], "gk_st_open: %d '%s'", e.code, e.msg);
    }
    gk_ckpt *c = NULL;
    e = (gk_err){0};
    if (gk_ckpt_open(&c, path, &e) == 0) {
        read_ckpt(c);
        gk_ckpt_close(c);
    }
}

/* The input as it is, and (when a mutation moved the end of the JSON header) with the header
 * length rewritten to where the JSON ends, so that edits of the header reach the table. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size);
    if (size <= 8)
        return 0;
    json_error_t je;
    json_t *j = json_loadb((const char *)data + 8, size - 8, JSON_DISABLE_EOF_CHECK, &je);
    json_decref(j);
    if (!j || (uint64_t)je.position == gk_le64(data))
        return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    gk_put_le64(fixed, (uint64_t)je.position);
    run(fixed, size);
    free(fixed);
    return 0;
}
