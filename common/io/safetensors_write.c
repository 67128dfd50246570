/* safetensors_write.c: the safetensors writer (see safetensors.h for the format), with the
 * per-tensor checksums in __metadata__ (GK_ST_CHECKSUMS_KEY). The header comes first in the file
 * but holds the checksums of the data after it: into a seekable output the data is written once,
 * checksummed on the way, and the header (of the same length: checksums are fixed-width) written
 * again at the end; into a pipe the checksums are computed in a pass before writing. */
#include "common/io/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/le.h"
#include "common/io/outfile.h"

#define MAX_HEADER 100000000ULL /* what readers (ours and the reference library) accept */
#define FILL_CHUNK (1u << 20)

typedef struct st_entry {
    char *name;
    enum gk_dtype dtype;
    int ndim;
    int64_t shape[GK_ST_MAX_DIMS];
    uint64_t nbytes;
    const void *data;   /* either data ... */
    gk_st_fill_fn fill; /* ... or fill(ctx) */
    void *ctx;
    size_t seq;         /* order added */
    uint32_t crc;       /* of the data, once computed (0 before) */
} st_entry;

struct gk_st_writer {
    st_entry *e;
    size_t n, cap;
    json_t *meta; /* __metadata__ object */
};

int gk_st_writer_create(gk_st_writer **out, gk_err *err)
{
    *out = calloc(1, sizeof **out);
    if (*out && !((*out)->meta = json_object())) {
        free(*out);
        *out = NULL;
    }
    return *out ? 0 : gk_errf(err, GK_ENOMEM, "safetensors writer: out of memory");
}

void gk_st_writer_free(gk_st_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].name);
    free(w->e);
    json_decref(w->meta);
    free(w);
}

static int add_entry(gk_st_writer *w, const char *name, enum gk_dtype dt, int ndim,
                     const int64_t *shape, st_entry **out, gk_err *err)
{
    if (!name || !*name || strcmp(name, "__metadata__") == 0)
        return gk_errf(err, GK_EUSAGE, "safetensors writer: bad tensor name '%s'",
                       name ? name : "");
    if (!gk_dtype_name(dt) || ndim < 0 || ndim > GK_ST_MAX_DIMS)
        return gk_errf(err, GK_EUSAGE, "safetensors writer: tensor '%s': bad dtype or ndim", name);
    uint64_t numel = 1, size = gk_dtype_size(dt);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] && numel > (uint64_t)INT64_MAX / size / (uint64_t)shape[d]))
            return gk_errf(err, GK_EUSAGE, "safetensors writer: tensor '%s': bad shape", name);
        numel *= (uint64_t)shape[d];
    }
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->e[i].name, name) == 0)
            return gk_errf(err, GK_EUSAGE, "safetensors writer: tensor '%s' added twice", name);
    if (gk_grow(&w->e, &w->cap, w->n + 1, sizeof *w->e, 64))
        return gk_errf(err, GK_ENOMEM, "safetensors writer: out of memory");
    st_entry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = strdup(name)))
        return gk_errf(err, GK_ENOMEM, "safetensors writer: out of memory");
    e->dtype = dt;
    e->ndim = ndim;
    if (ndim)
        memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    e->nbytes = numel * size;
    e->seq = w->n++;
    *out = e;
    return 0;
}

int gk_st_writer_add(gk_st_writer *w, const char *name, enum gk_dtype dt, int ndim,
                     const int64_t *shape, const void *data, gk_err *err)
{
    st_entry *e;
    int rc = add_entry(w, name, dt, ndim, shape, &e, err);
    if (rc == 0)
        e->data = data;
    return rc;
}

int gk_st_writer_add_fill(gk_st_writer *w, const char *name, enum gk_dtype dt, int ndim,
                          const int64_t *shape, gk_st_fill_fn fill, void *ctx, gk_err *err)
{
    st_entry *e;
    int rc = add_entry(w, name, dt, ndim, shape, &e, err);
    if (rc == 0) {
        e->fill = fill;
        e->ctx = ctx;
    }
    return rc;
}

int gk_st_writer_meta(gk_st_writer *w, const char *key, const char *value, gk_err *err)
{
    json_t *v = json_string(value);
    if (!v || json_object_set_new(w->meta, key, v) != 0)
        return gk_errf(err, GK_EUSAGE, "safetensors writer: metadata '%.100s': not valid UTF-8",
                       key);
    return 0;
}

/* ---- writing --------------------------------------------------------------------------- */

/* Larger elements first, then in the order added: keeps every tensor aligned. */
static int write_order(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    size_t sx = gk_dtype_size(x->dtype), sy = gk_dtype_size(y->dtype);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static json_t *tensor_json(const st_entry *e, uint64_t begin)
{
    json_t *shape = json_array();
    for (int d = 0; shape && d < e->ndim; d++)
        json_array_append_new(shape, json_integer(e->shape[d]));
    return json_pack("{s:s, s:o, s:[I,I]}", "dtype", gk_dtype_name(e->dtype), "shape", shape,
                     "data_offsets", (json_int_t)begin, (json_int_t)(begin + e->nbytes));
}

/* Sets the checksums metadata from the entries' crc fields (fixed width: 8 hex digits each). */
static int set_checksums(gk_st_writer *w, st_entry **order, gk_err *err)
{
    if (w->n == 0) /* nothing to check: the empty file stays "{}" */
        return 0;
    json_t *sums = json_object();
    char hex[9];
    for (size_t i = 0; sums && i < w->n; i++) {
        snprintf(hex, sizeof hex, "%08x", (unsigned)order[i]->crc);
        if (json_object_set_new(sums, order[i]->name, json_string(hex)) != 0) {
            json_decref(sums);
            return gk_errf(err, GK_EUSAGE, "safetensors writer: tensor '%.100s': cannot encode "
                           "(name not UTF-8?)", order[i]->name);
        }
    }
    char *text = sums ? json_dumps(sums, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(sums);
    int rc = text ? gk_st_writer_meta(w, GK_ST_CHECKSUMS_KEY, text, err)
                  : gk_errf(err, GK_ENOMEM, "safetensors writer: out of memory");
    free(text);
    return rc;
}

/* The padded header text into *out (malloc'd; *len is a multiple of 8), tensors in order. */
static int build_header(gk_st_writer *w, st_entry **order, char **out, size_t *len, gk_err *err)
{
    *out = NULL;
    int rc = set_checksums(w, order, err);
    if (rc)
        return rc;
    json_t *h = json_object();
    if (h && json_object_size(w->meta))
        json_object_set(h, "__metadata__", w->meta);
    uint64_t at = 0;
    for (size_t i = 0; h && i < w->n; i++) {
        json_t *t = tensor_json(order[i], at);
        if (!t || json_object_set_new(h, order[i]->name, t) != 0) {
            json_decref(h);
            return gk_errf(err, GK_EUSAGE, "safetensors writer: tensor '%.100s': cannot encode "
                           "(name not UTF-8?)", order[i]->name);
        }
        at += order[i]->nbytes;
    }
    char *s = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(h);
    size_t n = s ? strlen(s) : 0, padded = (n + 7) / 8 * 8;
    char *p = s ? realloc(s, padded + 1) : NULL;
    if (!p) {
        free(s);
        return gk_errf(err, GK_ENOMEM, "safetensors writer: out of memory");
    }
    memset(p + n, ' ', padded - n);
    p[padded] = '\0';
    *len = padded;
    *out = p;
    return 0;
}

/* Writes e's data to o (o == NULL: only checksums it), setting e->crc. */
static int write_tensor(gk_outfile *o, st_entry *e, char *buf, gk_err *err)
{
    if (!e->fill) {
        e->crc = gk_crc32(0, e->data, (size_t)e->nbytes);
        return o ? gk_outfile_write(o, e->data, (size_t)e->nbytes, err) : 0;
    }
    e->crc = 0;
    for (uint64_t off = 0; off < e->nbytes; off += FILL_CHUNK) {
        size_t n = e->nbytes - off < FILL_CHUNK ? (size_t)(e->nbytes - off) : FILL_CHUNK;
        int rc = e->fill(e->ctx, off, buf, n, err);
        e->crc = gk_crc32(e->crc, buf, n);
        if (rc == 0 && o)
            rc = gk_outfile_write(o, buf, n, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Every tensor's data to o in order (o == NULL: only their checksums). */
static int write_data(gk_outfile *o, st_entry **order, size_t n, const char *path, gk_err *err)
{
    char *buf = NULL;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (order[i]->fill && !buf && !(buf = malloc(FILL_CHUNK)))
            rc = gk_errf(err, GK_ENOMEM, "%s: out of memory", path);
        if (rc == 0)
            rc = write_tensor(o, order[i], buf, err);
    }
    free(buf);
    return rc;
}

/* The length and the header at the start of o (in_place: over the ones written before). */
static int write_header(gk_outfile *o, const char *hdr, size_t hlen, int in_place, gk_err *err)
{
    uint8_t lenbuf[8];
    gk_put_le64(lenbuf, (uint64_t)hlen);
    if (in_place)
        return gk_outfile_pwrite(o, hdr, hlen, 8, err);
    int rc = gk_outfile_write(o, lenbuf, 8, err);
    return rc ? rc : gk_outfile_write(o, hdr, hlen, err);
}

/* Header, data, and (seekable output) the header again with the checksums the data pass found;
 * a pipe gets a checksum pass first. */
static int write_all(gk_st_writer *w, gk_outfile *o, st_entry **order, char **hdr, size_t hlen,
                     const char *path, gk_err *err)
{
    size_t again = 0;
    int rc = 0;
    if (!o->seekable && (rc = write_data(NULL, order, w->n, path, err)) == 0) {
        free(*hdr);
        rc = build_header(w, order, hdr, &again, err);
    }
    if (rc == 0)
        rc = write_header(o, *hdr, hlen, 0, err);
    if (rc == 0)
        rc = write_data(o, order, w->n, path, err);
    if (rc == 0 && o->seekable) {
        free(*hdr);
        rc = build_header(w, order, hdr, &again, err);
        if (rc == 0 && again != hlen) /* cannot happen: every checksum is 8 digits */
            rc = gk_errf(err, GK_EIO, "%s: header changed length", path);
        if (rc == 0)
            rc = write_header(o, *hdr, hlen, 1, err);
    }
    return rc;
}

int gk_st_writer_write(gk_st_writer *w, const char *path, gk_err *err)
{
    st_entry **order = malloc((w->n + 1) * sizeof *order);
    if (!order)
        return gk_errf(err, GK_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < w->n; i++)
        order[i] = &w->e[i];
    qsort(order, w->n, sizeof *order, write_order);
    size_t hlen = 0;
    char *hdr;
    int rc = build_header(w, order, &hdr, &hlen, err);
    if (rc == 0 && hlen > MAX_HEADER)
        rc = gk_errf(err, GK_EFORMAT, "%s: header of %zu bytes exceeds the safetensors limit", path,
                     hlen);
    gk_outfile o;
    if (rc == 0 && (rc = gk_outfile_open(&o, path, err)) == 0) {
        rc = write_all(w, &o, order, &hdr, hlen, path, err);
        if (rc == 0)
            rc = gk_outfile_commit(&o, err);
        else
            gk_outfile_abort(&o);
    }
    free(hdr);
    free(order);
    return rc;
}
