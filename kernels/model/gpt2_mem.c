/* gpt2_mem.c: the fit check, before a model is made: what it needs by part (gk_gpt2_mem_estimate,
 * from the sizes gpt2_params.c's table and layout give: gk_gpt2_sizes_of), with ZeRO's
 * moments and gradients sharded over the ranks (gk_gpt2_mem_shard, shard_of: gpt2_shard.c's
 * layout), the largest batch that fits
 * (gk_gpt2_mem_max_batch), one rank's plan by row (gk_gpt2_mem_plan: gpt-train --plan's table),
 * and whether that fits in what the backend and the host have (gk_gpt2_mem_check). Declared in
 * gpt2.h. Owns nothing past a call. */
#include <stdio.h>

#include "common/mem.h"
#include "kernels/model/gpt2_internal.h"

/* The estimate from sizes s (flags: GK_GPT2_OFFLOAD). */
static void mem_of(const gk_gpt2_sizes *s, int max_B, int max_T, int flags, gk_gpt2_mem *out)
{
    size_t fp32 = s->n_floats * sizeof(float);
    int offload = (flags & GK_GPT2_OFFLOAD) && !s->inference;
    out->params = fp32 + s->copy_bytes;
    out->grads = s->inference ? 0 : fp32;
    out->optimizer = 2 * out->grads;
    out->host = 0;
    if (offload) { /* the device: the copies and the small block's fp32 (or every fp32) */
        out->params = (s->copy_bytes ? s->small_floats * sizeof(float) : fp32) + s->copy_bytes;
        out->optimizer = 0;
        /* and the staging: two chunks of gradients and 16-bit copies */
        out->host = 3 * fp32 + 2 * gk_gpt2_offload_chunk(s->n_floats) * (sizeof(float) + 2);
    }
    out->activations = s->act_bytes + GK_GPT2_MEM_SCRATCH + (size_t)max_B * max_T * 2 * sizeof(int);
    out->total = out->params + out->grads + out->optimizer + out->activations;
    out->master = fp32;
    out->copies = s->copy_bytes;
    out->slice = s->inference ? 0 : fp32;
    out->snapshot = 3 * out->slice;
}

/* The floats a rank keeps of ZeRO's layout at stage over world ranks (its piece of each bucket
 * and the tails; stage 0 and 1: one bucket, the whole block), and *last those of the last bucket
 * (the largest layer's, with ln_f). */
static size_t shard_floats(const gk_gpt2_sizes *s, int L, int world, int stage, size_t *last)
{
    size_t n = s->n_floats, stride = (s->layers_end - s->layers_at) / (size_t)L, shard = 0;
    size_t rows = gk_gpt2_head_rows(s->vocab_rows, world, stage, 1); /* (0: none) */
    *last = stride + n - s->layers_end;
    for (int b = 0; b < (stage <= 1 ? 1 : L + 1); b++) {
        size_t len = stage <= 1 ? n : b == 0 ? s->layers_at : b == L ? *last : stride;
        size_t piece = b == 0 && rows ? rows * s->width : gk_gpt2_piece(len, world);
        shard += len - piece * (size_t)(world - 1); /* the piece and the tail */
    }
    return shard;
}

/* With ZeRO over world ranks at stage (gk_gpt2_set_comm's layout, from s): the moments this
 * rank's shard (offloaded: in host memory, beside the device's whole fp32), from stage 2 the
 * gradients too, with the backward's buckets (wte and wpe's, and two of the last layer's, the
 * largest), and at stage 3 the parameters alike, with the gathered weight copies of wte and two
 * layers (gpt2_gather.c); at every stage the checkpoint's slice. */
static void shard_of(const gk_gpt2_sizes *s, int L, int world, int stage, gk_gpt2_mem *mem)
{
    size_t last, cut = shard_floats(s, L, world < 1 ? 1 : world, stage, &last);
    if (!s->inference) { /* a checkpoint's slice (tensor parallel: and rank 0's whole tensor) */
        mem->slice = cut * sizeof(float);
        mem->snapshot = 3 * mem->slice + s->whole_floats * sizeof(float);
    }
    if (world < 2 || stage < 1 || s->inference) return;
    size_t shard = cut, held = shard + s->layers_at + 2 * last; /* and three buckets' buffers */
    size_t rows = gk_gpt2_head_rows(s->vocab_rows, world, stage, 1), C = s->width;
    size_t grads = held; /* the head's gradient in stripes (gpt2_head.c): two, and the tail */
    if (rows) /* (and wpe's sink, max_T x C: left out) */
        grads = held - s->layers_at + 2 * (world * gk_gpt2_stripe_rows(rows, world, C) + 1) * C +
                ((s->layers_at - world * rows * C + C - 1) / C + 1) * C;
    mem->optimizer = 2 * shard * sizeof(float);
    if (mem->host) { /* offloaded: the shard's moments on the host; the device keeps the fp32 */
        /* and the staging: two chunks of gradients and weights */
        mem->host = mem->optimizer + 2 * gk_gpt2_offload_chunk(s->n_floats) * 2 * sizeof(float);
        mem->optimizer = 0;
        mem->params = s->n_floats * sizeof(float) + s->copy_bytes;
    }
    if (stage > 1) mem->grads = grads * sizeof(float);
    if (stage > 2) {
        size_t copies = s->copy_bytes, per_layer = 0, head = copies;
        if (s->copy_elems) {
            size_t bytes = copies / s->copy_elems; /* of one element */
            head = s->copies_at * bytes;
            per_layer = (s->copy_elems - s->copies_at) / (size_t)L * bytes;
        }
        if (rows) { /* wte a stripe at a time (gpt2_head.c): one stripe's and its copy */
            size_t stripe = (world * gk_gpt2_stripe_rows(rows, world, C) + 1) * C;
            head = s->copy_elems ? stripe * (copies / s->copy_elems) : 0;
            held += stripe - s->layers_at;
            mem->activations += s->embed_floats * sizeof(float); /* (the embedding's rows) */
        }
        mem->copies = head + 2 * per_layer;
        mem->params = held * sizeof(float) + mem->copies;
    }
    mem->total = mem->params + mem->grads + mem->optimizer + mem->activations;
}

int gk_gpt2_mem_estimate(const gk_gpt2_config *cfg, gk_elt act, int max_B, int max_T, int flags,
                         gk_gpt2_mem *out, gk_err *err)
{
    gk_gpt2_sizes s;
    int rc = gk_gpt2_sizes_of(cfg, act, max_B, max_T, flags, 1, &s, err);
    if (!rc) mem_of(&s, max_B, max_T, flags, out);
    return rc;
}

void gk_gpt2_mem_shard(gk_gpt2_mem *mem, int world)
{
    size_t n = mem->optimizer / (2 * sizeof(float)), cnt = world > 1 ? gk_gpt2_piece(n, world) : n;
    if (world > 1 && cnt) mem->optimizer = 2 * (cnt + n - cnt * (size_t)world) * sizeof(float);
    mem->total = mem->params + mem->grads + mem->optimizer + mem->activations;
}

int gk_gpt2_mem_max_batch(const gk_gpt2_config *cfg, gk_elt act, int T, int flags, int world,
                          int stage, int tp, size_t extra, size_t avail, int *B, gk_err *err)
{
    int lo = 0, hi = GK_GPT2_MEM_MAX_B; /* lo fits (0: nothing yet), above hi nothing does */
    while (lo < hi) { /* the estimate grows with the batch */
        int mid = lo + (hi - lo + 1) / 2;
        gk_gpt2_mem m;
        gk_gpt2_sizes s;
        int rc = gk_gpt2_sizes_of(cfg, act, mid, T, flags, tp, &s, err);
        if (rc) return rc;
        mem_of(&s, mid, T, flags, &m);
        shard_of(&s, cfg->n_layer, world, stage, &m);
        if (m.total <= avail && extra <= avail - m.total) lo = mid;
        else hi = mid - 1;
    }
    *B = lo;
    return 0;
}

/* ---- the plan's rows ---- */

void gk_gpt2_plan_add(gk_gpt2_plan *p, const char *name, size_t bytes, int host)
{
    if (p->n < GK_GPT2_PLAN_ROWS) p->row[p->n++] = (gk_gpt2_plan_row){name, bytes, host};
}

int gk_gpt2_mem_plan(const gk_gpt2_config *cfg, gk_elt act, int max_B, int max_T, int flags,
                     int world, int stage, int tp, gk_gpt2_mem *mem, gk_gpt2_plan *p,
                     gk_err *err)
{
    gk_gpt2_sizes s;
    int rc = gk_gpt2_sizes_of(cfg, act, max_B, max_T, flags, tp, &s, err);
    if (rc) return rc;
    mem_of(&s, max_B, max_T, flags, mem);
    shard_of(&s, cfg->n_layer, world, stage, mem);
    p->n = 0;
    gk_gpt2_plan_add(p, "weights, fp32 master", mem->params - mem->copies, 0);
    gk_gpt2_plan_add(p, act == GK_BF16 ? "weights, bf16 copy" : "weights, 16-bit copy",
                     mem->copies, 0);
    gk_gpt2_plan_add(p, "gradients, fp32", mem->grads, 0);
    gk_gpt2_plan_add(p, "AdamW moments, fp32", mem->optimizer, 0);
    gk_gpt2_plan_add(p, "activations", mem->activations - GK_GPT2_MEM_SCRATCH, 0);
    gk_gpt2_plan_add(p, "workspace and scratch", GK_GPT2_MEM_SCRATCH, 0);
    if (mem->host) gk_gpt2_plan_add(p, "optimizer offload, host", mem->host, 1);
    return 0;
}

static size_t sat_add(size_t a, size_t b) { return a > (size_t)-1 - b ? (size_t)-1 : a + b; }

void gk_gpt2_plan_sum(const gk_gpt2_plan *p, int shared, size_t *device, size_t *host)
{
    *device = *host = 0;
    for (int i = 0; i < p->n; i++) {
        size_t *to = p->row[i].host && !shared ? host : device;
        *to = sat_add(*to, p->row[i].bytes);
    }
}

/* ---- the fit check's message ---- */

/* ", NAME SIZE" appended at buf + *k when bytes > 0. */
static void add_part(char *buf, size_t cap, size_t *k, const char *name, size_t bytes)
{
    char t[32];
    if (!bytes || *k >= cap) return;
    *k += (size_t)snprintf(buf + *k, cap - *k, "%s%s %s", *k ? ", " : "", name,
                           gk_mem_text(bytes, t, sizeof t));
}

static int too_big(gk_err *e, size_t need, const char *parts, size_t avail, const char *where,
                   const char *hint)
{
    char a[32], b[32];
    return gk_errf(e, GK_ENOMEM, "model + batch need %s (%s) but %s are available %s: %s",
                   gk_mem_text(need, a, sizeof a), parts, gk_mem_text(avail, b, sizeof b), where,
                   hint);
}

int gk_gpt2_mem_check(gk_backend *be, const gk_gpt2_mem *need, size_t extra, const char *extra_what,
                      const char *hint, gk_err *e)
{
    size_t avail, total;
    const char *bound;
    int rc = gk_backend_mem_info(be, &avail, &total, &bound, e);
    if (rc) return rc;
    int shared = be->props.host_memory;
    char parts[512] = "", where[160];
    size_t k = 0, dev = need->total + (shared ? extra : 0);
    add_part(parts, sizeof parts, &k, "parameters", need->params);
    add_part(parts, sizeof parts, &k, "gradients", need->grads);
    add_part(parts, sizeof parts, &k, "optimizer", need->optimizer);
    add_part(parts, sizeof parts, &k, need->grads ? "activations" : "activations and KV cache",
             need->activations);
    if (shared) add_part(parts, sizeof parts, &k, extra_what, extra);
    if (bound) snprintf(where, sizeof where, "(%s)", bound);
    else snprintf(where, sizeof where, "on %s", be->what);
    if (dev > avail && dev - need->activations > avail) {
        char alone[96], t[32];
        snprintf(alone, sizeof alone, "even without its batch the model needs %s",
                 gk_mem_text(dev - need->activations, t, sizeof t));
        return too_big(e, dev, parts, avail, where, alone);
    }
    if (dev > avail) return too_big(e, dev, parts, avail, where, hint);
    if (shared || !extra) return 0;
    gk_host_mem h;
    gk_host_mem_read(&h);
    if (extra <= h.avail) return 0;
    k = 0;
    add_part(parts, sizeof parts, &k, extra_what, extra);
    snprintf(where, sizeof where, "in host memory (%s)", h.bound);
    return too_big(e, extra, parts, h.avail, where, hint);
}
