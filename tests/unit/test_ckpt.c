/* test_ckpt.c: checkpoint save/load: parameters, moments, metadata, embedded vocabulary,
 * bf16 storage, shape and dtype errors, non-finite values refused (every dtype, every position). */
#include <stdint.h>
#include <unistd.h>

#include "common/io/ckpt.h"
#include "common/io/safetensors.h"
#include "test.h"

static char dir[64];

static void test_round_trip(void)
{
    float w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {-1, 0.5f, 0.25f}, m[6] = {0.1f}, v[6] = {0.2f};
    gk_ckpt_param p[2] = {
        {"transformer.h.0.mlp.c_fc.weight", 2, {2, 3}, w, m, v},
        {"transformer.h.0.mlp.c_fc.bias", 1, {3, 0}, b, NULL, NULL},
    };
    uint32_t cps[3] = {'\n', 'a', 0xe9};
    gk_vocab *voc = NULL;
    gk_err e = {0};
    CHECK_OK(gk_vocab_from_chars(&voc, cps, 3, &e), &e);
    gk_ckpt_info info = {"{\"n_layer\":1}", "{\"step\":7}", voc, 0, NULL, NULL};
    char path[128];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    CHECK_OK(gk_ckpt_save(path, p, 2, &info, &e), &e);

    gk_ckpt *c = NULL;
    CHECK_OK(gk_ckpt_open(&c, path, &e), &e);
    if (!c)
        return;
    CHECK(strcmp(gk_ckpt_config_json(c), "{\"n_layer\":1}") == 0);
    CHECK(strcmp(gk_ckpt_train_json(c), "{\"step\":7}") == 0);
    CHECK(gk_ckpt_has_optimizer(c));
    float out[6] = {0};
    int64_t shape[2] = {2, 3};
    CHECK_OK(gk_ckpt_read(c, 0, p[0].name, 2, shape, out, &e), &e);
    CHECK(memcmp(out, w, sizeof w) == 0);
    CHECK_OK(gk_ckpt_read(c, 'm', p[0].name, 2, shape, out, &e), &e);
    CHECK(out[0] == 0.1f && out[1] == 0);
    CHECK(gk_ckpt_read(c, 'v', p[1].name, 1, shape + 1, out, &e) == GK_ENOTFOUND);
    int64_t wrong[2] = {3, 2};
    CHECK(gk_ckpt_read(c, 0, p[0].name, 2, wrong, out, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "has shape [2, 3], expected [3, 2]") != NULL, "%s", e.msg);
    gk_vocab *back = NULL;
    CHECK_OK(gk_ckpt_vocab(c, &back, &e), &e);
    CHECK(back && gk_vocab_fingerprint(back) == gk_vocab_fingerprint(voc));
    gk_vocab_free(back);
    gk_ckpt_close(c);
    gk_vocab_free(voc);
}

static void test_bf16_storage(void)
{
    float w[4] = {1.0f, -2.5f, 3.140625f, 1e-3f};
    gk_ckpt_param p = {"transformer.wte.weight", 2, {2, 2}, w, NULL, NULL};
    gk_ckpt_info info = {"{}", NULL, NULL, GK_DT_BF16, NULL, NULL};
    char path[128];
    snprintf(path, sizeof path, "%s/b.safetensors", dir);
    gk_err e = {0};
    CHECK_OK(gk_ckpt_save(path, &p, 1, &info, &e), &e);
    gk_ckpt *c = NULL;
    CHECK_OK(gk_ckpt_open(&c, path, &e), &e);
    if (!c)
        return;
    const gk_st_tensor *t = gk_st_find(gk_ckpt_file(c), "transformer.wte.weight");
    CHECK(t && t->dtype == GK_DT_BF16 && t->nbytes == 8);
    float out[4];
    CHECK_OK(gk_ckpt_read(c, 0, "transformer.wte.weight", 2, p.shape, out, &e), &e);
    CHECK(out[0] == 1.0f && out[1] == -2.5f && out[2] == 3.140625f);
    CHECK(out[3] > 0.000995f && out[3] < 0.001005f); /* bf16 keeps 8 bits of mantissa */
    CHECK(!gk_ckpt_has_optimizer(c));
    gk_vocab *none = NULL;
    CHECK(gk_ckpt_vocab(c, &none, &e) == GK_ENOTFOUND);
    gk_ckpt_close(c);
}

/* One NaN or infinity at position bad of an n-value tensor stored as dtype: the read fails
 * naming the file, tensor and element; the same tensor all finite reads back. */
static void nonfinite_case(int dtype, size_t n, size_t bad, float value, const char *word)
{
    float *w = malloc(n * sizeof *w), *out = malloc(n * sizeof *out);
    if (!w || !out) {
        CHECK(!"out of memory");
        free(w);
        free(out);
        return;
    }
    for (size_t i = 0; i < n; i++)
        w[i] = (float)(i % 7) - 3.0f;
    gk_ckpt_param p = {"transformer.h.0.mlp.c_proj.weight", 1, {(int64_t)n, 0}, w, w, NULL};
    gk_ckpt_info info = {"{}", NULL, NULL, dtype, NULL, NULL};
    char path[128];
    snprintf(path, sizeof path, "%s/nan.safetensors", dir);
    gk_err e = {0};
    gk_ckpt *c = NULL;
    CHECK_OK(gk_ckpt_save(path, &p, 1, &info, &e), &e);
    CHECK_OK(gk_ckpt_open(&c, path, &e), &e);
    CHECK_OK(c ? gk_ckpt_read(c, 0, p.name, 1, p.shape, out, &e) : -1, &e);
    gk_ckpt_close(c);
    w[bad] = value;
    CHECK_OK(gk_ckpt_save(path, &p, 1, &info, &e), &e);
    c = NULL;
    CHECK_OK(gk_ckpt_open(&c, path, &e), &e);
    char want[160];
    snprintf(want, sizeof want, "nan.safetensors: tensor '%s' holds %s at element %zu of %zu",
             p.name, word, bad, n);
    /* the parameter, then its 'm' moment (always F32: 1e6 is finite there) */
    for (int kind = 0; c && kind < (isfinite(value) ? 1 : 2); kind++) {
        CHECK(gk_ckpt_read(c, kind ? 'm' : 0, p.name, 1, p.shape, out, &e) == GK_EFORMAT);
        if (kind)
            snprintf(want, sizeof want, "tensor 'optimizer.m.%s' holds %s at element %zu", p.name,
                     word, bad);
        CHECKF(strstr(e.msg, want) != NULL, "%s (want %s)", e.msg, want);
    }
    gk_ckpt_close(c);
    free(w);
    free(out);
}

static void test_nonfinite(void)
{
    nonfinite_case(GK_DT_F32, 5, 2, NAN, "NaN");
    nonfinite_case(GK_DT_F32, 100000, 99999, INFINITY, "+Inf"); /* the tail, past a chunk */
    nonfinite_case(GK_DT_F32, 100000, 16384, -INFINITY, "-Inf"); /* a chunk's first element */
    nonfinite_case(GK_DT_F32, 40000, 17, NAN, "NaN");
    nonfinite_case(GK_DT_BF16, 40000, 33333, NAN, "NaN");
    nonfinite_case(GK_DT_F16, 50, 0, INFINITY, "+Inf");
    nonfinite_case(GK_DT_F16, 50, 49, 1e6f, "+Inf"); /* too large for F16: stored as infinity */
}

static void test_bad_file(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite("\x10\0\0\0\0\0\0\0{not json", 1, 17, f) == 17);
    if (f)
        fclose(f);
    gk_ckpt *c = NULL;
    gk_err e = {0};
    CHECK(gk_ckpt_open(&c, path, &e) != 0);
    CHECKF(strstr(e.msg, "bad.safetensors") != NULL, "%s", e.msg);
}

/* Flips one byte of path at offset off. */
static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    int c = f && fseek(f, off, SEEK_SET) == 0 ? fgetc(f) : EOF;
    CHECK(c != EOF);
    if (c != EOF && fseek(f, off, SEEK_SET) == 0)
        fputc(c ^ 0x10, f);
    if (f)
        fclose(f);
}

/* A flipped byte in a tensor's data is refused naming that tensor; a file without the
 * checksums key (as written before them) opens unverified. */
static void test_checksums(void)
{
    float w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {-1, 0.5f, 0.25f};
    gk_ckpt_param p[2] = {
        {"transformer.h.0.mlp.c_fc.weight", 2, {2, 3}, w, NULL, NULL},
        {"transformer.h.0.mlp.c_fc.bias", 1, {3, 0}, b, NULL, NULL},
    };
    gk_ckpt_info info = {"{}", NULL, NULL, 0, NULL, NULL};
    char path[128];
    snprintf(path, sizeof path, "%s/sum.safetensors", dir);
    gk_err e = {0};
    CHECK_OK(gk_ckpt_save(path, p, 2, &info, &e), &e);
    gk_st_file *f = NULL;
    int verified = 0;
    CHECK_OK(gk_st_open(&f, path, &e), &e);
    CHECK_OK(f ? gk_st_verify(f, &verified, &e) : -1, &e);
    CHECK(verified == 1);
    const gk_st_tensor *t = f ? gk_st_find(f, p[1].name) : NULL;
    long off = t ? (long)((const char *)t->data - (const char *)gk_st_at(f, 0)->data) : -1;
    long data_start = f ? (long)(gk_st_at(f, 0)->offset) : 0;
    long hlen = 0;
    FILE *fp = fopen(path, "rb");
    unsigned char len8[8] = {0};
    if (fp && fread(len8, 1, 8, fp) == 8)
        for (int i = 7; i >= 0; i--) hlen = hlen * 256 + len8[i];
    if (fp) fclose(fp);
    gk_st_close(f);
    CHECK(off >= 0 && data_start == 0);
    flip_byte(path, 8 + hlen + off + 1);
    gk_ckpt *c = NULL;
    CHECK(gk_ckpt_open(&c, path, &e) == GK_EFORMAT && c == NULL);
    char want[300];
    snprintf(want, sizeof want, "%s: tensor %s: checksum mismatch (the file is damaged)", path,
             p[1].name);
    CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
    /* the key renamed (same length), as a file written before checksums: opens unverified */
    static char buf[4096];
    fp = fopen(path, "r+b");
    size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    char *k = n > 8 ? memmem(buf, n, "gptkit.checksums", 16) : NULL;
    CHECK(k != NULL);
    if (k && fseek(fp, (long)(k - buf) + 15, SEEK_SET) == 0)
        fputc('z', fp);
    if (fp) fclose(fp);
    CHECK_OK(gk_ckpt_open(&c, path, &e), &e);
    float out[3] = {0};
    int64_t shape[1] = {3};
    CHECK_OK(c ? gk_ckpt_read(c, 0, p[1].name, 1, shape, out, &e) : -1, &e);
    CHECK(memcmp(out, b, sizeof b) != 0); /* the damage was not seen */
    gk_ckpt_close(c);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_ckpt_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN(test_round_trip);
    RUN(test_bf16_storage);
    RUN(test_nonfinite);
    RUN(test_bad_file);
    RUN(test_checksums);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return TEST_END();
}
