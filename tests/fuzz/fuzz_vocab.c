/* fuzz_vocab.c: every vocabulary format on arbitrary bytes. The first byte picks the format
 * (low 3 bits, mod 5): 0 encoder.json + vocab.bpe and 1 vocab.json + merges.txt (a directory,
 * gk_vocab_load), 2 the texts of a checkpoint (gk_vocab_load_mem), 3 a .tiktoken file, 4 a char
 * vocab file; bits 3-4 are gk_text_encode's flags. The rest is FILE1 \0 FILE2 \0 TEXT for the two
 * BPE texts, FILE \0 TEXT for the one-file formats. Properties: a failure is one gk_err with a
 * message; the two BPE texts that load from files load from memory to the same vocab; what
 * loads has sane tokens (BPE: the eot's text, no empty token), its JSON text (and merges) load
 * back to the same fingerprint, and it encodes TEXT and the vocabulary's own characters to ids
 * that decode to the sanitized text byte for byte. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text/encode_text.h"
#include "common/text/utf8.h"
#include "common/text/vocab.h"
#include "tests/fuzz/fuzz.h"

#define EOT "<|endoftext|>"

static char dir[64];

static void remove_dir(void)
{
    static const char *files[] = {"o/encoder.json", "o/vocab.bpe", "h/vocab.json", "h/merges.txt",
                                  "v.tiktoken", "chars.json", "o", "h", ""};
    char p[128];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        remove(p);
    }
}

/* dir/name holding data[0..n), or NULL. The directory is made once per process. */
static const char *put(const char *name, const uint8_t *data, size_t n)
{
    static char path[128];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/gk-fuzz-vocab.XXXXXX",
                 t && *t && strlen(t) < 30 ? t : "/tmp");
        if (!mkdtemp(dir)) return dir[0] = '\0', NULL;
        snprintf(path, sizeof path, "%s/o", dir);
        mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/h", dir);
        mkdir(path, 0700);
        atexit(remove_dir);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    int bad = n && fwrite(data, 1, n, f) != n;
    return fclose(f) || bad ? NULL : path;
}

static void check_failure(int rc, const gk_err *e)
{
    FZ_ASSERT(rc < 0 && e->code == rc && e->msg[0], "rc %d, code %d, message '%s'", rc, e->code,
              e->msg);
}

/* The concatenated bytes of ids[0..n) (malloc'd, *len set); every id must be a token. */
static char *decode(const gk_vocab *v, const uint32_t *ids, size_t n, size_t *len)
{
    size_t cap = 64, o = 0, tl;
    char *s = malloc(cap);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *t = gk_vocab_token(v, ids[i], &tl);
        FZ_ASSERT(t, "id %u of %u", ids[i], gk_vocab_size(v));
        while (o + tl > cap) s = realloc(s, cap *= 2);
        memcpy(s + o, t, tl);
        o += tl;
    }
    *len = o;
    return s;
}

/* Encodes text[0..len) with flags; if it encodes (BPE: always), the ids decode to the text. */
static void encode(const gk_vocab *v, const char *text, size_t len, int flags, int must)
{
    gk_err e = {0};
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0, replaced = 0, clean_cap = 0, clean_len = 0, dl;
    int rc = gk_text_encode(v, text, len, flags, &ids, &n, &cap, &replaced, &e);
    if (gk_vocab_type(v) == GK_VOCAB_BPE || must) FZ_ASSERT(rc == 0, "encode: %s", e.msg);
    if (rc) {
        check_failure(rc, &e);
        free(ids);
        return;
    }
    char *clean = NULL, *got = decode(v, ids, n, &dl);
    size_t bad = gk_utf8_sanitize(text, len, &clean, &clean_cap, &clean_len);
    FZ_ASSERT(bad == replaced, "%zu replaced, sanitize says %zu", replaced, bad);
    size_t skip = (flags & GK_ENCODE_EOT_FIRST) && gk_vocab_eot(v) >= 0 ? strlen(EOT) : 0;
    if (skip) FZ_ASSERT(n && ids[0] == (uint32_t)gk_vocab_eot(v), "no eot first");
    for (size_t i = skip ? 1 : 0; i < n && !(flags & GK_ENCODE_SPECIAL); i++)
        FZ_ASSERT((int32_t)ids[i] != gk_vocab_eot(v), "eot at %zu of ordinary text", i);
    FZ_ASSERT(dl == skip + clean_len && (!clean_len || !memcmp(got + skip, clean, clean_len)),
              "decoded %zu bytes, want %zu", dl, skip + clean_len);
    free(got);
    free(clean);
    free(ids);
}

/* Its JSON text (and merges) load back from memory to the same vocabulary. */
static void reload(const gk_vocab *v)
{
    gk_err e = {0};
    char *json = NULL, *merges = NULL;
    size_t jl, ml;
    int rc = gk_vocab_to_json(v, &json, &jl, &e);
    FZ_ASSERT(rc == 0, "to_json: %s", e.msg);
    if (gk_vocab_merges(v, &merges, &ml, &e) != 0) /* a rank no merge makes (.tiktoken) */
        merges = NULL, ml = 0;
    gk_vocab *w = NULL;
    rc = gk_vocab_load_mem(&w, json, jl, merges, ml, "reload", &e);
    FZ_ASSERT(rc == 0, "reload: %s", e.msg);
    FZ_ASSERT(gk_vocab_size(w) == gk_vocab_size(v) && gk_vocab_eot(w) == gk_vocab_eot(v) &&
              gk_vocab_fingerprint(w) == gk_vocab_fingerprint(v), "reloaded vocab differs");
    gk_vocab_free(w);
    free(json);
    free(merges);
}

static void check(const gk_vocab *v, const char *text, size_t len, int flags)
{
    uint32_t n = gk_vocab_size(v);
    int32_t eot = gk_vocab_eot(v);
    size_t tl, all = 0;
    FZ_ASSERT(!gk_vocab_token(v, n, &tl) && tl == 0, "token past the end");
    if (gk_vocab_type(v) == GK_VOCAB_BPE) {
        FZ_ASSERT(eot >= 0 && (uint32_t)eot < n, "eot %d of %u", eot, n);
        const unsigned char *t = gk_vocab_token(v, (uint32_t)eot, &tl);
        FZ_ASSERT(tl == strlen(EOT) && !memcmp(t, EOT, tl), "eot's text");
    }
    char own[256];
    for (uint32_t id = 0; id < n; id++) {
        const unsigned char *t = gk_vocab_token(v, id, &tl);
        FZ_ASSERT(t && tl > 0, "token %u is empty", id);
        if (gk_vocab_type(v) == GK_VOCAB_CHAR && id % 7 == 0 && all + tl <= sizeof own)
            memcpy(own + all, t, tl), all += tl;
    }
    reload(v);
    encode(v, text, len, flags, 0);
    encode(v, own, all, 0, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int mode = (data[0] & 7) % 5, flags = data[0] >> 3 & 3;
    const uint8_t *f1, *rest, *f2, *text;
    size_t n1, nrest, n2, nt;
    fz_split(data + 1, size - 1, 0, &f1, &n1, &rest, &nrest);
    if (mode <= 2) fz_split(rest, nrest, 0, &f2, &n2, &text, &nt);
    else f2 = NULL, n2 = 0, text = rest, nt = nrest;
    if (!text) text = (const uint8_t *)"";
    static const char *names[2][2] = {{"o/encoder.json", "o/vocab.bpe"},
                                      {"h/vocab.json", "h/merges.txt"}};
    gk_vocab *v = NULL;
    gk_err e = {0};
    const char *path = NULL;
    int rc;
    if (mode <= 1) {
        if (!put(names[mode][0], f1, n1) || !put(names[mode][1], f2 ? f2 : f1, n2)) return 0;
        char d[80];
        snprintf(d, sizeof d, "%s/%c", dir, "oh"[mode]);
        rc = gk_vocab_load(&v, d, &e);
    } else if (mode == 2) {
        rc = gk_vocab_load_mem(&v, (const char *)f1, n1, (const char *)f2, n2, "mem", &e);
    } else {
        if (!(path = put(mode == 3 ? "v.tiktoken" : "chars.json", f1, n1))) return 0;
        rc = gk_vocab_load(&v, path, &e);
    }
    if (rc) {
        check_failure(rc, &e);
        FZ_ASSERT(!v, "a vocab with an error");
        return 0;
    }
    if (mode <= 1) { /* the same texts from memory (a checkpoint's copy) make the same vocab */
        gk_vocab *w = NULL;
        rc = gk_vocab_load_mem(&w, (const char *)f1, n1, (const char *)f2, n2, "mem", &e);
        FZ_ASSERT(rc == 0 && gk_vocab_fingerprint(w) == gk_vocab_fingerprint(v), "from memory: %s",
                  rc ? e.msg : "another vocab");
        gk_vocab_free(w);
    }
    check(v, (const char *)text, nt, flags);
    gk_vocab_free(v);
    return 0;
}
