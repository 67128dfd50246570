/* launch.h: where this process sits in a distributed run (launch.c), and the local launcher
 * (spawn.c).
 * Reads the launcher's variables: torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: torchrun, Kubeflow PyTorchJob, DLRover ElasticJob,
 * TensorStack), else OpenMPI's (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE), else Slurm's
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE; before PMI, which
 * srun --mpi=pmi2 sets too), else PMI's (PMI_RANK, PMI_SIZE: MPICH, Intel MPI), else Kubeflow
 * Trainer v2's per-node ones (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR,
 * PET_MASTER_PORT); none of them: one process.
 * `nproc_per_node = N` (or PET_NPROC_PER_NODE) makes gpt-train start its N local ranks itself,
 * as torchrun does: tr_launch_spawn re-runs this executable N times with the torchrun-style
 * variables set and supervises the children.
 * The variables come through a getenv the tool's main passes (gk_env_getenv, common/env.h).
 * Owns: nothing past a call (tr_launch is plain values; its strings are the environment's).
 * Not thread-safe (reads environ). */
#ifndef TR_LAUNCH_H
#define TR_LAUNCH_H

#include "common/env.h"
#include "common/err.h"

typedef struct tr_launch {
    const char *source;     /* "torchrun", "mpirun", "slurm", "kubeflow" (PET_*), or "none" */
    int rank, world_size;   /* global; 0 and 1 for one process */
    int local_rank, local_world_size;
    int node_rank, nnodes;  /* PET_* (or derived: rank / local_world_size); 0 and 1 otherwise */
    int spawn;              /* processes this one must start
                             * (PET_NPROC_PER_NODE); 0: it is a rank */
    char master_addr[256];  /* MASTER_ADDR (PET_MASTER_ADDR, SLURM: the first host of
                             * SLURM_NODELIST when simple), default 127.0.0.1 */
    int master_port;        /* MASTER_PORT, default 29500 */
    int port_given;         /* MASTER_PORT or PET_MASTER_PORT is
                             * set (else spawn picks a free one) */
    int spawned;            /* GPT_TRAIN_SPAWNED is set: tr_launch_spawn started this process */
    const char *dist_token; /* GPT_DIST_TOKEN (the rendezvous store's job token), or NULL */
} tr_launch;

/* Ranks, sizes and node counts above this are typing errors. */
#define TR_LAUNCH_MAX_COUNT (1 << 24)

/* Fills l from the environment (read through get(name, ud): a tool passes gk_env_getenv), from
 * the first launcher whose variables are set (a variable set but empty counts as unset), and
 * port_given, spawned and dist_token. GPT_TRAIN_SPAWNED=1 (set by tr_launch_spawn): the
 * torchrun-style variables only, spawn = 0. torchrun-style: GROUP_RANK is the node rank when set;
 * without LOCAL_RANK/LOCAL_WORLD_SIZE, all ranks are on this node when MASTER_ADDR is unset or
 * loopback, else one rank per node (a PyTorchJob pod). mpirun and Slurm: MASTER_ADDR/MASTER_PORT
 * still win;
 * Slurm's master is else 127.0.0.1 on one node, else the first host of SLURM_JOB_NODELIST when
 * that is simple ("node[01-04]" -> "node01"; harder lists: an error asking for MASTER_ADDR).
 * PET_*: PET_MASTER_ADDR/PORT, else MASTER_ADDR/PORT; PET_NPROC_PER_NODE = "auto" means 1; above 1
 * it is spawn (world_size = PET_NNODES x it, rank = the node's first), at 1 the process is rank
 * PET_NODE_RANK of PET_NNODES. Numbers are non-negative decimal integers. GK_EUSAGE names the
 * variable and its bad value ("RANK = 'x' is not a number", "RANK = 3 is not below WORLD_SIZE =
 * 2", "LOCAL_RANK set without RANK", "MASTER_PORT = 0 is not a port (1 to 65535)"). */
int tr_launch_from_env(tr_launch *l, gk_getenv_fn get, void *ud, gk_err *e);

/* Starts nproc local ranks of this node (l: the node's place; the ranks are l->node_rank * nproc
 * + i of l->nnodes * nproc) by re-running /proc/self/exe with argv and RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, GPT_TRAIN_SPAWNED=1 and
 * GPT_DIST_TOKEN set (a spawned rank never spawns; on one node without MASTER_PORT a free port is
 * picked (l->port_given unset); the token is l->dist_token (GPT_DIST_TOKEN), else on one node 32
 * random hex digits, else none).
 * Supervises them: the children run in process groups of their own, and each SIGINT or SIGTERM
 * this process gets is passed on once to every live child (a terminal's Ctrl-C reaches them
 * once, through this process; each SIGINT and SIGTERM comes with a SIGCONT, so that a stopped
 * child handles it); a child whose parent dies gets SIGTERM. When one fails (non-zero
 * exit, or a signal not passed on to it) the others get 2 s to end on their own (after a bad
 * setting every rank does, and rank 0 must get to say why), then SIGTERM, then SIGKILL after
 * grace_s, and GK_EIO names the first rank that failed and how ("rank 1 (pid 4242) was killed
 * by signal 9 (Killed); stopped the other ranks"). GK_EINTR when a child was killed by a signal
 * passed on to it (a second Ctrl-C). Returns 0 when every child exited 0. Call it before starting
 * threads:
 * it waits for SIGINT, SIGTERM and SIGCHLD with them blocked in the calling thread only. */
int tr_launch_spawn(const tr_launch *l, int nproc, int argc, char **argv, double grace_s,
                    gk_err *e);

#endif
