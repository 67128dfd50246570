/* snapshot.c: a checkpoint's host copy (model_io.h's tr_snapshot), one slice a rank. Each rank
 * copies the part of the state it owns (gk_gpt2_slices: its pieces of ZeRO's layout, or of the
 * whole block without sharding; with one rank, everything), so that no rank holds the whole
 * state for a checkpoint. Rank 0 writes the file: with several ranks its tensors stream in from
 * the slices as the safetensors writer asks for them, every rank's writer thread running the same
 * schedule on a comm of their own (tr_dist's ckpt comm, Gloo on host memory): each tensor of the
 * file, in the file's order (entry by entry, its parameter, then m and v), cut where its owner
 * changes and at STREAM_CHUNK floats, each piece broadcast by the rank that owns it. Rank 0 keeps
 * one piece at a time; the others only send theirs (tr_snapshot_serve). Under tensor parallel
 * a split tensor comes part by part (each part from the ranks that hold it) and rank 0 puts the
 * whole tensor together before writing it (one tensor's floats at a time: GPT-2 124M's wte, 154
 * MB). A kind whose slice lies in host memory may be read in place instead of copied (the CPU's
 * state, an offloaded optimizer's): then it streams too, a piece at a time, from the model. */
#include "model_io.h"

#include "kernels/model/gpt2_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_CHUNK ((size_t)1 << 20) /* floats a piece at most (4 MB) */

/* The schedule's place, the same on every rank: the next piece starts at float pos of entry's
 * tensor of kind (0 the parameter, 1 m, 2 v), in tensor-parallel rank part's part of it (0 for
 * a tensor no rank splits). */
typedef struct cursor {
    int entry, kind, part;
    size_t pos;
} cursor;

struct tr_snapshot {
    int n;                    /* parameter table entries */
    size_t numel;             /* gk_gpt2_num_scalars: to check a take's model */
    int kinds;                /* 1 (parameters), or 3 (and both moments) */
    char (*names)[64];        /* copies of the table's names: a save reads no model */
    gk_ckpt_param *params;    /* n entries; with one rank pointing into buf */
    size_t *offset;           /* each entry's float in the parameter block */
    int *split;               /* each entry's gk_param.split */
    int tp;                   /* tensor-parallel ranks (gk_gpt2_tp_world): world = tp x the
                               * slices' ranks, rank = slice rank x tp + part */
    float *whole;             /* tp > 1, rank 0: one tensor put together from its parts */
    gk_gpt2_slices *slices;
    gk_comm *comm;            /* the writers' (several ranks), else NULL */
    int rank;
    size_t slice;             /* floats of this rank's slice */
    float *copy[3];           /* each kind's copy of this rank's slice (into buf), or NULL: the
                               * kind is read in place at the save (gk_gpt2_slice_read) */
    float *buf;               /* the copied kinds' slices */
    const gk_gpt2 *model;     /* the last take's, for the kinds read in place */
    float *piece;             /* STREAM_CHUNK floats: a piece received, or read in place */
    cursor next;              /* the schedule: the next piece */
    cursor got;               /* rank 0: the piece at got_at, got_n floats from got.pos */
    const float *got_at;
    size_t got_n;
    char *config_json, *state_json;
    const gk_vocab *vocab;    /* borrowed */
    int64_t step;
    int taken;                /* the last take succeeded */
};

void tr_snapshot_free(tr_snapshot *s)
{
    if (!s)
        return;
    gk_gpt2_slices_free(s->slices);
    free(s->names);
    free(s->params);
    free(s->offset);
    free(s->split);
    free(s->whole);
    free(s->buf);
    free(s->piece);
    free(s->config_json);
    free(s->state_json);
    free(s);
}

/* Whether the save streams the tensors (stream_fill) rather than pointing at whole copies: with
 * several ranks, or a kind read in place. */
static int streams(const tr_snapshot *s)
{
    return s->comm || tr_snapshot_in_place(s);
}

/* The table's names, shapes and offsets into s (one rank with every kind copied: the data
 * pointers into the copies). */
static void describe(tr_snapshot *s, const gk_gpt2 *m)
{
    for (int i = 0; i < s->n; i++) {
        const gk_param *t = gk_gpt2_param(m, i);
        float *p = streams(s) ? s->piece : s->copy[0] + t->offset; /* streamed: only "present" */
        snprintf(s->names[i], sizeof s->names[i], "%s", t->name);
        s->offset[i] = t->offset;
        s->split[i] = t->split;
        s->params[i] = (gk_ckpt_param){s->names[i], t->ndim,
                                       {t->full_shape[0], t->ndim > 1 ? t->full_shape[1] : 0}, p,
                                       NULL, NULL};
        if (s->kinds == 3) {
            s->params[i].m = streams(s) ? p : s->copy[1] + t->offset;
            s->params[i].v = streams(s) ? p : s->copy[2] + t->offset;
        }
    }
}

static const enum gk_tensor_kind kind_of[3] = {GK_TENSOR_PARAM, GK_TENSOR_ADAM_M,
                                               GK_TENSOR_ADAM_V};

int tr_snapshot_create(tr_snapshot **out, const gk_gpt2 *m, int with_optimizer, gk_comm *comm,
                       int in_place, gk_err *e)
{
    tr_snapshot *s = calloc(1, sizeof *s);
    int n = gk_gpt2_n_params(m), kinds = with_optimizer ? 3 : 1, copied = 0;
    for (int k = 0; k < kinds; k++)
        copied += !(in_place && gk_gpt2_slice_in_place(m, kind_of[k]));
    *out = NULL;
    if (s) {
        s->comm = comm && comm->world > 1 ? comm : NULL;
        s->rank = s->comm ? comm->rank : 0;
        s->slices = gk_gpt2_slices_new(m);
        s->slice = s->slices ? gk_gpt2_slice_floats(s->slices, s->rank) : 0;
        s->names = calloc((size_t)n, sizeof *s->names);
        s->params = calloc((size_t)n, sizeof *s->params);
        s->offset = calloc((size_t)n, sizeof *s->offset);
        s->split = calloc((size_t)n, sizeof *s->split);
        s->tp = gk_gpt2_tp_world(m);
        size_t max = 0;
        for (int i = 0; s->tp > 1 && s->rank == 0 && i < n; i++)
            if (gk_gpt2_param(m, i)->full_numel > max)
                max = gk_gpt2_param(m, i)->full_numel;
        s->whole = max ? malloc(max * sizeof *s->whole) : NULL;
        s->buf = s->slices && copied ? malloc(s->slice * (size_t)copied * sizeof *s->buf) : NULL;
        for (int k = 0, c = 0; s->buf && k < kinds; k++)
            if (!(in_place && gk_gpt2_slice_in_place(m, kind_of[k])))
                s->copy[k] = s->buf + s->slice * (size_t)c++;
        s->kinds = kinds;
        s->piece = streams(s) ? malloc(STREAM_CHUNK * sizeof *s->piece) : NULL;
    }
    if (s && s->slices &&
        gk_gpt2_slices_world(s->slices) * s->tp != (s->comm ? comm->world : 1)) {
        tr_snapshot_free(s);
        return gk_errf(e, GK_EUSAGE, "checkpoint snapshot: the model's state is cut over ranks "
                       "whose comm was not given");
    }
    if (!s || !s->slices || !s->names || !s->params || !s->offset || !s->split ||
        (copied && !s->buf) || (streams(s) && !s->piece) ||
        (s->tp > 1 && s->rank == 0 && !s->whole)) {
        size_t bytes = s ? s->slice * (size_t)copied * sizeof(float) : 0;
        tr_snapshot_free(s);
        return gk_errf(e, GK_ENOMEM, "out of memory for the checkpoint's host copy (%.1f MB)",
                       (double)bytes / 1e6);
    }
    /* its pages mapped now, not at the first copy */
    if (s->buf) memset(s->buf, 0, s->slice * (size_t)copied * sizeof *s->buf);
    s->n = n;
    s->numel = gk_gpt2_num_scalars(m);
    s->step = -1;
    describe(s, m);
    *out = s;
    return 0;
}

int tr_snapshot_take(tr_snapshot *s, gk_gpt2 *m, const gk_vocab *v, const tr_state *st,
                     const char *settings_json, gk_err *e)
{
    s->taken = 0;
    free(s->config_json);
    free(s->state_json);
    s->config_json = gk_gpt2_config_json(gk_gpt2_cfg(m));
    s->state_json = st ? tr_state_json(st, settings_json) : NULL;
    s->vocab = v;
    s->step = st ? st->step : -1;
    if (!s->config_json || (st && !s->state_json))
        return gk_errf(e, GK_ENOMEM, "out of memory preparing the checkpoint");
    if (gk_gpt2_n_params(m) != s->n || gk_gpt2_num_scalars(m) != s->numel)
        return gk_errf(e, GK_EUSAGE, "checkpoint snapshot: not made for this model");
    s->model = m;
    int rc = 0;
    for (int k = 0; !rc && k < s->kinds; k++)
        if (s->copy[k]) rc = gk_gpt2_slice_get(m, s->slices, kind_of[k], s->copy[k], e);
    s->taken = rc == 0;
    return rc;
}

/* ---- the stream: several ranks' slices into one file ---- */

/* The parts of entry i (tensor-parallel ranks holding a part of it: 1 when none splits it), and
 * the floats of part t. */
static int parts_of(const tr_snapshot *s, int i)
{
    return s->split[i] == GK_SPLIT_NONE ? 1 : s->tp;
}
static size_t part_numel(const tr_snapshot *s, int i, int t)
{
    const gk_ckpt_param *p = &s->params[i];
    int full[2] = {p->shape[0], p->shape[1]}, part[2];
    gk_tp_part_shape(s->split[i], p->ndim, full, s->tp, t, part);
    return (size_t)part[0] * (p->ndim > 1 ? (size_t)part[1] : 1);
}

/* Broadcasts the schedule's next piece from its owner; *n its floats (0: the schedule is over),
 * s->got and got_at (on rank 0) what it was. */
static int next_piece(tr_snapshot *s, size_t *n, gk_err *e)
{
    cursor *c = &s->next;
    while (c->entry < s->n && c->pos >= part_numel(s, c->entry, c->part)) {
        c->pos = 0;
        if (++c->part < parts_of(s, c->entry))
            continue;
        c->part = 0;
        if (++c->kind == s->kinds)
            c->kind = 0, c->entry++;
    }
    *n = 0;
    if (c->entry == s->n)
        return 0;
    size_t numel = part_numel(s, c->entry, c->part), at, run;
    int owner;
    gk_gpt2_slice_owner(s->slices, s->offset[c->entry] + c->pos, &owner, &at, &run);
    owner = owner * s->tp + c->part;
    size_t len = numel - c->pos < run ? numel - c->pos : run;
    len = len < STREAM_CHUNK ? len : STREAM_CHUNK;
    float *buf = owner == s->rank && s->copy[c->kind] ? s->copy[c->kind] + at /* only read */
                                                      : s->piece;
    int rc = owner == s->rank && !s->copy[c->kind]
                 ? gk_gpt2_slice_read(s->model, s->slices, kind_of[c->kind], at, len, buf, e)
                 : 0;
    if (!rc && s->comm) rc = s->comm->ops->broadcast(s->comm, buf, len * sizeof(float), owner, e);
    s->got = *c, s->got_at = buf, s->got_n = len;
    c->pos += len;
    *n = rc ? 0 : len;
    return rc;
}

/* Tensor parallel, rank 0: entry's tensor of kind k put together in s->whole from its parts'
 * pieces, which must come next in the schedule. */
static int whole_tensor(tr_snapshot *s, size_t entry, int k, gk_err *e)
{
    const gk_ckpt_param *p = &s->params[entry];
    int full[2] = {p->shape[0], p->shape[1]};
    size_t got;
    for (;;) {
        int rc = next_piece(s, &got, e);
        if (rc)
            return rc;
        if (!got || s->got.entry != (int)entry || s->got.kind != k)
            return gk_errf(e, GK_EUSAGE, "checkpoint stream: %s asked out of the file's order",
                           s->names[entry]);
        gk_tp_part_copy(s->split[entry], p->ndim, full, s->tp, s->got.part, s->whole,
                        (float *)s->got_at, s->got.pos, got, 1);
        if (s->got.part == parts_of(s, (int)entry) - 1 &&
            s->got.pos + got == part_numel(s, (int)entry, s->got.part))
            return 0;
    }
}

/* gk_ckpt_info.fill on rank 0 with tensor parallel: from whole_tensor's, made at the tensor's
 * first bytes. */
static int whole_fill(tr_snapshot *s, size_t entry, int k, uint64_t off, void *buf, size_t n,
                      gk_err *e)
{
    int rc = off == 0 ? whole_tensor(s, entry, k, e) : 0;
    if (!rc)
        memcpy(buf, (char *)s->whole + off, n);
    return rc;
}

/* gk_ckpt_info.fill on rank 0: the bytes asked, from the pieces as the schedule brings them. */
static int stream_fill(void *ctx, size_t entry, int kind, uint64_t off, void *buf, size_t n,
                       gk_err *e)
{
    tr_snapshot *s = ctx;
    int k = kind == 'm' ? 1 : kind == 'v' ? 2 : 0;
    if (s->tp > 1)
        return whole_fill(s, entry, k, off, buf, n, e);
    size_t first = (size_t)off / sizeof(float), count = n / sizeof(float);
    char *to = buf;
    while (count) {
        int here = s->got.entry == (int)entry && s->got.kind == k && first >= s->got.pos &&
                   first < s->got.pos + s->got_n;
        size_t got;
        int rc = here ? 0 : next_piece(s, &got, e);
        if (rc)
            return rc;
        if (!here && (s->got.entry != (int)entry || s->got.kind != k || s->got.pos != first))
            return gk_errf(e, GK_EUSAGE, "checkpoint stream: %s asked out of the file's order",
                           s->names[entry]);
        size_t take = s->got.pos + s->got_n - first;
        take = take < count ? take : count;
        memcpy(to, s->got_at + (first - s->got.pos), take * sizeof(float));
        to += take * sizeof(float), first += take, count -= take;
    }
    return 0;
}

/* The rest of the schedule, its pieces dropped (rank 0 after a save, or the serving ranks). */
static int drain(tr_snapshot *s, gk_err *e)
{
    size_t n = 1;
    int rc = 0;
    while (!rc && n)
        rc = next_piece(s, &n, e);
    return rc;
}

static void restart(tr_snapshot *s)
{
    s->next = (cursor){0, 0, 0, 0};
    s->got = (cursor){-1, 0, 0, 0};
    s->got_n = 0;
}

int tr_snapshot_save(tr_snapshot *s, const char *path, gk_err *e)
{
    if (!s->taken)
        return gk_errf(e, GK_EUSAGE, "%s: no snapshot taken to save", path);
    gk_ckpt_info info = {s->config_json, s->state_json, s->vocab, 0, NULL, NULL};
    if (!streams(s))
        return gk_ckpt_save(path, s->params, (size_t)s->n, &info, e);
    info.fill = stream_fill, info.fill_ctx = s;
    restart(s);
    int rc = gk_ckpt_save(path, s->params, (size_t)s->n, &info, e);
    if (!s->comm)
        return rc;
    gk_err quiet;
    int rest = drain(s, rc ? &quiet : e); /* the others send to the end whatever happened here */
    return rc ? rc : rest;
}

int tr_snapshot_serve(tr_snapshot *s, gk_err *e)
{
    if (!s->taken)
        return gk_errf(e, GK_EUSAGE, "checkpoint: no snapshot taken to send");
    restart(s);
    return s->comm ? drain(s, e) : 0;
}

int tr_snapshot_in_place(const tr_snapshot *s)
{
    for (int k = 0; k < s->kinds; k++)
        if (!s->copy[k]) return 1;
    return 0;
}

int64_t tr_snapshot_step(const tr_snapshot *s)
{
    return s->taken ? s->step : -1;
}
