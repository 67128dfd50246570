/* comm.c: opening a comm through the backend (gk_comm_open; gk_comm_gloo_open, the slot of cpu
 * and ref), the comm of one process (every collective is the identity), gk_comm_stop_on and
 * gk_comm_close. */
#include "kernels/comm/comm.h"

#include <stdlib.h>
#include <string.h>

int gk_comm_open_group(gk_backend *be, gk_store *store, const char *group, int rank, int world,
                       double timeout_s, const char *ifname, gk_comm **out, gk_err *e)
{
    *out = NULL;
    if (!be->ops->comm_open)
        return gk_errf(e, GK_EUSAGE, "%s: this backend has no collectives across processes",
                       be->ops->name);
    size_t n = group ? strlen(group) : 0;
    if (n > 24 || (group && strspn(group, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_-") != n))
        return gk_errf(e, GK_EUSAGE, "comm group '%.40s': 1 to 24 of A-Z a-z 0-9 _ -", group);
    gk_comm_boot b = {store, gk_store_set, gk_store_get, gk_store_add, rank, world, timeout_s,
                      ifname, group ? group : ""};
    return be->ops->comm_open(be, &b, out, e);
}

int gk_comm_open(gk_backend *be, gk_store *store, int rank, int world, double timeout_s,
                 const char *ifname, gk_comm **out, gk_err *e)
{
    return gk_comm_open_group(be, store, NULL, rank, world, timeout_s, ifname, out, e);
}

int gk_comm_gloo_open(gk_backend *be, const gk_comm_boot *b, gk_comm **out, gk_err *e)
{
    (void)be; /* host memory: Gloo reads and writes it directly */
    return gk_comm_open_gloo_group(out, b->store, b->group, b->rank, b->world, b->timeout_s,
                                   b->ifname, e);
}

/* ---- one process ---- */

static int single_allreduce(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    (void)c, (void)buf, (void)n, (void)e;
    return 0;
}

static int single_allreduce_host(gk_comm *c, double *vals, int n, gk_err *e)
{
    (void)c, (void)vals, (void)n, (void)e;
    return 0;
}

static int single_reduce_scatter(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    (void)c, (void)e;
    if (out != in)
        memmove(out, in, count * sizeof *out);
    return 0;
}

static int single_all_gather(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    return single_reduce_scatter(c, in, out, count, e);
}

static int single_broadcast(gk_comm *c, void *buf, size_t n, int root, gk_err *e)
{
    (void)c, (void)buf, (void)n, (void)root, (void)e;
    return 0;
}

static int single_barrier(gk_comm *c, gk_err *e)
{
    (void)c, (void)e;
    return 0;
}

static int single_allreduce_wait(gk_comm *c, gk_err *e)
{
    (void)c, (void)e;
    return 0;
}

static int single_started_wait(gk_comm *c, int keep, gk_err *e)
{
    (void)keep;
    return single_allreduce_wait(c, e);
}

static void single_close(gk_comm *c)
{
    free(c);
}

static const gk_comm_ops single_ops = {
    "single", single_allreduce, single_allreduce_host, single_reduce_scatter, single_all_gather,
    single_broadcast, single_barrier, single_close, single_allreduce, single_allreduce_wait,
    single_reduce_scatter, single_started_wait, single_all_gather,
};

int gk_comm_open_single(gk_comm **out, gk_err *e)
{
    gk_comm *c = calloc(1, sizeof *c);
    if (!c)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    c->ops = &single_ops;
    c->world = 1;
    *out = c;
    return 0;
}

int gk_comm_stop_on(gk_comm *c, const volatile sig_atomic_t *flag, double grace_s, gk_err *e)
{
    if (!c || strcmp(c->ops->name, "gloo") != 0)
        return 0;
    return gk_comm_gloo_stop_on(c, flag, grace_s, e);
}

void gk_comm_close(gk_comm *c)
{
    if (c)
        c->ops->close(c);
}
