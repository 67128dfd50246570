/* fuzz_ckpt_config.c: the model configs gpt-ckpt reads: a HuggingFace config.json as import
 * reads it (ck_hf_config_load, ckpt/table.c: GPT-2 keys, n_inner, model_type, the warnings) and
 * a checkpoint's gptkit.config metadata (gk_gpt2_config_parse), on arbitrary bytes, then the
 * tensor table of what they accept. Properties: an accepted config passes
 * gk_gpt2_config_check, its tensor table is made, and gptkit.config written for it
 * (gk_gpt2_config_json) parses back to the same config; a refusal is one GK_EFORMAT. */
#include <string.h>

#include "ckpt/ck.h"
#include "common/log.h"
#include "tests/fuzz/fuzz.h"

static void check_config(const gk_gpt2_config *c, const char *what)
{
    gk_err e = {0};
    FZ_ASSERT(gk_gpt2_config_check(c, &e) == 0, "%s: accepted, but %s", what, e.msg);
    ck_table t;
    int rc = ck_table_make(&t, c, &e);
    FZ_ASSERT(rc == 0, "%s: table: %s", what, e.msg);
    FZ_ASSERT(t.n == t.n_head + c->n_layer * t.n_layer_slots + t.n_tail, "%s: %d entries", what,
              t.n);
    ck_table_free(&t);
    char *json = gk_gpt2_config_json(c);
    FZ_ASSERT(json, "%s: no JSON", what);
    gk_gpt2_config back;
    rc = gk_gpt2_config_parse(json, "fuzz", &back, &e);
    FZ_ASSERT(rc == 0 && !memcmp(&back, c, sizeof back), "%s: %s does not read back: %s", what,
              json, e.msg);
    free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet++)
        gk_log_setup("fuzz_ckpt_config", GK_LOG_QUIET);
    const char *path = fz_file(0, data, size);
    if (!path)
        return 0;
    gk_gpt2_config c;
    gk_err e = {0};
    int rc = ck_hf_config_load(path, &c, &e);
    if (rc == 0)
        check_config(&c, "config.json");
    else
        FZ_ASSERT(rc == GK_EFORMAT && e.msg[0], "ck_hf_config_load: %d '%s'", rc, e.msg);
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    e = (gk_err){0};
    if ((rc = gk_gpt2_config_parse(text, "fuzz", &c, &e)) == 0)
        check_config(&c, "gptkit.config");
    else
        FZ_ASSERT(rc == GK_EFORMAT && e.msg[0], "gk_gpt2_config_parse: %d '%s'", rc, e.msg);
    free(text);
    return 0;
}
