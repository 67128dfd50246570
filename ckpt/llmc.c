/* llmc.c: llm.c's GPT-2 checkpoints (karpathy/llm.c train_gpt2.c, gpt2_124M.bin), read and written.
 *
 * The format, byte by byte (all little-endian):
 *   int32[256] header: [0] 20240326 magic, [1] version: 3 = fp32 parameters, 5 = bf16,
 *              [2] maxT (block_size), [3] V (vocab_size), [4] L (n_layer), [5] NH (n_head),
 *              [6] C (n_embd), [7] Vp (vocab padded, >= V; llm.c pads to a multiple of 128), rest 0
 *   then every parameter, back to back, in this order (shapes as llm.c stores them):
 *     wte (Vp,C)  wpe (maxT,C)  ln1w (L,C)  ln1b (L,C)  qkvw (L,3C,C)  qkvb (L,3C)
 *     attprojw (L,C,C)  attprojb (L,C)  ln2w (L,C)  ln2b (L,C)  fcw (L,4C,C)  fcb (L,4C)
 *     fcprojw (L,C,4C)  fcprojb (L,C)  lnfw (C)  lnfb (C)
 *   The file is exactly 1024 + (number of parameters) * (4 or 2) bytes.
 * This is the order of gptkit's parameter table (ck.h) with each per-layer tensor gathered over
 * the layers, so no list of names is needed: head entries, then per-layer slot k for layers
 * 0..L-1, then the tail. Two differences: wte has Vp rows (the rows past V are zero), and llm.c's
 * Linear weights are (out,in) where HuggingFace's Conv1D (our layout) is (in,out): every 2-D
 * per-layer tensor is transposed on the way in and out. llm.c models always have biases: a
 * bias = false model is written with zero biases, which give the same outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck.h"
#include "common/le.h"
#include "common/io/outfile.h"
#include "common/io/safetensors.h"

enum { HDR_INTS = 256, V_FP32 = 3, V_BF16 = 5 };

/* Rows x cols stored in llm.c's file for entry x (vp: padded vocab). */
static size_t llmc_numel(const ck_entry *x, const gk_gpt2_config *c, int64_t vp)
{
    size_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        n *= (size_t)ck_dim_size(c, x->sym[d], vp);
    return n;
}

/* dst (cols,rows) = src (rows,cols) transposed. */
static void transpose(float *dst, const float *src, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++)
            dst[k * rows + r] = src[r * cols + k];
}

static int transposed(const ck_entry *x) { return x->group == CK_LAYER && x->ndim == 2; }

/* ---------------------------------------------------------------- reading */

static int read_header(FILE *f, const char *path, int32_t *h, gk_err *e)
{
    unsigned char raw[HDR_INTS * 4];
    if (fread(raw, 1, sizeof raw, f) != sizeof raw)
        return ferror(f)
                   ? gk_errno(e, path)
                   : gk_errf(e, GK_EFORMAT, "%s: shorter than llm.c's 1024-byte header", path);
    for (int i = 0; i < HDR_INTS; i++)
        h[i] = (int32_t)gk_le32(raw + 4 * i);
    if (h[0] != CK_LLMC_MAGIC)
        return gk_errf(e, GK_EFORMAT, "%s: not an llm.c checkpoint (magic %d)", path, h[0]);
    if (h[1] != V_FP32 && h[1] != V_BF16)
        return gk_errf(e, GK_EFORMAT, "%s: llm.c checkpoint version %d (3 = fp32 and 5 = bf16 "
                       "are read)", path, h[1]);
    if (h[7] < h[3])
        return gk_errf(e, GK_EFORMAT, "%s: padded vocab %d smaller than vocab %d", path, h[7],
                       h[3]);
    return 0;
}

/* Reads n values (fp32 or bf16 in the file) into dst as fp32. */
static int read_values(FILE *f, const char *path, int bf16, float *dst, size_t n, gk_err *e)
{
    if (!bf16) {
        if (fread(dst, sizeof(float), n, f) != n)
            return gk_errf(e, GK_EFORMAT, "%s: truncated", path);
        return 0;
    }
    uint16_t tmp[4096];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 4096 ? n - done : 4096;
        if (fread(tmp, 2, k, f) != k)
            return gk_errf(e, GK_EFORMAT, "%s: truncated", path);
        gk_bf16_to_f32_n(dst + done, tmp, k);
        done += k;
    }
    return 0;
}

/* Reads one llm.c array (entry x at every layer it has) into the params' buffers. */
static int read_array(FILE *f, const char *path, int bf16, const ck_table *t, int g, int slot,
                      int64_t vp, gk_ckpt_param *params, float *scratch, gk_err *e)
{
    int layers = g == CK_LAYER ? t->cfg.n_layer : 1;
    for (int l = 0; l < layers; l++) {
        const ck_entry *x = ck_table_at(t, (enum ck_group)g, g == CK_LAYER ? l : -1, slot);
        float *dst = (float *)params[x - t->e].data;
        size_t n = llmc_numel(x, &t->cfg, vp);
        int rc = read_values(f, path, bf16, transposed(x) || n != x->numel ? scratch : dst, n, e);
        if (rc)
            return rc;
        if (transposed(x)) /* llm.c (out,in) -> ours (in,out) */
            transpose(dst, scratch, x->shape[1], x->shape[0]);
        else if (n != x->numel) /* wte: drop the padded rows */
            memcpy(dst, scratch, x->numel * sizeof *dst);
    }
    return 0;
}

int ck_llmc_read(const char *path, gk_gpt2_config *cfg, ck_table *tab, gk_ckpt_param **params,
                 float **buf, gk_err *e)
{
    *params = NULL;
    *buf = NULL;
    memset(tab, 0, sizeof *tab);
    FILE *f = fopen(path, "rb");
    if (!f)
        return gk_errno(e, path);
    int32_t h[HDR_INTS] = {0};
    float *scratch = NULL;
    int rc = read_header(f, path, h, e);
    *cfg = (gk_gpt2_config){h[4], h[5], h[6], h[2], h[3], 1, 0.0f};
    gk_err sub = {0};
    if (!rc && gk_gpt2_config_check(cfg, &sub))
        rc = gk_errf(e, GK_EFORMAT, "%s: llm.c header: %s", path, sub.msg);
    if (!rc)
        rc = ck_table_make(tab, cfg, e);
    size_t total = 0, widest = 0, elt = h[1] == V_BF16 ? 2 : 4;
    for (int i = 0; !rc && i < tab->n; i++) {
        size_t n = llmc_numel(&tab->e[i], cfg, h[7]);
        total += n;
        widest = n > widest ? n : widest;
    }
    if (!rc) {
        fseeko(f, 0, SEEK_END);
        long long size = (long long)ftello(f), want = (long long)(HDR_INTS * 4 + total * elt);
        fseeko(f, HDR_INTS * 4, SEEK_SET);
        if (size != want)
            rc = gk_errf(e, GK_EFORMAT, "%s: %lld bytes, but its header (maxT %d, V %d, L %d, "
                         "NH %d, C %d, Vp %d, %s) needs %lld", path, size, h[2], h[3], h[4], h[5],
                         h[6], h[7], elt == 2 ? "bf16" : "fp32", want);
    }
    if (!rc && (!(*params = calloc((size_t)tab->n, sizeof **params)) ||
                !(*buf = malloc(tab->numel * sizeof **buf)) ||
                !(scratch = malloc(widest * sizeof *scratch))))
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    float *p = *buf;
    for (int i = 0; !rc && i < tab->n; i++) {
        const ck_entry *x = &tab->e[i];
        (*params)[i] = (gk_ckpt_param){x->name, x->ndim, {x->shape[0], x->shape[1]}, p, NULL, NULL};
        p += x->numel;
    }
    int slots[3] = {tab->n_head, tab->n_layer_slots, tab->n_tail};
    for (int g = 0; !rc && g < 3; g++)
        for (int s = 0; !rc && s < slots[g]; s++)
            rc = read_array(f, path, elt == 2, tab, g, s, h[7], *params, scratch, e);
    fclose(f);
    free(scratch);
    if (rc) {
        free(*params);
        free(*buf);
        *params = NULL;
        *buf = NULL;
        ck_table_free(tab);
    }
    return rc;
}

/* ---------------------------------------------------------------- writing */

static int write_array(gk_outfile *o, const gk_ckpt *c, const ck_table *t, int g, int slot,
                       int64_t vp, float *a, float *b, gk_err *e)
{
    int layers = g == CK_LAYER ? t->cfg.n_layer : 1;
    for (int l = 0; l < layers; l++) {
        const ck_entry *x = ck_table_at(t, (enum ck_group)g, g == CK_LAYER ? l : -1, slot);
        size_t n = llmc_numel(x, &t->cfg, vp);
        int rc = 0;
        if (x->zero) /* a bias the model lacks */
            memset(a, 0, x->numel * sizeof *a);
        else if ((rc = gk_ckpt_read(c, 0, x->name, x->ndim, x->shape, a, e)))
            return rc;
        const float *src = a;
        if (transposed(x)) { /* ours (in,out) -> llm.c (out,in) */
            transpose(b, a, x->shape[0], x->shape[1]);
            src = b;
        } else if (n != x->numel) { /* wte: zero rows up to Vp */
            memset(a + x->numel, 0, (n - x->numel) * sizeof *a);
        }
        if ((rc = gk_outfile_write(o, src, n * sizeof *src, e)))
            return rc;
    }
    return 0;
}

int ck_llmc_write(const gk_ckpt *c, const gk_gpt2_config *cfg, const char *path, gk_err *e)
{
    ck_table t;
    int rc = ck_table_make_biased(&t, cfg, e);
    if (rc)
        return rc;
    int64_t vp = ((int64_t)cfg->vocab_size + 127) / 128 * 128;
    size_t widest = 0;
    for (int i = 0; i < t.n; i++) {
        size_t n = llmc_numel(&t.e[i], cfg, vp);
        widest = n > widest ? n : widest;
    }
    float *a = malloc(widest * sizeof *a), *b = malloc(widest * sizeof *b);
    int32_t h[HDR_INTS] = {CK_LLMC_MAGIC, V_FP32, cfg->block_size, cfg->vocab_size, cfg->n_layer,
                           cfg->n_head, cfg->n_embd, (int32_t)vp};
    unsigned char raw[HDR_INTS * 4];
    for (int i = 0; i < HDR_INTS; i++)
        gk_put_le32(raw + 4 * i, (uint32_t)h[i]);
    gk_outfile o;
    if (!a || !b)
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    else if ((rc = gk_outfile_open(&o, path, e)) == 0) {
        rc = gk_outfile_write(&o, raw, sizeof raw, e);
        int slots[3] = {t.n_head, t.n_layer_slots, t.n_tail};
        for (int g = 0; !rc && g < 3; g++)
            for (int s = 0; !rc && s < slots[g]; s++)
                rc = write_array(&o, c, &t, g, s, vp, a, b, e);
        if (rc)
            gk_outfile_abort(&o);
        else
            rc = gk_outfile_commit(&o, e);
    }
    free(a);
    free(b);
    ck_table_free(&t);
    return rc;
}
