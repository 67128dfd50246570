/* test_train_launch.c: train/launch.c: where a process sits as each launcher's variables say
 * (torchrun, OpenMPI, PMI, Slurm, Kubeflow Trainer's PET_*), their order and their errors; and the
 * local launcher: this binary re-runs itself as the ranks (main checks GPT_TRAIN_SPAWNED first
 * and acts as the child argv[1] names), which report what they saw, fail, or wait for signals. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/env.h"
#include "test.h"
#include "train/launch.h"

static char dir[64];

static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT", "GPT_TRAIN_SPAWNED", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID", "SLURM_NNODES",
    "SLURM_JOB_NODELIST", "SLURM_NODELIST", "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
    "PET_MASTER_ADDR", "PET_MASTER_PORT", NULL};

/* Clears every launcher variable, sets kv ("NAME=VALUE" strings, NULL-ended) and reads them. */
static int from(const char *const *kv, tr_launch *l, gk_err *e)
{
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
    for (int i = 0; kv[i]; i++) {
        char name[64];
        const char *eq = strchr(kv[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - kv[i]), kv[i]);
        setenv(name, eq + 1, 1);
    }
    memset(e, 0, sizeof *e);
    return tr_launch_from_env(l, gk_env_getenv, NULL, e);
}

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* l's fields as one line: source rank/world local/lws node/nnodes spawn addr:port. */
static const char *fields(const tr_launch *l)
{
    static char buf[400];
    snprintf(buf, sizeof buf, "%s %d/%d %d/%d %d/%d %d %s:%d", l->source, l->rank, l->world_size,
             l->local_rank, l->local_world_size, l->node_rank, l->nnodes, l->spawn, l->master_addr,
             l->master_port);
    return buf;
}

#define EXPECT(kv, want)                                                                     \
    do {                                                                                     \
        tr_launch l_;                                                                        \
        gk_err e_;                                                                           \
        int rc_ = from(kv, &l_, &e_);                                                        \
        CHECKF(rc_ == 0, "%s", e_.msg);                                                      \
        if (rc_ == 0)                                                                        \
            CHECKF(strcmp(fields(&l_), want) == 0, "got '%s', want '%s'", fields(&l_), want); \
    } while (0)

#define EXPECT_ERR(kv, want)                                                                 \
    do {                                                                                     \
        tr_launch l_;                                                                        \
        gk_err e_;                                                                           \
        int rc_ = from(kv, &l_, &e_);                                                        \
        CHECKF(rc_ == GK_EUSAGE && strcmp(e_.msg, want) == 0, "rc %d, '%s', want '%s'", rc_, \
               e_.msg, want);                                                                \
    } while (0)

static void test_env_none(void)
{
    EXPECT(ENV("UNRELATED=1"), "none 0/1 0/1 0/1 0 127.0.0.1:29500");
    EXPECT(ENV("MASTER_ADDR=10.0.0.5", "MASTER_PORT=1234"), "none 0/1 0/1 0/1 0 10.0.0.5:1234");
    /* set but empty counts as unset */
    EXPECT(ENV("RANK=", "WORLD_SIZE=", "MASTER_PORT="), "none 0/1 0/1 0/1 0 127.0.0.1:29500");
    EXPECT_ERR(ENV("MASTER_PORT=0"), "MASTER_PORT = 0 is not a port (1 to 65535)");
}

/* A getenv over "NAME=VALUE" strings (ud, NULL-ended). */
static const char *table_getenv(const char *name, void *ud)
{
    size_t n = strlen(name);
    for (const char *const *kv = ud; *kv; kv++)
        if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=')
            return *kv + n + 1;
    return NULL;
}

/* The variables come through the getenv main passes, not the process's own, and with the place
 * come what the launcher and the store need: a port given, a spawned rank, the job token. */
static void test_env_given_getenv(void)
{
    tr_launch l;
    gk_err e = {0};
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
    setenv("RANK", "5", 1); /* the process's own: not read */
    const char *const *kv = ENV("RANK=1", "WORLD_SIZE=2", "MASTER_PORT=4000", "GPT_TRAIN_SPAWNED=1",
                                "GPT_DIST_TOKEN=tok");
    CHECK_OK(tr_launch_from_env(&l, table_getenv, (void *)kv, &e), &e);
    CHECKF(strcmp(fields(&l), "torchrun 1/2 1/2 0/1 0 127.0.0.1:4000") == 0, "%s", fields(&l));
    CHECK(l.port_given && l.spawned && l.dist_token && strcmp(l.dist_token, "tok") == 0);
    const char *const *pet = ENV("PET_NNODES=1", "PET_MASTER_PORT=4000", "GPT_DIST_TOKEN=");
    CHECK_OK(tr_launch_from_env(&l, table_getenv, (void *)pet, &e), &e);
    CHECK(l.port_given && !l.spawned && !l.dist_token); /* set but empty: unset */
    const char *const *none = ENV("UNRELATED=1");
    CHECK_OK(tr_launch_from_env(&l, table_getenv, (void *)none, &e), &e);
    CHECK(!l.port_given && !l.spawned && !l.dist_token && strcmp(l.source, "none") == 0);
    unsetenv("RANK");
}

static void test_env_torchrun(void)
{
    EXPECT(ENV("RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
               "MASTER_ADDR=10.0.0.1", "MASTER_PORT=1234"),
           "torchrun 3/8 1/2 1/4 0 10.0.0.1:1234");
    /* the node rank derived when GROUP_RANK is absent */
    EXPECT(ENV("RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=h"),
           "torchrun 5/8 1/2 2/4 0 h:29500");
    EXPECT(ENV("RANK=0", "WORLD_SIZE=1"), "torchrun 0/1 0/1 0/1 0 127.0.0.1:29500");
    /* no LOCAL_*: one node on loopback, one process per pod (PyTorchJob) elsewhere */
    EXPECT(ENV("RANK=1", "WORLD_SIZE=2"), "torchrun 1/2 1/2 0/1 0 127.0.0.1:29500");
    EXPECT(ENV("RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=job-master-0", "MASTER_PORT=23456"),
           "torchrun 2/4 0/1 2/4 0 job-master-0:23456");
    EXPECT(ENV("RANK=05", "WORLD_SIZE=6", "LOCAL_WORLD_SIZE=3", "MASTER_ADDR=h"),
           "torchrun 5/6 2/3 1/2 0 h:29500");
}

static void test_env_torchrun_errors(void)
{
    EXPECT_ERR(ENV("RANK=x", "WORLD_SIZE=2"), "RANK = 'x' is not a number");
    EXPECT_ERR(ENV("RANK=1 ", "WORLD_SIZE=2"), "RANK = '1 ' is not a number");
    EXPECT_ERR(ENV("RANK=-1", "WORLD_SIZE=2"), "RANK = -1 is negative");
    EXPECT_ERR(ENV("RANK=99999999999", "WORLD_SIZE=2"), "RANK = 99999999999 is above 16777216");
    EXPECT_ERR(ENV("RANK=3", "WORLD_SIZE=2"), "RANK = 3 is not below WORLD_SIZE = 2");
    EXPECT_ERR(ENV("RANK=0", "WORLD_SIZE=0"), "WORLD_SIZE = 0 must be at least 1");
    EXPECT_ERR(ENV("RANK=0"), "RANK set without WORLD_SIZE");
    EXPECT_ERR(ENV("WORLD_SIZE=2"), "WORLD_SIZE set without RANK");
    EXPECT_ERR(ENV("LOCAL_RANK=0"), "LOCAL_RANK set without RANK");
    EXPECT_ERR(ENV("RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"),
               "LOCAL_RANK = 2 is not below LOCAL_WORLD_SIZE = 2");
    EXPECT_ERR(ENV("RANK=1", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=4"),
               "LOCAL_WORLD_SIZE = 4 is above WORLD_SIZE = 2");
    EXPECT_ERR(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_PORT=70000"),
               "MASTER_PORT = 70000 is not a port (1 to 65535)");
    EXPECT_ERR(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_PORT=p\n"),
               "MASTER_PORT = 'p?' is not a number");
    EXPECT_ERR(ENV("GPT_TRAIN_SPAWNED=1", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1"),
               "GPT_TRAIN_SPAWNED = 1 but RANK is not set");
}

/* A spawned rank reads the torchrun-style variables only, and never spawns. */
static void test_env_spawned(void)
{
    EXPECT(ENV("GPT_TRAIN_SPAWNED=1", "RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1",
               "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0", "MASTER_PORT=4000", "PET_NNODES=2",
               "PET_NPROC_PER_NODE=2", "PET_NODE_RANK=0", "SLURM_PROCID=7", "SLURM_NTASKS=8"),
           "torchrun 1/4 1/2 0/2 0 127.0.0.1:4000");
}

static void test_env_mpirun(void)
{
    EXPECT(ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
               "OMPI_COMM_WORLD_LOCAL_SIZE=2", "MASTER_ADDR=host1", "MASTER_PORT=4000",
               "SLURM_PROCID=0", "SLURM_NTASKS=1"),
           "mpirun 3/4 1/2 1/2 0 host1:4000");
    EXPECT(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"),
           "mpirun 1/2 1/2 0/1 0 127.0.0.1:29500");
    EXPECT(ENV("PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2"),
           "mpirun 1/2 1/2 0/1 0 127.0.0.1:29500");
    EXPECT_ERR(ENV("OMPI_COMM_WORLD_RANK=4", "OMPI_COMM_WORLD_SIZE=4"),
               "OMPI_COMM_WORLD_RANK = 4 is not below OMPI_COMM_WORLD_SIZE = 4");
    EXPECT_ERR(ENV("OMPI_COMM_WORLD_RANK=0"),
               "OMPI_COMM_WORLD_RANK set without OMPI_COMM_WORLD_SIZE");
    EXPECT_ERR(ENV("PMI_RANK=0", "PMI_SIZE=two"), "PMI_SIZE = 'two' is not a number");
}

static void test_env_slurm(void)
{
#define SLURM6 \
    "SLURM_PROCID=5", "SLURM_NTASKS=6", "SLURM_LOCALID=1", "SLURM_NODEID=2", "SLURM_NNODES=3"
    EXPECT(ENV(SLURM6, "SLURM_NTASKS_PER_NODE=2(x3)", "SLURM_JOB_NODELIST=node[01-03]"),
           "slurm 5/6 1/2 2/3 0 node01:29500");
    EXPECT(ENV(SLURM6, "SLURM_TASKS_PER_NODE=2(x3)", "SLURM_NODELIST=gpu7,gpu9,gpu11"),
           "slurm 5/6 1/2 2/3 0 gpu7:29500");
    EXPECT(ENV(SLURM6, "SLURM_JOB_NODELIST=a[003,5-6],b[1-2]"), "slurm 5/6 1/2 2/3 0 a003:29500");
    EXPECT(ENV(SLURM6, "SLURM_JOB_NODELIST=rack[1-2]-n[1-2]", "MASTER_ADDR=10.1.1.1",
               "MASTER_PORT=2222"),
           "slurm 5/6 1/2 2/3 0 10.1.1.1:2222");
    EXPECT(ENV("SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "SLURM_NODEID=0",
               "SLURM_NNODES=1", "SLURM_NTASKS_PER_NODE=2", "SLURM_JOB_NODELIST=n1"),
           "slurm 1/2 1/2 0/1 0 127.0.0.1:29500");
    EXPECT(ENV(SLURM6, "SLURM_JOB_NODELIST=n[1-3]", "PET_NNODES=4", "PET_NODE_RANK=0"),
           "slurm 5/6 1/2 2/3 0 n1:29500");
    EXPECT_ERR(ENV(SLURM6, "SLURM_JOB_NODELIST=rack[1-2]-n[1-2]"),
               "SLURM_JOB_NODELIST = 'rack[1-2]-n[1-2]' is not a simple node list: set MASTER_ADDR "
               "to the first node's address");
    EXPECT_ERR(ENV(SLURM6, "SLURM_JOB_NODELIST=n1", "SLURM_NTASKS_PER_NODE=x"),
               "SLURM_NTASKS_PER_NODE = 'x' is not a number of tasks");
    EXPECT_ERR(ENV("SLURM_PROCID=2", "SLURM_NTASKS=2", "SLURM_NNODES=1"),
               "SLURM_PROCID = 2 is not below SLURM_NTASKS = 2");
#undef SLURM6
}

static void test_env_kubeflow(void)
{
    EXPECT(ENV("PET_NNODES=2", "PET_NPROC_PER_NODE=4", "PET_NODE_RANK=1", "PET_MASTER_ADDR=m",
               "PET_MASTER_PORT=23456", "MASTER_ADDR=other", "MASTER_PORT=1"),
           "kubeflow 4/8 0/4 1/2 4 m:23456");
    EXPECT(ENV("PET_NNODES=3", "PET_NPROC_PER_NODE=1", "PET_NODE_RANK=2", "PET_MASTER_ADDR=m"),
           "kubeflow 2/3 0/1 2/3 0 m:29500");
    EXPECT(ENV("PET_NNODES=1", "PET_NPROC_PER_NODE=auto"),
           "kubeflow 0/1 0/1 0/1 0 127.0.0.1:29500");
    EXPECT(ENV("PET_NNODES=1", "PET_NPROC_PER_NODE=2", "MASTER_PORT=3333"),
           "kubeflow 0/2 0/2 0/1 2 127.0.0.1:3333");
    EXPECT_ERR(ENV("PET_NNODES=2", "PET_NODE_RANK=2"),
               "PET_NODE_RANK = 2 is not below PET_NNODES = 2");
    EXPECT_ERR(ENV("PET_NNODES=2", "PET_NPROC_PER_NODE=2"),
               "PET_NODE_RANK is not set (PET_NNODES = 2)");
    EXPECT_ERR(ENV("PET_NPROC_PER_NODE=2"), "PET_NPROC_PER_NODE set without PET_NNODES");
    EXPECT_ERR(ENV("PET_NNODES=1", "PET_NPROC_PER_NODE=0"),
               "PET_NPROC_PER_NODE = 0 must be at least 1");
    EXPECT_ERR(ENV("PET_NNODES=1", "PET_MASTER_PORT=65536"),
               "PET_MASTER_PORT = 65536 is not a port (1 to 65535)");
}

/* ---- the children (this binary re-run by tr_launch_spawn): train_launch_children.h ---- */
#include "train_launch_children.h"

/* ---- the parent ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *slurp(const char *name, int rank)
{
    static char buf[512];
    char path[128];
    snprintf(path, sizeof path, "%s/%s%d", dir, name, rank);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    unlink(path);
    return buf;
}

static int spawn(const char *mode, const tr_launch *l, int nproc, double grace_s, gk_err *e)
{
    char self[] = "test_train_launch", *argv[] = {self, (char *)mode, dir, NULL};
    memset(e, 0, sizeof *e);
    return tr_launch_spawn(l, nproc, 3, argv, grace_s, e);
}

static tr_launch one_node(void)
{
    tr_launch l = {.source = "none", .world_size = 1, .local_world_size = 1, .nnodes = 1,
                   .master_addr = "127.0.0.1", .master_port = 29500};
    return l;
}

/* Three ranks on one node: the variables each saw; a free port, the same for all, when
 * MASTER_PORT is not set. */
static void test_spawn_one_node(void)
{
    tr_launch l = one_node();
    gk_err e;
    int port = 0;
    for (int i = 0; launcher_vars[i]; i++)
        unsetenv(launcher_vars[i]);
    CHECK_OK(spawn("child-ok", &l, 3, 2, &e), &e);
    for (int r = 0; r < 3; r++) {
        char want[128];
        const char *got = slurp("rank", r);
        int p = 0;
        const char *colon = strrchr(got, ':');
        if (colon)
            p = (int)strtol(colon + 1, NULL, 10);
        if (r == 0)
            port = p;
        snprintf(want, sizeof want, "torchrun %d/3 %d/3 0/1 0 127.0.0.1:%d", r, r, port);
        CHECKF(strcmp(got, want) == 0, "rank %d saw '%s', want '%s'", r, got, want);
    }
    CHECKF(port > 0 && port != 29500, "port %d", port);
    l.master_port = 12345;
    l.port_given = 1; /* MASTER_PORT set */
    CHECK_OK(spawn("child-ok", &l, 2, 2, &e), &e);
    CHECK(strcmp(slurp("rank", 0), "torchrun 0/2 0/2 0/1 0 127.0.0.1:12345") == 0);
    CHECK(strcmp(slurp("rank", 1), "torchrun 1/2 1/2 0/1 0 127.0.0.1:12345") == 0);
}

/* Node 1 of 2: ranks 2 and 3 of 4, the node's master address and port. */
static void test_spawn_second_node(void)
{
    tr_launch l = one_node();
    gk_err e;
    l.node_rank = 1;
    l.nnodes = 2;
    l.master_port = 23456;
    strcpy(l.master_addr, "10.9.8.7");
    CHECK_OK(spawn("child-ok", &l, 2, 2, &e), &e);
    CHECK(strcmp(slurp("rank", 2), "torchrun 2/4 0/2 1/2 0 10.9.8.7:23456") == 0);
    CHECK(strcmp(slurp("rank", 3), "torchrun 3/4 1/2 1/2 0 10.9.8.7:23456") == 0);
}

/* Rank 1 exits 3: the error names it; rank 0 is stopped by SIGTERM at once, not after grace_s. */
static void test_spawn_failure(void)
{
    tr_launch l = one_node();
    gk_err e;
    double t0 = now_s();
    int rc = spawn("child-fail", &l, 2, 5, &e);
    double dt = now_s() - t0;
    CHECKF(rc == GK_EIO, "rc %d: %s", rc, e.msg);
    CHECKF(strncmp(e.msg, "rank 1 (pid ", 12) == 0 &&
               strstr(e.msg, ") exited with status 3; stopped the other ranks") &&
               !strchr(e.msg, '\n'),
           "%s", e.msg);
    CHECKF(dt < 4, "took %.2f s", dt);
}

/* Every rank stops on a bad setting, rank 0 last since it says why: the first failure does not
 * stop it before it has (the others get seconds to end on their own), and no rank was stopped. */
static void test_spawn_all_fail(void)
{
    tr_launch l = one_node();
    gk_err e;
    int rc = spawn("child-usage", &l, 3, 5, &e);
    CHECKF(rc == GK_EIO && strstr(e.msg, ") exited with status 2") && !strstr(e.msg, "stopped"),
           "rc %d: %s", rc, e.msg);
    CHECK(exists("said", 0));
    slurp("said", 0);
}

/* Rank 0 dies of SIGKILL; rank 1 ignores SIGTERM and is killed after grace_s. */
static void test_spawn_crash(void)
{
    tr_launch l = one_node();
    gk_err e;
    char want[200];
    double t0 = now_s();
    int rc = spawn("child-crash", &l, 2, 0.5, &e);
    double dt = now_s() - t0;
    snprintf(want, sizeof want,
             "rank 0 (pid %.20s) was killed by signal 9 (Killed); stopped the other ranks (rank 1 "
             "did not stop within 0.5 s after SIGTERM: SIGKILL)",
             slurp("pid", 0));
    slurp("ready", 1);
    CHECKF(rc == GK_EIO && strcmp(e.msg, want) == 0, "rc %d: '%s', want '%s'", rc, e.msg, want);
    CHECKF(dt >= 0.5 && dt < 5, "took %.2f s", dt);
}

/* The ranks of one node share a token made for them (32 hex digits), a new one each launch; a
 * GPT_DIST_TOKEN given is theirs; several nodes without one get none. */
static void test_spawn_token(void)
{
    tr_launch l = one_node();
    gk_err e;
    char first[64];
    unsetenv("GPT_DIST_TOKEN");
    CHECK_OK(spawn("child-token", &l, 2, 2, &e), &e);
    snprintf(first, sizeof first, "%s", slurp("token", 0));
    CHECKF(strlen(first) == 32 && strspn(first, "0123456789abcdef") == 32, "'%s'", first);
    CHECK(strcmp(slurp("token", 1), first) == 0);
    CHECK_OK(spawn("child-token", &l, 2, 2, &e), &e);
    CHECK(strcmp(slurp("token", 0), first) != 0);
    slurp("token", 1);
    l.dist_token = "given"; /* GPT_DIST_TOKEN set */
    CHECK_OK(spawn("child-token", &l, 2, 2, &e), &e);
    CHECK(strcmp(slurp("token", 0), "given") == 0 && strcmp(slurp("token", 1), "given") == 0);
    l.dist_token = NULL;
    l.nnodes = 2;
    CHECK_OK(spawn("child-token", &l, 1, 2, &e), &e);
    CHECK(strcmp(slurp("token", 0), "-") == 0);
}

/* Rank 0 fails while rank 1 is stopped (SIGSTOP): the SIGTERM that stops the others comes with a
 * SIGCONT, so rank 1 ends on it, not by SIGKILL grace_s later. (A grace of 30 s, far above what
 * ending takes even on a loaded machine, where 5 s once did not suffice: without the SIGCONT the
 * run takes the settle time plus the whole grace.) */
static void test_spawn_stopped_rank(void)
{
    tr_launch l = one_node();
    gk_err e;
    double t0 = now_s();
    int rc = spawn("child-stopped", &l, 2, 30, &e);
    double dt = now_s() - t0;
    slurp("ready", 1);
    CHECKF(rc == GK_EIO && strstr(e.msg, ") exited with status 3; stopped the other ranks") &&
               !strstr(e.msg, "SIGKILL"), "rc %d: %s", rc, e.msg);
    CHECKF(dt < 25, "took %.2f s", dt);
}

/* A process that sends sig to this one (to its process group: -1) `times` times, 50 ms apart,
 * once n ranks are ready. */
static pid_t killer(int sig, int n, int times)
{
    pid_t target = times < 0 ? -getpgid(0) : getpid(), pid = fork();
    if (pid != 0)
        return pid;
    signal(sig, SIG_IGN);
    for (int r = 0; r < n; r++)
        if (await("ready", r))
            _exit(1);
    for (int i = 0; i < (times < 0 ? 1 : times); i++, sleep_s(0.05))
        kill(target, sig);
    _exit(0);
}

/* One SIGTERM or SIGINT to the launcher reaches each rank once: all stop cleanly, exit 0. */
static void test_spawn_signal(void)
{
    int sigs[] = {SIGTERM, SIGINT};
    for (int k = 0; k < 2; k++) {
        tr_launch l = one_node();
        gk_err e;
        int st = -1;
        pid_t kp = killer(sigs[k], 2, 1);
        CHECK_OK(spawn("child-signal", &l, 2, 2, &e), &e);
        CHECK(waitpid(kp, &st, 0) == kp && st == 0);
        for (int r = 0; r < 2; r++) {
            CHECKF(exists("stopped", r), "signal %d: rank %d did not stop cleanly", sigs[k], r);
            slurp("stopped", r);
            slurp("ready", r);
        }
    }
}

/* A second SIGTERM is passed on as a second one: the ranks end at once; interrupted, not failed. */
static void test_spawn_second_signal(void)
{
    tr_launch l = one_node();
    gk_err e;
    int st = -1;
    pid_t kp = killer(SIGTERM, 2, 2);
    int rc = spawn("child-signal", &l, 2, 2, &e);
    CHECK(waitpid(kp, &st, 0) == kp && st == 0);
    CHECKF(rc == GK_EINTR && strstr(e.msg, ") was killed by signal 15 (Terminated), passed on to "
                                           "it: the run was interrupted"),
           "rc %d: %s", rc, e.msg);
    for (int r = 0; r < 2; r++) {
        CHECK(!exists("stopped", r));
        slurp("ready", r);
    }
}

/* Ctrl-C on a terminal signals the whole foreground process group: the launcher (here a process
 * leading a group of its own) gets it, the ranks get it once, through the launcher. */
static void test_spawn_terminal_group(void)
{
    int st = -1;
    pid_t pid = fork();
    if (pid == 0) {
        tr_launch l = one_node();
        gk_err e;
        setpgid(0, 0);
        pid_t kp = killer(SIGINT, 2, -1);
        int rc = spawn("child-signal", &l, 2, 2, &e);
        if (rc)
            fprintf(stderr, "spawn: %s\n", e.msg);
        _exit(rc || waitpid(kp, &st, 0) != kp || st != 0);
    }
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
    for (int r = 0; r < 2; r++) {
        CHECKF(exists("stopped", r), "rank %d did not stop cleanly", r);
        slurp("stopped", r);
        slurp("ready", r);
    }
}

int main(int argc, char **argv)
{
    const char *sp = getenv("GPT_TRAIN_SPAWNED");
    if (sp && strcmp(sp, "1") == 0 && argc == 3)
        return child_main(argv);
    snprintf(dir, sizeof dir, "/tmp/gk-launch-XXXXXX");
    if (!mkdtemp(dir))
        return perror("mkdtemp"), 1;
    RUN(test_env_none);
    RUN(test_env_given_getenv);
    RUN(test_env_torchrun);
    RUN(test_env_torchrun_errors);
    RUN(test_env_spawned);
    RUN(test_env_mpirun);
    RUN(test_env_slurm);
    RUN(test_env_kubeflow);
    RUN(test_spawn_one_node);
    RUN(test_spawn_second_node);
    RUN(test_spawn_failure);
    RUN(test_spawn_all_fail);
    RUN(test_spawn_crash);
    RUN(test_spawn_token);
    RUN(test_spawn_stopped_rank);
    RUN(test_spawn_signal);
    RUN(test_spawn_second_signal);
    RUN(test_spawn_terminal_group);
    if (rmdir(dir))
        fprintf(stderr, "%s: %s (files left)\n", dir, strerror(errno));
    return TEST_END();
}
