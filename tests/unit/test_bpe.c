/* test_bpe.c: GPT-2 BPE encoding against tiktoken's ids (shared tokenizer cases), the heap
 * merge against the scan, the ASCII pre-tokenizer against the PCRE2 regex, long pieces and
 * split points. */
#include <dirent.h>
#include <time.h>

#include "common/bpe.h"
#include "common/pretok.h"
#include "common/vocab.h"
#include "test.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while ((got = fread(b + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) b = realloc(b, cap *= 2);
    fclose(f);
    *len = n;
    return b;
}

/* Reads a file of space-separated ids; returns NULL if absent. */
static uint32_t *read_ids(const char *path, size_t *n)
{
    size_t len;
    char *t = slurp(path, &len);
    if (!t) return NULL;
    uint32_t *ids = malloc((len + 1) * sizeof *ids);
    char *p = t, *end = t + len;
    *n = 0;
    while (p < end) {
        if (*p < '0' || *p > '9') {
            p++;
            continue;
        }
        uint32_t v = 0;
        while (p < end && *p >= '0' && *p <= '9') v = v * 10 + (uint32_t)(*p++ - '0');
        ids[(*n)++] = v;
    }
    free(t);
    return ids;
}

static gk_vocab *load_gpt2(void)
{
    char path[4096];
    gk_err e;
    gk_vocab *v = NULL;
    snprintf(path, sizeof path, "%s/gpt2", test_data_dir());
    if (gk_vocab_load(&v, path, &e)) return NULL;
    return v;
}

static int decodes_to(const gk_vocab *v, const uint32_t *ids, size_t n, const char *t, size_t len)
{
    size_t o = 0, k;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *b = gk_vocab_token(v, ids[i], &k);
        if (!b || o + k > len || memcmp(t + o, b, k)) return 0;
        o += k;
    }
    return o == len;
}

static int same(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

/* Encodes text with a fresh array; returns the ids (caller frees), count in *n. */
static uint32_t *enc(gk_bpe *b, const char *t, size_t len, int special, size_t *n)
{
    uint32_t *ids = NULL;
    size_t cap = 0;
    gk_err e;
    *n = 0;
    CHECK_OK(gk_bpe_encode(b, t, len, special, &ids, n, &cap, &e), &e);
    return ids;
}

static void check_case(gk_bpe *b, gk_bpe *heap, const gk_vocab *v, const char *dir, const char *name)
{
    char path[4096];
    size_t len, nw, n, nh;
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    char *t = slurp(path, &len);
    snprintf(path, sizeof path, "%s/%s.ids", dir, name);
    uint32_t *want = read_ids(path, &nw);
    CHECKF(t && want, "%s: unreadable", name);
    if (!t || !want) return;
    uint32_t *got = enc(b, t, len, 0, &n), *got2 = enc(b, t, len, 0, &nh); /* 2nd: cached */
    CHECKF(same(got, n, want, nw), "%s: %zu ids, want %zu (or different ids)", name, n, nw);
    CHECKF(same(got2, nh, want, nw), "%s: second (cached) encode differs", name);
    CHECKF(decodes_to(v, got, n, t, len), "%s: decode differs from the text", name);
    free(got2);
    got2 = enc(heap, t, len, 0, &nh);
    CHECKF(same(got2, nh, want, nw), "%s: heap merge differs", name);
    free(got2);
    free(got);
    free(want);
    snprintf(path, sizeof path, "%s/%s.special_ids", dir, name);
    if ((want = read_ids(path, &nw)) != NULL) {
        got = enc(b, t, len, 1, &n);
        CHECKF(same(got, n, want, nw), "%s: special: %zu ids, want %zu", name, n, nw);
        CHECKF(decodes_to(v, got, n, t, len), "%s: special: decode differs", name);
        free(got);
        free(want);
    }
    free(t);
}

static void test_cases(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tokenizer-cases", test_data_dir());
    DIR *d = opendir(dir);
    gk_vocab *v = load_gpt2();
    if (!d || !v) {
        if (d) closedir(d);
        gk_vocab_free(v);
        SKIP("no tokenizer-cases or gpt2 vocab in the test data dir");
    }
    gk_bpe *b, *h;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    CHECK_OK(gk_bpe_create(&h, v, &e), &e);
    gk_bpe_set_heap_min(h, 2);
    struct dirent *de;
    int count = 0;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".txt")) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(l - 4), de->d_name);
        check_case(b, h, v, dir, name);
        count++;
    }
    closedir(d);
    CHECKF(count >= 34, "only %d cases found", count);
    gk_bpe_free(b);
    gk_bpe_free(h);
    gk_vocab_free(v);
}

/* Small cases checked with Python tiktoken: U+180E is not White_Space for tiktoken (PCRE2's
 * own \s would say it is), NUL is byte token 188, special token handling at the edges. */
static void test_extra_cases(void)
{
    static const struct {
        const char *t;
        size_t len;
        int special;
        uint32_t ids[8];
        size_t n;
    } c[] = {
        {"a\xe1\xa0\x8e b", 6, 0, {64, 157, 254, 236, 275}, 5},
        {"a \xe1\xa0\x8e" "b", 6, 0, {64, 28053, 254, 236, 65}, 5},
        {"\0", 1, 0, {188}, 1},
        {"<|endoftext|>", 13, 1, {50256}, 1},
        {"", 0, 1, {0}, 0},
    };
    gk_vocab *v = load_gpt2();
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    gk_bpe *b;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        size_t n;
        uint32_t *ids = enc(b, c[i].t, c[i].len, c[i].special, &n);
        CHECKF(same(ids, n, c[i].ids, c[i].n), "extra case %zu", i);
        free(ids);
    }
    gk_bpe_free(b);
    gk_vocab_free(v);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Long pieces take O(n log n): counts checked with Python tiktoken. */
static void test_long_pieces(void)
{
    gk_vocab *v = load_gpt2();
    if (!v) SKIP("no gpt2 vocab in the test data dir");
    gk_bpe *b;
    gk_err e;
    CHECK_OK(gk_bpe_create(&b, v, &e), &e);
    size_t n = 200001, got;
    char *t = malloc(2 * n);
    memset(t, 'a', n);
    double t0 = now();
    uint32_t *ids = enc(b, t, n - 1, 0, &got);
    CHECKF(got == 50000, "200000 a: %zu ids", got);
    free(ids);
    ids = enc(b, t, n, 0, &got);
    CHECKF(got == 50001, "200001 a: %zu ids", got);
    free(ids);
    memset(t, ' ', 100000);
    ids = enc(b, t, 100000, 0, &got);
    CHECKF(got == 100000 / 2, "100000 spaces: %zu ids", got); /* "  " is token 220+? */
    free(ids);
    for (size_t i = 0; i < 100000; i++) memcpy(t + 2 * i, "\xc3\xa9", 2);
    ids = enc(b, t, 200000, 0, &got);
    CHECKF(got == 100000, "100000 e-acute: %zu ids", got);
    free(ids);
    double dt = now() - t0;
    CHECKF(dt < 5.0, "long pieces took %.2f s", dt);
    free(t);
    gk_bpe_free(b);
    gk_vocab_free(v);
}
