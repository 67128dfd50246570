/* comm.h: collectives across the ranks of a data-parallel run, behind one small interface,
 * opened through the backend (gk_comm_open: its comm_open slot, backend.h) for the backend's
 * memory. Implementations: Gloo over TCP for the cpu and ref backends (comm_gloo.cc), NCCL for
 * cuda (inside the CUDA backend library, which maps NCCL's calls to host collectives under the
 * emulator, cuda-emu), and "single" for a run of one process (every collective is the identity).
 * Buffers are memory of the backend the comm serves (host memory for cpu/ref and under the
 * emulator, device memory for cuda), except allreduce_host, which takes host doubles: losses,
 * flags, counts.
 * Errors: a collective that fails (a peer gone, a timeout) returns GK_EIO with a message; after a
 * failure the comm is unusable and every later call fails at once.
 * Owns: its connections and scratch (and, for Gloo, the thread that runs started sums).
 * Lifetime: open .. close. Thread safety: one thread calls it. */
#ifndef GK_COMM_H
#define GK_COMM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/backend.h" /* gk_elt, gk_backend */
#include "kernels/comm/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gk_comm gk_comm;

typedef struct gk_comm_ops {
    const char *name; /* "single", "gloo", "nccl" */
    /* buf (n floats) = the elementwise sum over ranks of every rank's buf. */
    int (*allreduce)(gk_comm *c, float *buf, size_t n, gk_err *e);
    /* vals (n host doubles) = the elementwise sum over ranks (n small: losses, flags). */
    int (*allreduce_host)(gk_comm *c, double *vals, int n, gk_err *e);
    /* in holds world x count floats; out (count floats) = the sum over ranks of part `rank` of in.
     * out may be in + rank * count (in place). */
    int (*reduce_scatter)(gk_comm *c, const float *in, float *out, size_t count, gk_err *e);
    /* out (world x count floats) = every rank's in (count floats), in rank order; in may be
     * out + rank * count. */
    int (*all_gather)(gk_comm *c, const float *in, float *out, size_t count, gk_err *e);
    /* buf (n bytes) = root's buf on every rank. */
    int (*broadcast)(gk_comm *c, void *buf, size_t n, int root, gk_err *e);
    /* Returns when every rank has called it. */
    int (*barrier)(gk_comm *c, gk_err *e);
    void (*close)(gk_comm *c);
    /* Starts buf (n floats) = the sum over ranks, as allreduce does, and may return before it
     * has ended, so that other work goes on meanwhile (the backward of the layers below). Every
     * rank starts the same sums in the same order. Until allreduce_wait returns, nothing may read
     * or write buf (the host or the backend's ops) and no other collective may be called. */
    int (*allreduce_start)(gk_comm *c, float *buf, size_t n, gk_err *e);
    /* Returns when every sum started is in place (on a device: ordered before the ops launched
     * after this call), or with the first failure among them (the comm is then broken). */
    int (*allreduce_wait)(gk_comm *c, gk_err *e);
    /* Starts reduce_scatter(in, out, count) as allreduce_start starts a sum, in the same order
     * with them (in and out untouched by anyone until it is waited for). */
    int (*reduce_scatter_start)(gk_comm *c, const float *in, float *out, size_t count, gk_err *e);
    /* allreduce_wait for all but the last keep collectives started (0 <= keep; keep 0: all of
     * them): returns when the others have ended (on a device: ordered before the ops launched
     * after this call), or with the first failure. May wait for more than asked. */
    int (*started_wait)(gk_comm *c, int keep, gk_err *e);
    /* Starts all_gather(in, out, count) as allreduce_start starts a sum, in the same order with
     * them (out untouched by anyone, and in unchanged, until it is waited for: started_wait). */
    int (*all_gather_start)(gk_comm *c, const float *in, float *out, size_t count, gk_err *e);
} gk_comm_ops;

struct gk_comm {
    const gk_comm_ops *ops;
    int rank, world;
    void *impl;
    gk_elt sum_type; /* GK_F32 or GK_BF16 (see the top); set before the first collective */
};

/* What a backend's comm_open slot is given (gk_comm_open fills it). A backend library links no
 * store code (kernels/cuda is a library of its own), so the store comes with the functions that
 * bootstrap a comm through it (store.h's). */
typedef struct gk_comm_boot {
    gk_store *store; /* connected to by every rank of the run; outlives the comm */
    int (*store_set)(gk_store *s, const char *key, const void *val, size_t n, gk_err *e);
    int (*store_get)(gk_store *s, const char *key, void **val, size_t *n, gk_err *e);
    int (*store_add)(gk_store *s, const char *key, int64_t delta, int64_t *result, gk_err *e);
    int rank, world;  /* 0 <= rank < world */
    double timeout_s; /* the open and every collective give up after it (GK_EIO) */
    const char *ifname; /* Gloo's interface (a tool's GLOO_SOCKET_IFNAME), NULL or "": see
                         * gk_comm_open_gloo; others ignore it */
    const char *group;  /* gk_comm_open_group's (its store keys), or "": the whole run's */
} gk_comm_boot;

/* Opens this process's rank of the collectives for be's memory (be->ops->comm_open): Gloo on cpu
 * and ref, NCCL on cuda (rank 0 makes the communicator's id, the store carries it to the others:
 * keys "nccl/N/...", N counted per rank as Gloo's), the emulator's host collectives under
 * cuda-emu. Every rank calls it within timeout_s of the others. GK_EUSAGE when be has no
 * collectives (its slot left NULL: a test's hand-made backend) or no store, or rank, world or
 * timeout_s are out of range. Close the comm before be and the store. */
int gk_comm_open(gk_backend *be, gk_store *store, int rank, int world, double timeout_s,
                 const char *ifname, gk_comm **out, gk_err *e);
/* gk_comm_open for the ranks of one group of the run (tensor parallel's, data parallel's across
 * the groups): group names it, the same on each of its members and unique among the groups opened
 * over the store (1 to 24 of A-Z a-z 0-9 _ -: "tp0", "dp1"); rank and world are within the
 * group. Groups of other names open at the same time over one store without meeting (their keys
 * are "gloo/GROUP/..." and "nccl/GROUP/..."); a failure names the group's rank. GK_EUSAGE also
 * for a name out of those bounds. */
int gk_comm_open_group(gk_backend *be, gk_store *store, const char *group, int rank, int world,
                       double timeout_s, const char *ifname, gk_comm **out, gk_err *e);
/* The comm_open slot of the cpu and ref backends: gk_comm_open_gloo with b's store and ifname. */
int gk_comm_gloo_open(gk_backend *be, const gk_comm_boot *b, gk_comm **out, gk_err *e);

/* A comm of one rank (rank 0, world 1): the collectives return their input. */
int gk_comm_open_single(gk_comm **out, gk_err *e);
/* Gloo over TCP, bootstrapped through the store (keys "gloo/N/..."; one store can bootstrap
 * several comms in turn); collectives give up after timeout_s seconds. The device listens on the
 * interface ifname names (its first, if a list: a tool's GLOO_SOCKET_IFNAME; NULL or ""), else on
 * the address this host reaches the store from (gk_store_local_host), so MASTER_ADDR must be an
 * address rank 0 itself connects to as the others do (not 127.0.0.1 on a job of several hosts). A
 * failed collective names who caused it: "allreduce: rank 1 is gone: Connection closed by peer
 * [10.0.0.2]:41234" (at once when a rank dies, even for a send Gloo had queued: gloo_mesh.h),
 * "allreduce: rank 1 is not responding: Timed out waiting 300000ms for recv operation to complete"
 * (a rank that hangs: after the timeout and 2 s more), "allreduce: rank 0 (the store at
 * 10.0.0.1:29500) is gone: ...". Gloo writes to sockets without MSG_NOSIGNAL, so opening sets
 * SIGPIPE to SIG_IGN for the process when it has its default action. The store must outlive the
 * comm, which asks it (from the thread that calls the collectives) who is gone after a failure:
 * comms on other threads may share it (store.h). */
int gk_comm_open_gloo(gk_comm **out, gk_store *store, int rank, int world, double timeout_s,
                      const char *ifname, gk_err *e);
/* ... of one group (gk_comm_open_group; "" or NULL: the whole run, gk_comm_open_gloo). */
int gk_comm_open_gloo_group(gk_comm **out, gk_store *store, const char *group, int rank,
                            int world, double timeout_s, const char *ifname, gk_err *e);
/* From now on, once *flag is set (by the tool's SIGTERM/SIGINT handler), a collective in which
 * no transfer has ended for grace_s seconds fails: "allreduce: stopped by a signal: rank 1 made no
 * progress for 5 s" (a rank that hangs, or a peer gone unnoticed, would otherwise hold it for the
 * whole timeout). A collective that progresses is left to end, so that ranks stopped together
 * still agree on their last step. Gloo comms (a thread of the comm reads the flag); others
 * (single, NCCL) and NULL: no-op. */
int gk_comm_stop_on(gk_comm *c, const volatile sig_atomic_t *flag, double grace_s, gk_err *e);
int gk_comm_gloo_stop_on(gk_comm *c, const volatile sig_atomic_t *flag, double grace_s, gk_err *e);
/* Frees c (NULL: no-op). */
void gk_comm_close(gk_comm *c);

#ifdef __cplusplus
}
#endif

#endif
