/* fuzz_ckpt_llmc.c: gpt-ckpt import's reader of llm.c checkpoints (ckpt/llmc.c: the 1024-byte
 * header, the model config it gives, the file size it implies, fp32 and bf16 values) on
 * arbitrary bytes. Properties: whatever reads has a valid config, exactly the size its header
 * implies (so no header can make it allocate more than the file holds), and parameters that
 * follow the tensor table back to back inside the buffer; a failure is one GK_EFORMAT. Each
 * input also runs cut or padded to the size its header implies (up to 4 MB). */
#include <string.h>

#include "ckpt/ck.h"
#include "common/le.h"
#include "tests/fuzz/fuzz.h"

static void check_read(const gk_gpt2_config *cfg, const ck_table *tab, const gk_ckpt_param *params,
                       const float *buf, size_t size)
{
    gk_err e = {0};
    FZ_ASSERT(gk_gpt2_config_check(cfg, &e) == 0, "config: %s", e.msg);
    /* the file holds at least every parameter (padded vocab rows and all) at 2 bytes each */
    FZ_ASSERT(size >= 1024 + tab->numel * 2, "%zu bytes hold %zu parameters", size, tab->numel);
    const float *at = buf;
    double sum = 0;
    for (int i = 0; i < tab->n; i++) {
        const ck_entry *x = &tab->e[i];
        const gk_ckpt_param *p = &params[i];
        FZ_ASSERT(p->data == at && p->ndim == x->ndim && !strcmp(p->name, x->name), "param %d", i);
        FZ_ASSERT(p->shape[0] == x->shape[0] && p->shape[1] == x->shape[1], "param %s shape",
                  x->name);
        for (size_t k = 0; k < x->numel; k++) /* every value is there to read (ASan) */
            sum += p->data[k];
        at += x->numel;
    }
    FZ_ASSERT(at == buf + tab->numel, "parameters cover %td of %zu floats", at - buf, tab->numel);
    (void)sum;
}

static void run(const uint8_t *data, size_t size)
{
    const char *path = fz_file(0, data, size);
    if (!path)
        return;
    gk_gpt2_config cfg;
    ck_table tab;
    gk_ckpt_param *params = NULL;
    float *buf = NULL;
    gk_err e = {0};
    int rc = ck_llmc_read(path, &cfg, &tab, &params, &buf, &e);
    if (rc == 0) {
        check_read(&cfg, &tab, params, buf, size);
        ck_table_free(&tab);
        free(params);
        free(buf);
    } else {
        FZ_ASSERT(rc == GK_EFORMAT && e.msg[0] && !params && !buf, "ck_llmc_read: %d '%s'", rc,
                  e.msg);
    }
}

/* The size llm.c's header in data implies (ckpt/llmc.c's format comment), or 0. */
static size_t implied_size(const uint8_t *data, size_t size)
{
    if (size < 1024)
        return 0;
    int32_t h[8];
    for (int i = 0; i < 8; i++)
        h[i] = (int32_t)gk_le32(data + 4 * i);
    gk_gpt2_config cfg = {h[4], h[5], h[6], h[2], h[3], 1, 0.0f};
    ck_table t;
    gk_err e = {0};
    if ((h[1] != 3 && h[1] != 5) || h[7] < h[3] || ck_table_make(&t, &cfg, &e) != 0)
        return 0;
    size_t n = t.numel + (size_t)(h[7] - h[3]) * (size_t)h[6];
    ck_table_free(&t);
    return n > (1u << 20) ? 0 : 1024 + n * (h[1] == 5 ? 2 : 4);
}

/* The input as it is, and (when a mutation changed the dims in its header) cut or padded with
 * zeros to the size the header implies, so that the values are read for many shapes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size);
    size_t want = implied_size(data, size);
    if (!want || want == size)
        return 0;
    uint8_t *fixed = calloc(1, want);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size < want ? size : want);
    run(fixed, want);
    free(fixed);
    return 0;
}
