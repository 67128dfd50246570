/* vocab_bpe.c: readers for the BPE vocab formats: encoder.json + vocab.bpe, vocab.json +
 * merges.txt, and .tiktoken rank files (formats in vocab.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "vocab_int.h"

#define SHOW 80 /* bytes of an offending token quoted in messages */

int gk_vocab_read_file(const char *path, char **data, size_t *len, gk_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return gk_errno(e, path);
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p) free(buf);
            buf = p;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    if (bad) {
        free(buf);
        return gk_errf(e, GK_EIO, "%s: read error", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

/* ---------------------------------------------------------------- GPT-2 byte alphabet */

/* inv[cp] = the byte GPT-2's bytes_to_unicode maps to code point cp (cp < 324), or -1. */
static void byte_alphabet(int inv[324])
{
    int extra = 0;
    for (int cp = 0; cp < 324; cp++) inv[cp] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        inv[printable ? b : 256 + extra++] = b;
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
    byte_alphabet(inv);
    unsigned char *buf = NULL;
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val) {
        json_int_t id = json_integer_value(val);
        size_t klen = strlen(key);
        unsigned char *p = realloc(buf, klen + 1);
        long bl = p ? decode_key(inv, key, klen, p) : 0;
        buf = p ? p : buf;
        if (!p) rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
        else if (!json_is_integer(val) || id < 0 || (size_t)id >= b->n)
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
    long a = decode_key(inv, s, la, buf), b = decode_key(inv, sp + 1, len - la - 1, buf + (a > 0 ? a : 0));
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

static int read_merges(gk_vocab *v, const char *path, gk_err *e)
{
    char *text;
    size_t tlen;
    int rc = gk_vocab_read_file(path, &text, &tlen, e);
    if (rc) return rc;
    int inv[324];
    byte_alphabet(inv);
    unsigned char *buf = malloc(tlen + 1);
    if (!buf) rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    size_t lineno = 0;
    for (const char *s = text, *end = text + tlen; s < end && !rc; lineno++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = (size_t)((nl ? nl : end) - s);
        if (len && s[len - 1] == '\r') len--;
        int header = lineno == 0 && len >= 8 && !memcmp(s, "#version", 8);
        if (len && !header) rc = merge_line(v, inv, path, lineno + 1, s, len, buf, e);
        s = nl ? nl + 1 : end;
    }
    free(buf);
    if (rc) {
        free(text);
        return rc;
    }
    v->merges = text;
    v->merges_len = tlen;
    return 0;
}

int gk_vocab_load_json_dir(gk_vocab **out, const char *json, const char *merges, gk_err *e)
{
    json_error_t je;
    json_t *root = json_load_file(json, JSON_REJECT_DUPLICATES, &je);
    *out = NULL;
    if (!root) return gk_errf(e, GK_EFORMAT, "%s:%d:%d: %s", json, je.line, je.column, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return gk_errf(e, GK_EFORMAT, "%s: not a JSON object of token -> id", json);
    }
    int has_eot = json_object_get(root, GK_EOT_TEXT) != NULL;
    size_t n = json_object_size(root) + !has_eot;
    gk_vocab *v = gk_vocab_alloc(GK_VOCAB_BPE);
    gk_vbuild b = {0};
    uint32_t gap = 0;
    int rc = !v || gk_vbuild_init(&b, (uint32_t)n) ? gk_errf(e, GK_ENOMEM, "%s: out of memory", json)
                                                   : read_encoder(v, &b, root, json, e);
    json_decref(root);
    if (!rc && !has_eot) {
        v->eot = (int32_t)(n - 1);
        if ((rc = gk_vbuild_put(&b, (uint32_t)v->eot, GK_EOT_TEXT, strlen(GK_EOT_TEXT))) != 0)
            rc = gk_errf(e, rc, "%s: ids must be 0..%zu without gaps (id %zu is for the added "
                         "<|endoftext|>)", json, n - 2, n - 1);
    }
    if (!rc && (rc = gk_vbuild_finish(&b, v, &gap)) != 0)
        rc = rc == GK_ENOMEM ? gk_errf(e, rc, "%s: out of memory", json)
                             : gk_errf(e, rc, "%s: id %u missing (ids must be 0..%zu)", json, gap,
                                       n - 1 - !has_eot);
    gk_vbuild_free(&b);
    if (!rc) rc = gk_vocab_finish_bpe(v, json, e);
    if (!rc) rc = read_merges(v, merges, e);
    if (rc) gk_vocab_free(v);
    else *out = v;
    return rc;
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
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
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
        return gk_errf(e, GK_EFORMAT, "%s:%zu: rank \"%.*s\" is not in 0..%u (ranks must be "
                       "0..N-1 without gaps)", path, lineno, (int)(s + len - sp - 1 < 20 ? s + len - sp - 1 : 20),
                       sp + 1, b->n - 2);
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
    int rc = gk_vocab_read_file(path, &text, &tlen, e);
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
        rc = gk_errf(e, rc, "%s: rank %zu out of range (ranks must be 0..%zu)", path, toks, toks - 1);
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
