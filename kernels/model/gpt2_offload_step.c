/* gpt2_offload_step.c: an update with the optimizer offloaded (gpt2_offload.c has its memory).
 * The update is a list of slices (offload_slice: a run of floats with its device gradients, its
 * weights, host moments and where the new weights go on the device), cut into chunks of at most
 * m->offload_chunk floats (gk_gpt2_offload_chunk). Each chunk's gradients (and, where the device
 * holds the master, its weights) are copied into one of two staging buffers; a thread of this
 * file runs the host backend's AdamW over the chunk (16-bit copies written into the staging too)
 * while the calling thread copies the next chunk into the other buffer; then the chunk's weights
 * go back to the device. So the copies of one chunk run while AdamW works on the one before (on
 * cuda through pinned memory: the bus and the CPU at once). */
#include <pthread.h>
#include <stdlib.h>

#include "kernels/model/gpt2_internal.h"


/* A run of n floats to update: gradients on the device; the weights in host memory (the master,
 * p_host) or, staged, on the device (param: the device's, read and written back); the moments in
 * host memory; dst and cdst: where the device reads the new fp32 and 16-bit weights (or NULL). */
typedef struct offload_slice {
    const float *grad;
    float *param, *m, *v, *dst;
    void *cdst;
    size_t n;
    int decay, staged;
} offload_slice;

/* One chunk: its table for the host's AdamW (hs, n entries), each entry's slice and first float
 * (of, from), and its thread's result. */
typedef struct offload_job {
    gk_gpt2 *m;
    const gk_adamw *h;
    float lr, scale;
    gk_adamw_tensor *hs;
    int *of;
    size_t *from;
    int n, rc, running;
    gk_err err;
    pthread_t thread;
} offload_job;

static void *run_adamw(void *arg)
{
    offload_job *j = arg;
    gk_backend *host = j->m->offload;
    host->ops->adamw_multi(host, j->hs, j->n, j->lr, j->h->beta1, j->h->beta2, j->h->eps,
                           j->h->weight_decay, (int)j->m->step, j->scale, j->m->wt);
    j->rc = gk_backend_status(host, &j->err);
    return NULL;
}

/* The chunk of slices from s[*k] float *j on into staging buffer buf: gradients (and staged
 * weights) copied from the device, the host table made; *k and *j moved past it. */
static int stage_chunk(gk_gpt2 *m, const offload_slice *s, int ns, int *k, size_t *j, int buf,
                       offload_job *job, gk_err *err)
{
    gk_backend *be = m->be;
    size_t at = 0, copies = 0;
    job->n = 0;
    size_t cap = m->offload_chunk;
    while (*k < ns && at < cap) {
        const offload_slice *q = &s[*k];
        size_t len = q->n - *j < cap - at ? q->n - *j : cap - at;
        float *g = m->g_stage[buf] + at, *p = q->param + *j;
        be->ops->to_host(be, g, q->grad + *j, len * sizeof(float));
        if (q->staged) {
            p = m->p_stage[buf] + at;
            be->ops->to_host(be, p, q->param + *j, len * sizeof(float));
        }
        void *copy = q->cdst ? (char *)m->w_stage[buf] + gk_elt_bytes(m->wt, copies) : NULL;
        copies += q->cdst ? len : 0;
        job->of[job->n] = *k, job->from[job->n] = *j;
        job->hs[job->n++] = (gk_adamw_tensor){p, g, q->m + *j, q->v + *j, copy, len, q->decay};
        at += len, *j += len;
        if (*j == q->n) ++*k, *j = 0;
    }
    return gk_backend_status(be, err);
}

/* The chunk's new weights where the device reads them (after its AdamW). From pinned staging the
 * copies may still be reading when this returns: the buffer is written again only after the
 * next chunk staged into it, whose to_host (on the same stream, after them) has waited. */
static int push_chunk(gk_gpt2 *m, const offload_slice *s, const offload_job *job, gk_err *err)
{
    gk_backend *be = m->be;
    for (int i = 0; i < job->n; i++) {
        const offload_slice *q = &s[job->of[i]];
        const gk_adamw_tensor *t = &job->hs[i];
        if (q->dst) be->ops->to_device(be, q->dst + job->from[i], t->param, t->n * sizeof(float));
        if (q->cdst)
            be->ops->to_device(be, (char *)q->cdst + gk_elt_bytes(m->wt, job->from[i]), t->copy,
                               gk_elt_bytes(m->wt, t->n));
    }
    return gk_backend_status(be, err);
}

/* Waits for job's AdamW (its thread, if it has one); its result, unless rc is already a
 * failure (taken once). */
static int join_job(offload_job *job, int rc, gk_err *err)
{
    if (job->running) pthread_join(job->thread, NULL);
    job->running = 0;
    if (!rc && job->rc) *err = job->err, rc = job->rc;
    job->rc = 0;
    return rc;
}

/* AdamW over the slices s (ns of them) on the host, chunk by chunk, the copies of each chunk
 * while the one before is updated. jobs: two, each with room for ns entries. */
static int run_slices(gk_gpt2 *m, const offload_slice *s, int ns, offload_job jobs[2],
                      gk_err *err)
{
    int rc = 0, k = 0, prev = -1;
    size_t j = 0;
    for (int c = 0; !rc; c++) {
        offload_job *job = &jobs[c % 2];
        int more = k < ns;
        if (more) rc = stage_chunk(m, s, ns, &k, &j, c % 2, job, err);
        if (prev >= 0) {
            rc = join_job(&jobs[prev], rc, err);
            if (!rc) rc = push_chunk(m, s, &jobs[prev], err);
        }
        if (rc || !more) break;
        if (pthread_create(&job->thread, NULL, run_adamw, job) != 0) {
            run_adamw(job); /* (no thread to be had: here, without the overlap) */
        } else {
            job->running = 1;
        }
        prev = c % 2;
    }
    rc = join_job(&jobs[0], rc, err); /* (after a failure: none left running) */
    return join_job(&jobs[1], rc, err);
}

/* run_slices with the jobs' tables allocated. */
static int update_slices(gk_gpt2 *m, const gk_adamw *h, float lr, float scale,
                         const offload_slice *s, int ns, gk_err *err)
{
    offload_job jobs[2];
    size_t cap = (size_t)(ns ? ns : 1);
    int ok = 1;
    for (int b = 0; b < 2; b++) {
        jobs[b] = (offload_job){.m = m, .h = h, .lr = lr, .scale = scale};
        jobs[b].hs = malloc(sizeof *jobs[b].hs * cap);
        jobs[b].of = malloc(sizeof *jobs[b].of * cap);
        jobs[b].from = malloc(sizeof *jobs[b].from * cap);
        ok = ok && jobs[b].hs && jobs[b].of && jobs[b].from;
    }
    int rc = ok ? run_slices(m, s, ns, jobs, err)
                : gk_errf(err, GK_ENOMEM, "update: out of memory for %d slices", ns);
    for (int b = 0; b < 2; b++) free(jobs[b].hs), free(jobs[b].of), free(jobs[b].from);
    return rc;
}

int gk_gpt2_offload_update(gk_gpt2 *m, const gk_adamw *h, float lr, float scale, gk_err *err)
{
    offload_slice *s = malloc(sizeof *s * (size_t)m->n_params);
    if (!s) return gk_errf(err, GK_ENOMEM, "update: out of memory");
    for (int i = 0; i < m->n_params; i++) { /* each entry whole (wte's padding rows left alone) */
        const gk_param *p = &m->params[i];
        s[i] = (offload_slice){m->g_block + p->offset, m->p_host + p->offset, m->om + p->offset,
                               m->ov + p->offset, p->data, p->copy, p->numel, p->decay, 0};
    }
    m->step++;
    int rc = update_slices(m, h, lr, scale, s, m->n_params, err);
    free(s);
    return rc;
}

int gk_gpt2_offload_sharded(gk_gpt2 *m, const gk_adamw *h, float lr, float scale,
                            const gk_adamw_tensor *ts, int n, gk_err *err)
{
    offload_slice *s = malloc(sizeof *s * (size_t)(n ? n : 1));
    if (!s) return gk_errf(err, GK_ENOMEM, "update: out of memory");
    for (int k = 0; k < n; k++) /* the device's weights staged, and put back where they were */
        s[k] = (offload_slice){ts[k].grad, ts[k].param, ts[k].m, ts[k].v, ts[k].param, NULL,
                               ts[k].n, ts[k].decay, 1};
    int rc = update_slices(m, h, lr, scale, s, n, err);
    free(s);
    return rc;
}
