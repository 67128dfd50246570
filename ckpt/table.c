/* table.c: the expected tensors of a config, and model config JSON (see ck.h).
 *
 * The table comes from the model's own parameter table (gk_gpt2_param_table, which allocates no
 * model) so that no tensor list is repeated: the table of the config with one layer, with its
 * symbolic dimensions, is expanded to every layer: "transformer.h.0.X" becomes X for each. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ck.h"
#include "common/log.h"

int64_t ck_dim_size(const gk_gpt2_config *c, enum gk_gpt2_dim d, int64_t vp)
{
    return d == GK_DIM_V && vp > 0 ? vp : gk_gpt2_dim_size(c, d);
}

void ck_shape_text(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    int k = snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k > 0 && (size_t)k < cap; i++)
        k += snprintf(buf + k, cap - (size_t)k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k > 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, "]");
}

/* The one-layer table of cfg as templates: group and name suffix per entry, in order. */
static int table_templates(const gk_gpt2_config *cfg, ck_entry *tmpl, int *n, gk_err *e)
{
    gk_gpt2_config pc = *cfg;
    pc.n_layer = 1;
    gk_param table[4 + 16];
    int count = gk_gpt2_param_table(&pc, table, (int)(sizeof table / sizeof *table));
    int rc = count < 0 ? gk_errf(e, count, "parameter table: out of memory")
             : count > (int)(sizeof table / sizeof *table)
                 ? gk_errf(e, GK_EFORMAT, "parameter table: %d entries", count)
                 : 0;
    int seen_layer = 0;
    *n = 0;
    for (int i = 0; rc == 0 && i < count; i++) {
        const gk_param *p = &table[i];
        ck_entry *t = &tmpl[(*n)++];
        memset(t, 0, sizeof *t);
        const char *rest = strncmp(p->name, "transformer.", 12) == 0 ? p->name + 12 : p->name;
        if (strncmp(rest, "h.0.", 4) == 0) {
            t->group = CK_LAYER;
            rest += 4;
            seen_layer = 1;
        } else {
            t->group = seen_layer ? CK_TAIL : CK_HEAD;
        }
        snprintf(t->name, sizeof t->name, "%.63s", rest);
        t->ndim = p->ndim;
        t->sym[0] = p->dim[0];
        t->sym[1] = p->ndim == 2 ? p->dim[1] : GK_DIM_1;
    }
    return rc;
}

int ck_table_make(ck_table *t, const gk_gpt2_config *cfg, gk_err *e)
{
    memset(t, 0, sizeof *t);
    int rc = gk_gpt2_config_check(cfg, e);
    if (rc)
        return rc;
    ck_entry tmpl[64];
    int nt = 0;
    if ((rc = table_templates(cfg, tmpl, &nt, e)))
        return rc;
    t->cfg = *cfg;
    for (int i = 0; i < nt; i++) {
        t->n_head += tmpl[i].group == CK_HEAD;
        t->n_layer_slots += tmpl[i].group == CK_LAYER;
        t->n_tail += tmpl[i].group == CK_TAIL;
    }
    size_t n = (size_t)t->n_head + (size_t)cfg->n_layer * t->n_layer_slots + t->n_tail;
    t->e = calloc(n, sizeof *t->e);
    if (!t->e)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    for (int pass = 0; pass < 3; pass++) { /* head, layers, tail: the model's order */
        int layers = pass == 1 ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++) {
            int slot = 0;
            for (int i = 0; i < nt; i++) {
                if ((int)tmpl[i].group != pass)
                    continue;
                ck_entry *x = &t->e[t->n++];
                *x = tmpl[i];
                x->layer = pass == 1 ? l : -1;
                x->slot = slot++;
                if (pass == 1)
                    snprintf(x->name, sizeof x->name, "transformer.h.%d.%.60s", l, tmpl[i].name);
                else
                    snprintf(x->name, sizeof x->name, "transformer.%.80s", tmpl[i].name);
                x->numel = 1;
                for (int d = 0; d < x->ndim; d++) {
                    x->shape[d] = ck_dim_size(cfg, x->sym[d], 0);
                    x->numel *= (size_t)x->shape[d];
                }
                t->numel += x->numel;
            }
        }
    }
    return 0;
}

void ck_table_free(ck_table *t)
{
    if (!t)
        return;
    free(t->e);
    t->e = NULL;
    t->n = 0;
}

const ck_entry *ck_table_at(const ck_table *t, enum ck_group g, int layer, int slot)
{
    switch (g) {
    case CK_HEAD: return &t->e[slot];
    case CK_LAYER: return &t->e[t->n_head + layer * t->n_layer_slots + slot];
    default: return &t->e[t->n_head + t->cfg.n_layer * t->n_layer_slots + slot];
    }
}

/* An integer key of a HuggingFace config; GK_ENOTFOUND when absent. */
static int hf_int(json_t *o, const char *key, int *out, const char *path, gk_err *e)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return GK_ENOTFOUND;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
        return gk_errf(e, GK_EFORMAT, "%s: \"%s\" must be a positive integer", path, key);
    *out = (int)json_integer_value(v);
    return 0;
}

static void hf_warnings(json_t *o, const gk_gpt2_config *c, const char *path)
{
    const char *act = json_string_value(json_object_get(o, "activation_function"));
    if (act && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
        gk_warn("%s: activation_function \"%s\": gptkit uses GELU's tanh form (gelu_new)", path,
                act);
    json_t *eps = json_object_get(o, "layer_norm_epsilon");
    if (eps && json_is_number(eps) && json_number_value(eps) != 1e-5)
        gk_warn("%s: layer_norm_epsilon %g: gptkit uses 1e-5", path, json_number_value(eps));
    const char *flags[] = {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"};
    for (int i = 0; i < 2; i++)
        if (json_is_true(json_object_get(o, flags[i])))
            gk_warn("%s: %s is set: gptkit does not implement it", path, flags[i]);
    if (json_is_false(json_object_get(o, "scale_attn_weights")))
        gk_warn("%s: scale_attn_weights is false: gptkit always scales by 1/sqrt(head size)", path);
    int n_ctx = 0;
    if (hf_int(o, "n_ctx", &n_ctx, path, NULL) == 0 && n_ctx != c->block_size)
        gk_warn("%s: n_ctx %d differs from n_positions %d (using n_positions)", path, n_ctx,
                c->block_size);
}

int ck_hf_config_load(const char *path, gk_gpt2_config *c, gk_err *e)
{
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o) {
        FILE *f = fopen(path, "r");
        if (!f)
            return gk_errno(e, path);
        fclose(f);
        return gk_errf(e, GK_EFORMAT, "%s:%d:%d: bad JSON: %s", path, je.line, je.column, je.text);
    }
    int rc = 0;
    const char *type = json_string_value(json_object_get(o, "model_type"));
    if (!json_is_object(o))
        rc = gk_errf(e, GK_EFORMAT, "%s: not a JSON object", path);
    else if (type && strcmp(type, "gpt2") != 0)
        rc = gk_errf(e, GK_EFORMAT, "%s: model_type \"%s\": only GPT-2 models can be imported",
                     path, type);
    memset(c, 0, sizeof *c);
    c->bias = 1;
    const char *keys[] = {"n_layer", "n_head", "n_embd", "vocab_size"};
    int *dst[] = {&c->n_layer, &c->n_head, &c->n_embd, &c->vocab_size};
    for (int i = 0; rc == 0 && i < 4; i++)
        if ((rc = hf_int(o, keys[i], dst[i], path, e)) == GK_ENOTFOUND)
            rc = gk_errf(e, GK_EFORMAT, "%s: no \"%s\"", path, keys[i]);
    if (rc == 0 && (rc = hf_int(o, "n_positions", &c->block_size, path, e)) == GK_ENOTFOUND &&
        (rc = hf_int(o, "n_ctx", &c->block_size, path, e)) == GK_ENOTFOUND)
        rc = gk_errf(e, GK_EFORMAT, "%s: no \"n_positions\"", path);
    json_t *inner = json_object_get(o, "n_inner");
    if (rc == 0 && inner && !json_is_null(inner) &&
        (!json_is_integer(inner) || json_integer_value(inner) != 4 * (json_int_t)c->n_embd))
        rc = gk_errf(e, GK_EFORMAT, "%s: n_inner must be null or 4 * n_embd (%lld)", path,
                     4 * (long long)c->n_embd);
    gk_err sub = {0};
    if (rc == 0 && gk_gpt2_config_check(c, &sub))
        rc = gk_errf(e, GK_EFORMAT, "%s: %s", path, sub.msg);
    if (rc == 0)
        hf_warnings(o, c, path);
    json_decref(o);
    return rc;
}
