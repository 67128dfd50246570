/* comm_nccl.cu: collectives across CUDA ranks on NCCL: the comm_open slot of gk_ops and the
 * gk_comm (kernels/comm/comm.h) it returns. The communicator's id travels through the rendezvous
 * store, by the functions the slot is given (gk_comm_boot: this library links no store code):
 * rank 0 makes it and sets "nccl/N/id", the others get it; N counts the rank's opens, as Gloo's
 * "gloo/N/" keys do, so that one store can bootstrap several communicators in turn (a group's:
 * "nccl/GROUP/N/id", so that groups open at once).
 * Owns: the NCCL communicator (nonblocking mode, so that no NCCL call waits past a deadline), its
 * stream and the two events that order it against the backend's stream, the device and pinned
 * host scratch of allreduce_host and barrier, and the checks that turn NCCL and CUDA failures
 * into one-line GK_EIO errors ("nccl allreduce: remote process exited or there was a network
 * error: ...").
 * Ordering: a collective records `ready` on the backend's stream and the comm stream waits for it
 * (so it sees every op launched before), runs on the comm stream, records `done`; the host then
 * polls `done` and ncclCommGetAsyncError with short sleeps until the collective has ended, an
 * error shows or timeout_s has passed, and the backend's stream waits for `done` (so every op
 * launched after sees the result). An error or a timeout aborts the communicator (ncclCommAbort
 * stops its kernels) and every later call fails at once with the first error.
 * allreduce_start, reduce_scatter_start and all_gather_start are collectives without their end:
 * the host goes on launching ops on the backend's stream while the comm stream runs them; each
 * records one of the `ends` events after it, and allreduce_wait is the end of the last one
 * started, started_wait the end of an earlier one (of the last NC_ENDS).
 * bf16 sums (sum_type GK_BF16): on the comm stream, the floats are cast into the comm's bf16
 * buffer (`wire`), NCCL sums it as ncclBfloat16 (in place), and the result is cast back.
 * NCCL is loaded (dlopen libnccl.so.2) when the first communicator is made, not linked, so that
 * one GPU needs no NCCL: a build without nccl.h (GK_NO_NCCL) or a machine without the library
 * refuses several CUDA ranks with one line saying so. Under the emulator (GK_CUDA_EMU) the same
 * code runs on kernels/emu/emu_nccl's socket collectives, called directly.
 * Thread safety: a comm is used by the backend's one host thread; close it before the backend. */
#include "kernels/cuda/cuda_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/comm/comm.h"

#ifdef GK_NO_NCCL

static int no_nccl(gk_err *e)
{
    return gk_errf(e, GK_EUSAGE,
                   "nccl: this CUDA backend was built without NCCL (no nccl.h was found): a run of "
                   "several CUDA ranks needs it: install NCCL (libnccl-dev) and rebuild");
}

int cu_comm_open(gk_backend *be, const gk_comm_boot *b, gk_comm **out, gk_err *e)
{
    (void)be, (void)b;
    *out = NULL;
    return no_nccl(e);
}

#else

#include <dlfcn.h>
#include <pthread.h>

/* ---- NCCL's functions: loaded from libnccl.so.2 on first use (the emulator's: linked) ---- */

#define NCCL_FUNCS(X)                                                                             \
    X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommGetAsyncError) X(ncclCommAbort)        \
    X(ncclCommFinalize) X(ncclCommDestroy) X(ncclAllReduce) X(ncclReduceScatter) X(ncclAllGather) \
    X(ncclBroadcast) X(ncclGetErrorString) X(ncclGetLastError)
#define NC_FIELD(f) decltype(&::f) f;
static struct { NCCL_FUNCS(NC_FIELD) } api;
static char api_error[200]; /* why it did not load; empty when it did */
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
#ifdef GK_CUDA_EMU
#define NC_LINKED(f) api.f = &::f;
    NCCL_FUNCS(NC_LINKED)
#else
    /* RTLD_GLOBAL is not needed: only we call it. Searched as dlopen does, with this library's
     * RPATH (CUDA_HOME/lib64, NCCL_HOME/lib) first. */
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(api_error, sizeof api_error, "cannot load NCCL: %s", why ? why : "libnccl.so.2");
        return;
    }
#define NC_DLSYM(f)                                               \
    if (!api_error[0] && !(api.f = (decltype(&::f))dlsym(h, #f))) \
        snprintf(api_error, sizeof api_error,                     \
                 "libnccl.so.2 has no %s: NCCL 2.14 or later is needed", #f);
    NCCL_FUNCS(NC_DLSYM)
#endif
}

/* 0 once NCCL's functions are in api, else GK_ENOTFOUND naming what is missing. */
static int api_ready(gk_err *e)
{
    pthread_once(&api_once, api_load);
    if (!api_error[0]) return 0;
    return gk_errf(e, GK_ENOTFOUND,
                   "nccl: %s (a run of several CUDA ranks needs NCCL: install it, or point "
                   "LD_LIBRARY_PATH at its lib folder)",
                   api_error);
}

#define NC_MIN_SCRATCH 16 /* doubles of allreduce_host scratch before it grows */

#define NC_ENDS 4 /* the started collectives whose ends started_wait tells apart */

typedef struct nc_comm {
    gk_comm base;       /* base.impl points back here */
    gk_backend *be;
    ncclComm_t nccl;    /* NULL once aborted or destroyed */
    cudaStream_t stream;
    cudaEvent_t ready, done;
    double *dev;        /* device scratch of allreduce_host and barrier: cap doubles */
    double *host;       /* pinned staging of allreduce_host: cap doubles */
    int cap;
    bf16 *wire;         /* bf16 sums' buffer: wire_cap elements */
    size_t wire_cap;
    double timeout_s;
    int started;        /* collectives started (allreduce_start, reduce_scatter_start) and not
                         * yet waited for */
    double started_deadline; /* the first one's */
    const char *started_op;  /* the last one's name, for messages */
    unsigned seq;       /* collectives started so far: the last one's end is ends[(seq-1) % N] */
    cudaEvent_t ends[NC_ENDS];
    gk_err failure;     /* the first failure (code 0 while the comm works) */
} nc_comm;

#define NC(gc) ((nc_comm *)(gc)->impl)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(void)
{
    struct timespec ts = {0, 100 * 1000}; /* 100 us: a poll costs far less than a collective */
    nanosleep(&ts, NULL);
}

/* ---- errors ---- */

/* Fails the comm with "nccl OP: MESSAGE" unless it failed before (the first failure is kept),
 * aborts the NCCL communicator, and copies the failure to e. Returns GK_EIO. */
static int nc_fail(nc_comm *c, gk_err *e, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int nc_fail(nc_comm *c, gk_err *e, const char *op, const char *fmt, ...)
{
    if (!c->failure.code) {
        char msg[sizeof c->failure.msg - 64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        for (char *p = msg; *p; p++) /* one line */
            if (*p == '\n' || *p == '\r') *p = ' ';
        for (size_t n = strlen(msg); n > 0 && msg[n - 1] == ' ';) msg[--n] = 0;
        gk_errf(&c->failure, GK_EIO, "nccl %s: %s", op, msg);
        if (c->nccl) api.ncclCommAbort(c->nccl);
        c->nccl = NULL;
    }
    return gk_errf(e, GK_EIO, "%s", c->failure.msg);
}

/* A failed NCCL result: its string and NCCL's last error message. */
static int nc_fail_nccl(nc_comm *c, gk_err *e, const char *op, ncclResult_t rc)
{
    const char *last = api.ncclGetLastError(c->nccl);
    if (last && *last) return nc_fail(c, e, op, "%s: %s", api.ncclGetErrorString(rc), last);
    return nc_fail(c, e, op, "%s", api.ncclGetErrorString(rc));
}

static int nc_timeout(nc_comm *c, gk_err *e, const char *op)
{
    if (strcmp(op, "init") == 0)
        return nc_fail(c, e, op, "rank %d of %d: not every rank joined within %g s", c->base.rank,
                       c->base.world, c->timeout_s);
    return nc_fail(c, e, op, "not done within %g s (a rank died or stopped calling collectives)",
                   c->timeout_s);
}

/* A CUDA runtime call on the comm's behalf ("nccl OP: cuda CALL: MESSAGE"). */
static int nc_cuda(nc_comm *c, cudaError_t rc, const char *call, const char *op, gk_err *e)
{
    if (rc == cudaSuccess) return 0;
    return nc_fail(c, e, op, "cuda %.*s: %s", (int)strcspn(call, "("), call,
                   cudaGetErrorString(rc));
}
#define NC_CUDA(c, op, e, call) nc_cuda((c), (call), #call, (op), (e))

/* The result of an NCCL call: ncclSuccess, or ncclInProgress (nonblocking mode) polled until the
 * communicator settles or the deadline passes; anything else fails the comm. */
static int nc_settle(nc_comm *c, ncclResult_t rc, const char *op, double deadline, gk_err *e)
{
    while (rc == ncclInProgress) {
        if (now_s() > deadline) return nc_timeout(c, e, op);
        nap();
        ncclResult_t st = api.ncclCommGetAsyncError(c->nccl, &rc);
        if (st != ncclSuccess) rc = st;
    }
    return rc == ncclSuccess ? 0 : nc_fail_nccl(c, e, op, rc);
}
#define NC_CHECK(c, op, deadline, e, call) nc_settle((c), (call), (op), (deadline), (e))

/* ---- ordering and waiting ---- */

/* Before a collective: refuses a failed comm or backend, sets the deadline and orders the comm
 * stream after every op launched on the backend's stream so far. */
static int nc_begin(nc_comm *c, const char *op, double *deadline, gk_err *e)
{
    if (c->failure.code)
        return gk_errf(e, GK_EIO, "nccl %s: the communicator failed earlier: %s", op,
                       c->failure.msg);
    if (c->be->err.code)
        return gk_errf(e, c->be->err.code, "nccl %s: the backend failed earlier: %s", op,
                       c->be->err.msg);
    *deadline = now_s() + c->timeout_s;
    if (NC_CUDA(c, op, e, cudaEventRecord(c->ready, CU(c->be)->stream))) return GK_EIO;
    return NC_CUDA(c, op, e, cudaStreamWaitEvent(c->stream, c->ready, 0));
}

/* After a collective: waits (polling, see the top) until it has ended, then orders the backend's
 * stream after it. */
static int nc_await(nc_comm *c, cudaEvent_t ev, const char *op, double deadline, gk_err *e);

static int nc_end(nc_comm *c, const char *op, double deadline, gk_err *e)
{
    if (NC_CUDA(c, op, e, cudaEventRecord(c->done, c->stream))) return GK_EIO;
    return nc_await(c, c->done, op, deadline, e);
}

/* Waits (polling) until ev has happened, then orders the backend's stream after it. */
static int nc_await(nc_comm *c, cudaEvent_t ev, const char *op, double deadline, gk_err *e)
{
    for (;;) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) return nc_cuda(c, q, "cudaEventQuery", op, e);
        ncclResult_t async = ncclSuccess, st = api.ncclCommGetAsyncError(c->nccl, &async);
        if (st != ncclSuccess) async = st;
        if (async != ncclSuccess && async != ncclInProgress) return nc_fail_nccl(c, e, op, async);
        if (now_s() > deadline) return nc_timeout(c, e, op);
        nap();
    }
    return NC_CUDA(c, op, e, cudaStreamWaitEvent(CU(c->be)->stream, ev, 0));
}

/* Scratch for n doubles (the collectives before have ended: nothing uses the old one). */
static int nc_scratch(nc_comm *c, int n, const char *op, gk_err *e)
{
    if (n <= c->cap) return 0;
    cudaFree(c->dev), cudaFreeHost(c->host);
    c->dev = c->host = NULL, c->cap = 0;
    if (NC_CUDA(c, op, e, cudaMalloc(&c->dev, (size_t)n * sizeof(double))) ||
        NC_CUDA(c, op, e, cudaMallocHost(&c->host, (size_t)n * sizeof(double))) ||
        NC_CUDA(c, op, e, cudaMemset(c->dev, 0, (size_t)n * sizeof(double))))
        return GK_EIO;
    c->cap = n;
    return 0;
}

/* The buffer of bf16 sums, n elements. It grows only when nothing on the comm stream uses it: a
 * larger sum while started ones run (in a run's first step) waits for those first. */
static int nc_wire(nc_comm *c, size_t n, const char *op, gk_err *e)
{
    if (n <= c->wire_cap) return 0;
    if (c->started && nc_end(c, op, c->started_deadline, e)) return GK_EIO;
    cudaFree(c->wire);
    c->wire = NULL, c->wire_cap = 0;
    if (NC_CUDA(c, op, e, cudaMalloc(&c->wire, n * sizeof(bf16)))) return GK_EIO;
    c->wire_cap = n;
    return 0;
}

/* dst (n elements of dt) = src (n of the other type), on the comm stream. */
static int nc_cast(nc_comm *c, void *dst, gk_elt dt, const void *src, size_t n, const char *op,
                   gk_err *e)
{
    if (!n) return 0;
    cu_cast_on(c->be, c->stream, dst, dt, src, n);
    return nc_cuda(c, cudaGetLastError(), "cast_kernel", op, e);
}

/* buf (n floats) = the sum over ranks, in bf16 (through wire), on the comm stream. */
static int nc_sum_bf16(nc_comm *c, float *buf, size_t n, double dl, gk_err *e)
{
    const char *op = "allreduce";
    if (nc_wire(c, n, op, e) || nc_cast(c, c->wire, GK_BF16, buf, n, op, e) ||
        NC_CHECK(c, op, dl, e,
                 api.ncclAllReduce(c->wire, c->wire, n, ncclBfloat16, ncclSum, c->nccl, c->stream)))
        return GK_EIO;
    return nc_cast(c, buf, GK_F32, c->wire, n, op, e);
}

/* out (count floats) = the sum over ranks of part `rank` of in, in bf16: in place in wire, where
 * this rank's part becomes its result. */
static int nc_scatter_bf16(nc_comm *c, const float *in, float *out, size_t count, double dl,
                           gk_err *e)
{
    const char *op = "reduce_scatter";
    size_t all = count * (size_t)c->base.world;
    if (nc_wire(c, all, op, e) || nc_cast(c, c->wire, GK_BF16, in, all, op, e)) return GK_EIO;
    bf16 *mine = c->wire + count * (size_t)c->base.rank;
    if (NC_CHECK(c, op, dl, e,
                 api.ncclReduceScatter(c->wire, mine, count, ncclBfloat16, ncclSum, c->nccl,
                                       c->stream)))
        return GK_EIO;
    return nc_cast(c, out, GK_F32, mine, count, op, e);
}

/* ---- the collectives (comm.h) ---- */

/* A collective just put on the comm stream by a *_start: its end recorded. */
static int nc_started(nc_comm *c, const char *op, double dl, gk_err *e)
{
    if (NC_CUDA(c, op, e, cudaEventRecord(c->ends[c->seq % NC_ENDS], c->stream))) return GK_EIO;
    c->seq++;
    c->started_op = op;
    if (!c->started++) c->started_deadline = dl;
    return 0;
}

/* allreduce without its end: the comm stream runs it while the backend's stream goes on. */
static int nc_allreduce_start(gk_comm *gc, float *buf, size_t n, gk_err *e)
{
    nc_comm *c = NC(gc);
    double dl = 0;
    int rc = nc_begin(c, "allreduce", &dl, e);
    if (!rc && gc->sum_type == GK_BF16)
        rc = nc_sum_bf16(c, buf, n, dl, e);
    else if (!rc)
        rc = NC_CHECK(c, "allreduce", dl, e,
                      api.ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, c->nccl, c->stream));
    return rc ? rc : nc_started(c, "allreduce", dl, e);
}

static int nc_reduce_scatter_start(gk_comm *gc, const float *in, float *out, size_t count,
                                   gk_err *e)
{
    nc_comm *c = NC(gc);
    double dl = 0;
    const char *op = "reduce_scatter";
    int rc = nc_begin(c, op, &dl, e);
    if (!rc && gc->sum_type == GK_BF16)
        rc = nc_scatter_bf16(c, in, out, count, dl, e);
    else if (!rc)
        rc = NC_CHECK(c, op, dl, e,
                      api.ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, c->nccl,
                                            c->stream));
    return rc ? rc : nc_started(c, op, dl, e);
}

/* The end of every started collective but the last keep (of the last NC_ENDS: more otherwise):
 * they are in order on the comm stream, so that one's. */
static int nc_started_wait(gk_comm *gc, int keep, gk_err *e)
{
    nc_comm *c = NC(gc);
    if (keep < 0) keep = 0;
    if (keep >= NC_ENDS) keep = NC_ENDS - 1;
    if (c->failure.code) return gk_errf(e, GK_EIO, "%s", c->failure.msg);
    if (c->started <= keep) return 0;
    double dl = c->started_deadline;
    c->started = keep;
    c->started_deadline = now_s() + c->timeout_s; /* (the rest: from now) */
    return nc_await(c, c->ends[(c->seq - 1 - (unsigned)keep) % NC_ENDS], c->started_op, dl, e);
}

static int nc_allreduce_wait(gk_comm *gc, gk_err *e)
{
    return nc_started_wait(gc, 0, e);
}

static int nc_allreduce(gk_comm *gc, float *buf, size_t n, gk_err *e)
{
    int rc = nc_allreduce_start(gc, buf, n, e);
    return rc ? rc : nc_allreduce_wait(gc, e);
}

static int nc_allreduce_host(gk_comm *gc, double *vals, int n, gk_err *e)
{
    nc_comm *c = NC(gc);
    const char *op = "allreduce_host";
    if (n < 0) return gk_errf(e, GK_EUSAGE, "nccl %s: %d values", op, n);
    double dl = 0;
    size_t bytes = (size_t)n * sizeof(double);
    int rc = nc_begin(c, op, &dl, e);
    if (!rc) rc = nc_scratch(c, n, op, e);
    if (rc) return rc;
    if (n) memcpy(c->host, vals, bytes);
    if (NC_CUDA(c, op, e,
                cudaMemcpyAsync(c->dev, c->host, bytes, cudaMemcpyHostToDevice, c->stream)) ||
        NC_CHECK(c, op, dl, e,
                 api.ncclAllReduce(c->dev, c->dev, (size_t)n, ncclFloat64, ncclSum, c->nccl,
                                   c->stream)) ||
        NC_CUDA(c, op, e,
                cudaMemcpyAsync(c->host, c->dev, bytes, cudaMemcpyDeviceToHost, c->stream)) ||
        nc_end(c, op, dl, e))
        return GK_EIO;
    if (n) memcpy(vals, c->host, bytes);
    return 0;
}

static int nc_reduce_scatter(gk_comm *gc, const float *in, float *out, size_t count, gk_err *e)
{
    int rc = nc_reduce_scatter_start(gc, in, out, count, e);
    return rc ? rc : nc_started_wait(gc, 0, e);
}

static int nc_all_gather_start(gk_comm *gc, const float *in, float *out, size_t count,
                               gk_err *e)
{
    nc_comm *c = NC(gc);
    double dl = 0;
    int rc = nc_begin(c, "all_gather", &dl, e);
    if (!rc)
        rc = NC_CHECK(c, "all_gather", dl, e,
                      api.ncclAllGather(in, out, count, ncclFloat32, c->nccl, c->stream));
    return rc ? rc : nc_started(c, "all_gather", dl, e);
}

static int nc_all_gather(gk_comm *gc, const float *in, float *out, size_t count, gk_err *e)
{
    int rc = nc_all_gather_start(gc, in, out, count, e);
    return rc ? rc : nc_started_wait(gc, 0, e);
}

static int nc_broadcast(gk_comm *gc, void *buf, size_t n, int root, gk_err *e)
{
    nc_comm *c = NC(gc);
    if (root < 0 || root >= gc->world)
        return gk_errf(e, GK_EUSAGE, "nccl broadcast: root %d of %d ranks", root, gc->world);
    double dl = 0;
    int rc = nc_begin(c, "broadcast", &dl, e);
    if (!rc)
        rc = NC_CHECK(c, "broadcast", dl, e,
                      api.ncclBroadcast(buf, buf, n, ncclUint8, root, c->nccl, c->stream));
    return rc ? rc : nc_end(c, "broadcast", dl, e);
}

/* A one-element allreduce that the host waits for. */
static int nc_barrier(gk_comm *gc, gk_err *e)
{
    nc_comm *c = NC(gc);
    double dl = 0;
    int rc = nc_begin(c, "barrier", &dl, e);
    if (!rc)
        rc = NC_CHECK(c, "barrier", dl, e,
                      api.ncclAllReduce(c->dev, c->dev, 1, ncclFloat64, ncclSum, c->nccl,
                                        c->stream));
    return rc ? rc : nc_end(c, "barrier", dl, e);
}

/* Finalizes and destroys the communicator (aborts it when that fails or does not end within the
 * timeout), then frees the stream, events and scratch. */
static void nc_close(gk_comm *gc)
{
    if (!gc) return;
    nc_comm *c = NC(gc);
    if (c->nccl) {
        gk_err e = {0, {0}};
        if (NC_CHECK(c, "close", now_s() + c->timeout_s, &e, api.ncclCommFinalize(c->nccl)) == 0)
            api.ncclCommDestroy(c->nccl); /* nc_settle aborted it otherwise */
        c->nccl = NULL;
    }
    if (c->done) cudaEventDestroy(c->done);
    for (int i = 0; i < NC_ENDS; i++)
        if (c->ends[i]) cudaEventDestroy(c->ends[i]);
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaFree(c->dev);
    cudaFreeHost(c->host);
    cudaFree(c->wire);
    (void)cudaGetLastError();
    free(c);
}

static const gk_comm_ops nc_ops = {
    "nccl", nc_allreduce, nc_allreduce_host, nc_reduce_scatter, nc_all_gather,
    nc_broadcast, nc_barrier, nc_close, nc_allreduce_start, nc_allreduce_wait,
    nc_reduce_scatter_start, nc_started_wait, nc_all_gather_start,
};

/* ---- the gk_ops slots ---- */

/* The communicator's id: rank 0 makes it (ncclGetUniqueId) and sets it at "nccl/N/id" in the
 * store, the others get it from there (waiting as long as the store does). */
static int nc_share_id(const gk_comm_boot *b, ncclUniqueId *uid, gk_err *e)
{
    char key[96];
    int64_t opens = 0;
    const char *g = b->group ? b->group : "", *sep = *g ? "/" : ""; /* (a group's keys) */
    snprintf(key, sizeof key, "nccl/%s%sopens/%d", g, sep, b->rank);
    int rc = b->store_add(b->store, key, 1, &opens, e);
    if (rc) return rc;
    snprintf(key, sizeof key, "nccl/%s%s%lld/id", g, sep, (long long)opens);
    if (b->rank == 0) {
        ncclResult_t r = api.ncclGetUniqueId(uid);
        if (r != ncclSuccess) {
            const char *last = api.ncclGetLastError(NULL);
            return gk_errf(e, GK_EIO, "nccl id: %s%s%s", api.ncclGetErrorString(r),
                           last && *last ? ": " : "", last ? last : "");
        }
        return b->store_set(b->store, key, uid, sizeof *uid, e);
    }
    void *val = NULL;
    size_t n = 0;
    rc = b->store_get(b->store, key, &val, &n, e);
    if (!rc && n != sizeof *uid)
        rc = gk_errf(e, GK_EUSAGE, "nccl init: the id at %s has %zu bytes, not %zu", key, n,
                     sizeof *uid);
    if (!rc) memcpy(uid, val, sizeof *uid);
    free(val);
    return rc;
}

/* Device state, then ncclCommInitRankConfig (nonblocking) settled within the timeout. */
static int nc_init(nc_comm *c, const ncclUniqueId *uid, gk_err *e)
{
    const char *op = "init";
    double dl = now_s() + c->timeout_s;
    if (NC_CUDA(c, op, e, cudaSetDevice(CU(c->be)->device)) ||
        NC_CUDA(c, op, e, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) ||
        NC_CUDA(c, op, e, cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming)) ||
        NC_CUDA(c, op, e, cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming)) ||
        nc_scratch(c, NC_MIN_SCRATCH, op, e))
        return GK_EIO;
    for (int i = 0; i < NC_ENDS; i++)
        if (NC_CUDA(c, op, e, cudaEventCreateWithFlags(&c->ends[i], cudaEventDisableTiming)))
            return GK_EIO;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t rc = api.ncclCommInitRankConfig(&comm, c->base.world, *uid, c->base.rank, &config);
    c->nccl = comm;
    return nc_settle(c, rc, op, dl, e);
}

int cu_comm_open(gk_backend *be, const gk_comm_boot *b, gk_comm **out, gk_err *e)
{
    *out = NULL;
    if (!b->store)
        return gk_errf(e, GK_EUSAGE, "nccl init: no store to pass the communicator's id through");
    if (b->world < 1 || b->rank < 0 || b->rank >= b->world)
        return gk_errf(e, GK_EUSAGE, "nccl init: rank %d of %d", b->rank, b->world);
    if (!(b->timeout_s > 0))
        return gk_errf(e, GK_EUSAGE, "nccl init: timeout %g s", b->timeout_s);
    if (be->err.code)
        return gk_errf(e, be->err.code, "nccl init: the backend failed earlier: %s", be->err.msg);
    if (api_ready(e)) return GK_ENOTFOUND;
    ncclUniqueId uid;
    int rc = nc_share_id(b, &uid, e);
    if (rc) return rc;
    nc_comm *c = (nc_comm *)calloc(1, sizeof *c);
    if (!c) return gk_errf(e, GK_ENOMEM, "nccl init: out of memory");
    c->base.ops = &nc_ops;
    c->base.rank = b->rank, c->base.world = b->world;
    c->base.impl = c;
    c->be = be;
    c->timeout_s = b->timeout_s;
    rc = nc_init(c, &uid, e);
    if (rc) {
        nc_close(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}

#endif /* GK_NO_NCCL */
