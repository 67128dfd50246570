/* vocab_bpe.c: the BPE vocab formats (see vocab.h): readers for encoder.json + vocab.bpe or
 * vocab.json + merges.txt (from files or memory) and .tiktoken rank files; writers of the
 * vocab.json text and of merges.txt (kept, or regenerated from the ranks). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/io/readall.h"
#include "common/text/utf8.h"
#include "common/text/vocab_formats.h"
#include "common/text/vocab_int.h"

#define SHOW 80 /* bytes of an offending token quoted in messages */

/* ---------------------------------------------------------------- GPT-2 byte alphabet */

static int printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

/* inv[cp] = the byte GPT-2's bytes_to_unicode maps to code point cp (cp < 324), or -1;
 * fwd[b] (if fwd != NULL) = the code point byte b maps to. */
static void byte_alphabet(int inv[324], uint32_t *fwd)
{
    int extra = 0;
    for (int cp = 0; cp < 324; cp++) inv[cp] = -1;
    for (int b = 0; b < 256; b++) {
        int cp = printable(b) ? b : 256 + extra++;
        inv[cp] = b;
        if (fwd) fwd[b] = (uint32_t)cp;
    }
}

/* Decodes a key written in the byte alphabet into out (room for len bytes); -1 if invalid. */
static long decode_key(const int inv[324], const char *key, size_t len, unsigned char *out)
{
    const unsigned char *u = (const unsigned char *)key;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += gk_utf8_next(u + i, len - i, &cp);
        if (cp >= 324 || inv[cp] < 0) return -1;
        out[o++] = (unsigned char)inv[cp];
    }
    return (long)o;
}

/* ---------------------------------------------------------------- encoder.json / vocab.json */

static int put_token(gk_vbuild *b, json_int_t id, const void *bytes, size_t len,
                     const char *path, gk_err *e)
{
    int rc = gk_vbuild_put(b, (uint32_t)id, bytes, len);
    if (rc == GK_ENOMEM) return gk_errf(e, rc, "%s: out of memory", path);
    if (rc) return gk_errf(e, rc, "%s: id %lld used twice", path, (long long)id);
    return 0;
}

static int read_encoder(gk_vocab *v, gk_vbuild *b, json_t *root, const char *path, gk_err *e)
{
    int inv[324];
    byte_alphabet(inv, NULL);
    unsigned char *buf = NULL;
    size_t cap = 0;
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val) {
        json_int_t id = json_integer_value(val);
        size_t klen = strlen(key);
        if (klen >= cap) { /* grown, not made anew for each token (50257 reallocs) */
            unsigned char *p = realloc(buf, 2 * klen + 64);
            if (!p) {
                rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
                break;
            }
            buf = p, cap = 2 * klen + 64;
        }
        long bl = decode_key(inv, key, klen, buf);
        if (!json_is_integer(val) || id < 0 || (size_t)id >= b->n)
            rc = gk_errf(e, GK_EFORMAT, "%s: token \"%.*s\": id must be an integer in 0..%u",
                         path, SHOW, key, b->n - 1);
        else if (!strcmp(key, GK_EOT_TEXT)) {
            v->eot = (int32_t)id;
            rc = put_token(b, id, key, klen, path, e);
        } else if (bl <= 0)
            rc = gk_errf(e, GK_EFORMAT, "%s: token \"%.*s\" has a character outside GPT-2's "
                         "byte alphabet", path, SHOW, key);
        else
            rc = put_token(b, id, buf, (size_t)bl, path, e);
        if (rc) break;
    }
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- merges */

static int merge_line(const gk_vocab *v, const int inv[324], const char *path, size_t lineno,
                      const char *s, size_t len, unsigned char *buf, gk_err *e)
{
    const char *sp = memchr(s, ' ', len);
    if (!sp || sp == s || sp + 1 == s + len || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1)))
        return gk_errf(e, GK_EFORMAT, "%s:%zu: expected two tokens \"A B\", got \"%.*s\"", path,
                       lineno, (int)(len < SHOW ? len : SHOW), s);
    size_t la = (size_t)(sp - s);
    long a = decode_key(inv, s, la, buf),
         b = decode_key(inv, sp + 1, len - la - 1, buf + (a > 0 ? a : 0));
    if (a <= 0 || b <= 0)
        return gk_errf(e, GK_EFORMAT, "%s:%zu: \"%.*s\" has a character outside GPT-2's byte "
                       "alphabet", path, lineno, (int)(len < SHOW ? len : SHOW), s);
    const char *bad = NULL;
    if (gk_vocab_lookup(v, buf, (size_t)a) == GK_NONE) bad = "first half";
    else if (gk_vocab_lookup(v, buf + a, (size_t)b) == GK_NONE) bad = "second half";
    else if (gk_vocab_lookup(v, buf, (size_t)(a + b)) == GK_NONE) bad = "concatenation";
    if (bad)
        return gk_errf(e, GK_EFORMAT, "%s:%zu: merge \"%.*s\": its %s is not a token", path,
                       lineno, (int)(len < SHOW ? len : SHOW), s, bad);
    return 0;
}

/* The pattern the merges' first line s[0..len) names (" pattern: NAME"), set on v. */
static int header_pattern(gk_vocab *v, const char *s, size_t len, const char *mname, gk_err *e)
{
    static const char key[] = " pattern: ";
    const char *at = memmem(s, len, key, sizeof key - 1);
    if (!at) return 0;
    const char *name = at + sizeof key - 1, *end = name;
    while (end < s + len && *end != ' ' && *end != '\t') end++;
    char buf[16];
    size_t n = (size_t)(end - name);
    int pattern = -1;
    if (n < sizeof buf) {
        memcpy(buf, name, n);
        buf[n] = '\0';
        pattern = gk_pattern_of(buf);
    }
    if (pattern < 0)
        return gk_errf(e, GK_EFORMAT, "%s:1: pre-tokenizer pattern \"%.*s\" unknown (gpt2, gpt4)",
                       mname, (int)(n < SHOW ? n : SHOW), name);
    gk_vocab_set_pattern(v, pattern);
    return 0;
}

/* Checks the merges text m[0..mlen) against v and keeps a copy in v (messages name mname). */
static int read_merges(gk_vocab *v, const char *m, size_t mlen, const char *mname, gk_err *e)
{
    int inv[324], rc = 0;
    byte_alphabet(inv, NULL);
    unsigned char *buf = malloc(mlen + 1);
    if (!buf) return gk_errf(e, GK_ENOMEM, "%s: out of memory", mname);
    size_t lineno = 0;
    for (const char *s = m, *end = m + mlen; s < end && !rc; lineno++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = (size_t)((nl ? nl : end) - s);
        if (len && s[len - 1] == '\r') len--;
        int header = lineno == 0 && len >= 8 && !memcmp(s, "#version", 8);
        if (header) rc = header_pattern(v, s, len, mname, e);
        else if (len) rc = merge_line(v, inv, mname, lineno + 1, s, len, buf, e);
        s = nl ? nl + 1 : end;
    }
    free(buf);
    if (rc) return rc;
    if (!(v->merges = malloc(mlen + 1))) return gk_errf(e, GK_ENOMEM, "%s: out of memory", mname);
    memcpy(v->merges, m, mlen);
    v->merges[mlen] = '\0';
    v->merges_len = mlen;
    return 0;
}

int gk_vocab_parse_bpe(gk_vocab **out, const char *json, size_t jlen, const char *jname,
                       const char *merges, size_t mlen, const char *mname, gk_err *e)
{
    json_error_t je;
    json_t *root = json_loadb(json, jlen, JSON_REJECT_DUPLICATES, &je);
    *out = NULL;
    if (!root) return gk_errf(e, GK_EFORMAT, "%s:%d:%d: %s", jname, je.line, je.column, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return gk_errf(e, GK_EFORMAT, "%s: not a JSON object of token -> id", jname);
    }
    int has_eot = json_object_get(root, GK_EOT_TEXT) != NULL;
    size_t n = json_object_size(root) + !has_eot;
    gk_vocab *v = gk_vocab_alloc(GK_VOCAB_BPE);
    gk_vbuild b = {0};
    uint32_t gap = 0;
    int rc = !v || gk_vbuild_init(&b, (uint32_t)n)
                 ? gk_errf(e, GK_ENOMEM, "%s: out of memory", jname)
                 : read_encoder(v, &b, root, jname, e);
    json_decref(root);
    if (!rc && !has_eot) {
        v->eot = (int32_t)(n - 1);
        if ((rc = gk_vbuild_put(&b, (uint32_t)v->eot, GK_EOT_TEXT, strlen(GK_EOT_TEXT))) != 0)
            rc = gk_errf(e, rc, "%s: ids must be 0..%zu without gaps (id %zu is for the added "
                         "<|endoftext|>)", jname, n - 2, n - 1);
    }
    if (!rc && (rc = gk_vbuild_finish(&b, v, &gap)) != 0)
        rc = rc == GK_ENOMEM ? gk_errf(e, rc, "%s: out of memory", jname)
                             : gk_errf(e, rc, "%s: id %u missing (ids must be 0..%zu)", jname, gap,
                                       n - 1 - !has_eot);
    gk_vbuild_free(&b);
    if (!rc) rc = gk_vocab_finish_bpe(v, jname, e);
    if (!rc && merges && mlen) rc = read_merges(v, merges, mlen, mname, e);
    if (rc) gk_vocab_free(v);
    else *out = v;
    return rc;
}

int gk_vocab_load_json_dir(gk_vocab **out, const char *json, const char *merges, gk_err *e)
{
    char *jt = NULL, *mt = NULL;
    size_t jl, ml;
    *out = NULL;
    int rc = gk_read_file(json, GK_VOCAB_FILE_MAX, &jt, &jl, e);
    if (!rc) rc = gk_read_file(merges, GK_VOCAB_FILE_MAX, &mt, &ml, e);
    if (!rc) rc = gk_vocab_parse_bpe(out, jt, jl, json, mt, ml, merges, e);
    free(jt);
    free(mt);
    return rc;
}

/* ---------------------------------------------------------------- writers */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *s, const void *data, size_t len)
{
    if (s->oom) return;
    if (len >= SIZE_MAX - s->n || gk_grow(&s->p, &s->cap, s->n + len + 1, 1, 1 << 16)) {
        s->oom = 1;
        return;
    }
    memcpy(s->p + s->n, data, len);
    s->n += len;
    s->p[s->n] = '\0';
}

/* Hands the text to the caller (*out malloc'd, NUL-terminated), or GK_ENOMEM. */
static int sb_finish(sbuf *s, char **out, size_t *len, const char *what, gk_err *e)
{
    if (!s->oom && !s->p) sb_put(s, "", 0);
    if (s->oom) {
        free(s->p);
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", what);
    }
    *out = s->p;
    *len = s->n;
    return 0;
}

/* Appends bytes b[0..n) in the byte alphabet; quoted = 1 writes them as a JSON string body the
 * way Python's json.dumps (ensure_ascii) does: \" \\ and \uXXXX (lower-case) beyond '~'. */
static void sb_bytes(sbuf *s, const uint32_t fwd[256], const unsigned char *b, size_t n, int quoted)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = fwd[b[i]];
        char t[8];
        int k = 0;
        if (quoted && cp > '~') k = snprintf(t, sizeof t, "\\u%04x", (unsigned)cp);
        else if (cp >= 0x80) k = (int)gk_utf8_put(cp, (unsigned char *)t);
        else {
            if (quoted && (cp == '"' || cp == '\\')) t[k++] = '\\';
            t[k++] = (char)cp;
        }
        sb_put(s, t, (size_t)k);
    }
}

int gk_vocab_bpe_json(const gk_vocab *v, char **out, size_t *len, gk_err *e)
{
    uint32_t fwd[256];
    int inv[324];
    byte_alphabet(inv, fwd);
    sbuf s = {0};
    sb_put(&s, "{", 1);
    for (uint32_t id = 0; id < v->n; id++) {
        const unsigned char *b = v->bytes + v->off[id];
        size_t n = v->off[id + 1] - v->off[id];
        char num[16];
        sb_put(&s, id ? ", \"" : "\"", id ? 3 : 1);
        if ((int32_t)id == v->eot) sb_put(&s, b, n); /* "<|endoftext|>": nothing to escape */
        else sb_bytes(&s, fwd, b, n, 1);
        sb_put(&s, num, (size_t)snprintf(num, sizeof num, "\": %u", id));
    }
    sb_put(&s, "}", 1);
    return sb_finish(&s, out, len, "vocab to JSON", e);
}

/* Writes the merge line of token id: the two parts tiktoken's merge of its bytes ends with
 * (run the merge, lowest rank first and leftmost on ties, until two parts are left). */
static int regen_line(const gk_vocab *v, uint32_t id, const uint32_t fwd[256], uint32_t *parts,
                      sbuf *s, gk_err *e)
{
    const unsigned char *b = v->bytes + v->off[id];
    size_t n = v->off[id + 1] - v->off[id], np = n, at = 0;
    for (size_t i = 0; i < n; i++) parts[i] = v->byte_id[b[i]];
    while (np > 2) {
        uint32_t best = GK_NONE;
        for (size_t i = 0; i + 1 < np; i++) {
            uint32_t r = gk_vocab_pair(v, parts[i], parts[i + 1]);
            if (r < best) best = r, at = i;
        }
        if (best >= id) break;
        parts[at] = best;
        memmove(parts + at + 1, parts + at + 2, (np - at - 2) * sizeof *parts);
        np--;
    }
    if (np != 2 || gk_vocab_pair(v, parts[0], parts[1]) != id) {
        sbuf t = {0}; /* the token in the byte alphabet: no control characters in the message */
        sb_bytes(&t, fwd, b, n < SHOW ? n : SHOW, 0);
        gk_errf(e, GK_EFORMAT, "vocab merges: token %u \"%s\" is not made by merging tokens of "
                "lower rank", id, t.p ? t.p : "");
        free(t.p);
        return GK_EFORMAT;
    }
    size_t la = v->off[parts[0] + 1] - v->off[parts[0]];
    sb_bytes(s, fwd, b, la, 0);
    sb_put(s, " ", 1);
    sb_bytes(s, fwd, b + la, n - la, 0);
    sb_put(s, "\n", 1);
    return 0;
}

int gk_vocab_merges(const gk_vocab *v, char **out, size_t *len, gk_err *e)
{
    *out = NULL;
    *len = 0;
    if (v->type != GK_VOCAB_BPE) return 0;
    sbuf s = {0};
    if (v->merges) {
        sb_put(&s, v->merges, v->merges_len);
        return sb_finish(&s, out, len, "vocab merges", e);
    }
    uint32_t fwd[256], maxlen = 1, *parts;
    int inv[324], rc = 0;
    byte_alphabet(inv, fwd);
    for (uint32_t id = 0; id < v->n; id++)
        if (v->off[id + 1] - v->off[id] > maxlen) maxlen = v->off[id + 1] - v->off[id];
    if (!(parts = malloc(maxlen * sizeof *parts)))
        return gk_errf(e, GK_ENOMEM, "vocab merges: out of memory");
    sb_put(&s, "#version: 0.2", 13);
    if (v->pattern != GK_PATTERN_GPT2) {
        sb_put(&s, " pattern: ", 10);
        sb_put(&s, gk_pattern_name(v->pattern), strlen(gk_pattern_name(v->pattern)));
    }
    sb_put(&s, "\n", 1);
    for (uint32_t id = 0; id < v->n && !rc; id++)
        if ((int32_t)id != v->eot && v->off[id + 1] - v->off[id] >= 2)
            rc = regen_line(v, id, fwd, parts, &s, e);
    free(parts);
    if (rc) {
        free(s.p);
        return rc;
    }
    return sb_finish(&s, out, len, "vocab merges", e);
}

/* ---------------------------------------------------------------- .tiktoken */

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes standard padded base64 s[0..n) into out; returns the length or -1 if malformed. */
static long b64decode(const char *s, size_t n, unsigned char *out)
{
    long o = 0;
    if (n == 0 || n % 4) return -1;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            int c = (unsigned char)s[i + k];
            v[k] = c == '=' && i + 4 == n && k >= 2 ? (pad++, 0) : b64val(c);
            if (v[k] < 0 || (pad && c != '=')) return -1;
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (pad < 2) out[o++] = (unsigned char)(w >> 8);
        if (pad < 1) out[o++] = (unsigned char)w;
    }
    return o;
}

static int tiktoken_line(gk_vbuild *b, const char *path, size_t lineno, const char *s,
                         size_t len, unsigned char *buf, gk_err *e)
{
    const char *sp = memchr(s, ' ', len);
    long bl = sp ? b64decode(s, (size_t)(sp - s), buf) : -1;
    if (bl <= 0)
        return gk_errf(e, GK_EFORMAT, "%s:%zu: bad base64 token (expected \"BASE64 RANK\")", path,
                       lineno);
    char *endp;
    errno = 0;
    unsigned long long r = strtoull(sp + 1, &endp, 10);
    if (errno || endp != s + len || sp[1] < '0' || sp[1] > '9' || r >= b->n - 1)
        return gk_errf(e, GK_EFORMAT,
                       "%s:%zu: rank \"%.*s\" is not in 0..%u (ranks must be 0..N-1 without gaps)",
                       path, lineno, (int)(s + len - sp - 1 < 20 ? s + len - sp - 1 : 20), sp + 1,
                       b->n - 2);
    int rc = gk_vbuild_put(b, (uint32_t)r, buf, (size_t)bl);
    if (rc == GK_ENOMEM) return gk_errf(e, rc, "%s: out of memory", path);
    if (rc) return gk_errf(e, rc, "%s:%zu: rank %llu used twice", path, lineno, r);
    return 0;
}

int gk_vocab_load_tiktoken(gk_vocab **out, const char *path, gk_err *e)
{
    char *text;
    size_t tlen, lines = 0, lineno = 0;
    *out = NULL;
    int rc = gk_read_file(path, GK_VOCAB_FILE_MAX, &text, &tlen, e);
    if (rc) return rc;
    for (size_t i = 0; i < tlen; i++) lines += text[i] == '\n' || (i + 1 == tlen);
    gk_vocab *v = gk_vocab_alloc(GK_VOCAB_BPE);
    unsigned char *buf = malloc(tlen + 1);
    gk_vbuild b = {0};
    if (!v || !buf || gk_vbuild_init(&b, (uint32_t)lines + 1))
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    size_t toks = 0;
    for (const char *s = text, *end = text + tlen; s < end && !rc; lineno++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = (size_t)((nl ? nl : end) - s);
        if (len && s[len - 1] == '\r') len--;
        if (len) rc = tiktoken_line(&b, path, lineno + 1, s, len, buf, e), toks++;
        s = nl ? nl + 1 : end;
    }
    b.n = (uint32_t)toks + 1; /* blank lines do not count */
    uint32_t gap;
    if (!rc && toks == 0) rc = gk_errf(e, GK_EFORMAT, "%s: no tokens", path);
    if (!rc && (rc = gk_vbuild_put(&b, (uint32_t)toks, GK_EOT_TEXT, strlen(GK_EOT_TEXT))) != 0)
        rc = gk_errf(e, rc, "%s: rank %zu out of range (ranks must be 0..%zu)", path, toks,
                     toks - 1);
    if (!rc && (rc = gk_vbuild_finish(&b, v, &gap)) != 0)
        rc = rc == GK_ENOMEM ? gk_errf(e, rc, "%s: out of memory", path)
                             : gk_errf(e, rc, "%s: rank %u missing (ranks must be 0..%zu)", path,
                                       gap, toks - 1);
    if (v && !rc) v->eot = (int32_t)toks;
    if (!rc) rc = gk_vocab_finish_bpe(v, path, e);
    gk_vbuild_free(&b);
    free(buf);
    free(text);
    if (rc) gk_vocab_free(v);
    else *out = v;
    return rc;
}
