/* vocab.c: gk_vocab core: tables, accessors, fingerprint, char vocabs, loading (from a path or
 * from memory) and lookup of where to load. The BPE formats are in vocab_bpe.c. */
#include "common/text/vocab.h"

#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/text/utf8.h"
#include "common/text/vocab_int.h"

#ifndef GPTKIT_DATADIR
#define GPTKIT_DATADIR "/usr/local/share/gptkit"
#endif

/* ---------------------------------------------------------------- small helpers */

uint64_t gk_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    while (n >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    return h ^ h >> 31;
}

int gk_ids_reserve(uint32_t **ids, size_t *cap, size_t need)
{
    if (need <= *cap && *ids) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    uint32_t *p = realloc(*ids, c * sizeof *p);
    if (!p) return GK_ENOMEM;
    *ids = p;
    *cap = c;
    return 0;
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n) c *= 2;
    return c;
}

gk_vocab *gk_vocab_alloc(int type)
{
    gk_vocab *v = calloc(1, sizeof *v);
    if (v) {
        v->type = type;
        v->eot = -1;
    }
    return v;
}

void gk_vocab_free(gk_vocab *v)
{
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->merges);
    free(v->tok_tab);
    free(v->pair_tab);
    free(v->byte_pair);
    free(v->cps);
    free(v);
}

/* ---------------------------------------------------------------- builder */

int gk_vbuild_init(gk_vbuild *b, uint32_t n)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->soff = malloc((n ? n : 1) * sizeof *b->soff);
    b->slen = malloc((n ? n : 1) * sizeof *b->slen);
    if (!b->soff || !b->slen) return GK_ENOMEM;
    for (uint32_t i = 0; i < n; i++) b->slen[i] = GK_NONE;
    return 0;
}

int gk_vbuild_put(gk_vbuild *b, uint32_t id, const void *bytes, size_t len)
{
    if (id >= b->n || b->slen[id] != GK_NONE) return GK_EFORMAT;
    if (b->alen + len > b->acap) {
        size_t c = b->acap ? b->acap * 2 : 4096;
        while (c < b->alen + len) c *= 2;
        unsigned char *p = realloc(b->arena, c);
        if (!p) return GK_ENOMEM;
        b->arena = p;
        b->acap = c;
    }
    memcpy(b->arena + b->alen, bytes, len);
    b->soff[id] = b->alen;
    b->slen[id] = (uint32_t)len;
    b->alen += len;
    return 0;
}

int gk_vbuild_finish(gk_vbuild *b, gk_vocab *v, uint32_t *gap)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (b->slen[i] == GK_NONE) {
            *gap = i;
            return GK_EFORMAT;
        }
    v->bytes = malloc(b->alen ? b->alen : 1);
    v->off = malloc((b->n + 1) * sizeof *v->off);
    if (!v->bytes || !v->off) return GK_ENOMEM;
    uint32_t o = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        v->off[i] = o;
        memcpy(v->bytes + o, b->arena + b->soff[i], b->slen[i]);
        o += b->slen[i];
    }
    v->off[b->n] = o;
    v->n = b->n;
    return 0;
}

void gk_vbuild_free(gk_vbuild *b)
{
    free(b->arena);
    free(b->soff);
    free(b->slen);
    memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- BPE tables */

uint32_t gk_vocab_lookup(const gk_vocab *v, const void *bytes, size_t len)
{
    return gk_vocab_lookup_h(v, bytes, len, gk_hash_bytes(bytes, len));
}

uint32_t gk_vocab_lookup_h(const gk_vocab *v, const void *bytes, size_t len, uint64_t h)
{
    uint32_t i = (uint32_t)h & v->tok_mask;
    for (;;) {
        uint32_t id = v->tok_tab[i];
        if (id == GK_NONE) return GK_NONE;
        if (v->off[id + 1] - v->off[id] == len && !memcmp(v->bytes + v->off[id], bytes, len))
            return id;
        i = (i + 1) & v->tok_mask;
    }
}

static int build_tok_tab(gk_vocab *v, const char *path, gk_err *e)
{
    v->tok_mask = pow2_at_least((uint64_t)v->n * 2) - 1;
    v->tok_tab = malloc(((size_t)v->tok_mask + 1) * sizeof *v->tok_tab);
    if (!v->tok_tab) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    memset(v->tok_tab, 0xFF, ((size_t)v->tok_mask + 1) * sizeof *v->tok_tab);
    for (uint32_t id = 0; id < v->n; id++) {
        if ((int32_t)id == v->eot) continue;
        const unsigned char *b = v->bytes + v->off[id];
        size_t len = v->off[id + 1] - v->off[id];
        if (len == 0) return gk_errf(e, GK_EFORMAT, "%s: token %u is empty", path, id);
        uint32_t other = gk_vocab_lookup(v, b, len);
        if (other != GK_NONE)
            return gk_errf(e, GK_EFORMAT, "%s: tokens %u and %u have the same bytes", path,
                           other, id);
        uint32_t i = (uint32_t)gk_hash_bytes(b, len) & v->tok_mask;
        while (v->tok_tab[i] != GK_NONE) i = (i + 1) & v->tok_mask;
        v->tok_tab[i] = id;
    }
    for (int c = 0; c < 256; c++) {
        unsigned char byte = (unsigned char)c;
        v->byte_id[c] = gk_vocab_lookup(v, &byte, 1);
        if (v->byte_id[c] == GK_NONE)
            return gk_errf(e, GK_EFORMAT, "%s: no token for the single byte 0x%02X", path, c);
    }
    return 0;
}

/* Calls fn for every split of every token into two tokens; returns the number of splits. */
static size_t each_pair(gk_vocab *v, void (*fn)(gk_vocab *, uint32_t, uint32_t, uint32_t))
{
    size_t count = 0;
    for (uint32_t id = 0; id < v->n; id++) {
        if ((int32_t)id == v->eot) continue;
        const unsigned char *b = v->bytes + v->off[id];
        size_t len = v->off[id + 1] - v->off[id];
        for (size_t k = 1; k < len; k++) {
            uint32_t l = gk_vocab_lookup(v, b, k), r;
            if (l == GK_NONE || (r = gk_vocab_lookup(v, b + k, len - k)) == GK_NONE) continue;
            count++;
            if (fn) fn(v, l, r, id);
        }
    }
    return count;
}

static void pair_insert(gk_vocab *v, uint32_t l, uint32_t r, uint32_t id)
{
    uint32_t i = gk_pair_hash(l, r) & v->pair_mask;
    while (v->pair_tab[i].left != GK_NONE) i = (i + 1) & v->pair_mask;
    v->pair_tab[i] = (gk_pair){l, r, id};
}

static uint32_t fingerprint_bpe(const gk_vocab *v)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint32_t id = 0; id < v->n; id++) {
        uint32_t len = v->off[id + 1] - v->off[id];
        unsigned char hdr[8];
        for (int k = 0; k < 4; k++) {
            hdr[k] = (unsigned char)(id >> 8 * k);
            hdr[4 + k] = (unsigned char)(len >> 8 * k);
        }
        crc = crc32(crc, hdr, 8);
        crc = crc32(crc, v->bytes + v->off[id], len);
    }
    return (uint32_t)crc;
}

int gk_vocab_finish_bpe(gk_vocab *v, const char *path, gk_err *e)
{
    int rc = build_tok_tab(v, path, e);
    if (rc) return rc;
    size_t pairs = each_pair(v, NULL);
    v->pair_mask = pow2_at_least(pairs + pairs / 2 + 1) - 1;
    v->pair_tab = malloc(((size_t)v->pair_mask + 1) * sizeof *v->pair_tab);
    if (!v->pair_tab) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    memset(v->pair_tab, 0xFF, ((size_t)v->pair_mask + 1) * sizeof *v->pair_tab);
    each_pair(v, pair_insert);
    if (!(v->byte_pair = malloc(65536 * sizeof *v->byte_pair)))
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    for (uint32_t k = 0; k < 65536; k++)
        v->byte_pair[k] = gk_vocab_pair(v, v->byte_id[k >> 8], v->byte_id[k & 255]);
    v->fingerprint = fingerprint_bpe(v);
    return 0;
}

/* ---------------------------------------------------------------- char vocabs */

int gk_vocab_finish_chars(gk_vocab *v, const char *path, gk_err *e)
{
    v->bytes = malloc((size_t)v->n * 4 + 1);
    v->off = malloc(((size_t)v->n + 1) * sizeof *v->off);
    if (!v->bytes || !v->off) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int c = 0; c < 128; c++) v->ascii_id[c] = -1;
    uint32_t o = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        uint32_t cp = v->cps[i];
        size_t k = gk_utf8_put(cp, v->bytes + o);
        if (!k) return gk_errf(e, GK_EUSAGE, "%s: U+%04X is not a valid character", path, cp);
        if (i && cp <= v->cps[i - 1])
            return gk_errf(e, GK_EUSAGE, "%s: characters not in strictly ascending order at id %u "
                           "(U+%04X after U+%04X)", path, i, cp, v->cps[i - 1]);
        if (cp < 128) v->ascii_id[cp] = (int32_t)i;
        v->off[i] = o;
        o += (uint32_t)k;
        unsigned char le[4] = {cp & 0xFF, cp >> 8 & 0xFF, cp >> 16 & 0xFF, cp >> 24};
        crc = crc32(crc, le, 4);
    }
    v->off[v->n] = o;
    v->fingerprint = (uint32_t)crc;
    return 0;
}

int gk_vocab_from_chars(gk_vocab **out, const uint32_t *codepoints, size_t n, gk_err *e)
{
    *out = NULL;
    if (n > 0x110000) return gk_errf(e, GK_EUSAGE, "char vocab: %zu characters is too many", n);
    gk_vocab *v = gk_vocab_alloc(GK_VOCAB_CHAR);
    if (!v || !(v->cps = malloc((n ? n : 1) * sizeof *v->cps))) {
        gk_vocab_free(v);
        return gk_errf(e, GK_ENOMEM, "char vocab: out of memory");
    }
    if (n) memcpy(v->cps, codepoints, n * sizeof *v->cps);
    v->n = (uint32_t)n;
    int rc = gk_vocab_finish_chars(v, "char vocab", e);
    if (rc) {
        gk_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

/* The char vocab as a compact JSON array of one-character strings plus a newline. */
static int chars_json(const gk_vocab *v, char **out, size_t *len, gk_err *e)
{
    json_t *arr = json_array();
    char *s = NULL;
    int rc = arr ? 0 : GK_ENOMEM;
    for (uint32_t i = 0; i < v->n && !rc; i++) {
        json_t *c = json_stringn((const char *)v->bytes + v->off[i], v->off[i + 1] - v->off[i]);
        if (!c || json_array_append_new(arr, c)) rc = GK_ENOMEM;
    }
    size_t n = rc ? 0 : json_dumpb(arr, NULL, 0, JSON_COMPACT);
    if (!rc && (!n || !(s = malloc(n + 2)) || json_dumpb(arr, s, n, JSON_COMPACT) != n))
        rc = GK_ENOMEM;
    json_decref(arr);
    if (rc) {
        free(s);
        return gk_errf(e, rc, "char vocab to JSON: out of memory");
    }
    s[n] = '\n';
    s[n + 1] = '\0';
    *out = s;
    *len = n + 1;
    return 0;
}

int gk_vocab_to_json(const gk_vocab *v, char **out, size_t *len, gk_err *e)
{
    *out = NULL;
    *len = 0;
    return v->type == GK_VOCAB_CHAR ? chars_json(v, out, len, e) : gk_vocab_bpe_json(v, out, len, e);
}

int gk_vocab_save_chars(const gk_vocab *v, FILE *f, gk_err *e)
{
    if (v->type != GK_VOCAB_CHAR)
        return gk_errf(e, GK_EUSAGE, "save char vocab: not a char-level vocab");
    char *s;
    size_t n;
    int rc = chars_json(v, &s, &n, e);
    if (rc) return rc;
    rc = fwrite(s, 1, n, f) != n || fflush(f) || ferror(f);
    free(s);
    return rc ? gk_errno(e, "save char vocab") : 0;
}

/* Parses a char vocab from the JSON array text[0..len) (messages name name). */
static int parse_chars(gk_vocab **out, const char *text, size_t len, const char *name, gk_err *e)
{
    json_error_t je;
    json_t *arr = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    *out = NULL;
    if (!arr) return gk_errf(e, GK_EFORMAT, "%s:%d:%d: %s", name, je.line, je.column, je.text);
    if (!json_is_array(arr)) {
        json_decref(arr);
        return gk_errf(e, GK_EFORMAT, "%s: not a JSON array of characters", name);
    }
    size_t n = json_array_size(arr);
    uint32_t *cps = malloc((n ? n : 1) * sizeof *cps);
    int rc = cps ? 0 : gk_errf(e, GK_ENOMEM, "%s: out of memory", name);
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *s = json_array_get(arr, i);
        const unsigned char *b = (const unsigned char *)json_string_value(s);
        size_t sl = json_string_length(s);
        uint32_t cp = GK_UTF8_INVALID;
        if (!b || !sl || gk_utf8_next(b, sl, &cp) != sl || cp == GK_UTF8_INVALID)
            rc = gk_errf(e, GK_EFORMAT, "%s: element %zu is not a one-character string", name, i);
        cps[i] = cp;
    }
    json_decref(arr);
    gk_vocab *v = rc ? NULL : gk_vocab_alloc(GK_VOCAB_CHAR);
    if (!rc && !v) rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", name);
    if (!rc) {
        v->cps = cps, v->n = (uint32_t)n, cps = NULL;
        if (gk_vocab_finish_chars(v, name, e)) {
            rc = GK_EFORMAT;
            if (e) e->code = rc;
        }
    }
    if (rc) {
        gk_vocab_free(v);
        v = NULL;
    }
    free(cps);
    *out = v;
    return rc;
}

static int load_chars(gk_vocab **out, const char *path, gk_err *e)
{
    char *text;
    size_t len;
    *out = NULL;
    int rc = gk_vocab_read_file(path, &text, &len, e);
    if (rc) return rc;
    rc = parse_chars(out, text, len, path, e);
    free(text);
    return rc;
}

int gk_char_encode(const gk_vocab *v, const char *text, size_t len, uint32_t **ids, size_t *n,
                   size_t *cap, gk_err *e)
{
    if (v->type != GK_VOCAB_CHAR) return gk_errf(e, GK_EUSAGE, "char encode: not a char vocab");
    if (gk_ids_reserve(ids, cap, *n + len)) return gk_errf(e, GK_ENOMEM, "char encode: out of memory");
    const unsigned char *u = (const unsigned char *)text;
    uint32_t *o = *ids + *n;
    for (size_t i = 0; i < len;) {
        int32_t id = -1;
        uint32_t cp = u[i];
        size_t k = 1;
        if (cp < 128) id = v->ascii_id[cp];
        else if ((k = gk_utf8_next(u + i, len - i, &cp)) && cp != GK_UTF8_INVALID) {
            size_t lo = 0, hi = v->n;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (v->cps[mid] < cp) lo = mid + 1;
                else hi = mid;
            }
            if (lo < v->n && v->cps[lo] == cp) id = (int32_t)lo;
        }
        if (id < 0) {
            *n = (size_t)(o - *ids);
            if (cp == GK_UTF8_INVALID)
                return gk_errf(e, GK_EFORMAT, "invalid UTF-8 at byte %zu", i);
            return gk_errf(e, GK_EFORMAT, "character U+%04X at byte %zu is not in the vocabulary",
                           cp, i);
        }
        *o++ = (uint32_t)id;
        i += k;
    }
    *n = (size_t)(o - *ids);
    return 0;
}

/* ---------------------------------------------------------------- accessors */

int gk_vocab_type(const gk_vocab *v) { return v->type; }
uint32_t gk_vocab_size(const gk_vocab *v) { return v->n; }
int32_t gk_vocab_eot(const gk_vocab *v) { return v->eot; }
uint32_t gk_vocab_fingerprint(const gk_vocab *v) { return v->fingerprint; }

const unsigned char *gk_vocab_token(const gk_vocab *v, uint32_t id, size_t *len)
{
    if (id >= v->n) {
        *len = 0;
        return NULL;
    }
    *len = v->off[id + 1] - v->off[id];
    return v->bytes + v->off[id];
}

const char *gk_vocab_merges_text(const gk_vocab *v, size_t *len)
{
    if (len) *len = v->merges ? v->merges_len : 0;
    return v->merges;
}

/* ---------------------------------------------------------------- loading and finding */

static int file_in(const char *dir, const char *name)
{
    char p[8192];
    struct stat st;
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return 0;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int load_dir(gk_vocab **out, const char *dir, gk_err *e)
{
    static const char *pairs[2][2] = {{"encoder.json", "vocab.bpe"}, {"vocab.json", "merges.txt"}};
    for (int k = 0; k < 2; k++) {
        int a = file_in(dir, pairs[k][0]), b = file_in(dir, pairs[k][1]);
        if (!a && !b) continue;
        char pj[8192], pm[8192];
        snprintf(pj, sizeof pj, "%s/%s", dir, pairs[k][0]);
        snprintf(pm, sizeof pm, "%s/%s", dir, pairs[k][1]);
        if (!a || !b)
            return gk_errf(e, GK_ENOTFOUND, "%s: no such file (needed with %s)", a ? pm : pj,
                           a ? pj : pm);
        return gk_vocab_load_json_dir(out, pj, pm, e);
    }
    return gk_errf(e, GK_ENOTFOUND, "%s: holds neither encoder.json + vocab.bpe nor vocab.json + "
                   "merges.txt", dir);
}

int gk_vocab_load(gk_vocab **out, const char *path, gk_err *e)
{
    struct stat st;
    *out = NULL;
    if (stat(path, &st)) return gk_errno(e, path);
    if (S_ISDIR(st.st_mode)) return load_dir(out, path, e);
    size_t pl = strlen(path);
    if (pl >= 9 && !strcmp(path + pl - 9, ".tiktoken")) return gk_vocab_load_tiktoken(out, path, e);
    FILE *f = fopen(path, "rb");
    if (!f) return gk_errno(e, path);
    int c;
    while ((c = getc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r') {}
    fclose(f);
    if (c == '[') return load_chars(out, path, e);
    if (c == '{')
        return gk_errf(e, GK_EUSAGE, "%s: a JSON object: give the directory holding it and its "
                       "merges file (encoder.json + vocab.bpe or vocab.json + merges.txt)", path);
    return gk_vocab_load_tiktoken(out, path, e);
}

int gk_vocab_load_mem(gk_vocab **out, const char *vocab_json, size_t vocab_len, const char *merges,
                      size_t merges_len, const char *origin, gk_err *e)
{
    size_t i = 0;
    *out = NULL;
    while (i < vocab_len && memchr(" \t\r\n", vocab_json[i], 4)) i++;
    char c = i < vocab_len ? vocab_json[i] : '\0';
    if (c == '[' && merges && merges_len)
        return gk_errf(e, GK_EFORMAT, "%s: a char vocab (JSON array) takes no merges (got %zu bytes)",
                       origin, merges_len);
    if (c == '[') return parse_chars(out, vocab_json, vocab_len, origin, e);
    if (c != '{')
        return gk_errf(e, GK_EFORMAT, "%s: not a vocab: expected a JSON object (BPE token -> id) "
                       "or array (characters)", origin);
    char *mname = malloc(strlen(origin) + sizeof " (merges)");
    if (!mname) return gk_errf(e, GK_ENOMEM, "%s: out of memory", origin);
    strcat(strcpy(mname, origin), " (merges)");
    int rc = gk_vocab_parse_bpe(out, vocab_json, vocab_len, origin, merges, merges_len, mname, e);
    free(mname);
    return rc;
}

static int put_path(char *out, size_t cap, const char *p, gk_err *e)
{
    size_t n = strlen(p);
    if (n >= cap) return gk_errf(e, GK_EUSAGE, "vocab path too long: %s", p);
    memcpy(out, p, n + 1);
    return 0;
}

/* The snapshot refs/main names if it has vocab.json + merges.txt, else any such snapshot.
 * Returns 0 (found), 1 (none), or an error code. */
static int find_hf(char *out, size_t cap, gk_err *e)
{
    char base[4096], dir[4600], ref[128] = "";
    const char *hf = getenv("HF_HOME"), *home = getenv("HOME");
    if (hf && *hf) snprintf(base, sizeof base, "%s/hub/models--gpt2", hf);
    else if (home && *home) snprintf(base, sizeof base, "%s/.cache/huggingface/hub/models--gpt2", home);
    else return 1;
    snprintf(dir, sizeof dir, "%s/refs/main", base);
    FILE *f = fopen(dir, "r");
    if (f) {
        if (fscanf(f, "%127s", ref) != 1) ref[0] = '\0';
        fclose(f);
    }
    snprintf(dir, sizeof dir, "%s/snapshots/%s", base, ref);
    if (ref[0] && !strchr(ref, '/') && file_in(dir, "vocab.json") && file_in(dir, "merges.txt"))
        return put_path(out, cap, dir, e);
    snprintf(dir, sizeof dir, "%s/snapshots/*/vocab.json", base);
    glob_t g;
    int found = 1;
    if (glob(dir, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && found == 1; i++) {
            char *d = g.gl_pathv[i];
            *strrchr(d, '/') = '\0';
            if (file_in(d, "merges.txt")) found = put_path(out, cap, d, e);
        }
        globfree(&g);
    }
    return found;
}

int gk_vocab_find(char *out, size_t cap, const char *option, gk_err *e)
{
    const char *env = getenv("GPT_VOCAB");
    if (option) return put_path(out, cap, option, e);
    if (env && *env) return put_path(out, cap, env, e);
    int r = find_hf(out, cap, e);
    if (r <= 0) return r;
    if (file_in(GPTKIT_DATADIR, "encoder.json") && file_in(GPTKIT_DATADIR, "vocab.bpe"))
        return put_path(out, cap, GPTKIT_DATADIR, e);
    return gk_errf(e, GK_ENOTFOUND, "no GPT-2 vocabulary found: use -V DIR or GPT_VOCAB=DIR with "
                   "DIR holding encoder.json + vocab.bpe or vocab.json + merges.txt");
}
