/* launch.c: where this process sits in a distributed run (tr_launch_from_env): the variables of
 * torchrun, Open MPI, Slurm, PMI and Kubeflow Trainer, checked. The local launcher is spawn.c.
 * See launch.h. */
#include "train/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_COUNT TR_LAUNCH_MAX_COUNT

/* ---- reading the environment ---- */

/* The launcher's variables, read through the tool's getenv (tr_launch_from_env). */
typedef struct vars {
    gk_getenv_fn get;
    void *ud;
} vars;

/* Variable name's value; NULL when it is unset or empty. */
static const char *var(const vars *vs, const char *name)
{
    const char *v = vs->get(name, vs->ud);
    return v && *v ? v : NULL;
}
#define env(name) var(vs, name)

/* v as it may appear in a one-line message: at most 64 bytes, control characters as '?'. */
static const char *shown(const char *v, char buf[80])
{
    size_t n = 0;
    for (; v[n] && n < 64; n++)
        buf[n] = (unsigned char)v[n] < 0x20 || v[n] == 0x7f ? '?' : v[n];
    strcpy(buf + n, v[n] ? "..." : "");
    return buf;
}

/* A non-negative decimal integer in [min, max], named `name` in errors. */
static int parse_num(const char *name, const char *text, int min, int max, int *out, gk_err *e)
{
    char b[80];
    long long v = 0;
    const char *p = text;
    if (*p == '-' && p[1] >= '0' && p[1] <= '9')
        return gk_errf(e, GK_EUSAGE, "%s = %s is negative", name, shown(text, b));
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return gk_errf(e, GK_EUSAGE, "%s = '%s' is not a number", name, shown(text, b));
        v = v * 10 + (*p - '0');
        if (v > max)
            return gk_errf(e, GK_EUSAGE, "%s = %s is above %d", name, shown(text, b), max);
    }
    if (v < min)
        return gk_errf(e, GK_EUSAGE, "%s = %lld must be at least %d", name, v, min);
    *out = (int)v;
    return 0;
}

/* Reads variable `name` into *out when set ([min, MAX_COUNT]); *set tells whether it was. */
static int env_num(const vars *vs, const char *name, int min, int *out, int *set, gk_err *e)
{
    const char *v = env(name);
    *set = v != NULL;
    return v ? parse_num(name, v, min, MAX_COUNT, out, e) : 0;
}

/* Like env_num, but the variable must be set when `needed` (named in the error) is. */
static int env_need(const vars *vs, const char *name, const char *needed, int min, int *out,
                    gk_err *e)
{
    int set, rc = env_num(vs, name, min, out, &set, e);
    if (!rc && !set)
        rc = gk_errf(e, GK_EUSAGE, "%s set without %s", needed, name);
    return rc;
}

/* The leading number of a Slurm tasks-per-node value such as "2(x3),1". */
static int slurm_leading(const char *name, const char *text, int *out, gk_err *e)
{
    char num[16], b[80];
    size_t n = strspn(text, "0123456789");
    if (n == 0 || n >= sizeof num || (text[n] && text[n] != '(' && text[n] != ','))
        return gk_errf(e, GK_EUSAGE, "%s = '%s' is not a number of tasks", name, shown(text, b));
    memcpy(num, text, n);
    num[n] = '\0';
    return parse_num(name, num, 1, MAX_COUNT, out, e);
}

static int is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "localhost") == 0 ||
           strcmp(addr, "::1") == 0;
}

static int set_addr(tr_launch *l, const char *name, const char *v, gk_err *e)
{
    char b[80];
    if (strlen(v) >= sizeof l->master_addr)
        return gk_errf(e, GK_EUSAGE, "%s = '%s' is too long (%zu bytes at most)", name, shown(v, b),
                       sizeof l->master_addr - 1);
    strcpy(l->master_addr, v);
    return 0;
}

/* MASTER_ADDR and MASTER_PORT (first the `pet` variants when given), else the defaults. */
static int read_master(const vars *vs, tr_launch *l, int pet, gk_err *e)
{
    const char *an = pet && env("PET_MASTER_ADDR") ? "PET_MASTER_ADDR" : "MASTER_ADDR";
    const char *pn = pet && env("PET_MASTER_PORT") ? "PET_MASTER_PORT" : "MASTER_PORT";
    const char *a = env(an), *p = env(pn);
    char b[80];
    int rc = set_addr(l, an, a ? a : "127.0.0.1", e);
    l->master_port = 29500;
    if (!rc && p && (rc = parse_num(pn, p, 0, 1 << 30, &l->master_port, e)) == 0 &&
        (l->master_port < 1 || l->master_port > 65535))
        rc = gk_errf(e, GK_EUSAGE, "%s = %s is not a port (1 to 65535)", pn, shown(p, b));
    return rc;
}

/* The first host of a Slurm node list when simple: "node01", "a,b", "node[01-04,07]" ->
 * "node01" (zero padding kept). 0, or -1 for anything harder. */
static int first_host(const char *list, char *out, size_t cap)
{
    size_t n = strspn(list, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._");
    if (list[n] == ',' || list[n] == '\0') {
        if (n == 0 || n >= cap)
            return -1;
        memcpy(out, list, n);
        out[n] = '\0';
        return 0;
    }
    if (list[n] != '[')
        return -1;
    const char *in = list + n + 1;
    size_t d = strspn(in, "0123456789"), all = strspn(in, "0123456789-,");
    if (d == 0 || in[all] != ']' || (in[all + 1] != '\0' && in[all + 1] != ',') || n + d >= cap)
        return -1;
    memcpy(out, list, n);
    memcpy(out + n, in, d);
    out[n + d] = '\0';
    return 0;
}

/* ---- the launchers ---- */

typedef struct names {
    const char *rank, *world, *local_rank, *local_world;
} names;

static const names TORCHRUN = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
                   OMPI = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                   PMI = {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                   SLURM = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                            "SLURM_NTASKS_PER_NODE"};

/* The checks every launcher's values get, and node_rank/nnodes when the launcher gave none. */
static int finish(tr_launch *l, const names *nm, gk_err *e)
{
    if (l->rank >= l->world_size)
        return gk_errf(e, GK_EUSAGE, "%s = %d is not below %s = %d", nm->rank, l->rank, nm->world,
                       l->world_size);
    if (l->local_world_size > l->world_size)
        return gk_errf(e, GK_EUSAGE, "%s = %d is above %s = %d", nm->local_world,
                       l->local_world_size, nm->world, l->world_size);
    if (l->local_rank >= l->local_world_size)
        return gk_errf(e, GK_EUSAGE, "%s = %d is not below %s = %d", nm->local_rank, l->local_rank,
                       nm->local_world, l->local_world_size);
    if (l->nnodes <= 0)
        l->nnodes = (l->world_size + l->local_world_size - 1) / l->local_world_size;
    if (l->node_rank < 0)
        l->node_rank = l->rank / l->local_world_size;
    if (l->node_rank >= l->nnodes)
        return gk_errf(e, GK_EUSAGE, "the node rank %d is not below the node count %d",
                       l->node_rank, l->nnodes);
    return 0;
}

/* Local rank and size from the named variables; unknown ones: one node (all ranks here) when
 * MASTER_ADDR is a loopback address, else one process per node (Kubeflow's PyTorchJob). */
static int read_local(const vars *vs, tr_launch *l, const names *nm, gk_err *e)
{
    int lr_set = 0, lw_set = 0, rc;
    if ((rc = env_num(vs, nm->local_rank, 0, &l->local_rank, &lr_set, e)) ||
        (rc = env_num(vs, nm->local_world, 1, &l->local_world_size, &lw_set, e)))
        return rc;
    int one_node = is_loopback(l->master_addr);
    if (!lw_set)
        l->local_world_size = one_node || lr_set ? l->world_size : 1;
    if (!lr_set)
        l->local_rank = one_node || lw_set ? l->rank % l->local_world_size : 0;
    return 0;
}

/* torchrun's variables (with GROUP_RANK, the node rank, as node_var) or mpirun's. */
static int from_ranks(const vars *vs, tr_launch *l, const char *source, const names *nm,
                      const char *node_var, gk_err *e)
{
    int rc, set;
    l->source = source;
    l->nnodes = 0;
    l->node_rank = -1;
    if ((rc = env_need(vs, nm->rank, nm->world, 0, &l->rank, e)) ||
        (rc = env_need(vs, nm->world, nm->rank, 1, &l->world_size, e)) ||
        (rc = read_master(vs, l, 0, e)) || (rc = read_local(vs, l, nm, e)) ||
        (node_var && (rc = env_num(vs, node_var, 0, &l->node_rank, &set, e))))
        return rc;
    return finish(l, nm, e);
}

/* Slurm's master: MASTER_ADDR, else loopback on one node, else the node list's first host. */
static int slurm_master(const vars *vs, tr_launch *l, gk_err *e)
{
    const char *ln = env("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
    const char *list = env(ln);
    char b[80];
    int rc = read_master(vs, l, 0, e);
    if (rc || env("MASTER_ADDR") || l->nnodes == 1)
        return rc;
    if (!list)
        return gk_errf(e, GK_EUSAGE,
                       "SLURM_NNODES = %d but SLURM_JOB_NODELIST is not "
                       "set: set MASTER_ADDR to the first node's address",
                       l->nnodes);
    if (first_host(list, l->master_addr, sizeof l->master_addr))
        return gk_errf(e, GK_EUSAGE,
                       "%s = '%s' is not a simple node list: set "
                       "MASTER_ADDR to the first node's address",
                       ln, shown(list, b));
    return 0;
}

static int from_slurm(const vars *vs, tr_launch *l, gk_err *e)
{
    const char *tn =
        env("SLURM_NTASKS_PER_NODE") ? "SLURM_NTASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    int rc, set;
    l->source = "slurm";
    l->node_rank = -1;
    if ((rc = env_num(vs, "SLURM_PROCID", 0, &l->rank, &set, e)) ||
        (rc = env_need(vs, "SLURM_NTASKS", "SLURM_PROCID", 1, &l->world_size, e)) ||
        (rc = env_num(vs, "SLURM_NODEID", 0, &l->node_rank, &set, e)) ||
        (rc = env_num(vs, "SLURM_NNODES", 1, &l->nnodes, &set, e)))
        return rc;
    if (!set)
        l->nnodes = 0;
    if ((rc = slurm_master(vs, l, e)) ||
        (rc = env_num(vs, "SLURM_LOCALID", 0, &l->local_rank, &set, e)))
        return rc;
    if (!set)
        l->local_rank = l->nnodes == 1 ? l->rank : 0;
    if (env(tn) && (rc = slurm_leading(tn, env(tn), &l->local_world_size, e)))
        return rc;
    if (!env(tn))
        l->local_world_size =
            l->nnodes > 0 ? (l->world_size + l->nnodes - 1) / l->nnodes : l->world_size;
    return finish(l, &SLURM, e);
}

static int from_kubeflow(const vars *vs, tr_launch *l, gk_err *e)
{
    const char *np = env("PET_NPROC_PER_NODE");
    int rc, set, nproc = 1;
    l->source = "kubeflow";
    if ((rc = env_num(vs, "PET_NNODES", 1, &l->nnodes, &set, e)))
        return rc;
    if (!set)
        return gk_errf(e, GK_EUSAGE, "%s set without PET_NNODES",
                       env("PET_NODE_RANK") ? "PET_NODE_RANK" : "PET_NPROC_PER_NODE");
    if (np && strcmp(np, "auto") != 0 &&
        (rc = parse_num("PET_NPROC_PER_NODE", np, 1, MAX_COUNT, &nproc, e)))
        return rc;
    if ((rc = env_num(vs, "PET_NODE_RANK", 0, &l->node_rank, &set, e)) ||
        (rc = read_master(vs, l, 1, e)))
        return rc;
    if (!set && l->nnodes > 1)
        return gk_errf(e, GK_EUSAGE, "PET_NODE_RANK is not set (PET_NNODES = %d)", l->nnodes);
    if (l->node_rank >= l->nnodes)
        return gk_errf(e, GK_EUSAGE, "PET_NODE_RANK = %d is not below PET_NNODES = %d",
                       l->node_rank, l->nnodes);
    if ((long long)l->nnodes * nproc > MAX_COUNT)
        return gk_errf(e, GK_EUSAGE, "PET_NNODES x PET_NPROC_PER_NODE = %lld is above %d",
                       (long long)l->nnodes * nproc, MAX_COUNT);
    l->spawn = nproc > 1 ? nproc : 0;
    l->world_size = l->nnodes * nproc;
    l->local_world_size = nproc;
    l->rank = l->node_rank * nproc;
    l->local_rank = 0;
    return 0;
}

int tr_launch_from_env(tr_launch *l, gk_getenv_fn get, void *ud, gk_err *e)
{
    static const char *const torchrun[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK"};
    const vars v = {get, ud}, *vs = &v;
    const char *sp = env("GPT_TRAIN_SPAWNED"), *first = NULL;
    memset(l, 0, sizeof *l);
    l->world_size = l->local_world_size = l->nnodes = 1;
    l->spawned = sp != NULL;
    l->dist_token = env("GPT_DIST_TOKEN");
    l->port_given = env("MASTER_PORT") || env("PET_MASTER_PORT");
    for (int i = 4; i >= 0; i--)
        first = env(torchrun[i]) ? torchrun[i] : first;
    if (sp && strcmp(sp, "1") == 0 && !env("RANK"))
        return gk_errf(e, GK_EUSAGE, "GPT_TRAIN_SPAWNED = 1 but RANK is not set");
    if (first && !env("RANK"))
        return gk_errf(e, GK_EUSAGE, "%s set without RANK", first);
    if (first)
        return from_ranks(vs, l, "torchrun", &TORCHRUN, "GROUP_RANK", e);
    if (env("OMPI_COMM_WORLD_RANK") || env("OMPI_COMM_WORLD_SIZE"))
        return from_ranks(vs, l, "mpirun", &OMPI, NULL, e);
    /* before PMI: srun --mpi=pmi2 sets both, and only Slurm's local ranks */
    if (env("SLURM_PROCID"))
        return from_slurm(vs, l, e);
    if (env("PMI_RANK") || env("PMI_SIZE"))
        return from_ranks(vs, l, "mpirun", &PMI, NULL, e);
    if (env("PET_NNODES") || env("PET_NPROC_PER_NODE") || env("PET_NODE_RANK"))
        return from_kubeflow(vs, l, e);
    l->source = "none";
    return read_master(vs, l, 0, e);
}
