/* dist.c: the data-parallel run: rendezvous, collectives, agreements (see dist.h). */
#include "dist.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/env.h"
#include "common/log.h"
#include "common/progress.h" /* gk_now */

int tr_dist_is_root(const tr_dist *d) { return d->rank == 0; }

/* The signal that stopped the rendezvous (SIGINT or SIGTERM), else 0: the rendezvous has
 * handlers of its own, as the run's are installed only once it has begun. */
static volatile sig_atomic_t rdzv_signal;

static void on_rdzv_signal(int sig) { rdzv_signal = sig; }

static int rdzv_stopped(const tr_launch *l, gk_err *e)
{
    return gk_errf(e, GK_EINTR, strchr(l->master_addr, ':') ? "stopped by %s while waiting at "
                   "rendezvous at [%s]:%d" : "stopped by %s while waiting at rendezvous at %s:%d",
                   rdzv_signal == SIGINT ? "SIGINT" : "SIGTERM", l->master_addr, l->master_port);
}

/* ", the store refused 2 clients (the last: PEER: why)" into out (cap bytes), or "". */
static void refusals_text(tr_dist *d, char *out, size_t cap)
{
    char last[400];
    gk_err quiet;
    int64_t n = gk_store_refusals(d->store, last, sizeof last, &quiet);
    out[0] = '\0';
    if (n > 0)
        snprintf(out, cap, "; the store refused %lld client%s (the last: %s)", (long long)n,
                 n == 1 ? "" : "s", last);
}

/* The timeout's message: the ranks that arrived (and are still connected) and, when more are
 * connected, how many: a rank may connect without arriving (it died or hangs in between); the
 * clients the store refused (a rank with another job token, a second rank of one number). */
static int rdzv_timeout(tr_dist *d, gk_err *e)
{
    int gone[64], ready = 0, ng = gk_store_gone(d->store, gone, 64, e);
    int connected = ng < 0 ? ng : gk_store_connected(d->store, e);
    if (connected < 0)
        return e->code;
    for (int r = 0; r < d->world; r++) {
        char key[40];
        int left = 0;
        snprintf(key, sizeof key, "rdzv/rank/%d", r);
        for (int i = 0; i < ng && i < 64; i++)
            left |= gone[i] == r;
        int here = gk_store_check(d->store, key, e);
        if (here < 0)
            return here;
        ready += here && !left;
    }
    char more[64] = "", refused[600];
    if (connected > ready)
        snprintf(more, sizeof more, " (%d connected)", connected);
    refusals_text(d, refused, sizeof refused);
    if (ready == d->world)
        return gk_errf(e, GK_EIO, "rendezvous at %s: all %d ranks arrived within %g s, but rank 0 "
                       "did not declare the rendezvous complete%s", gk_store_address(d->store),
                       d->world, d->timeout_s, refused);
    return gk_errf(e, GK_EIO, "rendezvous at %s: %d of %d ranks arrived within %g s%s%s",
                   gk_store_address(d->store), ready, d->world, d->timeout_s, more, refused);
}

/* Rank 0's check of the ranks that arrived: 1 when every rank is there with rank 0's world size
 * ("rdzv/ready" set), 0 when some are still missing, else the error, also left in "rdzv/error"
 * for the other ranks to report. */
static int rdzv_verify(tr_dist *d, gk_err *e)
{
    int missing = 0;
    for (int r = 0; r < d->world; r++) {
        char key[40];
        void *val = NULL;
        size_t n;
        snprintf(key, sizeof key, "rdzv/rank/%d", r);
        int rc = gk_store_check(d->store, key, e);
        if (rc == 1 && (rc = gk_store_get(d->store, key, &val, &n, e)) == 0 &&
            atoi(val) != d->world) {
            rc = gk_errf(e, GK_EUSAGE, "rendezvous at %s: rank %d was started with a world of %d "
                         "ranks, rank 0 with %d (WORLD_SIZE or the launcher's settings differ)",
                         gk_store_address(d->store), r, atoi(val), d->world);
            gk_err quiet;
            gk_store_set(d->store, "rdzv/error", e->msg, strlen(e->msg), &quiet);
        }
        free(val);
        if (rc < 0)
            return rc;
        missing += rc == 0 && !val;
    }
    if (missing)
        return 0;
    int rc = gk_store_set(d->store, "rdzv/ready", "1", 1, e);
    return rc ? rc : 1;
}

/* Rank 0, between two waits: names clients the store refused since the last look, says once
 * (after a second) how many ranks it still waits for, and checks the ranks once they seem all
 * there ("rdzv/full", or the counter: a restarted rank counts twice). 1: ready. */
static int rdzv_root_poll(tr_dist *d, double t0, int *said, int64_t *refused, gk_err *e)
{
    char last[400];
    gk_err quiet;
    int64_t arrived = 0, n = gk_store_refusals(d->store, last, sizeof last, &quiet);
    if (n > *refused)
        gk_warn("rendezvous at %s: refused %lld client%s (%s)", gk_store_address(d->store),
                (long long)(n - *refused), n - *refused == 1 ? "" : "s", last);
    *refused = n > *refused ? n : *refused;
    int rc = gk_store_add(d->store, "rdzv/arrived", 0, &arrived, e);
    if (!rc && arrived >= d->world)
        return rdzv_verify(d, e);
    if (!rc && !*said && gk_now() - t0 >= 1.0) {
        gk_info("waiting for %lld more rank%s at %s", (long long)(d->world - arrived),
                d->world - arrived == 1 ? "" : "s", gk_store_address(d->store));
        *said = 1;
    }
    return rc;
}

/* Another rank, between two waits: the error rank 0 left, if any. */
static int rdzv_error(tr_dist *d, gk_err *e)
{
    int rc = gk_store_check(d->store, "rdzv/error", e);
    void *val = NULL;
    size_t n;
    if (rc == 1 && (rc = gk_store_get(d->store, "rdzv/error", &val, &n, e)) == 0)
        rc = gk_errf(e, GK_EUSAGE, "%s", (const char *)val);
    free(val);
    return rc;
}

/* Every rank sets "rdzv/rank/R" to its world size and adds itself to a counter; the one that
 * brings the counter to its world size sets "rdzv/full". Rank 0 alone declares the rendezvous
 * complete ("rdzv/ready", which the others wait for), once every rank has arrived with its own
 * world size, or says why not ("rdzv/error"). Waits a quarter of a second at a time (a signal
 * stops them). */
static int rendezvous(tr_dist *d, gk_err *e)
{
    char key[40], world[16];
    int64_t arrived = 0, refused = 0;
    snprintf(key, sizeof key, "rdzv/rank/%d", d->rank);
    snprintf(world, sizeof world, "%d", d->world);
    int rc = gk_store_set(d->store, key, world, strlen(world), e);
    if (!rc)
        rc = gk_store_add(d->store, "rdzv/arrived", 1, &arrived, e);
    if (!rc && arrived == d->world)
        rc = gk_store_set(d->store, "rdzv/full", "1", 1, e);
    const char *wait = d->rank == 0 ? "rdzv/full" : "rdzv/ready";
    double t0 = gk_now(), left;
    int said = 0, done = 0;
    while (!rc && !done && (left = t0 + d->timeout_s - gk_now()) > 0) {
        int r = gk_store_wait_for(d->store, &wait, 1, left < 0.25 ? left : 0.25, e);
        if (r < 0)
            return r;
        rc = rdzv_signal ? rdzv_stopped(&d->where, e) : 0;
        if (d->rank == 0 && r == 0)
            wait = "rdzv/ready"; /* seen full: from now on a quarter of a second at a time */
        if (!rc && d->rank == 0)
            rc = (done = rdzv_root_poll(d, t0, &said, &refused, e)) < 0 ? done : 0;
        else if (!rc)
            rc = r == 0 ? (done = 1, 0) : rdzv_error(d, e);
    }
    if (rc || done)
        return rc;
    rc = gk_store_check(d->store, "rdzv/ready", e); /* one that arrived just now */
    return rc == 1 ? 0 : rc < 0 ? rc : rdzv_timeout(d, e);
}

/* Opens the store and waits for every rank, with SIGINT and SIGTERM stopping the wait. Without
 * GPT_DIST_TOKEN (l->dist_token; gpt-train's own launcher makes one) rank 0's store takes any
 * client. */
static int dist_join(tr_dist *d, const tr_launch *l, gk_err *e)
{
    const char *token = l->dist_token;
    gk_store_opts o = {.serve = d->rank == 0, .world = d->world,
                       .local = l->local_world_size >= l->world_size, .token = token,
                       .token_name = "GPT_DIST_TOKEN", .timeout_s = d->timeout_s,
                       .stop = &rdzv_signal};
    struct sigaction sa = {.sa_handler = on_rdzv_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    rdzv_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int rc = gk_store_open_opts(&d->store, l->master_addr, l->master_port, d->rank, &o, e);
    if (rc == GK_EINTR)
        rc = rdzv_stopped(l, e);
    if (!rc && !token && d->rank == 0)
        gk_warn("GPT_DIST_TOKEN is not set: the rendezvous store at %s (listening on %s) accepts "
                "any client that reaches it", gk_store_address(d->store), gk_store_bound(d->store));
    if (!rc)
        rc = rendezvous(d, e);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return !rc && rdzv_signal ? rdzv_stopped(l, e) : rc; /* one at the very end */
}

int tr_dist_open(tr_dist *d, const tr_launch *l, double timeout_s, const gk_env *env, gk_err *e)
{
    memset(d, 0, sizeof *d);
    d->where = *l;
    d->rank = l->rank;
    d->world = l->world_size > 0 ? l->world_size : 1;
    d->tp = 1;
    d->dp_rank = d->rank, d->dp_world = d->world;
    d->timeout_s = timeout_s;
    d->accum = d->accum_total = 1;
    d->overlap = !env->no_grad_overlap;
    d->gloo_ifname = env->gloo_ifname;
    return d->world == 1 ? 0 : dist_join(d, l, e);
}

/* ---- the timed comm: forwards to its inner, adding the time each collective takes ---- */

#define TIMED(d, call)                                \
    do {                                              \
        double t0_ = gk_now();                        \
        int rc_ = (call);                             \
        (d)->comm_secs += gk_now() - t0_;             \
        return rc_;                                   \
    } while (0)

/* A timed comm's impl: the run's dist (its comm_secs) and the comm that does the work. */
static tr_timed *timed_of(gk_comm *c) { return c->impl; }

static int timed_allreduce(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->allreduce(t->inner, buf, n, e));
}

static int timed_allreduce_host(gk_comm *c, double *v, int n, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->allreduce_host(t->inner, v, n, e));
}

static int timed_reduce_scatter(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->reduce_scatter(t->inner, in, out, count, e));
}

static int timed_all_gather(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->all_gather(t->inner, in, out, count, e));
}

static int timed_broadcast(gk_comm *c, void *buf, size_t n, int root, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->broadcast(t->inner, buf, n, root, e));
}

static int timed_barrier(gk_comm *c, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->barrier(t->inner, e));
}

static int timed_allreduce_start(gk_comm *c, float *buf, size_t n, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->allreduce_start(t->inner, buf, n, e));
}

static int timed_allreduce_wait(gk_comm *c, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->allreduce_wait(t->inner, e));
}

static int timed_reduce_scatter_start(gk_comm *c, const float *in, float *out, size_t count,
                                      gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->reduce_scatter_start(t->inner, in, out, count, e));
}

static int timed_started_wait(gk_comm *c, int keep, gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->started_wait(t->inner, keep, e));
}

static int timed_all_gather_start(gk_comm *c, const float *in, float *out, size_t count,
                                  gk_err *e)
{
    tr_timed *t = timed_of(c);
    TIMED(t->d, t->inner->ops->all_gather_start(t->inner, in, out, count, e));
}

static void timed_close(gk_comm *c)
{
    tr_timed *t = timed_of(c);
    gk_comm_close(t->inner);
    t->inner = NULL;
}

static const gk_comm_ops timed_ops = {
    "timed", timed_allreduce, timed_allreduce_host, timed_reduce_scatter, timed_all_gather,
    timed_broadcast, timed_barrier, timed_close, timed_allreduce_start, timed_allreduce_wait,
    timed_reduce_scatter_start, timed_started_wait, timed_all_gather_start,
};

double tr_dist_comm_secs(tr_dist *d)
{
    double s = d->comm_secs;
    d->comm_secs = 0;
    return s;
}

int tr_dist_tp(tr_dist *d, gk_backend *be, int tp, gk_err *e)
{
    int local = d->where.local_world_size > 0 ? d->where.local_world_size : 1;
    if (tp <= 1)
        return 0;
    if (d->world % tp || local % tp)
        return gk_errf(e, GK_EUSAGE, "tensor_parallel = %d must divide the ranks of each node "
                       "(%d here, %d in all): start a multiple of %d a node (nproc_per_node)",
                       tp, local, d->world, tp);
    char name[32];
    snprintf(name, sizeof name, "tp%d", d->rank / tp);
    int rc = gk_comm_open_group(be, d->store, name, d->rank % tp, tp, d->timeout_s,
                                d->gloo_ifname, &d->tp_t.inner, e);
    if (rc)
        return rc;
    d->tp_t.d = d;
    d->tp_t.inner->sum_type = GK_F32; /* (activations: summed in float32) */
    d->tp_timed = (gk_comm){&timed_ops, d->rank % tp, tp, &d->tp_t, GK_F32};
    d->tp_comm = &d->tp_timed;
    d->tp = tp, d->tp_rank = d->rank % tp;
    d->dp_rank = d->rank / tp, d->dp_world = d->world / tp;
    return 0;
}

/* The comm the gradients are summed over: the whole run's, or with tensor parallel the ranks
 * that hold the same part ("dp<P>"; one of its own: "single"). */
static int open_dp(tr_dist *d, gk_backend *be, gk_err *e)
{
    if (d->tp == 1)
        return gk_comm_open(be, d->store, d->rank, d->world, d->timeout_s, d->gloo_ifname,
                            &d->dp_t.inner, e);
    if (d->dp_world == 1)
        return gk_comm_open_single(&d->dp_t.inner, e);
    char name[32];
    snprintf(name, sizeof name, "dp%d", d->tp_rank);
    return gk_comm_open_group(be, d->store, name, d->dp_rank, d->dp_world, d->timeout_s,
                              d->gloo_ifname, &d->dp_t.inner, e);
}

int tr_dist_comm(tr_dist *d, gk_backend *be, gk_elt sum_type, gk_err *e)
{
    if (d->world == 1)
        return gk_comm_open_single(&d->comm, e);
    int rc = open_dp(d, be, e);
    if (rc)
        return rc;
    d->dp_t.d = d;
    d->dp_t.inner->sum_type = sum_type;
    d->timed = (gk_comm){&timed_ops, d->dp_rank, d->dp_world, &d->dp_t, sum_type};
    d->comm = &d->timed;
    /* the checkpoint writers' (host memory, on their threads) */
    return gk_comm_open_gloo(&d->ckpt, d->store, d->rank, d->world, d->timeout_s, d->gloo_ifname,
                             e);
}

int tr_dist_split(tr_dist *d, int64_t accum_total, gk_err *e)
{
    if (accum_total % d->dp_world != 0)
        return gk_errf(e, GK_EUSAGE, "%lld micro-batches per step do not split over %d ranks",
                       (long long)accum_total, d->dp_world);
    d->accum_total = accum_total;
    d->accum = accum_total / d->dp_world;
    return 0;
}

int64_t tr_dist_micro(const tr_dist *d, int64_t k) { return (int64_t)d->dp_rank * d->accum + k; }

int tr_dist_sum(tr_dist *d, double *v, int n, gk_err *e)
{
    int rc = d->comm->ops->allreduce_host(d->comm, v, n, e);
    if (rc || !d->tp_comm)
        return rc;
    rc = d->tp_comm->ops->allreduce_host(d->tp_comm, v, n, e); /* (a stop flag seen by one) */
    for (int i = 0; i < n; i++)
        v[i] /= d->tp;
    return rc;
}

int tr_dist_share(tr_dist *d, const char *key, int ok, char *text, size_t cap, gk_err *e)
{
    if (d->world == 1)
        return 0;
    char k[128];
    snprintf(k, sizeof k, "share/%s", key);
    if (d->rank == 0) {
        char buf[1100];
        snprintf(buf, sizeof buf, "%c%s", ok ? '!' : '=', text);
        return gk_store_set(d->store, k, buf, strlen(buf), e);
    }
    void *val = NULL;
    size_t n = 0;
    int rc = gk_store_get(d->store, k, &val, &n, e);
    if (rc)
        return rc;
    const char *s = val;
    if (n > 0 && s[0] == '!') {
        rc = gk_errf(e, GK_EIO, "rank 0: %s", s + 1);
        d->quiet_error = 1; /* rank 0 reports it */
    } else
        snprintf(text, cap, "%s", n > 0 ? s + 1 : "");
    free(val);
    return rc;
}

/* The agreement's entry of rank r: 0, or its error in e ("rank R: MSG" unless r is this rank). */
static int agreed(tr_dist *d, const char *key, int r, gk_err *e)
{
    char k[128];
    void *val = NULL;
    size_t n = 0;
    snprintf(k, sizeof k, "agree/%s/%d", key, r);
    int rc = gk_store_get(d->store, k, &val, &n, e);
    const char *s = val;
    if (!rc && n > 0 && s[0] == '!')
        rc = r == d->rank ? gk_errf(e, GK_EIO, "%s", s + 1)
                          : gk_errf(e, GK_EIO, "rank %d: %s", r, s + 1);
    free(val);
    return rc;
}

int tr_dist_agree(tr_dist *d, const char *key, int rc, gk_err *e)
{
    if (d->world == 1)
        return rc;
    char k[128], buf[1100];
    snprintf(k, sizeof k, "agree/%s/%d", key, d->rank);
    snprintf(buf, sizeof buf, "%c%s", rc ? '!' : '=', rc ? e->msg : "");
    gk_err local;
    int src = gk_store_set(d->store, k, buf, strlen(buf), &local);
    /* rank 0 says it when it failed alike (a bad setting, a missing file) */
    if (rc && d->rank > 0) {
        void *val = NULL;
        size_t n = 0;
        snprintf(k, sizeof k, "agree/%s/0", key);
        if (!src && gk_store_get(d->store, k, &val, &n, &local) == 0 && n > 0 &&
            strcmp(val, buf) == 0)
            d->quiet_error = 1;
        free(val);
    }
    if (rc || src)
        return rc ? rc : (*e = local, src);
    for (int r = 0; r < d->world && !rc; r++)
        rc = agreed(d, key, r, e);
    return rc;
}

void tr_dist_reported(tr_dist *d)
{
    gk_err ignored;
    if (d->store && d->rank == 0)
        gk_store_set(d->store, "reported", "1", 1, &ignored);
}

void tr_dist_await_report(const tr_dist *d)
{
    gk_err ignored;
    for (int i = 0; d->store && d->quiet_error && i < 100; i++) {
        if (gk_store_check(d->store, "reported", &ignored) != 0)
            return; /* there, or the store is gone */
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
}

void tr_dist_close(tr_dist *d)
{
    gk_comm_close(d->comm);
    d->comm = NULL;
    gk_comm_close(d->tp_comm);
    d->tp_comm = NULL;
    gk_comm_close(d->ckpt);
    d->ckpt = NULL;
    if (d->store)
        gk_store_close(d->store);
    d->store = NULL;
}
