/* fuzz_ckpt_llmc.c: gpt-ckpt import's reader of llm.c checkpoints (ckpt/llmc.c: the 1024-byte
 * header, the model config it gives, the file size it implies, fp32 and bf16 values) on
 * arbitrary bytes. Properties: whatever reads has a valid config, exactly the size its header
 * implies (so no header can make it allocate more than the file holds), and parameters that
 * follow the tensor table back to back inside the buffer; a failure is one GK_EFORMAT. */
#include <string.h>

#include "ckpt/ck.h"
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
        FZ_ASSERT(p->shape[0] == x->shape[0] && p->shape[1] == x->shape[1], "param %s shape", x->name);
        for (size_t k = 0; k < x->numel; k++) /* every value is there to read (ASan) */
            sum += p->data[k];
        at += x->numel;
    }
    FZ_ASSERT(at == buf + tab->numel, "parameters cover %td of %zu floats", at - buf, tab->numel);
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file(0, data, size);
    if (!path)
        return 0;
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
        FZ_ASSERT(rc == GK_EFORMAT && e.msg[0] && !params && !buf, "ck_llmc_read: %d '%s'", rc, e.msg);
    }
    return 0;
}
