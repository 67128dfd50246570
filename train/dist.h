/* dist.h: a data-parallel run as gpt-train drives it: the rendezvous store, the collectives,
 * the split of each global batch over the ranks, and the agreements every rank must share
 * (where to start, whether setup worked everywhere, when to stop).
 * A run of one process has a dist too (world 1, a "single" comm, no store): the loop never
 * branches on the world size.
 * Owns: the store and the comm (the model sums gradients and shards its moments through it:
 * gk_gpt2_set_comm). Lifetime: tr_dist_open .. close.
 * Not thread-safe: the run's thread. */
#ifndef TR_DIST_H
#define TR_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "common/env.h"
#include "common/err.h"
#include "kernels/backend.h"
#include "kernels/comm/comm.h"
#include "kernels/comm/store.h"
#include "kernels/model/gpt2.h"
#include "launch.h"

/* A timed comm's impl (dist.c): the run's dist, whose comm_secs it adds to, and the comm that
 * does the work. */
typedef struct tr_timed {
    struct tr_dist *d;
    gk_comm *inner;
} tr_timed;

typedef struct tr_dist {
    tr_launch where;      /* this process's place (launch.h) */
    int rank, world;
    int tp, tp_rank;      /* tensor parallel: ranks of a group (1: none), this one's place in it */
    int dp_rank, dp_world; /* data parallel: this rank's group among the groups (rank / tp) and
                            * their number (world / tp); without tensor parallel rank, world */
    gk_comm *tp_comm;     /* from tr_dist_tp: the group's (tp > 1), timed, else NULL */
    gk_comm tp_timed;     /* (tp_comm points here) */
    tr_timed tp_t;
    double timeout_s;
    gk_store *store;      /* NULL in a one-process run */
    gk_comm *comm;        /* from tr_dist_comm */
    gk_comm *ckpt;        /* from tr_dist_comm with world > 1: the checkpoint writers' own
                           * (Gloo, host memory; used by their threads only: model_io.h) */
    int64_t accum;        /* micro-batches of one step this rank computes */
    int64_t accum_total;  /* micro-batches of one step over all ranks */
    int quiet_error;      /* this rank's error is rank 0's too, which reports it: print nothing */
    gk_comm timed;        /* comm's collectives, timed: d->comm points here (world > 1) */
    tr_timed dp_t;        /* its impl: dp_t.inner is the comm that does the work */
    double comm_secs;     /* seconds spent in collectives since the last tr_dist_comm_secs */
    int overlap;          /* sum each layer's gradients during the
                           * backward (not GPT_GRAD_OVERLAP=0) */
    const char *gloo_ifname; /* GLOO_SOCKET_IFNAME: the Gloo collectives' interface(s), or NULL */
} tr_dist;

/* Joins the run l describes, with env's settings (GPT_GRAD_OVERLAP, GLOO_SOCKET_IFNAME): with
 * world > 1, rank 0 hosts the store (on loopback when every rank is local; the token
 * l->dist_token, GPT_DIST_TOKEN, without which rank 0 warns that it accepts any client) and every
 * rank connects to it and waits (timeout_s) until all have arrived ("rendezvous at 10.0.0.1:29500:
 * 1 of 2 ranks arrived within 300 s", "... (2 connected)" when a rank connected without arriving);
 * rank 0 says once, after a second, how many it waits for.
 * SIGINT or SIGTERM meanwhile: GK_EINTR "stopped by SIGTERM while waiting at rendezvous at
 * HOST:PORT" (handlers of its own, restored after). */
int tr_dist_open(tr_dist *d, const tr_launch *l, double timeout_s, const gk_env *env, gk_err *e);
/* Opens the collectives for the backend's memory through the backend (gk_comm_open: Gloo on
 * cpu and ref, NCCL on cuda, emulated under cuda-emu), bootstrapped through the store, timed
 * (tr_dist_comm_secs); "single" for one process. The gradient sums travel and add in sum_type
 * (GK_F32 or GK_BF16: comm.h); one process has no sums. With several ranks, also d->ckpt. */
int tr_dist_comm(tr_dist *d, gk_backend *be, gk_elt sum_type, gk_err *e);
int tr_dist_is_root(const tr_dist *d);
/* Tensor parallel over groups of tp consecutive ranks of a node (gk_comm_open_group "tp<G>" for
 * group G = rank / tp): tp must divide the ranks of each node (GK_EUSAGE naming the numbers); from
 * then on tr_dist_comm's comm is the data-parallel one across the groups ("dp<P>" among the ranks
 * of place P in theirs), and the batch splits over the groups. tp 1: nothing. Before tr_dist_comm,
 * every rank at once (a collective). */
int tr_dist_tp(tr_dist *d, gk_backend *be, int tp, gk_err *e);

/* Seconds this rank spent in collectives since the last call (0 for one process): the gradients'
 * sums and, with tensor parallel, the group's all-reduces. */
double tr_dist_comm_secs(tr_dist *d);

/* Splits accum_total micro-batches of a step over the data-parallel ranks (dp_world): GK_EUSAGE
 * when it does not divide. */
int tr_dist_split(tr_dist *d, int64_t accum_total, gk_err *e);
/* The global index of this rank's micro-batch k of a step (rank-major: data-parallel rank r owns
 * r * accum .. r * accum + accum - 1, so the data and dropout of a step do not depend on the
 * world size). */
int64_t tr_dist_micro(const tr_dist *d, int64_t k);

/* Sums n host doubles over the ranks (losses, counts, flags); with tensor parallel over the
 * groups, each group's ranks' values (the same: they ran the same batch) counted once as their
 * mean. */
int tr_dist_sum(tr_dist *d, double *v, int n, gk_err *e);
/* Every rank gets root's text: rank 0 passes ok = 0 and its text, or its error (ok < 0, text =
 * e->msg), which every other rank returns as "rank 0: MSG" (quiet_error set: rank 0 reports
 * it); key names the agreement. text has cap bytes. A one-process run returns at once. */
int tr_dist_share(tr_dist *d, const char *key, int ok, char *text, size_t cap, gk_err *e);
/* Every rank reports how its setup went (rc, e); returns this rank's own failure, else the first
 * of any rank ("rank 1: train_data: no file matches ..."), so that all ranks stop together
 * rather than wait. A rank other than 0 whose failure is rank 0's too sets quiet_error. */
int tr_dist_agree(tr_dist *d, const char *key, int rc, gk_err *e);

/* After a failure that rank 0 reports for every rank (quiet_error): rank 0 says it has printed
 * it (tr_dist_reported), and a quiet rank waits for that, 5 s at most, before it exits
 * (tr_dist_await_report), so that a launcher that ends every rank once one has exited (mpirun,
 * srun) cannot stop rank 0 before it has said why. */
void tr_dist_reported(tr_dist *d);
void tr_dist_await_report(const tr_dist *d);
/* Closes the comm and the store (rank 0 waits for the others to leave it). */
void tr_dist_close(tr_dist *d);

#endif
