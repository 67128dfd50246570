/* test_vocab.c: vocab formats (OpenAI, HuggingFace, .tiktoken, char) load to the same ids and
 * fingerprint; char vocab round trip and encoding; bad inputs give GK_E* codes naming the file;
 * the texts a checkpoint carries (gk_vocab_to_json, gk_vocab_merges, gk_vocab_load_mem) round
 * trip, and regenerated merges equal vocab.bpe. gk_vocab_find's lookup order: test_vocab_find.c. */
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpe_harness.h" /* slurp, load_gpt2 */

static char tmpdir[] = "/tmp/test_vocab.XXXXXX";
static int have_tmp;

static void tmp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

/* GPT-2's bytes_to_unicode: the code point standing for byte b, as UTF-8 into out. */
static size_t byte_char(int b, char *out)
{
    int n = 0, cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
        for (int k = 0; k < b; k++)
            n += !((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || k >= 174);
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static int same_vocab(const gk_vocab *a, const gk_vocab *b)
{
    if (gk_vocab_size(a) != gk_vocab_size(b) || gk_vocab_eot(a) != gk_vocab_eot(b) ||
        gk_vocab_fingerprint(a) != gk_vocab_fingerprint(b) || gk_vocab_type(a) != gk_vocab_type(b))
        return 0;
    for (uint32_t id = 0; id < gk_vocab_size(a); id++) {
        size_t la, lb;
        const unsigned char *ta = gk_vocab_token(a, id, &la), *tb = gk_vocab_token(b, id, &lb);
        if (la != lb || memcmp(ta, tb, la)) return 0;
    }
    return 1;
}

static void test_gpt2_dir(void)
{
    gk_vocab *v = load_gpt2();
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    size_t len;
    CHECK(gk_vocab_type(v) == GK_VOCAB_BPE);
    CHECK(gk_vocab_size(v) == 50257);
    CHECK(gk_vocab_eot(v) == 50256);
    const unsigned char *t = gk_vocab_token(v, 50256, &len);
    CHECK(len == 13 && !memcmp(t, "<|endoftext|>", 13));
    t = gk_vocab_token(v, 188, &len);
    CHECK(len == 1 && t[0] == 0);
    t = gk_vocab_token(v, 198, &len);
    CHECK(len == 1 && t[0] == '\n');
    t = gk_vocab_token(v, 262, &len);
    CHECK(len == 4 && !memcmp(t, " the", 4));
    CHECK(gk_vocab_token(v, 50257, &len) == NULL && len == 0);
    const char *m = gk_vocab_merges_text(v, &len);
    CHECK(m && len == 456318 && !strncmp(m, "#version: 0.2", 13));
    CHECK(gk_vocab_fingerprint(v) != 0);
    gk_vocab_free(v);
}

/* Writes the .tiktoken line "BASE64 RANK" of token t[0..len). */
static void tiktoken_line(FILE *f, const unsigned char *t, size_t len, uint32_t rank)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t k = 0; k < len; k += 3) {
        uint32_t w =
            (uint32_t)t[k] << 16 | (k + 1 < len ? t[k + 1] << 8 : 0) | (k + 2 < len ? t[k + 2] : 0);
        fputc(b64[w >> 18], f), fputc(b64[w >> 12 & 63], f);
        fputc(k + 1 < len ? b64[w >> 6 & 63] : '=', f), fputc(k + 2 < len ? b64[w & 63] : '=', f);
    }
    fprintf(f, " %u\n", rank);
}

/* Writes vocab.json + merges.txt (HuggingFace names) and gpt2.tiktoken from v. */
static int write_other_formats(const gk_vocab *v)
{
    char path[4608];
    json_t *obj = json_object();
    FILE *tk;
    tmp_path(path, sizeof path, "gpt2.tiktoken");
    if (!(tk = fopen(path, "wb"))) return -1;
    for (uint32_t id = 0; id < gk_vocab_size(v); id++) {
        size_t len, o = 0;
        const unsigned char *t = gk_vocab_token(v, id, &len);
        char key[512];
        if ((int32_t)id == gk_vocab_eot(v)) {
            json_object_set_new(obj, "<|endoftext|>", json_integer(id));
            continue;
        }
        for (size_t k = 0; k < len; k++) o += byte_char(t[k], key + o);
        json_object_set_new(obj, (key[o] = 0, key), json_integer(id));
        tiktoken_line(tk, t, len, id);
    }
    fclose(tk);
    mkdir((tmp_path(path, sizeof path, "hf"), path), 0755);
    tmp_path(path, sizeof path, "hf/vocab.json");
    int rc = json_dump_file(obj, path, 0);
    json_decref(obj);
    size_t ml;
    const char *m = gk_vocab_merges_text(v, &ml);
    tmp_path(path, sizeof path, "hf/merges.txt");
    write_file(path, m, ml);
    return rc;
}

static void test_formats_agree(void)
{
    gk_vocab *v = load_gpt2(), *hf = NULL, *tk = NULL;
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    if (!have_tmp) SKIP("mkdtemp failed");
    char path[4608];
    gk_err e;
    CHECK(write_other_formats(v) == 0);
    tmp_path(path, sizeof path, "hf");
    CHECK_OK(gk_vocab_load(&hf, path, &e), &e);
    tmp_path(path, sizeof path, "gpt2.tiktoken");
    CHECK_OK(gk_vocab_load(&tk, path, &e), &e);
    CHECK(hf && same_vocab(v, hf));
    CHECK(tk && same_vocab(v, tk));
    CHECK(tk && gk_vocab_merges_text(tk, NULL) == NULL);
    CHECK(hf && gk_vocab_merges_text(hf, NULL) != NULL);
    gk_vocab_free(hf);
    gk_vocab_free(tk);
    gk_vocab_free(v);
}

static void test_chars(void)
{
    static const uint32_t cps[] = {0x0, 0x1, '\n', ' ', '"', '/', '\\', 'a', 0x7F, 0xE9, 0x2028,
                                   0x1F600};
    const size_t n = sizeof cps / sizeof cps[0];
    gk_vocab *v, *w = NULL;
    gk_err e;
    char path[4608];
    if (!have_tmp) SKIP("mkdtemp failed");
    CHECK_OK(gk_vocab_from_chars(&v, cps, n, &e), &e);
    CHECK(gk_vocab_type(v) == GK_VOCAB_CHAR && gk_vocab_size(v) == n && gk_vocab_eot(v) == -1);
    tmp_path(path, sizeof path, "chars.json");
    FILE *f = fopen(path, "wb");
    CHECK_OK(gk_vocab_save_chars(v, f, &e), &e);
    fclose(f);
    CHECK_OK(gk_vocab_load(&w, path, &e), &e);
    CHECK(w && same_vocab(v, w));
    size_t len;
    const unsigned char *t = gk_vocab_token(v, 11, &len);
    CHECK(len == 4 && !memcmp(t, "\xf0\x9f\x98\x80", 4));
    /* fingerprint: CRC-32 of the code points as u32le (zlib crc32 of these 8 bytes) */
    gk_vocab *ab;
    CHECK_OK(gk_vocab_from_chars(&ab, (const uint32_t[]){'a', 'b'}, 2, &e), &e);
    CHECK(gk_vocab_fingerprint(ab) == 0xE84C40C4u);
    gk_vocab_free(ab);
    uint32_t *ids = NULL;
    size_t nids = 0, cap = 0;
    const char text[] = "a\n\"\xc3\xa9\0\xf0\x9f\x98\x80";
    CHECK_OK(gk_char_encode(v, text, sizeof text - 1, &ids, &nids, &cap, &e), &e);
    CHECK(nids == 6 && ids[0] == 7 && ids[1] == 2 && ids[2] == 4 && ids[3] == 9 && ids[4] == 0 &&
          ids[5] == 11);
    CHECK(gk_char_encode(v, "ab", 2, &ids, &nids, &cap, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "U+0062"), "%s", e.msg);
    CHECK(gk_vocab_from_chars(&ab, (const uint32_t[]){'b', 'a'}, 2, &e) == GK_EUSAGE);
    CHECK(gk_vocab_from_chars(&ab, (const uint32_t[]){0xD800}, 1, &e) == GK_EUSAGE);
    free(ids);
    gk_vocab_free(v);
    gk_vocab_free(w);
}

/* Loads path (relative to tmpdir unless absolute); expects code and the file name in msg. */
static void expect_error(const char *name, int code, const char *in_msg)
{
    char path[4608];
    gk_vocab *v = (gk_vocab *)1;
    gk_err e = {0, ""};
    if (name[0] == '/') snprintf(path, sizeof path, "%s", name);
    else tmp_path(path, sizeof path, name);
    int rc = gk_vocab_load(&v, path, &e);
    CHECKF(rc == code && e.code == code, "%s: rc %d, want %d (%s)", name, rc, code, e.msg);
    CHECKF(strstr(e.msg, in_msg), "%s: message \"%s\" lacks \"%s\"", name, e.msg, in_msg);
    CHECK(v == NULL);
    if (getenv("VERBOSE")) fprintf(stderr, "  %s -> %s\n", name, e.msg);
    CHECKF(!strchr(e.msg, '\n'), "%s: message has a newline", name);
}

static void make_dir(const char *name, const char *json, size_t jl, const char *merges)
{
    char path[4608];
    tmp_path(path, sizeof path, name);
    mkdir(path, 0755);
    snprintf(path + strlen(path), 64, "/encoder.json");
    write_file(path, json, jl);
    tmp_path(path, sizeof path, name);
    snprintf(path + strlen(path), 64, "/vocab.bpe");
    if (merges) write_file(path, merges, strlen(merges));
}

/* A JSON object for the 256 single bytes (ids in byte order) plus extra entries. */
static char *bytes_json(const char *extra)
{
    json_t *o = json_object();
    for (int b = 0; b < 256; b++) {
        char k[4];
        k[byte_char(b, k)] = 0;
        json_object_set_new(o, k, json_integer(b));
    }
    json_t *x = json_loads(extra, 0, NULL);
    json_object_update(o, x);
    json_decref(x);
    char *s = json_dumps(o, JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static void test_bad_inputs(void)
{
    if (!have_tmp) SKIP("mkdtemp failed");
    char path[4608];
    expect_error("/nonexistent/vocab", GK_ENOTFOUND, "/nonexistent/vocab");
    mkdir((tmp_path(path, sizeof path, "empty"), path), 0755);
    expect_error("empty", GK_ENOTFOUND, "empty");
    /* truncated JSON (the start of the real encoder.json, or a stand-in) */
    char *good = bytes_json("{\"ab\": 256, \"<|endoftext|>\": 257}");
    make_dir("trunc", good, strlen(good) / 2, "#version: 0.2\n");
    expect_error("trunc", GK_EFORMAT, "trunc/encoder.json:1:");
    make_dir("nomerges", good, strlen(good), NULL);
    expect_error("nomerges", GK_ENOTFOUND, "nomerges/vocab.bpe");
    make_dir("okdir", good, strlen(good), "#version: 0.2\na b\n");
    gk_vocab *v;
    gk_err e;
    tmp_path(path, sizeof path, "okdir");
    CHECK_OK(gk_vocab_load(&v, path, &e), &e);
    gk_vocab_free(v);
    make_dir("badmerge", good, strlen(good), "#version: 0.2\na b\nab zq\n");
    expect_error("badmerge", GK_EFORMAT, "badmerge/vocab.bpe:3:");
    make_dir("badmerge2", good, strlen(good), "a c\n");
    expect_error("badmerge2", GK_EFORMAT, "badmerge2/vocab.bpe:1:");
    make_dir("badmerge3", good, strlen(good), "abc\n");
    expect_error("badmerge3", GK_EFORMAT, "badmerge3/vocab.bpe:1:");
    free(good);
    good = bytes_json("{\"ab\": 255}");
    make_dir("dupid", good, strlen(good), "");
    expect_error("dupid", GK_EFORMAT, "dupid/encoder.json: id 255 used twice");
    free(good);
    good = bytes_json("{\"ab\": 257}");
    make_dir("gap", good, strlen(good), "");
    expect_error("gap", GK_EFORMAT, "gap/encoder.json");
    free(good);
    good = bytes_json("{\"ab\": \"x\"}");
    make_dir("notint", good, strlen(good), "");
    expect_error("notint", GK_EFORMAT, "notint/encoder.json");
    free(good);
    good = bytes_json("{\"\xe4\xb8\xad\": 256}");
    make_dir("alphabet", good, strlen(good), "");
    expect_error("alphabet", GK_EFORMAT, "alphabet/encoder.json");
    free(good);
    const char bad64[] = "IQ== 0\n!!!! 1\n";
    write_file((tmp_path(path, sizeof path, "bad.tiktoken"), path), bad64, sizeof bad64 - 1);
    expect_error("bad.tiktoken", GK_EFORMAT, "bad.tiktoken:2:");
    const char gap64[] = "IQ== 0\nIg== 2\n";
    write_file((tmp_path(path, sizeof path, "gap.tiktoken"), path), gap64, sizeof gap64 - 1);
    expect_error("gap.tiktoken", GK_EFORMAT, "gap.tiktoken");
    const char few[] = "IQ== 0\n"; /* a byte token missing */
    write_file((tmp_path(path, sizeof path, "few.tiktoken"), path), few, sizeof few - 1);
    expect_error("few.tiktoken", GK_EFORMAT, "few.tiktoken: no token for the single byte");
    const char chars_bad[] = "[\"a\", \"bc\"]";
    write_file((tmp_path(path, sizeof path, "c1.json"), path), chars_bad, sizeof chars_bad - 1);
    expect_error("c1.json", GK_EFORMAT, "c1.json: element 1");
    const char chars_order[] = "[\"b\", \"a\"]";
    write_file((tmp_path(path, sizeof path, "c2.json"), path), chars_order, sizeof chars_order - 1);
    expect_error("c2.json", GK_EFORMAT, "c2.json");
    const char chars_trunc[] = "[\"a\", ";
    write_file((tmp_path(path, sizeof path, "c3.json"), path), chars_trunc, sizeof chars_trunc - 1);
    expect_error("c3.json", GK_EFORMAT, "c3.json:1:");
}

/* ---------------------------------------------------------------- text round trips */

/* Drops each '\r' before a '\n' in place; returns the new length. */
static size_t lf_only(char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')) s[o++] = s[i];
    return o;
}

/* Compares merges texts line by line (line endings normalized); reports the first difference. */
static int same_merges(char *got, size_t gl, char *want, size_t wl, size_t *lines)
{
    gl = lf_only(got, gl);
    wl = lf_only(want, wl);
    *lines = 0;
    for (size_t i = 0; i < wl; i++) *lines += want[i] == '\n';
    if (gl == wl && !memcmp(got, want, wl)) return 1;
    size_t i = 0, line = 1, start = 0;
    for (; i < gl && i < wl && got[i] == want[i]; i++)
        if (got[i] == '\n') line++, start = i + 1;
    fprintf(stderr, "  merges differ at line %zu: got \"%.40s\", want \"%.40s\"\n", line,
            got + start, want + start);
    return 0;
}

static void test_gpt2_text_round_trip(void)
{
    gk_vocab *v = load_gpt2(), *w = NULL, *x = NULL;
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    char path[4096], *json = NULL, *m = NULL, *m2 = NULL;
    size_t jl = 0, ml = 0, m2l = 0, el = 0, bl = 0, lines;
    gk_err e;
    snprintf(path, sizeof path, "%s/gpt2/encoder.json", test_data_dir());
    char *enc = slurp(path, &el);
    snprintf(path, sizeof path, "%s/gpt2/vocab.bpe", test_data_dir());
    char *bpe = slurp(path, &bl);
    CHECK(enc && bpe);
    CHECK_OK(gk_vocab_to_json(v, &json, &jl, &e), &e);
    CHECK(json && strlen(json) == jl && !strncmp(json, "{\"!\": 0, \"\\\"\": 1, ", 18));
    /* byte for byte OpenAI's encoder.json (which HuggingFace ships as vocab.json) */
    CHECKF(enc && jl == el && !memcmp(json, enc, el), "to_json: %zu bytes, encoder.json %zu", jl,
           el);
    CHECK_OK(gk_vocab_merges(v, &m, &ml, &e), &e);
    CHECK(m && strlen(m) == ml && ml == bl && !memcmp(m, bpe, bl)); /* the kept text */
    CHECK_OK(gk_vocab_load_mem(&w, json, jl, m, ml, "ckpt:tokenizer.vocab", &e), &e);
    CHECK(w && same_vocab(v, w));
    if (w) {
        size_t kl;
        const char *kept = gk_vocab_merges_text(w, &kl);
        char *k = kept ? strdup(kept) : NULL;
        CHECK(k && bpe && same_merges(k, kl, bpe, bl, &lines) && lines == 50001);
        free(k);
    }
    /* without merges: they are regenerated from the ranks */
    CHECK_OK(gk_vocab_load_mem(&x, json, jl, NULL, 0, "ckpt:tokenizer.vocab", &e), &e);
    CHECK(x && same_vocab(v, x) && gk_vocab_merges_text(x, NULL) == NULL);
    if (x) CHECK_OK(gk_vocab_merges(x, &m2, &m2l, &e), &e);
    CHECK(m2 && bpe && same_merges(m2, m2l, bpe, bl, &lines));
    free(m2);
    free(m);
    free(json);
    free(enc);
    free(bpe);
    gk_vocab_free(x);
    gk_vocab_free(w);
    gk_vocab_free(v);
}

static void test_tiktoken_merges(void)
{
    gk_vocab *v = load_gpt2(), *tk = NULL;
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    if (!have_tmp) SKIP("mkdtemp failed");
    char path[4608], *m = NULL;
    size_t ml = 0, bl = 0, lines = 0;
    gk_err e;
    CHECK(write_other_formats(v) == 0);
    tmp_path(path, sizeof path, "gpt2.tiktoken");
    CHECK_OK(gk_vocab_load(&tk, path, &e), &e);
    if (tk) CHECK_OK(gk_vocab_merges(tk, &m, &ml, &e), &e);
    snprintf(path, sizeof path, "%s/gpt2/vocab.bpe", test_data_dir());
    char *bpe = slurp(path, &bl);
    CHECK(m && bpe && strlen(m) == ml && !strncmp(m, "#version: 0.2\n", 14));
    CHECK(m && bpe && same_merges(m, ml, bpe, bl, &lines));
    CHECKF(lines == 50001, "%zu lines", lines);
    free(m);
    free(bpe);
    gk_vocab_free(tk);
    gk_vocab_free(v);
}

/* A small .tiktoken vocab: the 256 bytes, then extra tokens in rank order. */
static gk_vocab *small_tiktoken(const char *name, const char *const *extra, int n, gk_err *e)
{
    char path[4608];
    gk_vocab *v = NULL;
    tmp_path(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    for (int b = 0; b < 256; b++)
        tiktoken_line(f, (const unsigned char[]){(unsigned char)b}, 1, (uint32_t)b);
    for (int i = 0; i < n; i++)
        tiktoken_line(f, (const unsigned char *)extra[i], strlen(extra[i]), 256 + (uint32_t)i);
    fclose(f);
    gk_vocab_load(&v, path, e);
    return v;
}

static void test_merges_small(void)
{
    if (!have_tmp) SKIP("mkdtemp failed");
    gk_err e = {0, ""};
    /* "abc" is made last from "a" + "bc" ("bc" ranks before "ab"); "\xc4 " is in the alphabet */
    static const char *const ok[] = {"bc", "ab", "abc", "\xc4 ", "\"\\"};
    gk_vocab *v = small_tiktoken("small.tiktoken", ok, 5, &e), *w = NULL;
    CHECKF(v != NULL, "%s", e.msg);
    if (!v) return;
    char *m = NULL, *json = NULL;
    size_t ml = 0, jl = 0;
    CHECK_OK(gk_vocab_merges(v, &m, &ml, &e), &e);
    CHECKF(m && !strcmp(m, "#version: 0.2\nb c\na b\na bc\n\xc3\x84 \xc4\xa0\n\" \\\n"), "%s", m);
    CHECK_OK(gk_vocab_to_json(v, &json, &jl, &e), &e);
    CHECK(json && strstr(json, ", \"\\\"\\\\\": 260, \"<|endoftext|>\": 261}") &&
          strstr(json, "\"\\u00c4\\u0120\": 259"));
    CHECK_OK(gk_vocab_load_mem(&w, json, jl, m, ml, "small", &e), &e);
    CHECK(w && same_vocab(v, w));
    free(m);
    free(json);
    gk_vocab_free(w);
    gk_vocab_free(v);
    /* "a\nc" with neither "a\n" nor "\nc": merges cannot make it */
    static const char *const bad[] = {"a\nc"};
    v = small_tiktoken("bad.tiktoken", bad, 1, &e);
    CHECKF(v != NULL, "%s", e.msg);
    if (v) CHECK(gk_vocab_merges(v, &m, &ml, &e) == GK_EFORMAT && m == NULL &&
                 strstr(e.msg, "token 256 \"a\xc4\x8a" "c\"") && !strchr(e.msg, '\n'));
    gk_vocab_free(v);
}

static void test_chars_text(void)
{
    static const uint32_t cps[] = {0x0, '\n', ' ', '"', '\\', 'a', 0xE9, 0x2028, 0x1F600};
    gk_vocab *v = NULL, *w = NULL;
    gk_err e;
    char *json = NULL, *m = (char *)1, path[4608];
    size_t jl = 0, ml = 1, fl = 0;
    if (!have_tmp) SKIP("mkdtemp failed");
    CHECK_OK(gk_vocab_from_chars(&v, cps, sizeof cps / sizeof cps[0], &e), &e);
    CHECK_OK(gk_vocab_to_json(v, &json, &jl, &e), &e);
    CHECK(json && jl && json[jl - 1] == '\n' &&
          !strcmp(json, "[\"\\u0000\",\"\\n\",\" \",\"\\\"\","
                        "\"\\\\\",\"a\",\"\xc3\xa9\",\"\xe2\x80\xa8\",\"\xf0\x9f\x98\x80\"]\n"));
    tmp_path(path, sizeof path, "chars2.json");
    FILE *f = fopen(path, "wb");
    CHECK_OK(gk_vocab_save_chars(v, f, &e), &e);
    fclose(f);
    char *saved = slurp(path, &fl);
    CHECK(saved && json && fl == jl && !memcmp(saved, json, jl));
    CHECK_OK(gk_vocab_merges(v, &m, &ml, &e), &e);
    CHECK(m == NULL && ml == 0);
    CHECK_OK(gk_vocab_load_mem(&w, json, jl, NULL, 0, "chars", &e), &e);
    CHECK(w && same_vocab(v, w));
    gk_vocab_free(w);
    /* lengths are honoured: the text need not end where the buffer does */
    const char buf[] = " [\"b\",\"x\"]garbage";
    CHECK_OK(gk_vocab_load_mem(&w, buf, 10, "", 0, "chars", &e), &e);
    CHECK(w && gk_vocab_size(w) == 2 && gk_vocab_type(w) == GK_VOCAB_CHAR);
    gk_vocab_free(w);
    gk_vocab_free(v);
    CHECK_OK(gk_vocab_from_chars(&v, NULL, 0, &e), &e);
    free(json);
    CHECK_OK(gk_vocab_to_json(v, &json, &jl, &e), &e);
    CHECK(json && !strcmp(json, "[]\n") && jl == 3);
    CHECK_OK(gk_vocab_load_mem(&w, json, jl, NULL, 0, "chars", &e), &e);
    CHECK(w && gk_vocab_size(w) == 0);
    gk_vocab_free(w);
    gk_vocab_free(v);
    free(json);
    free(saved);
}

/* load_mem of (json, merges) must fail with GK_EFORMAT and a message holding want. */
static void expect_mem_error(const char *json, const char *merges, const char *want)
{
    gk_vocab *v = (gk_vocab *)1;
    gk_err e = {0, ""};
    const char *origin = "model.safetensors:tokenizer.vocab";
    int rc = gk_vocab_load_mem(&v, json, strlen(json), merges, merges ? strlen(merges) : 0,
                               origin, &e);
    CHECKF(rc == GK_EFORMAT && e.code == rc, "%.40s: rc %d (%s)", json, rc, e.msg);
    CHECKF(!strncmp(e.msg, origin, strlen(origin)), "%.40s: message \"%s\" lacks the origin", json,
           e.msg);
    CHECKF(strstr(e.msg, want), "%.40s: message \"%s\" lacks \"%s\"", json, e.msg, want);
    CHECKF(!strchr(e.msg, '\n'), "%.40s: message has a newline", json);
    CHECK(v == NULL);
    if (getenv("VERBOSE")) fprintf(stderr, "  %.30s -> %s\n", json, e.msg);
}

static void test_load_mem_bad(void)
{
    char *good = bytes_json("{\"ab\": 256, \"<|endoftext|>\": 257}");
    gk_vocab *v = NULL;
    gk_err e;
    CHECK_OK(gk_vocab_load_mem(&v, good, strlen(good), "#version: 0.2\na b\n", 18, "x", &e), &e);
    CHECK(v && gk_vocab_size(v) == 258 && gk_vocab_eot(v) == 257);
    gk_vocab_free(v);
    expect_mem_error("", NULL, "not a vocab");
    expect_mem_error("  \"abc\"", NULL, "not a vocab");
    expect_mem_error("42", NULL, "not a vocab");
    expect_mem_error("{\"a\": ", NULL, "tokenizer.vocab:1:");
    expect_mem_error("[\"a\", ", NULL, "tokenizer.vocab:1:");
    expect_mem_error("{\"a\": 0, \"a\": 1}", NULL, "tokenizer.vocab:1:");
    expect_mem_error("[1, 2]", NULL, "element 0");
    expect_mem_error("[\"a\", [\"b\"]]", NULL, "element 1");
    expect_mem_error("[\"b\", \"a\"]", NULL, "ascending");
    expect_mem_error("[\"a\"]", "a b\n", "no merges");
    expect_mem_error("{\"!\": \"x\"}", NULL, "id must be an integer");
    expect_mem_error("{\"!\": 1.5}", NULL, "id must be an integer");
    expect_mem_error("{\"!\": -1}", NULL, "id must be an integer");
    expect_mem_error("{\"!\": 0}", NULL, "single byte");
    expect_mem_error("{\"\xe4\xb8\xad\": 0}", NULL, "byte alphabet");
    expect_mem_error(good, "#version: 0.2\na b\nab zq\n", "tokenizer.vocab (merges):3:");
    expect_mem_error(good, "a  b\n", "tokenizer.vocab (merges):1:");
    free(good);
}

int main(void)
{
    have_tmp = mkdtemp(tmpdir) != NULL;
    RUN(test_gpt2_dir);
    RUN(test_formats_agree);
    RUN(test_chars);
    RUN(test_bad_inputs);
    RUN(test_gpt2_text_round_trip);
    RUN(test_tiktoken_merges);
    RUN(test_merges_small);
    RUN(test_chars_text);
    RUN(test_load_mem_bad);
    if (have_tmp) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return TEST_END();
}
