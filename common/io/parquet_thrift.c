/* parquet_thrift.c: the Parquet footer (FileMetaData) and page headers, decoded from the Thrift
 * compact protocol (see parquet_int.h). Only the fields a string column needs are kept; every
 * other field is skipped by its type. Every varint, length and element count is checked against
 * the bytes left, nesting is bounded, so a damaged footer is an error, never a long loop. */
#include <stdlib.h>
#include <string.h>

#include "common/io/parquet_int.h"

/* Compact protocol types. */
enum { T_STOP, T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY, T_LIST, T_SET,
       T_MAP, T_STRUCT };
#define MAX_DEPTH 32

typedef struct tbuf {
    const uint8_t *start, *p, *end;
    int depth;
    const char *bad; /* the first problem, or NULL */
} tbuf;

static int fail(tbuf *b, const char *what)
{
    if (!b->bad) b->bad = what;
    b->p = b->end;
    return -1;
}

static int varint(tbuf *b, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return fail(b, "a number runs past the end");
        uint8_t c = *b->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return fail(b, "a number of over 64 bits");
}

static int zigzag(tbuf *b, int64_t *out)
{
    uint64_t v;
    if (varint(b, &v)) return -1;
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 0;
}

/* The next field of a struct: *type (T_STOP at its end) and *id. */
static int field(tbuf *b, int16_t *id, int *type)
{
    if (b->p >= b->end) return fail(b, "a struct runs past the end");
    uint8_t c = *b->p++;
    *type = c & 0x0f;
    if (*type == T_STOP) return 0;
    if (c >> 4) {
        *id = (int16_t)(*id + (c >> 4));
    } else {
        int64_t v;
        if (zigzag(b, &v)) return -1;
        if (v < -32768 || v > 32767) return fail(b, "a field id out of range");
        *id = (int16_t)v;
    }
    if (*type > T_STRUCT) return fail(b, "an unknown field type");
    return 0;
}

/* A list or set header: element type and count (each element takes a byte at least). */
static int list_begin(tbuf *b, int *etype, int64_t *count)
{
    if (b->p >= b->end) return fail(b, "a list runs past the end");
    uint8_t c = *b->p++;
    *etype = c & 0x0f;
    *count = c >> 4;
    if (*count == 15) {
        uint64_t n;
        if (varint(b, &n)) return -1;
        if (n > (uint64_t)(b->end - b->p)) return fail(b, "a list longer than the bytes left");
        *count = (int64_t)n;
    }
    if (*count > b->end - b->p) return fail(b, "a list longer than the bytes left");
    if (*etype == T_STOP || *etype > T_STRUCT) return fail(b, "a list of an unknown type");
    return 0;
}

static int binary(tbuf *b, const uint8_t **s, size_t *n)
{
    uint64_t len;
    if (varint(b, &len)) return -1;
    if (len > (uint64_t)(b->end - b->p)) return fail(b, "a string runs past the end");
    *s = b->p;
    *n = (size_t)len;
    b->p += len;
    return 0;
}

static int skip(tbuf *b, int type);

static int skip_struct(tbuf *b)
{
    if (++b->depth > MAX_DEPTH) return fail(b, "structs nested too deep");
    int16_t id = 0;
    int type;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        if (skip(b, type)) return -1;
    }
    b->depth--;
    return 0;
}

static int skip(tbuf *b, int type)
{
    int64_t v, n;
    const uint8_t *s;
    size_t len;
    int et, kt;
    switch (type) {
    case T_TRUE: case T_FALSE: return 0;
    case T_BYTE:
        if (b->p >= b->end) return fail(b, "a byte runs past the end");
        b->p++;
        return 0;
    case T_I16: case T_I32: case T_I64: return zigzag(b, &v);
    case T_DOUBLE:
        if (b->end - b->p < 8) return fail(b, "a double runs past the end");
        b->p += 8;
        return 0;
    case T_BINARY: return binary(b, &s, &len);
    case T_LIST: case T_SET:
        if (list_begin(b, &et, &n)) return -1;
        if (++b->depth > MAX_DEPTH) return fail(b, "lists nested too deep");
        for (int64_t i = 0; i < n; i++)
            if (skip(b, et == T_TRUE || et == T_FALSE ? T_BYTE : et)) return -1;
        b->depth--;
        return 0;
    case T_MAP: {
        uint64_t count;
        if (varint(b, &count)) return -1;
        if (count == 0) return 0;
        if (count > (uint64_t)(b->end - b->p) / 2 || b->p >= b->end)
            return fail(b, "a map longer than the bytes left");
        kt = *b->p >> 4, et = *b->p & 0x0f;
        b->p++;
        if (++b->depth > MAX_DEPTH) return fail(b, "maps nested too deep");
        for (uint64_t i = 0; i < count; i++)
            if (skip(b, kt) || skip(b, et)) return -1;
        b->depth--;
        return 0;
    }
    case T_STRUCT: return skip_struct(b);
    default: return fail(b, "an unknown field type");
    }
}

/* An integer field into *out (within [lo, hi]); another type is an error. */
static int integer(tbuf *b, int type, long long lo, long long hi, long long *out)
{
    int64_t v;
    if (type != T_I32 && type != T_I64 && type != T_I16)
        return fail(b, "a field of the wrong type");
    if (zigzag(b, &v)) return -1;
    if (v < lo || v > hi) return fail(b, "a number out of range");
    *out = v;
    return 0;
}

static int int32f(tbuf *b, int type, int *out)
{
    long long v;
    if (integer(b, type, -2147483647LL - 1, 2147483647LL, &v)) return -1;
    *out = (int)v;
    return 0;
}

/* ---- FileMetaData ---- */

static int schema_element(tbuf *b, pq_schema *s)
{
    int16_t id = 0;
    int type, have_name = 0;
    *s = (pq_schema){.type = -1, .repetition = -1, .converted = -1};
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        const uint8_t *str;
        size_t n;
        switch (id) {
        case 1: if (int32f(b, type, &s->type)) return -1; break;
        case 3: if (int32f(b, type, &s->repetition)) return -1; break;
        case 5: if (int32f(b, type, &s->num_children)) return -1; break;
        case 6: if (int32f(b, type, &s->converted)) return -1; break;
        case 4:
            if (type != T_BINARY) return fail(b, "a field of the wrong type");
            if (binary(b, &str, &n)) return -1;
            free(s->name);
            if (!(s->name = malloc(n + 1))) return fail(b, "out of memory");
            memcpy(s->name, str, n);
            s->name[n] = 0;
            have_name = 1;
            break;
        default: if (skip(b, type)) return -1;
        }
    }
    if (!have_name) return fail(b, "a schema element without a name");
    if (s->num_children < 0) return fail(b, "a negative child count");
    return 0;
}

/* The schema tree, depth first: leaves with their dotted paths and maximum levels. */
static int walk(pq_meta *m, int *i, int depth, int *stack, int def, int rep, gk_err *e)
{
    if (*i >= m->nschema)
        return gk_errf(e, GK_EFORMAT,
                       "footer: the schema has fewer elements than its groups' children");
    if (depth > MAX_DEPTH) return gk_errf(e, GK_EFORMAT, "footer: the schema is nested too deep");
    int self = (*i)++;
    const pq_schema *s = &m->schema[self];
    if (depth > 0) {
        if (s->repetition == PQ_OPTIONAL) def++;
        else if (s->repetition == PQ_REPEATED) def++, rep++;
        else if (s->repetition != PQ_REQUIRED)
            return gk_errf(e, GK_EFORMAT, "footer: schema element '%s' has no repetition", s->name);
        stack[depth - 1] = self;
    }
    if (s->num_children > 0) {
        for (int k = 0; k < s->num_children; k++) {
            int rc = walk(m, i, depth + 1, stack, def, rep, e);
            if (rc) return rc;
        }
        return 0;
    }
    if (depth == 0) return gk_errf(e, GK_EFORMAT, "footer: the schema has no columns");
    if (s->type < 0 || s->type > PQ_FIXED)
        return gk_errf(e, GK_EFORMAT, "footer: column '%s' has no valid type", s->name);
    size_t len = 0;
    for (int d = 0; d < depth; d++) len += strlen(m->schema[stack[d]].name) + 1;
    pq_leaf *l = &m->leaves[m->nleaves++];
    if (!(l->path = malloc(len + 1))) return gk_errf(e, GK_ENOMEM, "out of memory");
    l->path[0] = 0;
    for (int d = 0; d < depth; d++) {
        if (d) strcat(l->path, ".");
        strcat(l->path, m->schema[stack[d]].name);
    }
    l->type = s->type, l->converted = s->converted, l->max_def = def, l->max_rep = rep;
    return 0;
}

static int file_meta(tbuf *b, pq_meta *m)
{
    int16_t id = 0;
    int type, et, have_rows = 0;
    int64_t n;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        if (id == 2 && type == T_LIST) {
            if (list_begin(b, &et, &n)) return -1;
            if (et != T_STRUCT || m->schema) return fail(b, "a bad schema list");
            if (!(m->schema = calloc((size_t)n + 1, sizeof *m->schema)))
                return fail(b, "out of memory");
            for (int64_t i = 0; i < n; i++) {
                m->nschema++; /* counted first: a failed element's name is freed too */
                if (schema_element(b, &m->schema[i])) return -1;
            }
        } else if (id == 3) {
            if (integer(b, type, 0, INT64_MAX, &m->num_rows)) return -1;
            have_rows = 1;
        } else if (id == 4 && type == T_LIST) {
            if (list_begin(b, &et, &n)) return -1;
            if (et != T_STRUCT) return fail(b, "a bad row group list");
            m->rg_at = b->p, m->nrg = (int)n;
            for (int64_t i = 0; i < n; i++)
                if (skip_struct(b)) return -1;
        } else if (skip(b, type)) {
            return -1;
        }
    }
    if (!m->schema || !have_rows || !m->rg_at)
        return fail(b, "the schema, row count or row groups missing");
    return 0;
}

int pq_read_meta(const uint8_t *buf, size_t n, pq_meta *m, gk_err *e)
{
    *m = (pq_meta){0};
    tbuf b = {buf, buf, buf + n, 0, NULL};
    if (file_meta(&b, m))
        return gk_errf(e, GK_EFORMAT, "footer: damaged FileMetaData (%s, near byte %td of %zu)",
                       b.bad, b.p - buf, n);
    m->end = buf + n;
    if (m->nschema < 1) return gk_errf(e, GK_EFORMAT, "footer: the schema is empty");
    if (!(m->leaves = calloc((size_t)m->nschema, sizeof *m->leaves)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int i = 0, stack[MAX_DEPTH + 1];
    int rc = walk(m, &i, 0, stack, 0, 0, e);
    if (rc) return rc;
    if (i != m->nschema)
        return gk_errf(e, GK_EFORMAT, "footer: the schema has %d elements, its tree %d", m->nschema,
                       i);
    return 0;
}

void pq_meta_free(pq_meta *m)
{
    for (int i = 0; m->schema && i < m->nschema; i++) free(m->schema[i].name);
    for (int i = 0; m->leaves && i < m->nleaves; i++) free(m->leaves[i].path);
    free(m->schema);
    free(m->leaves);
    *m = (pq_meta){0};
}

/* ---- row groups: only the chosen column's chunk is decoded ---- */

static int column_meta(tbuf *b, pq_chunk *c)
{
    int16_t id = 0;
    int type;
    unsigned have = 0;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        long long big = INT64_MAX;
        int rc = 0;
        switch (id) {
        case 1: rc = int32f(b, type, &c->type); break;
        case 4: rc = int32f(b, type, &c->codec); break;
        case 5: rc = integer(b, type, 0, big, &c->num_values); break;
        case 7: rc = integer(b, type, 0, big, &c->compressed_size); break;
        case 9: rc = integer(b, type, 0, big, &c->data_off); break;
        case 11: rc = integer(b, type, 0, big, &c->dict_off); break;
        default: rc = skip(b, type);
        }
        if (rc) return -1;
        if (id == 1 || id == 4 || id == 5 || id == 7 || id == 9) have |= 1u << id;
    }
    unsigned need = 1u << 1 | 1u << 4 | 1u << 5 | 1u << 7 | 1u << 9;
    if ((have & need) != need)
        return fail(b, "a column chunk without its type, codec, sizes or offset");
    c->has_meta = 1;
    return 0;
}

static int column_chunk(tbuf *b, pq_chunk *c)
{
    int16_t id = 0;
    int type;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        if (id == 1) c->has_file_path = 1;
        if (id == 3 && type == T_STRUCT) {
            if (++b->depth > MAX_DEPTH || column_meta(b, c)) return fail(b, "too deep");
            b->depth--;
        } else if (skip(b, type)) {
            return -1;
        }
    }
    return 0;
}

static int row_group(tbuf *b, int leaf, int nleaves, pq_chunk *c)
{
    int16_t id = 0;
    int type, et, have_cols = 0, have_rows = 0;
    int64_t n;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        if (id == 1 && type == T_LIST) {
            if (list_begin(b, &et, &n)) return -1;
            if (et != T_STRUCT || n != nleaves)
                return fail(b, "a row group whose column count is not the schema's");
            for (int64_t i = 0; i < n; i++)
                if (i == leaf ? column_chunk(b, c) : skip_struct(b)) return -1;
            have_cols = 1;
        } else if (id == 3) {
            if (integer(b, type, 0, INT64_MAX, &c->num_rows)) return -1;
            have_rows = 1;
        } else if (skip(b, type)) {
            return -1;
        }
    }
    if (!have_cols || !have_rows) return fail(b, "a row group without its columns or row count");
    if (!c->has_meta) return fail(b, "a column chunk without its metadata");
    return 0;
}

int pq_read_row_groups(const pq_meta *m, int leaf, pq_chunk *chunks, gk_err *e)
{
    tbuf b = {m->rg_at, m->rg_at, m->end, 0, NULL};
    for (int i = 0; i < m->nrg; i++) {
        chunks[i] = (pq_chunk){.dict_off = -1};
        if (row_group(&b, leaf, m->nleaves, &chunks[i]))
            return gk_errf(e, GK_EFORMAT, "footer: row group %d of %d: damaged (%s)", i + 1, m->nrg,
                           b.bad);
    }
    return 0;
}

/* ---- page headers ---- */

static int data_header(tbuf *b, pq_page_header *h, int v2)
{
    int16_t id = 0;
    int type, rc;
    unsigned have = 0;
    long long big = 2147483647LL, n;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        rc = 0;
        int known = 1;
        if (id == 1) rc = integer(b, type, 0, big, &h->num_values);
        else if (id == (v2 ? 4 : 2)) rc = int32f(b, type, &h->encoding);
        else if (!v2 && id == 3) rc = int32f(b, type, &h->def_encoding);
        else if (!v2 && id == 4) rc = int32f(b, type, &h->rep_encoding);
        else if (v2 && id == 5) rc = integer(b, type, 0, big, &h->def_len);
        else if (v2 && id == 6) rc = integer(b, type, 0, big, &h->rep_len);
        else if (v2 && id == 7 && (type == T_TRUE || type == T_FALSE))
            h->is_compressed = type == T_TRUE;
        else if (v2 && (id == 2 || id == 3)) rc = integer(b, type, 0, big, &n);
        else rc = skip(b, type), known = 0;
        if (rc) return -1;
        if (known && id > 0 && id < 8) have |= 1u << id;
    }
    unsigned need = v2 ? (1u << 1 | 1u << 4 | 1u << 5 | 1u << 6) : (1u << 1 | 1u << 2);
    if ((have & need) != need) return fail(b, "a data page header without its counts or encodings");
    return 0;
}

static int dict_header(tbuf *b, pq_page_header *h)
{
    int16_t id = 0;
    int type, rc;
    unsigned have = 0;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        if (id == 1) rc = integer(b, type, 0, 2147483647LL, &h->num_values), have |= 1;
        else if (id == 2) rc = int32f(b, type, &h->encoding), have |= 2;
        else rc = skip(b, type);
        if (rc) return -1;
    }
    if (have != 3) return fail(b, "a dictionary page header without its count or encoding");
    return 0;
}

static int page_header(tbuf *b, pq_page_header *h)
{
    int16_t id = 0;
    int type, rc;
    unsigned have = 0;
    long long big = 2147483647LL, crc = 0;
    for (;;) {
        if (field(b, &id, &type)) return -1;
        if (type == T_STOP) break;
        int sub = type == T_STRUCT && (id == 5 || id == 7 || id == 8);
        if (sub && ++b->depth > MAX_DEPTH) return fail(b, "too deep");
        if (id == 1) rc = int32f(b, type, &h->type), have |= 1;
        else if (id == 2) rc = integer(b, type, 0, big, &h->uncompressed), have |= 2;
        else if (id == 3) rc = integer(b, type, 0, big, &h->compressed), have |= 4;
        else if (id == 4 && type == T_I32)
            rc = integer(b, type, INT32_MIN, INT32_MAX, &crc), h->have_crc = 1;
        else if (sub && id == 5) rc = data_header(b, h, 0), h->have_data = 1;
        else if (sub && id == 7) rc = dict_header(b, h), h->have_dict = 1;
        else if (sub && id == 8) rc = data_header(b, h, 1), h->have_v2 = 1;
        else rc = skip(b, type);
        if (rc) return -1;
        if (sub) b->depth--;
    }
    if (have != 7) return fail(b, "a page header without its type or sizes");
    h->crc = (uint32_t)crc;
    return 0;
}

int pq_read_page_header(const uint8_t *p, size_t n, pq_page_header *h, size_t *used, gk_err *e)
{
    *h = (pq_page_header){.encoding = -1,
                          .def_encoding = PQ_RLE,
                          .rep_encoding = PQ_RLE,
                          .is_compressed = 1};
    tbuf b = {p, p, p + n, 0, NULL};
    if (page_header(&b, h))
        return gk_errf(e, GK_EFORMAT, "damaged page header (%s)", b.bad);
    *used = (size_t)(b.p - p);
    return 0;
}

/* ---- names for messages ---- */

const char *pq_type_name(int type)
{
    static const char *names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE",
                                  "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return type >= 0 && type <= PQ_FIXED ? names[type] : "an unknown type";
}

const char *pq_codec_name(int codec)
{
    static const char *names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD",
                                  "LZ4_RAW"};
    return codec >= 0 && codec <= PQ_LZ4_RAW ? names[codec] : "an unknown codec";
}

const char *pq_encoding_name(int encoding)
{
    static const char *names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                  "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY",
                                  "DELTA_BYTE_ARRAY", "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return encoding >= 0 && encoding <= 9 ? names[encoding] : "an unknown encoding";
}
