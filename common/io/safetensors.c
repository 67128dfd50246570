/* safetensors.c: the safetensors reader and the dtype table (see safetensors.h).
 * The writer is in safetensors_write.c, fp16/bf16 conversion in safetensors_half.c. */
#include "common/io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/shard.h"
#include "common/le.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define MAX_HEADER 100000000ULL /* the reference library's limit */

/* ---- dtypes ---------------------------------------------------------------------------- */

static const struct { const char *name; size_t size; } dtypes[GK_DT_COUNT] = {
    [GK_DT_BOOL] = { "BOOL", 1 },     [GK_DT_U8] = { "U8", 1 },     [GK_DT_I8] = { "I8", 1 },
    [GK_DT_F8_E5M2] = { "F8_E5M2", 1 }, [GK_DT_F8_E4M3] = { "F8_E4M3", 1 },
    [GK_DT_I16] = { "I16", 2 },       [GK_DT_U16] = { "U16", 2 },   [GK_DT_F16] = { "F16", 2 },
    [GK_DT_BF16] = { "BF16", 2 },     [GK_DT_I32] = { "I32", 4 },   [GK_DT_U32] = { "U32", 4 },
    [GK_DT_F32] = { "F32", 4 },       [GK_DT_F64] = { "F64", 8 },   [GK_DT_I64] = { "I64", 8 },
    [GK_DT_U64] = { "U64", 8 },
};

const char *gk_dtype_name(enum gk_dtype dt)
{
    return (unsigned)dt < GK_DT_COUNT ? dtypes[dt].name : NULL;
}

size_t gk_dtype_size(enum gk_dtype dt)
{
    return (unsigned)dt < GK_DT_COUNT ? dtypes[dt].size : 0;
}

int gk_dtype_parse(const char *name, enum gk_dtype *out)
{
    for (int i = 0; i < GK_DT_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (enum gk_dtype)i;
            return 0;
        }
    }
    return -1;
}

static const struct {
    const char *name, *alias;
    enum gk_dtype dt;
} user_dtypes[] = {
    {"float32", "fp32", GK_DT_F32},
    {"bfloat16", "bf16", GK_DT_BF16},
    {"float16", "fp16", GK_DT_F16},
};

int gk_dtype_from_user(const char *text, enum gk_dtype *out)
{
    for (size_t i = 0; text && i < sizeof user_dtypes / sizeof user_dtypes[0]; i++) {
        if (strcmp(text, user_dtypes[i].name) == 0 || strcmp(text, user_dtypes[i].alias) == 0) {
            *out = user_dtypes[i].dt;
            return 0;
        }
    }
    return -1;
}

const char *gk_dtype_user_name(enum gk_dtype dt)
{
    for (size_t i = 0; i < sizeof user_dtypes / sizeof user_dtypes[0]; i++)
        if (user_dtypes[i].dt == dt) return user_dtypes[i].name;
    return NULL;
}

/* ---- the file object ------------------------------------------------------------------- */

struct gk_st_file {
    char *path;
    const uint8_t *map; /* whole file, read-only */
    size_t map_len;
    void *copy;         /* aligned copies of the tensors, when the file's layout needs them */
    const uint8_t *data;
    uint64_t data_len;
    json_t *header;     /* owns the name and metadata strings */
    gk_st_tensor *tensors; /* by data offset */
    size_t n;
    const gk_st_tensor **by_name; /* sorted by name */
    const char **meta_keys, **meta_vals;
    size_t n_meta;
};

void gk_st_close(gk_st_file *f)
{
    if (!f)
        return;
    if (f->map)
        munmap((void *)f->map, f->map_len);
    free(f->copy);
    json_decref(f->header);
    free(f->tensors);
    free((void *)f->by_name);
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->path);
    free(f);
}

size_t gk_st_count(const gk_st_file *f) { return f->n; }
const char *gk_st_path(const gk_st_file *f) { return f->path; }
size_t gk_st_meta_count(const gk_st_file *f) { return f->n_meta; }

const gk_st_tensor *gk_st_at(const gk_st_file *f, size_t i)
{
    return i < f->n ? &f->tensors[i] : NULL;
}

void gk_st_meta_at(const gk_st_file *f, size_t i, const char **key, const char **value)
{
    *key = i < f->n_meta ? f->meta_keys[i] : NULL;
    *value = i < f->n_meta ? f->meta_vals[i] : NULL;
}

const char *gk_st_meta(const gk_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0)
            return f->meta_vals[i];
    return NULL;
}

const gk_st_tensor *gk_st_find(const gk_st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const gk_st_tensor *t = f->by_name[mid];
        int c = strcmp(t->name, name);
        if (c == 0)
            return t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- header validation ----------------------------------------------------------------- */

static int bad(gk_st_file *f, gk_err *err, const char *what, const char *name, const char *problem)
{
    if (name)
        return gk_errf(err, GK_EFORMAT, "%s: %s '%.200s': %s", f->path, what, name, problem);
    return gk_errf(err, GK_EFORMAT, "%s: %s", f->path, problem);
}

static void format_shape(const gk_st_tensor *t, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

static int parse_shape(gk_st_file *f, gk_st_tensor *t, json_t *shape, gk_err *err)
{
    if (!json_is_array(shape))
        return bad(f, err, "tensor", t->name, "missing or non-array 'shape'");
    if (json_array_size(shape) > GK_ST_MAX_DIMS)
        return bad(f, err, "tensor", t->name, "more than 8 dimensions");
    t->ndim = (int)json_array_size(shape);
    t->numel = 1;
    int64_t limit = INT64_MAX / (int64_t)gk_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return bad(f, err, "tensor", t->name, "shape holds a value that is not a size");
        t->shape[d] = json_integer_value(v);
        if (t->shape[d] && t->numel > limit / t->shape[d])
            return bad(f, err, "tensor", t->name, "shape too large");
        t->numel *= t->shape[d];
    }
    return 0;
}

static int parse_offsets(gk_st_file *f, gk_st_tensor *t, json_t *offs, gk_err *err)
{
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(b)
        || !json_is_integer(e) || json_integer_value(b) < 0
        || json_integer_value(e) < json_integer_value(b))
        return bad(f, err, "tensor", t->name,
                   "'data_offsets' is not [begin, end] with begin <= end");
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
    char msg[300], shape[200];
    if (end > f->data_len) {
        snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] exceed data size %llu",
                 (unsigned long long)begin, (unsigned long long)end,
                 (unsigned long long)f->data_len);
        return bad(f, err, "tensor", t->name, msg);
    }
    uint64_t want = (uint64_t)t->numel * gk_dtype_size(t->dtype);
    if (end - begin != want) {
        format_shape(t, shape, sizeof shape);
        snprintf(msg, sizeof msg,
                 "shape %s of %s needs %llu bytes but data_offsets [%llu, %llu] hold %llu", shape,
                 gk_dtype_name(t->dtype), (unsigned long long)want, (unsigned long long)begin,
                 (unsigned long long)end, (unsigned long long)(end - begin));
        return bad(f, err, "tensor", t->name, msg);
    }
    t->offset = begin;
    t->nbytes = (size_t)want;
    return 0;
}

static int parse_tensor(gk_st_file *f, gk_st_tensor *t, const char *name, json_t *v, gk_err *err)
{
    t->name = name;
    if (!*name)
        return bad(f, err, "tensor", name, "empty tensor name");
    if (!json_is_object(v))
        return bad(f, err, "tensor", name, "entry is not a JSON object");
    json_t *dt = json_object_get(v, "dtype");
    if (!json_is_string(dt))
        return bad(f, err, "tensor", name, "missing or non-string 'dtype'");
    if (gk_dtype_parse(json_string_value(dt), &t->dtype) != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "unknown dtype '%.100s'", json_string_value(dt));
        return bad(f, err, "tensor", name, msg);
    }
    int rc = parse_shape(f, t, json_object_get(v, "shape"), err);
    return rc ? rc : parse_offsets(f, t, json_object_get(v, "data_offsets"), err);
}

static int parse_metadata(gk_st_file *f, json_t *m, gk_err *err)
{
    if (!json_is_object(m))
        return bad(f, err, NULL, NULL, "__metadata__ is not a JSON object");
    size_t n = json_object_size(m);
    f->meta_keys = calloc(n + 1, sizeof *f->meta_keys);
    f->meta_vals = calloc(n + 1, sizeof *f->meta_vals);
    if (!f->meta_keys || !f->meta_vals)
        return gk_errf(err, GK_ENOMEM, "%s: out of memory", f->path);
    const char *key;
    json_t *v;
    json_object_foreach (m, key, v) {
        if (!json_is_string(v))
            return bad(f, err, "__metadata__ value", key, "not a string");
        f->meta_keys[f->n_meta] = key;
        f->meta_vals[f->n_meta++] = json_string_value(v);
    }
    return 0;
}

static int by_offset(const void *a, const void *b)
{
    const gk_st_tensor *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Tensors must tile the data section: no overlap, no gap, nothing left over. */
static int check_layout(gk_st_file *f, gk_err *err)
{
    qsort(f->tensors, f->n, sizeof *f->tensors, by_offset);
    uint64_t at = 0;
    char msg[400];
    for (size_t i = 0; i < f->n; i++) {
        const gk_st_tensor *t = &f->tensors[i];
        if (t->offset < at) {
            snprintf(msg, sizeof msg, "tensors '%.150s' and '%.150s' overlap",
                     f->tensors[i - 1].name, t->name);
            return bad(f, err, NULL, NULL, msg);
        }
        if (t->offset > at) {
            snprintf(msg, sizeof msg, "bytes [%llu, %llu) of the data section belong to no tensor",
                     (unsigned long long)at, (unsigned long long)t->offset);
            return bad(f, err, NULL, NULL, msg);
        }
        at = t->offset + t->nbytes;
    }
    if (at != f->data_len) {
        snprintf(msg, sizeof msg, "data section has %llu bytes but tensors cover %llu",
                 (unsigned long long)f->data_len, (unsigned long long)at);
        return bad(f, err, NULL, NULL, msg);
    }
    return 0;
}

static int parse_header(gk_st_file *f, const uint8_t *hdr, size_t len, gk_err *err)
{
    json_error_t je;
    char msg[300];
    if (len == 0 || hdr[0] != '{')
        return bad(f, err, NULL, NULL, "not a safetensors file (header does not start with '{')");
    f->header = json_loadb((const char *)hdr, len, JSON_REJECT_DUPLICATES, &je);
    if (!f->header) {
        snprintf(msg, sizeof msg, "not a safetensors file (bad JSON header at byte %d: %s)",
                 8 + je.position, je.text);
        return bad(f, err, NULL, NULL, msg);
    }
    size_t n = json_object_size(f->header);
    f->tensors = calloc(n + 1, sizeof *f->tensors);
    f->by_name = calloc(n + 1, sizeof *f->by_name);
    if (!f->tensors || !f->by_name)
        return gk_errf(err, GK_ENOMEM, "%s: out of memory", f->path);
    const char *key;
    json_t *v;
    json_object_foreach (f->header, key, v) {
        int rc = strcmp(key, "__metadata__") == 0
                     ? parse_metadata(f, v, err)
                     : parse_tensor(f, &f->tensors[f->n++], key, v, err);
        if (rc != 0)
            return rc;
    }
    return check_layout(f, err);
}

/* ---- open ------------------------------------------------------------------------------ */

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const gk_st_tensor *const *)a)->name, (*(const gk_st_tensor *const *)b)->name);
}

/* Points every tensor at its bytes. A foreign file may misalign some (its data section at an
 * odd file offset, or a tensor at an offset that is no multiple of its element size after
 * smaller ones): then every tensor is copied into its own 64-byte aligned slot of one buffer
 * (copying the data section whole would keep a tensor's own misalignment). */
static int place_data(gk_st_file *f, gk_err *err)
{
    int aligned = 1;
    uint64_t need = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (f->tensors[i].nbytes
            && (uintptr_t)(f->data + f->tensors[i].offset) % gk_dtype_size(f->tensors[i].dtype))
            aligned = 0;
        need += (f->tensors[i].nbytes + 63) / 64 * 64;
    }
    uint8_t *slot = NULL;
    if (!aligned) {
        f->copy = slot = aligned_alloc(64, need ? need : 64);
        if (!slot)
            return gk_errf(err, GK_ENOMEM, "%s: out of memory (%llu bytes)", f->path,
                           (unsigned long long)need);
    }
    for (size_t i = 0; i < f->n; i++) {
        gk_st_tensor *t = &f->tensors[i];
        t->data = f->data + t->offset;
        if (slot) {
            memcpy(slot, t->data, t->nbytes);
            t->data = slot;
            slot += (t->nbytes + 63) / 64 * 64;
        }
        f->by_name[i] = t;
    }
    qsort((void *)f->by_name, f->n, sizeof *f->by_name, by_name);
    return 0;
}

/* The files of gptkit's and llm.c's other formats, told by their first int32 when their first 8
 * bytes make no safetensors header length: what the file is and what reads it. 0 when unknown. */
static int other_format(gk_st_file *f, const uint8_t *head, gk_err *err)
{
    enum { LLMC_MODEL = 20240326, LLMC_STATE = 20240527 }; /* llm.c's train_gpt2.cu */
    char msg[300];
    uint32_t magic = gk_le32(head);
    if (magic == GK_SHARD_MAGIC)
        return bad(f, err, NULL, NULL, "a token shard, not a checkpoint (gpt-tokenize -d decodes "
                   "it; gpt-evalppl scores a checkpoint on it; gpt-train trains on it)");
    if (magic == LLMC_MODEL) {
        snprintf(msg, sizeof msg, "an llm.c checkpoint, not a safetensors one: convert it with "
                 "gpt-ckpt import %.200s", f->path);
        return bad(f, err, NULL, NULL, msg);
    }
    if (magic == LLMC_STATE)
        return bad(f, err, NULL, NULL, "llm.c's training state (optimizer moments), not a model: "
                   "gpt-ckpt import reads llm.c's model file (model_NNNNNNNN.bin, gpt2_124M.bin)");
    return 0;
}

/* Checks the header length against the file and maps the file. */
static int map_file(gk_st_file *f, int fd, uint64_t *hlen, gk_err *err)
{
    struct stat st;
    uint8_t lenbuf[8];
    char msg[200];
    if (fstat(fd, &st) != 0)
        return gk_errno(err, f->path);
    if (!S_ISREG(st.st_mode))
        return bad(f, err, NULL, NULL, "not a regular file");
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) {
        snprintf(msg, sizeof msg, "truncated file (%llu bytes; the header length alone takes 8)",
                 (unsigned long long)size);
        return bad(f, err, NULL, NULL, msg);
    }
    if (pread(fd, lenbuf, 8, 0) != 8)
        return gk_errno(err, f->path);
    *hlen = gk_le64(lenbuf);
    if ((*hlen > size - 8 || *hlen > MAX_HEADER) && other_format(f, lenbuf, err))
        return GK_EFORMAT;
    if (*hlen > size - 8) {
        snprintf(msg, sizeof msg,
                 "header length %llu exceeds file size %llu (truncated or not a safetensors file)",
                 (unsigned long long)*hlen, (unsigned long long)size);
        return bad(f, err, NULL, NULL, msg);
    }
    if (*hlen > MAX_HEADER) {
        snprintf(msg, sizeof msg, "header length %llu exceeds the limit of %llu",
                 (unsigned long long)*hlen, MAX_HEADER);
        return bad(f, err, NULL, NULL, msg);
    }
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return gk_errno(err, f->path);
    f->map = m;
    f->map_len = (size_t)size;
    f->data = f->map + 8 + *hlen;
    f->data_len = size - 8 - *hlen;
    return 0;
}

int gk_st_open(gk_st_file **out, const char *path, gk_err *err)
{
    *out = NULL;
    /* (O_NONBLOCK: a FIFO opens at once, to be refused as not a regular file, where it would
     * wait for a writer; reads of a regular file do not change) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return gk_errno(err, path);
    int rc = gk_st_open_fd(out, fd, path, err);
    close(fd);
    return rc;
}

int gk_st_open_fd(gk_st_file **out, int fd, const char *name, gk_err *err)
{
    *out = NULL;
    gk_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name))) {
        free(f);
        return gk_errf(err, GK_ENOMEM, "%s: out of memory", name);
    }
    uint64_t hlen = 0;
    int rc = map_file(f, fd, &hlen, err);
    if (rc == 0)
        rc = parse_header(f, f->map + 8, (size_t)hlen, err);
    if (rc == 0)
        rc = place_data(f, err);
    if (rc != 0) {
        gk_st_close(f);
        return rc;
    }
    *out = f;
    return 0;
}
