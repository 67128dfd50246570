/* test_ckpt_q8.c: int8 checkpoint tensors (common/io/q8.c, gk_ckpt_read; gpt-formats(5)): the
 * Q8_0 block rule on hand-checked values (exact halves among them) and a strided block, which axis
 * a scales tensor names, and int8 parameters read back widened (blocks along either axis) with
 * every malformed case (no scales, scales of another shape or dtype, a non-finite scale, an int8
 * AdamW moment) refused in one message naming the file and tensor. */
#include <stdint.h>
#include <unistd.h>

#include "common/io/ckpt.h"
#include "common/io/q8.h"
#include "common/io/safetensors.h"
#include "test.h"

static char dir[64];

static void test_q8_rule(void)
{
    float x[64];
    for (int i = 0; i < 32; i++) {
        x[2 * i] = (float)(i - 16) / 8.0f; /* -2 .. 1.875, every other element */
        x[2 * i + 1] = 100.0f;             /* skipped by the stride */
    }
    uint16_t d;
    int8_t q[32];
    gk_q8_quantize32(x, 2, &d, q);
    CHECK(d == gk_f32_to_f16(2.0f / 127.0f));
    CHECK(q[0] == -127 && q[16] == 0 && q[17] == 8 && q[31] == 119); /* 1.875 * 63.5 = 119.06 */
    /* exact halves (scale 1: amax 127; scale 1/2: amax 63.5) round away from zero, as
     * llama.cpp's roundf does (rintf's ties to even would give 0, -2, 2, 126 ...) */
    float halves[32] = {127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f, 3.0f};
    gk_q8_quantize32(halves, 1, &d, q);
    CHECK(d == gk_f32_to_f16(1.0f));
    CHECK(q[1] == 1 && q[2] == -1 && q[3] == 2 && q[4] == -2 && q[5] == 3 && q[6] == -3);
    CHECK(q[7] == 127 && q[8] == -127 && q[9] == 3 && q[10] == 0);
    float quarters[32] = {-63.5f, 0.25f, -0.25f, 1.25f, 62.25f};
    gk_q8_quantize32(quarters, 1, &d, q);
    CHECK(d == gk_f32_to_f16(0.5f));
    CHECK(q[0] == -127 && q[1] == 1 && q[2] == -1 && q[3] == 3 && q[4] == 125);
    float zero[32] = {0};
    gk_q8_quantize32(zero, 1, &d, q);
    CHECK(d == 0 && q[0] == 0 && q[31] == 0);
    int64_t shape[2] = {64, 3}, s0[2] = {2, 3}, s1[2] = {64, 1}, bad[2] = {2, 1};
    int64_t wte[2] = {5, 64}, w1[2] = {5, 2};
    CHECK(gk_q8_axis(shape, s0) == 0 && gk_q8_axis(shape, bad) == -1);
    CHECK(gk_q8_axis(shape, s1) == -1); /* 3 is no multiple of 32 */
    CHECK(gk_q8_axis(wte, w1) == 1);
}

/* a file with w (I8, shape) and, unless sdt is -1, scales of shape ss and dtype sdt */
static int write_q8(const char *path, const int8_t *w, const int64_t *shape, const void *s,
                    const int64_t *ss, int sdt, int moment)
{
    gk_st_writer *wr = NULL;
    gk_err e = {0};
    int rc = gk_st_writer_create(&wr, &e);
    const char *name = moment ? "optimizer.m.transformer.h.0.mlp.c_fc.weight"
                              : "transformer.h.0.mlp.c_fc.weight";
    if (!rc) rc = gk_st_writer_add(wr, name, GK_DT_I8, 2, shape, w, &e);
    if (!rc && sdt >= 0)
        rc = gk_st_writer_add(wr, "q8_0.transformer.h.0.mlp.c_fc.weight", (enum gk_dtype)sdt, 2, ss,
                              s, &e);
    if (!rc) rc = gk_st_writer_write(wr, path, &e);
    gk_st_writer_free(wr);
    return rc;
}

/* reads the parameter back: 0 and out, or the error's code and message in e */
static int read_back(const char *path, int kind, const int64_t *shape, float *out, gk_err *e)
{
    gk_ckpt *c = NULL;
    int rc = gk_ckpt_open(&c, path, e);
    if (!rc) rc = gk_ckpt_read(c, kind, "transformer.h.0.mlp.c_fc.weight", 2, shape, out, e);
    gk_ckpt_close(c);
    return rc;
}

static void test_read_int8(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/q.safetensors", dir);
    int8_t w[64 * 2];
    for (int i = 0; i < 128; i++) w[i] = (int8_t)(i % 255 - 127 + (i % 3));
    uint16_t s0[2 * 2] = {gk_f32_to_f16(0.5f), gk_f32_to_f16(0.25f), gk_f32_to_f16(2.0f),
                          gk_f32_to_f16(-1.0f)};
    int64_t shape[2] = {64, 2}, ss0[2] = {2, 2};
    float out[128];
    gk_err e = {0};
    /* blocks along axis 0: element (i, j) takes scale (i / 32, j) */
    CHECK_OK(write_q8(path, w, shape, s0, ss0, GK_DT_F16, 0), &e);
    CHECK_OK(read_back(path, 0, shape, out, &e), &e);
    int bad = 0;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 2; j++)
            bad += out[i * 2 + j] != gk_f16_to_f32(s0[(i / 32) * 2 + j]) * w[i * 2 + j];
    CHECK(bad == 0 && out[0] == 0.5f * w[0] && out[127] == -1.0f * w[127]);
    /* blocks along axis 1: a (2, 64) tensor with scales (2, 2) */
    int64_t shape1[2] = {2, 64};
    CHECK_OK(write_q8(path, w, shape1, s0, ss0, GK_DT_F16, 0), &e);
    CHECK_OK(read_back(path, 0, shape1, out, &e), &e);
    CHECK(out[31] == 0.5f * w[31] && out[32] == 0.25f * w[32] && out[64] == 2.0f * w[64] &&
          out[127] == -1.0f * w[127]);
    /* refused: no scales, scales of another shape, F32 scales, a NaN scale, an int8 moment */
    CHECK_OK(write_q8(path, w, shape, s0, ss0, -1, 0), &e);
    CHECK(read_back(path, 0, shape, out, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "q.safetensors: int8 tensor 'transformer.h.0.mlp.c_fc.weight' needs F16 "
                         "scales 'q8_0.transformer.h.0.mlp.c_fc.weight' of shape [64/32, 2] or "
                         "[64, 2/32] (absent)") != NULL, "%s", e.msg);
    int64_t ss_bad[2] = {1, 4};
    CHECK_OK(write_q8(path, w, shape, s0, ss_bad, GK_DT_F16, 0), &e);
    CHECK(read_back(path, 0, shape, out, &e) == GK_EFORMAT);
    float s32[4] = {1, 1, 1, 1};
    CHECK_OK(write_q8(path, w, shape, s32, ss0, GK_DT_F32, 0), &e);
    CHECK(read_back(path, 0, shape, out, &e) == GK_EFORMAT);
    s0[3] = 0x7e00; /* NaN */
    CHECK_OK(write_q8(path, w, shape, s0, ss0, GK_DT_F16, 0), &e);
    CHECK(read_back(path, 0, shape, out, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "non-finite scale at element 3 of 4") != NULL, "%s", e.msg);
    s0[3] = gk_f32_to_f16(1.0f);
    CHECK_OK(write_q8(path, w, shape, s0, ss0, GK_DT_F16, 1), &e);
    CHECK(read_back(path, 'm', shape, out, &e) == GK_EFORMAT);
    CHECKF(strstr(e.msg, "has dtype I8, expected F32, BF16 or F16") != NULL, "%s", e.msg);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_ckq8_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN(test_q8_rule);
    RUN(test_read_int8);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return TEST_END();
}
