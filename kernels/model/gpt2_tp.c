/* gpt2_tp.c: tensor parallel (gpt2.h gk_gpt2_create_tp): how each table entry is cut over the
 * ranks (gk_tp_part_shape, gk_tp_part_copy: host arithmetic any tool may use), the model's
 * tensor-parallel state (the vocabulary's split, scratch), the all-reduces the graph makes
 * between the split regions (gpt2_fwd.c, gpt2_bwd.c call gk_gpt2_tp_sum), and the gradient norm
 * over the parts. */
#include <string.h>
#include <stdlib.h>

#include "kernels/model/gpt2_internal.h"
#include "kernels/model/vocab_split.h"

int gk_gpt2_tp_split_of(int layer, int slot)
{
    if (layer < 0) return slot == G_WTE ? GK_SPLIT_VOCAB : GK_SPLIT_NONE;
    switch (slot) {
    case L_QKVW: case L_QKVB: return GK_SPLIT_QKV;
    case L_FCW: case L_FCB: return GK_SPLIT_COLS;
    case L_ATTPW: case L_FCPW: return GK_SPLIT_ROWS;
    default: return GK_SPLIT_NONE;
    }
}

/* A tensor as rows of cols (a 1-D one: one row). */
static void as_rows(int ndim, const int full[2], size_t *rows, size_t *cols)
{
    *rows = ndim == 2 ? (size_t)full[0] : 1;
    *cols = ndim == 2 ? (size_t)full[1] : (size_t)full[0];
}

/* VOCAB: rank r's first row and rows. */
static void vocab_rows(int rows, int n, int r, int *lo, int *count)
{
    int s = (rows + n - 1) / n;
    long first = (long)s * r;
    *lo = first < rows ? (int)first : rows;
    *count = first < rows ? (rows - (int)first < s ? rows - (int)first : s) : 0;
}

void gk_tp_part_shape(int split, int ndim, const int full[2], int n, int r, int part[2])
{
    part[0] = full[0], part[1] = ndim == 2 ? full[1] : 0;
    int lo, *cut = ndim == 2 ? &part[1] : &part[0]; /* the columns (a 1-D tensor's elements) */
    switch (split) {
    case GK_SPLIT_ROWS: part[0] = full[0] / n; break;
    case GK_SPLIT_COLS: case GK_SPLIT_QKV: *cut /= n; break;
    case GK_SPLIT_VOCAB: vocab_rows(full[0], n, r, &lo, &part[0]); break;
    default: break;
    }
}

/* Where float j of rank r's part lies in the whole tensor, and how many floats from there on
 * lie one after another in both. */
static size_t full_index(int split, int ndim, const int full[2], int n, int r, size_t j,
                         size_t *run)
{
    size_t rows, K, pc, row, col;
    as_rows(ndim, full, &rows, &K);
    int lo, count;
    switch (split) {
    case GK_SPLIT_ROWS: *run = (size_t)-1; return (size_t)r * (rows / (size_t)n) * K + j;
    case GK_SPLIT_VOCAB:
        vocab_rows(full[0], n, r, &lo, &count);
        *run = (size_t)-1;
        return (size_t)lo * K + j;
    case GK_SPLIT_COLS:
        pc = K / (size_t)n, row = j / pc, col = j % pc;
        *run = pc - col;
        return row * K + (size_t)r * pc + col;
    case GK_SPLIT_QKV: {
        size_t gw = K / 3 / (size_t)n, q, c;
        pc = 3 * gw, row = j / pc, col = j % pc, q = col / gw, c = col % gw;
        *run = gw - c;
        return row * K + q * (K / 3) + (size_t)r * gw + c;
    }
    default: *run = (size_t)-1; return j;
    }
}

void gk_tp_part_copy(int split, int ndim, const int full[2], int n, int r, float *full_buf,
                     float *part, size_t lo, size_t count, int to_full)
{
    for (size_t j = lo; j < lo + count;) {
        size_t run, at = full_index(split, ndim, full, n, r, j, &run);
        if (run > lo + count - j) run = lo + count - j;
        if (to_full) memcpy(full_buf + at, part + (j - lo), run * sizeof *part);
        else memcpy(part + (j - lo), full_buf + at, run * sizeof *part);
        j += run;
    }
}

int gk_gpt2_tp_world(const gk_gpt2 *m) { return m->tp_n; }
int gk_gpt2_tp_rank(const gk_gpt2 *m) { return m->tp_rank; }

int gk_gpt2_tp_check(const gk_gpt2_config *c, int flags, int n, gk_err *err)
{
    if (n <= 1) return 0;
    if (c->n_head % n || (4 * c->n_embd) % n)
        return gk_errf(err, GK_EUSAGE, "tensor_parallel = %d: must divide n_head (%d) and 4 x "
                       "n_embd (%d)", n, c->n_head, 4 * c->n_embd);
    if (flags & GK_GPT2_OFFLOAD)
        return gk_errf(err, GK_EUSAGE, "optimizer_offload with tensor_parallel = %d: not "
                       "supported yet (use one or the other)", n);
    if (flags & (GK_GPT2_INFERENCE | GK_GPT2_BF16 | GK_GPT2_F16 | GK_GPT2_Q8))
        return gk_errf(err, GK_EUSAGE, "tensor_parallel = %d: for training models only (not "
                       "inference, or 16-bit or int8 weights)", n);
    return 0;
}

size_t gk_gpt2_tp_scratch(const gk_gpt2_config *c, gk_elt act, int max_B, int max_T, int tp)
{
    size_t N = (size_t)max_B * (size_t)max_T, C = (size_t)c->n_embd, f = sizeof(float);
    size_t sum = act == GK_F32 ? 0 : 2 * N * C * f; /* tp_f32 and vocab_split's d_sum */
    return sum + (size_t)max_T * C * f + (3 + (size_t)tp) * N * f; /* its zero wpe, rows */
}

int gk_gpt2_tp_setup(gk_gpt2 *m, gk_err *err)
{
    gk_backend *be = m->be;
    size_t BT = (size_t)m->max_B * (size_t)m->max_T;
    int rc = gk_vocab_split_new(&m->vs, be, m->tp, m->cfg.vocab_size, m->cfg.n_embd, (int)BT,
                                m->max_T, err);
    if (rc) return rc;
    m->h_inputs = malloc(BT * sizeof *m->h_inputs);
    if (m->act != GK_F32)
        m->tp_f32 = be->ops->alloc(be, BT * (size_t)m->cfg.n_embd * sizeof(float));
    if (!m->h_inputs || (m->act != GK_F32 && !m->tp_f32))
        return gk_errf(err, GK_ENOMEM, "tensor parallel: out of memory for its scratch");
    return 0;
}

void gk_gpt2_tp_free(gk_gpt2 *m)
{
    gk_vocab_split_free(m->vs);
    free(m->h_inputs);
    if (m->tp_f32) m->be->ops->free(m->be, m->tp_f32);
}

void gk_gpt2_tp_sum(gk_gpt2 *m, void *buf, size_t n)
{
    gk_backend *be = m->be;
    gk_comm *c = m->tp;
    if (!c || m->gather_rc) return;
    int rc;
    if (m->act == GK_F32) {
        rc = c->ops->allreduce(c, buf, n, &m->gather_err);
    } else {
        be->ops->cast(be, m->tp_f32, GK_F32, buf, m->act, n);
        rc = c->ops->allreduce(c, m->tp_f32, n, &m->gather_err);
        if (!rc) be->ops->cast(be, buf, m->act, m->tp_f32, GK_F32, n);
    }
    if (rc) m->gather_rc = rc;
}

void gk_gpt2_tp_sum_start(gk_gpt2 *m, void *buf, size_t n)
{
    gk_backend *be = m->be;
    gk_comm *c = m->tp;
    if (!c || m->gather_rc) return;
    if (m->act != GK_F32) be->ops->cast(be, m->tp_f32, GK_F32, buf, m->act, n);
    int rc = c->ops->allreduce_start(c, m->act == GK_F32 ? buf : m->tp_f32, n, &m->gather_err);
    if (rc) m->gather_rc = rc;
}

void gk_gpt2_tp_sum_wait(gk_gpt2 *m, void *buf, size_t n)
{
    gk_backend *be = m->be;
    gk_comm *c = m->tp;
    if (!c || m->gather_rc) return;
    int rc = c->ops->allreduce_wait(c, &m->gather_err);
    if (rc) m->gather_rc = rc;
    else if (m->act != GK_F32) be->ops->cast(be, buf, m->act, m->tp_f32, GK_F32, n);
}

int gk_gpt2_tp_norm(gk_gpt2 *m, double *sumsq, gk_err *err)
{
    double s[2] = {0, 0}; /* the parts', summed over the ranks; the replicated tensors' */
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        double x = 0;
        if (p->numel) m->be->ops->sumsq(m->be, &x, p->grad, p->numel);
        s[p->split == GK_SPLIT_NONE] += x;
    }
    int rc = gk_backend_status(m->be, err);
    if (!rc) rc = m->tp->ops->allreduce_host(m->tp, s, 1, err);
    *sumsq = s[0] + s[1];
    return rc;
}
