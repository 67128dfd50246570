/* test_import.c: gpt-ckpt import of a HuggingFace GPT-2 against transformers.
 *
 * Runs the built tool (BUILD/bin/gpt-ckpt, found beside this binary's directory) on the committed
 * fixture tests/fixtures/hf_tiny (made by tests/ref/hf_tiny.py: a random GPT2LMHeadModel saved
 * with save_pretrained, and logits.bin holding transformers' logits and loss for a fixed input;
 * its layout is in the script's docstring), loads the checkpoint into a model on the CPU backend
 * and compares the forward pass: logits within 1e-5 relative to their largest magnitude (fp32
 * with a different summation order), loss likewise. Then the file variants HuggingFace has:
 * names without "transformer." plus attention buffers and a tied lm_head (as the hub's gpt2
 * ships), and F16 / BF16 storage, must import to the same weights. */
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/io/ckpt.h"
#include "common/io/safetensors.h"
#include "kernels/cpu/cpu.h"
#include "kernels/model/gpt2.h"
#include "test.h"

#define FIX "tests/fixtures/hf_tiny"

static char tool[4096], dir[64];

/* Imports src into out with gpt-ckpt; returns its exit status. */
static int run_import(const char *src, const char *out)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' import -q '%s' -o '%s'", tool, src, out);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

typedef struct ref {
    int T, V;
    int *ids;
    float loss, *logits;
    char *buf;
} ref;

static int ref_load(ref *r)
{
    FILE *f = fopen(FIX "/logits.bin", "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    r->buf = malloc((size_t)n);
    int ok = r->buf && fread(r->buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    int32_t h[8];
    if (!ok || n < 32)
        return -1;
    memcpy(h, r->buf, sizeof h);
    r->T = h[2];
    r->V = h[3];
    if (h[0] != 0x54464847 || h[1] != 1 || r->T < 1 || r->V < 1 ||
        n != 32 + 4L * r->T + 4 + 4L * r->T * r->V)
        return -1;
    r->ids = (int *)(r->buf + 32);
    memcpy(&r->loss, r->buf + 32 + 4 * r->T, 4);
    r->logits = (float *)(r->buf + 36 + 4 * r->T);
    return 0;
}

static int config_of(const gk_ckpt *c, gk_gpt2_config *cfg)
{
    json_t *o = json_loads(gk_ckpt_config_json(c), 0, NULL);
    int bias = 0;
    double dropout = 0;
    int rc = json_unpack(o, "{s:i, s:i, s:i, s:i, s:i, s:b, s:F}", "n_layer", &cfg->n_layer,
                         "n_head", &cfg->n_head, "n_embd", &cfg->n_embd, "block_size",
                         &cfg->block_size, "vocab_size", &cfg->vocab_size, "bias", &bias,
                         "dropout", &dropout);
    cfg->bias = bias;
    cfg->dropout = (float)dropout;
    json_decref(o);
    return rc;
}

static void test_logits(void)
{
    ref r = {0};
    char out[128];
    snprintf(out, sizeof out, "%s/tiny.safetensors", dir);
    CHECK(ref_load(&r) == 0);
    CHECK(run_import(FIX, out) == 0);
    gk_err e = {0};
    gk_ckpt *c = NULL;
    gk_backend *be = NULL;
    gk_gpt2 *m = NULL;
    gk_gpt2_config cfg;
    CHECK_OK(gk_ckpt_open(&c, out, &e), &e);
    if (!c || t_cur_failed)
        goto done;
    CHECK(config_of(c, &cfg) == 0);
    CHECK(cfg.n_layer == 2 && cfg.n_head == 2 && cfg.n_embd == 32 && cfg.block_size == 32);
    CHECK(cfg.vocab_size == r.V && cfg.bias == 1);
    CHECK_OK(gk_cpu_create(&be, 2, &e), &e);
    CHECK_OK(gk_gpt2_create(&m, &cfg, be, 1, r.T, &e), &e);
    if (t_cur_failed)
        goto done;
    float *host = malloc((size_t)r.V * cfg.n_embd * sizeof *host);
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        int64_t shape[2] = {p->shape[0], p->shape[1]};
        CHECK_OK(gk_ckpt_read(c, 0, p->name, p->ndim, shape, host, &e), &e);
        be->ops->to_device(be, p->data, host, p->numel * sizeof *host);
    }
    free(host);
    float loss = 0;
    int *targets = malloc((size_t)r.T * sizeof *targets);
    for (int t = 0; t < r.T; t++) /* labels = input ids, shifted as transformers does */
        targets[t] = t + 1 < r.T ? r.ids[t + 1] : -1;
    CHECK_OK(gk_gpt2_forward(m, r.ids, targets, 1, r.T, &loss, &e), &e);
    free(targets);
    int Vp = gk_gpt2_padded_vocab(m);
    float *logits = malloc((size_t)r.T * Vp * sizeof *logits);
    gk_gpt2_logits_host(m, 0, r.T, Vp, logits, NULL);
    double maxdiff = 0, maxref = 0;
    for (int t = 0; t < r.T; t++)
        for (int v = 0; v < r.V; v++) {
            double d = fabs((double)logits[t * Vp + v] - r.logits[t * r.V + v]);
            maxdiff = d > maxdiff ? d : maxdiff;
            maxref = fabs(r.logits[t * r.V + v]) > maxref ? fabs(r.logits[t * r.V + v]) : maxref;
        }
    free(logits);
    CHECKF(maxdiff / maxref < 1e-5, "logits: max |diff| %g, max |ref| %g", maxdiff, maxref);
    CHECKF(fabs(loss - r.loss) / r.loss < 1e-5, "loss %.7f, transformers %.7f", loss, r.loss);
done:
    gk_gpt2_free(m);
    gk_backend_free(be);
    gk_ckpt_close(c);
    free(r.buf);
}

/* Copies the fixture's small files into d and writes a variant of its model.safetensors:
 * names without "transformer.", attn.bias / attn.masked_bias buffers, lm_head.weight, and the
 * parameters stored as dt. */
static int write_variant(const char *d, enum gk_dtype dt)
{
    char cmd[512], path[256];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp " FIX "/config.json " FIX "/vocab.json "
             FIX "/merges.txt '%s'", d, d);
    if (system(cmd) != 0)
        return -1;
    gk_err e = {0};
    gk_st_file *f = NULL;
    gk_st_writer *w = NULL;
    if (gk_st_open(&f, FIX "/model.safetensors", &e) || gk_st_writer_create(&w, &e))
        return -1;
    size_t n = gk_st_count(f);
    uint16_t **half = calloc(n, sizeof *half);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        const char *name = strncmp(t->name, "transformer.", 12) == 0 ? t->name + 12 : t->name;
        const void *data = t->data;
        if (dt != GK_DT_F32) {
            half[i] = malloc((size_t)t->numel * 2);
            if (dt == GK_DT_F16)
                gk_f32_to_f16_n(half[i], t->data, (size_t)t->numel);
            else
                gk_f32_to_bf16_n(half[i], t->data, (size_t)t->numel);
            data = half[i];
        }
        rc = gk_st_writer_add(w, name, dt, t->ndim, t->shape, data, &e);
        if (rc == 0 && strcmp(name, "wte.weight") == 0)
            rc = gk_st_writer_add(w, "lm_head.weight", dt, t->ndim, t->shape, data, &e);
    }
    static float mask[32 * 32], masked = -1e4f;
    for (int i = 0; i < 32 * 32; i++)
        mask[i] = i % 32 <= i / 32;
    int64_t mshape[4] = {1, 1, 32, 32};
    for (int l = 0; rc == 0 && l < 2; l++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "h.%d.attn.bias", l);
        snprintf(b, sizeof b, "h.%d.attn.masked_bias", l);
        rc = gk_st_writer_add(w, a, GK_DT_F32, 4, mshape, mask, &e);
        if (rc == 0)
            rc = gk_st_writer_add(w, b, GK_DT_F32, 0, mshape, &masked, &e);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", d);
    if (rc == 0)
        rc = gk_st_writer_meta(w, "format", "pt", &e) || gk_st_writer_write(w, path, &e);
    if (rc)
        fprintf(stderr, "write_variant: %s\n", e.msg);
    for (size_t i = 0; i < n; i++)
        free(half[i]);
    free(half);
    gk_st_writer_free(w);
    gk_st_close(f);
    return rc;
}

/* The variant imports to the weights of the fixture, as stored in dt. */
static void check_variant(enum gk_dtype dt, const char *tag)
{
    char d[128], out[160], ref_out[160];
    snprintf(d, sizeof d, "%s/%s", dir, tag);
    snprintf(out, sizeof out, "%s/%s.safetensors", dir, tag);
    snprintf(ref_out, sizeof ref_out, "%s/ref_%s.safetensors", dir, tag);
    CHECK(write_variant(d, dt) == 0);
    CHECK(run_import(d, out) == 0);
    CHECK(run_import(FIX, ref_out) == 0);
    gk_err e = {0};
    gk_ckpt *a = NULL, *b = NULL;
    CHECK_OK(gk_ckpt_open(&a, out, &e), &e);
    CHECK_OK(gk_ckpt_open(&b, ref_out, &e), &e);
    if (!a || !b)
        goto done;
    const gk_st_file *fa = gk_ckpt_file(a), *fb = gk_ckpt_file(b);
    CHECK(gk_st_count(fa) == gk_st_count(fb));
    for (size_t i = 0; i < gk_st_count(fb); i++) {
        const gk_st_tensor *x = gk_st_at(fb, i), *y = gk_st_find(fa, x->name);
        CHECKF(y && y->dtype == x->dtype && y->nbytes == x->nbytes, "%s", x->name);
        if (!y || y->nbytes != x->nbytes || x->dtype != GK_DT_F32)
            continue;
        const float *p = x->data, *q = y->data;
        size_t bad = 0;
        for (size_t k = 0; k < (size_t)x->numel; k++) {
            float want = dt == GK_DT_F16 ? gk_f16_to_f32(gk_f32_to_f16(p[k]))
                         : dt == GK_DT_BF16 ? gk_bf16_to_f32(gk_f32_to_bf16(p[k])) : p[k];
            bad += q[k] != want;
        }
        CHECKF(bad == 0, "%s: %zu values differ", x->name, bad);
    }
done:
    gk_ckpt_close(a);
    gk_ckpt_close(b);
}

static void test_hub_layout(void) { check_variant(GK_DT_F32, "hub"); }
static void test_f16(void) { check_variant(GK_DT_F16, "f16"); }
static void test_bf16(void) { check_variant(GK_DT_BF16, "bf16"); }

int main(int argc, char **argv)
{
    (void)argc;
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(tool, sizeof tool, "%s/../bin/gpt-ckpt", dirname(self));
    snprintf(dir, sizeof dir, "/tmp/test_import.XXXXXX");
    if (access(tool, X_OK) != 0 || !mkdtemp(dir)) {
        fprintf(stderr, "FAIL: %s not built (make all units)\n", tool);
        return 1;
    }
    RUN(test_logits);
    RUN(test_hub_layout);
    RUN(test_f16);
    RUN(test_bf16);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
