/* plan.c: the memory plan (gpt-train --plan) and the fit check a run makes before its model is
 * allocated (tr_model_flags, with recompute = auto): both from kernels/model/gpt2_mem.c's
 * estimate and its rows per rank (gk_gpt2_plan), here given the tool's own buffer (each rank's
 * checkpoint snapshot), printed as a table, and, for a run that does not fit, what would. See
 * run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/mem.h"
#include "run.h"

/* What a plan is made for. */
typedef struct plan_in {
    gk_gpt2_config mc;
    gk_elt act;
    int B;             /* batch_size (x mc.block_size) */
    int set, lo;       /* recompute's flags; -1: auto, from level lo up */
    int world, zero;   /* ranks (data parallel: tensor-parallel groups); zero_stage */
    int tp;            /* tensor_parallel */
    int offload;       /* optimizer_offload: GK_GPT2_OFFLOAD for the estimates, else 0 */
    int shared;        /* the device's memory is the host's */
    int host_backend;  /* the device is the host (cpu, ref): its state is the host's memory */
    int copy;          /* checkpoint_copy: the snapshot copies every kind */
    size_t avail, host;       /* available on one device; in host memory */
    const char *bound, *host_bound; /* which limit each is */
} plan_in;

/* One rank's column: every rank holds the same (each its slice of a checkpoint's state). The
 * table has room for two kinds of rank (cols), for a layout where one holds more. */
typedef struct plan_col {
    gk_gpt2_plan p;
    int flags, fits, max_B;
    size_t device, host; /* gk_gpt2_plan_sum */
} plan_col;

typedef struct plan {
    plan_in in;
    plan_col col[2];
    int cols, fits; /* cols: 1 (every rank alike); fits: every rank */
} plan;

static const int levels[] = {0, GK_GPT2_RECOMPUTE, GK_GPT2_RECOMPUTE | GK_GPT2_RECOMPUTE_LN};
static const char *level_names[] = {"false", "gelu", "gelu+ln"};

static int level_of(int flags)
{
    return flags & GK_GPT2_RECOMPUTE_LN ? 2 : flags & GK_GPT2_RECOMPUTE ? 1 : 0;
}

/* What recompute asks for: its flags, or -1 for auto. */
static int recompute_setting(const char *rc)
{
    if (strcmp(rc, "auto") == 0)
        return -1;
    if (strcmp(rc, "gelu+ln") == 0)
        return GK_GPT2_RECOMPUTE | GK_GPT2_RECOMPUTE_LN;
    return strcmp(rc, "true") == 0 || strcmp(rc, "gelu") == 0 ? GK_GPT2_RECOMPUTE : 0;
}

/* The plan's settings from the run's, for world ranks (available memory not filled in). Without
 * a backend (--plan for a GPU this machine lacks): a CUDA device's, of the dtype asked (auto:
 * cuda's, bfloat16). */
static plan_in in_of(const tr_run *r, const gk_gpt2_config *mc, int world)
{
    int tp = r->s.tensor_parallel > 1 ? (int)r->s.tensor_parallel : 1;
    int lo = r->be ? r->be->props.recompute : 1; /* the device's default (cuda's: gelu) */
    gk_elt act = r->be                                         ? r->be->act
                 : r->s.dtype && !strcmp(r->s.dtype, "float32") ? GK_F32
                                                                : GK_BF16;
    return (plan_in){.mc = *mc, .act = act, .B = (int)r->s.batch_size,
                     .set = recompute_setting(r->s.recompute), .lo = lo < 0 || lo > 2 ? 0 : lo,
                     .world = world / tp > 1 ? world / tp : 1, .tp = tp,
                     .zero = (int)r->s.zero_stage,
                     .offload = r->s.optimizer_offload ? GK_GPT2_OFFLOAD : 0,
                     .shared = r->be ? r->be->props.host_memory : 0,
                     .host_backend = r->be && (r->be->props.kind == GK_KIND_CPU ||
                                               r->be->props.kind == GK_KIND_REF),
                     .copy = r->s.checkpoint_copy};
}

/* One rank's estimate with flags (ZeRO's moments and gradients sharded) into *m and as rows into
 * *p, with the host copy each rank keeps for a checkpoint: its slice of the parameters and
 * moments (3 x the fp32 parameters over the ranks; rank 0's with the tails), less the kinds read
 * in place (snapshot.c); *snap its bytes. */
static int need_of(const plan_in *in, int flags, gk_gpt2_mem *m, gk_gpt2_plan *p, size_t *snap,
                   gk_err *e)
{
    int rc = gk_gpt2_mem_plan(&in->mc, in->act, in->B, in->mc.block_size, flags | in->offload,
                              in->world, in->zero, in->tp, m, p, e);
    static const enum gk_tensor_kind kinds[3] = {GK_TENSOR_PARAM, GK_TENSOR_ADAM_M,
                                                 GK_TENSOR_ADAM_V};
    for (int k = 0; !rc && !in->copy && k < 3; k++)
        if (gk_gpt2_slice_on_host(in->host_backend, in->offload != 0,
                                  in->world > 1 ? in->zero : 0, kinds[k]))
            m->snapshot -= m->slice;
    *snap = m->snapshot + m->host; /* the host's: a checkpoint's copy, an offloaded optimizer */
    if (!rc)
        gk_gpt2_plan_add(p, "checkpoint snapshot, host", m->snapshot, 1);
    return rc;
}

/* ---- the fit check of a run ---- */

/* Whether the model (with flags) and a batch fit the device: 0, or GK_ENOMEM with the message
 * (gpt2 mem_check's; hint names what would help), or another error. */
static int mem_fits(const tr_run *r, const gk_gpt2_config *mc, int flags, const char *hint,
                    gk_err *e)
{
    plan_in in = in_of(r, mc, r->dist.world);
    gk_gpt2_mem need;
    gk_gpt2_plan rows;
    size_t snap;
    int rc = need_of(&in, flags, &need, &rows, &snap, e);
    return rc ? rc
              : gk_gpt2_mem_check(r->be, &need, snap,
                                  need.host ? "checkpoint copy and optimizer" : "checkpoint copy",
                                  hint, e);
}

/* Measured against the peak RSS of gpt-train on the CPU (the shakespeare_char preset: 10.8M
 * parameters, batch 64 x 256, 2 steps and a checkpoint): estimate 3.125 GB, peak RSS 3.091 GB
 * (1% over; the activations, 2.82 GB, are nearly all of it). GPT_MEM_CHECK=warn|off
 * (common/mem.h) goes past an estimate that is wrong. */
int tr_model_flags(tr_run *r, const gk_gpt2_config *mc, int *flags, gk_err *e)
{
    int set = recompute_setting(r->s.recompute), lo = r->be->props.recompute; /* the device's */
    lo = lo < 0 || lo > 2 ? 0 : lo;
    int k = lo, mode = r->env.mem_check, rc = 0; /* GPT_MEM_CHECK */
    *flags = set >= 0 ? set : levels[lo];
    if (mode == 2)
        return 0;
    do { /* auto: from the device's default up, until one fits */
        if (set < 0)
            *flags = levels[k];
        rc = mem_fits(r, mc, *flags,
                      *flags & GK_GPT2_RECOMPUTE_LN
                          ? "lower batch_size or block_size"
                          : "lower batch_size or block_size, or set recompute = gelu+ln",
                      e);
    } while (set < 0 && rc == GK_ENOMEM && ++k < 3);
    if (!rc && set < 0 && k > lo)
        gk_info("recompute = auto: %s, so that the model and batch fit", level_names[k]);
    if (rc == GK_ENOMEM && mode == 1) {
        gk_warn("%s (GPT_MEM_CHECK=warn: going on)", e->msg);
        rc = 0;
    }
    if (rc == GK_ENOMEM) { /* main prints the plan after the error line (tr_plan_explain) */
        r->unfit = 1;
        r->unfit_mc = *mc;
    }
    return rc;
}

/* ---- the plan ---- */

/* One kind of rank's column: with auto, the first recompute level from lo up that fits (the
 * last when none does, as tr_model_flags), and the largest batch at that level. */
static int column(const plan_in *in, plan_col *c, gk_err *e)
{
    int k = in->lo, rc;
    size_t snap;
    do {
        c->flags = in->set >= 0 ? in->set : levels[k];
        gk_gpt2_mem m;
        if ((rc = need_of(in, c->flags, &m, &c->p, &snap, e)))
            return rc;
        gk_gpt2_plan_sum(&c->p, in->shared, &c->device, &c->host);
        c->fits = c->device <= in->avail && c->host <= in->host;
    } while (in->set < 0 && !c->fits && ++k < 3);
    c->max_B = 0;
    if (in->shared || snap <= in->host)
        rc = gk_gpt2_mem_max_batch(&in->mc, in->act, in->mc.block_size, c->flags | in->offload,
                                   in->world, in->zero, in->tp, in->shared ? snap : 0,
                                   in->avail, &c->max_B, e);
    return rc;
}

static int build(const plan_in *in, plan *p, gk_err *e)
{
    p->in = *in;
    p->cols = 1;
    p->fits = 1;
    for (int i = 0; i < p->cols; i++) {
        int rc = column(in, &p->col[i], e);
        if (rc)
            return rc;
        p->fits &= p->col[i].fits;
    }
    return 0;
}

/* The available memory for in: memory (bytes, from --plan-memory) per device when > 0, else
 * the backend's (gk_backend_mem_info, as gk_gpt2_mem_check sees it) and the host's. */
static int read_avail(gk_backend *be, size_t memory, plan_in *in, gk_err *e)
{
    gk_host_mem h;
    gk_host_mem_read(&h);
    in->host = h.avail, in->host_bound = h.bound;
    if (memory) {
        in->avail = memory, in->bound = "--plan-memory";
        if (in->shared)
            in->host = memory, in->host_bound = in->bound;
        return 0;
    }
    size_t total;
    int rc = gk_backend_mem_info(be, &in->avail, &total, &in->bound, e);
    if (!rc && !in->bound)
        in->bound = "device";
    return rc;
}

/* ---- printing ---- */

/* n with thousands separators: "124,439,808". */
static const char *grouped(size_t n, char *buf, size_t cap)
{
    char d[32];
    int len = snprintf(d, sizeof d, "%zu", n), k = 0;
    for (int i = 0; i < len && k + 2 < (int)cap; i++) {
        buf[k++] = d[i];
        if ((len - 1 - i) % 3 == 0 && i < len - 1)
            buf[k++] = ',';
    }
    buf[k] = '\0';
    return buf;
}

#define LABEL "%-28s"
#define CELL " %14s"

static void row_text(FILE *f, const char *label, const char *cell0, const char *cell1, int cols)
{
    fprintf(f, LABEL CELL, label, cell0);
    if (cols > 1)
        fprintf(f, CELL, cell1);
    fputc('\n', f);
}

static void row_bytes(FILE *f, const char *label, size_t b0, size_t b1, int cols)
{
    char t0[32] = "-", t1[32] = "-";
    if (b0)
        gk_mem_text(b0, t0, sizeof t0);
    if (b1)
        gk_mem_text(b1, t1, sizeof t1);
    row_text(f, label, t0, t1, cols);
}

/* The table: a column per kind of rank, a row per part (rows of 0 bytes in every column left
 * out), the recompute level under the activations, then the totals, what is available, the
 * largest batch_size and whether it fits. */
static void print_rows(FILE *f, const plan *p)
{
    const plan_col *c0 = &p->col[0], *c1 = &p->col[p->cols - 1];
    int n = p->cols;
    char t0[32], t1[32];
    int world = p->in.world * p->in.tp;
    if (world > 1)
        snprintf(t0, sizeof t0, "ranks 0-%d", world - 1);
    row_text(f, "memory per rank", world > 1 ? t0 : "rank 0", "", n);
    for (int i = 0; i < c0->p.n; i++) {
        const char *name = c0->p.row[i].name;
        if (c0->p.row[i].bytes || c1->p.row[i].bytes)
            row_bytes(f, name, c0->p.row[i].bytes, c1->p.row[i].bytes, n);
        if (strcmp(name, "activations") != 0)
            continue;
        const char *how = p->in.set < 0 ? " (auto)" : "";
        snprintf(t0, sizeof t0, "%s%s", level_names[level_of(c0->flags)], how);
        snprintf(t1, sizeof t1, "%s%s", level_names[level_of(c1->flags)], how);
        row_text(f, "  recompute", t0, t1, n);
    }
    row_bytes(f, p->in.shared ? "peak" : "peak, device", c0->device, c1->device, n);
    if (!p->in.shared)
        row_bytes(f, "peak, host", c0->host, c1->host, n);
    char label[64];
    snprintf(label, sizeof label, "available (%s)", p->in.bound);
    row_bytes(f, label, p->in.avail, p->in.avail, n);
    const char *host = strlen(p->in.host_bound) > 12 ? "host (%s)" : "host available (%s)";
    snprintf(label, sizeof label, host, p->in.host_bound); /* (within the label's 28 columns) */
    if (!p->in.shared)
        row_bytes(f, label, p->in.host, p->in.host, n);
    snprintf(t0, sizeof t0, "%d", c0->max_B);
    snprintf(t1, sizeof t1, "%d", c1->max_B);
    row_text(f, "largest batch_size", c0->max_B ? t0 : "none", c1->max_B ? t1 : "none", n);
    row_text(f, "fits", c0->fits ? "yes" : "no", c1->fits ? "yes" : "no", n);
}

/* The two lines above the table: the model (and its parameters: the table's numel, without
 * wte's padding rows) and the run. */
static void print_head(FILE *f, const plan *p, const char *dtype, const char *device,
                       const char *recompute)
{
    const gk_gpt2_config *mc = &p->in.mc;
    int cap = 4 + mc->n_layer * 12, k = 0; /* the table's entries at most */
    gk_param *t = calloc((size_t)cap, sizeof *t);
    size_t n = 0;
    if (t) k = gk_gpt2_param_table(mc, t, cap);
    for (int i = 0; i < k && i < cap; i++) n += t[i].numel;
    free(t);
    char g[32];
    fprintf(f, "model: %d layers, %d heads, n_embd %d, block_size %d, vocab_size %d: %s "
            "parameters\n", mc->n_layer, mc->n_head, mc->n_embd, mc->block_size, mc->vocab_size,
            grouped(n, g, sizeof g));
    char tp[48] = "";
    if (p->in.tp > 1)
        snprintf(tp, sizeof tp, " (tensor_parallel %d)", p->in.tp);
    int world = p->in.world * p->in.tp;
    fprintf(f, "run: batch_size %d x %d tokens, %s on %s, %d rank%s%s, zero_stage %d, recompute "
            "%s\n", p->in.B, mc->block_size, dtype, device, world, world > 1 ? "s" : "", tp,
            p->in.zero, recompute);
}

/* ---- --plan, and a run that does not fit ---- */

/* The world --plan is for: nproc_per_node (or PET_NPROC_PER_NODE) ranks on each node, else
 * WORLD_SIZE (or another launcher's) as a run would be placed (main.c's place). */
static int plan_world(tr_run *r, int *world, gk_err *e)
{
    tr_launch l;
    int rc = tr_launch_from_env(&l, r->env.getenv_fn, NULL, e);
    int nproc = l.spawn ? l.spawn : (int)r->s.nproc_per_node;
    *world = nproc > 1 ? nproc * l.nnodes : l.world_size;
    return rc;
}

/* vocab_size, when not set, from train_data's first shard (as setup_rank takes it). */
static int plan_vocab(tr_run *r, gk_gpt2_config *mc, gk_err *e)
{
    if (mc->vocab_size)
        return 0;
    int rc = tr_data_open(&r->train, r->s.train_data, mc->block_size, 0, NULL, "train_data", e);
    if (!rc && (mc->vocab_size = (int)tr_data_vocab_size(r->train)) == 0)
        rc = gk_errf(e, GK_EUSAGE, "vocab_size: not set and %s does not say", r->s.train_data);
    return rc;
}

/* Each setting alone that would make p fit, on f: a higher recompute level, the largest
 * batch_size, optimizer offload (a device of its own memory), zero_stage = 1, else 2, else 3,
 * over as many ranks as it has or the fewest more. */
static void suggest(FILE *f, const plan *p, gk_err *e)
{
    int any = 0;
    plan q;
    plan_in in = p->in;
    fprintf(f, "what would fit (each alone):\n");
    for (int k = level_of(p->col[0].flags) + 1; in.set >= 0 && k < 3; k++) {
        in.set = levels[k];
        if (build(&in, &q, e) == 0 && q.fits) {
            fprintf(f, "  recompute = %s\n", level_names[k]);
            any = 1;
            break;
        }
    }
    int B = p->col[0].max_B < p->col[p->cols - 1].max_B ? p->col[0].max_B
                                                         : p->col[p->cols - 1].max_B;
    if (B > 0 && B < p->in.B) {
        fprintf(f, "  batch_size = %d (the largest that fits, with recompute = %s)\n", B,
                level_names[level_of(p->col[0].flags)]);
        any = 1;
    }
    in = p->in;
    in.offload = GK_GPT2_OFFLOAD;
    if (!p->in.offload && !p->in.shared && build(&in, &q, e) == 0 && q.fits) {
        char t[32];
        fprintf(f, "  optimizer_offload = true (%s of host memory a rank)\n",
                gk_mem_text(q.col[0].host, t, sizeof t));
        any = 1;
    }
    in = p->in;
    int found = 0;
    for (int w = 2; w <= 1024 && !found; w *= 2)
        for (int z = 1; z <= 3 && !found; z++) {
            if (w < p->in.world || (w == p->in.world && z <= p->in.zero))
                continue;
            in.world = w, in.zero = z;
            if (build(&in, &q, e) == 0 && q.fits) {
                fprintf(f, "  zero_stage = %d over %d ranks (a device each)\n", z, w * in.tp);
                any = found = 1;
            }
        }
    if (!any)
        fprintf(f, "  none of recompute, a smaller batch_size%s or zero_stage = 1, 2 or 3: a "
                   "smaller model or block_size, or more memory\n",
                p->in.shared ? "" : ", optimizer_offload");
}

int tr_run_plan(tr_run *r, gk_err *e)
{
    int world = 1;
    gk_gpt2_config mc = tr_model_config(&r->s);
    int rc = plan_world(r, &world, e);
    if (!rc)
        rc = tr_start_shape(r, &mc, e);
    if (!rc)
        rc = plan_vocab(r, &mc, e);
    if (!rc)
        rc = gk_gpt2_config_check(&mc, e);
    if (!rc)
        rc = tr_open_backend(r, e);
    if (rc && r->plan_memory > 0 && strcmp(r->s.device, "cuda") == 0) {
        gk_info("planning for a CUDA device this machine lacks (%s)", e->msg);
        rc = 0; /* the size given is all the plan needs of it */
    }
    if (rc)
        return rc;
    plan p;
    plan_in in = in_of(r, &mc, world);
    rc = read_avail(r->be, (size_t)r->plan_memory, &in, e);
    if (!rc && r->plan_host_memory > 0 && !in.shared)
        in.host = (size_t)r->plan_host_memory, in.host_bound = "--plan-host-memory";
    if (rc || (rc = build(&in, &p, e)))
        return rc;
    print_head(stdout, &p, in.act == GK_BF16 ? "bfloat16" : "float32",
               r->be ? r->be->ops->name : "cuda", r->s.recompute);
    print_rows(stdout, &p);
    if (!p.fits)
        suggest(stdout, &p, e);
    return fflush(stdout) || ferror(stdout) ? gk_errno(e, "stdout") : 0;
}

void tr_plan_explain(tr_run *r, FILE *f)
{
    gk_err e = {0};
    plan p;
    plan_in in = in_of(r, &r->unfit_mc, r->dist.world > 1 ? r->dist.world : 1);
    if (read_avail(r->be, 0, &in, &e) || build(&in, &p, &e))
        return; /* the error line said what matters */
    print_rows(f, &p);
    suggest(f, &p, &e);
}
