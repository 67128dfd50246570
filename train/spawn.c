/* spawn.c: the local launcher that starts a node's ranks and supervises them (tr_launch_spawn).
 * See launch.h.
 *
 * Signals while supervising. The children run in process groups of their own, so a terminal's
 * Ctrl-C (sent to the foreground group) reaches only the parent, and the parent passes every
 * SIGINT and SIGTERM it receives on to every live child, once: one Ctrl-C or `kill -TERM` is one
 * signal in each rank (stop at the next step boundary, checkpoint, exit 0), a second one is a
 * second signal (gpt-train's "exit at once"), the same as for a single process. Kubernetes and
 * `kill PID` signal the parent only, which suits this. Something that signals every process of
 * a cgroup or step (systemd's KillMode=control-group, Slurm's scancel) reaches each child
 * directly and through the parent: twice. Each child has PR_SET_PDEATHSIG = SIGTERM, so a
 * parent killed outright (SIGKILL) still stops its ranks cleanly. Ctrl-Z stops the parent only;
 * every SIGINT and SIGTERM sent to a child comes with a SIGCONT, so that a stopped one handles it.
 * The ranks share a job token (GPT_DIST_TOKEN) that rank 0's rendezvous store asks of them.
 * The children inherit stdin; as they are not in the terminal's foreground group they must not
 * read the terminal (gpt-train never does).
 *
 * A child that exits non-zero, or is killed by a signal the parent did not pass on to it, has
 * failed: the others get SETTLE_S seconds to end on their own (after a bad setting all do, and
 * rank 0 says why), then SIGTERM, then SIGKILL after grace_s, and the error names the first rank
 * that failed. A child killed by a signal the parent passed on (a second Ctrl-C, or a first one
 * before its handler was installed) was interrupted: GK_EINTR, after the others have ended.
 *
 * The children run /proc/self/exe: the very program the parent runs, even if its file has been
 * rebuilt or deleted since; readlink gives its name for messages. */
#include "train/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The variables each child gets; anything else of this environment is passed on as it is. */
static const char *const child_vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                         "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                                         "GPT_TRAIN_SPAWNED", "GPT_DIST_TOKEN"};
#define N_CHILD_VARS (sizeof child_vars / sizeof child_vars[0])

typedef struct child {
    pid_t pid;      /* 0 until started */
    int rank;
    int alive;
    int status;     /* waitpid's, or -1 when it was lost (reaped by someone else) */
    unsigned sent;  /* bit s: this process sent it signal s */
} child;

typedef struct supervisor {
    child *c;
    int n;
    int failed;           /* index of the first child that failed, -1 */
    char start_err[400];  /* why a child could not be started, "" */
    int stopping;         /* a child failed: the others are being stopped */
    int termed;           /* ... and were sent SIGTERM (at term_at) */
    int stopped_others;   /* ... and some were still alive then */
    double term_at;       /* when the ones still alive get SIGTERM (monotonic seconds) */
    double kill_at;       /* when the ones still alive get SIGKILL */
    int killed;           /* SIGKILL sent: the first rank that needed it, -1 */
} supervisor;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds the other ranks get to end on their own after one failed, before SIGTERM. */
#define SETTLE_S 2.0

/* A free port for rank 0's store (the kernel's choice for port 0), held by *fd, bound but not
 * listening, until the ranks end. With SO_REUSEADDR on both sockets rank 0's store can still
 * listen there, while the kernel gives the port to no outgoing connection and another program's
 * bind is refused, so nothing takes it between our choice and rank 0's listen. */
static int reserve_port(int *port, int *fd, gk_err *e)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    int one = 1, rc = 0;
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0 || setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(*fd, (struct sockaddr *)&a, sizeof a) || getsockname(*fd, (struct sockaddr *)&a, &len))
        rc = gk_errno(e, "picking a free port for the local ranks");
    if (rc && *fd >= 0)
        close(*fd), *fd = -1;
    *port = ntohs(a.sin_port);
    return rc;
}

/* The ranks' job token (GPT_DIST_TOKEN): the one given, else on one node 32 random hex digits
 * (a node's ranks share nothing else); "" on several nodes without one (rank 0 warns). */
static int job_token(const tr_launch *l, char *tok, size_t cap, gk_err *e)
{
    const char *given = l->dist_token;
    unsigned char r[16];
    *tok = '\0';
    if (given || l->nnodes > 1) {
        if (given && strlen(given) >= cap)
            return gk_errf(e, GK_EUSAGE, "GPT_DIST_TOKEN has %zu bytes (at most %zu)",
                           strlen(given), cap - 1);
        snprintf(tok, cap, "%s", given ? given : "");
        return 0;
    }
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return gk_errno(e, "making the ranks' job token: getrandom");
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(tok + 2 * i, cap - 2 * i, "%02x", r[i]);
    return 0;
}

/* This environment without child_vars, with N_CHILD_VARS free slots at *ours and a NULL after. */
static char **child_env(char ***ours)
{
    size_t n = 0, k = 0;
    while (environ && environ[n])
        n++;
    char **envp = calloc(n + N_CHILD_VARS + 1, sizeof *envp);
    if (!envp)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        for (; j < N_CHILD_VARS; j++) {
            size_t len = strlen(child_vars[j]);
            if (strncmp(environ[i], child_vars[j], len) == 0 && environ[i][len] == '=')
                break;
        }
        if (j == N_CHILD_VARS)
            envp[k++] = environ[i];
    }
    *ours = envp + k;
    return envp;
}

typedef struct start_args {
    char **argv, **envp;
    const sigset_t *mask;              /* the caller's signal mask, for the child */
    const struct sigaction *chld;      /* the caller's SIGCHLD action, for the child */
} start_args;

/* Forks and execs one child in a process group of its own; *err = errno when that failed
 * (fork's, or execve's as the child sent it back through a close-on-exec pipe). */
static pid_t start_child(const start_args *a, int *err)
{
    int p[2], x = 0;
    pid_t parent = getpid();
    if (pipe2(p, O_CLOEXEC)) {
        *err = errno;
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1); /* the parent is gone already */
        sigaction(SIGCHLD, a->chld, NULL);
        pthread_sigmask(SIG_SETMASK, a->mask, NULL);
        execve("/proc/self/exe", a->argv, a->envp);
        x = errno;
        if (write(p[1], &x, sizeof x) < 0)
            x = 0;
        _exit(127);
    }
    *err = errno;
    close(p[1]);
    ssize_t r = -1;
    if (pid > 0) {
        setpgid(pid, pid); /* as the child does: the group exists before any signal is sent */
        while ((r = read(p[0], &x, sizeof x)) < 0 && errno == EINTR) {
        }
    }
    close(p[0]);
    if (pid > 0 && r == (ssize_t)sizeof x) {
        waitpid(pid, NULL, 0);
        *err = x;
        return -1;
    }
    return pid;
}

/* sig to every live child; with SIGINT and SIGTERM a SIGCONT too, so that a stopped one
 * (SIGSTOP, a debugger's) handles it now rather than be killed grace_s later. */
static void signal_all(supervisor *s, int sig)
{
    for (int i = 0; i < s->n; i++)
        if (s->c[i].alive && kill(s->c[i].pid, sig) == 0) {
            s->c[i].sent |= 1u << sig;
            if (sig == SIGINT || sig == SIGTERM)
                kill(s->c[i].pid, SIGCONT);
        }
}

/* After the first failure: the others get settle_s seconds to end on their own (a bad setting
 * ends every rank at once, and rank 0, the one that says why, must not be stopped before it has
 * said it), then SIGTERM, then SIGKILL grace_s later (stop_due). */
static void begin_stop(supervisor *s, double settle_s, double grace_s)
{
    if (s->stopping)
        return;
    s->stopping = 1;
    s->term_at = now_s() + settle_s;
    s->kill_at = s->term_at + (grace_s > 0 ? grace_s : 0);
}

/* SIGTERM to the children still alive once term_at has come. */
static void stop_due(supervisor *s)
{
    if (!s->stopping || s->termed || now_s() < s->term_at)
        return;
    s->termed = 1;
    for (int i = 0; i < s->n; i++)
        s->stopped_others |= s->c[i].alive;
    signal_all(s, SIGTERM);
}

static int has_failed(const child *c)
{
    if (c->status == -1)
        return 1;
    if (WIFEXITED(c->status))
        return WEXITSTATUS(c->status) != 0;
    return !(c->sent & (1u << WTERMSIG(c->status)));
}

/* Reaps the children that have ended. Of several failures seen at once, one killed by a signal
 * is taken as the first (a crash makes the others fail after it), then the lowest rank. */
static void reap(supervisor *s, double grace_s)
{
    int best = -1;
    for (int i = 0; i < s->n; i++) {
        child *c = &s->c[i];
        int st;
        pid_t r = c->alive ? waitpid(c->pid, &st, WNOHANG) : 0;
        if (r == 0 || (r < 0 && errno == EINTR))
            continue;
        c->alive = 0;
        c->status = r == c->pid ? st : -1;
        if (s->failed < 0 && has_failed(c) &&
            (best < 0 ||
             (c->status != -1 && WIFSIGNALED(c->status) && !WIFSIGNALED(s->c[best].status))))
            best = i;
    }
    if (best >= 0) {
        s->failed = best;
        begin_stop(s, SETTLE_S, grace_s);
    }
}

static int any_alive(const supervisor *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->c[i].alive)
            return 1;
    return 0;
}

/* Waits for every child, passing SIGINT and SIGTERM on, stopping the rest after a failure. */
static void supervise(supervisor *s, const sigset_t *set, double grace_s)
{
    for (;;) {
        reap(s, grace_s);
        if (!any_alive(s))
            return;
        stop_due(s);
        double wait = 1.0; /* a poll besides SIGCHLD, in case one was taken by another thread */
        if (s->stopping && !s->termed)
            wait = s->term_at - now_s() < wait ? s->term_at - now_s() : wait;
        if (wait < 0)
            wait = 0;
        if (s->termed && s->killed < 0) {
            double left = s->kill_at - now_s();
            if (left <= 0) {
                for (int i = 0; i < s->n && s->killed < 0; i++)
                    if (s->c[i].alive)
                        s->killed = i;
                signal_all(s, SIGKILL);
                continue;
            }
            wait = left < wait ? left : wait;
        }
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        siginfo_t si;
        int sig = sigtimedwait(set, &si, &ts);
        if (sig == SIGINT || sig == SIGTERM)
            signal_all(s, sig);
    }
}

/* "rank 1 (pid 4242) exited with status 3" or "... was killed by signal 9 (Killed)". */
static void describe(const child *c, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "rank %d (pid %d) ", c->rank, (int)c->pid);
    if (n < 0 || (size_t)n >= cap)
        return;
    if (c->status == -1)
        snprintf(buf + n, cap - n,
                 "ended, but its exit status was taken by another part of this process");
    else if (WIFEXITED(c->status))
        snprintf(buf + n, cap - n, "exited with status %d", WEXITSTATUS(c->status));
    else
        snprintf(buf + n, cap - n, "was killed by signal %d (%s%s)", WTERMSIG(c->status),
                 strsignal(WTERMSIG(c->status)), WCOREDUMP(c->status) ? ", core dumped" : "");
}

static int outcome(const supervisor *s, double grace_s, gk_err *e)
{
    char what[512], stop[160] = "";
    if (s->stopped_others && s->killed >= 0)
        snprintf(stop, sizeof stop,
                 "; stopped the other ranks (rank %d did not "
                 "stop within %g s after SIGTERM: SIGKILL)",
                 s->c[s->killed].rank, grace_s);
    else if (s->stopped_others)
        snprintf(stop, sizeof stop, "; stopped the other ranks");
    if (s->start_err[0])
        return gk_errf(e, GK_EIO, "%s%s", s->start_err, stop);
    if (s->failed >= 0) {
        describe(&s->c[s->failed], what, sizeof what);
        return gk_errf(e, GK_EIO, "%s%s", what, stop);
    }
    for (int i = 0; i < s->n; i++)
        if (s->c[i].status != 0) {
            describe(&s->c[i], what, sizeof what);
            return gk_errf(e, GK_EINTR, "%s, passed on to it: the run was interrupted", what);
        }
    return 0;
}

/* Starts the children one after another; a child that cannot be started stops the others. */
static void start_all(supervisor *s, const tr_launch *l, const start_args *a, char **ours,
                      const char *exe, int port, const char *token, double grace_s)
{
    char vars[N_CHILD_VARS][300];
    for (int i = 0; i < s->n; i++) {
        int k = 0, err = 0;
        snprintf(vars[k++], sizeof vars[0], "RANK=%d", s->c[i].rank);
        snprintf(vars[k++], sizeof vars[0], "WORLD_SIZE=%d", l->nnodes * s->n);
        snprintf(vars[k++], sizeof vars[0], "LOCAL_RANK=%d", i);
        snprintf(vars[k++], sizeof vars[0], "LOCAL_WORLD_SIZE=%d", s->n);
        snprintf(vars[k++], sizeof vars[0], "GROUP_RANK=%d", l->node_rank);
        snprintf(vars[k++], sizeof vars[0], "MASTER_ADDR=%s", l->master_addr);
        snprintf(vars[k++], sizeof vars[0], "MASTER_PORT=%d", port);
        snprintf(vars[k++], sizeof vars[0], "GPT_TRAIN_SPAWNED=1");
        if (*token)
            snprintf(vars[k++], sizeof vars[0], "GPT_DIST_TOKEN=%s", token);
        for (int j = 0; j < k; j++)
            ours[j] = vars[j];
        pid_t pid = start_child(a, &err);
        if (pid < 0) {
            snprintf(s->start_err, sizeof s->start_err, "cannot start rank %d: %.300s: %s",
                     s->c[i].rank, err == EAGAIN || err == ENOMEM ? "fork" : exe, strerror(err));
            begin_stop(s, 0, grace_s);
            stop_due(s);
            return;
        }
        s->c[i].pid = pid;
        s->c[i].alive = 1;
    }
}

int tr_launch_spawn(const tr_launch *l, int nproc, int argc, char **argv, double grace_s, gk_err *e)
{
    char exe[4096], token[257];
    int port = l->master_port, held = -1, rc = 0;
    if (nproc < 1 || nproc > 4096 || argc < 1 || l->nnodes < 1 || l->node_rank < 0 ||
        l->node_rank >= l->nnodes || (long long)l->nnodes * nproc > TR_LAUNCH_MAX_COUNT)
        return gk_errf(e, GK_EUSAGE,
                       "cannot start %d local ranks as node %d of %d (1 to 4096 ranks per node)",
                       nproc, l->node_rank, l->nnodes);
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len < 0)
        return gk_errno(e, "cannot find this program to start the local ranks: /proc/self/exe");
    exe[len] = '\0';
    if ((rc = job_token(l, token, sizeof token, e)))
        return rc;
    if (l->nnodes == 1 && !l->port_given && (rc = reserve_port(&port, &held, e)))
        return rc;

    char **ours, **av = calloc((size_t)argc + 1, sizeof *av), **envp = child_env(&ours);
    supervisor s = {.c = calloc((size_t)nproc, sizeof(child)),
                    .n = nproc,
                    .failed = -1,
                    .killed = -1};
    if (!av || !envp || !s.c) {
        rc = gk_errf(e, GK_ENOMEM, "out of memory starting %d local ranks", nproc);
        goto out;
    }
    memcpy(av, argv, (size_t)argc * sizeof *av);
    for (int i = 0; i < nproc; i++)
        s.c[i].rank = l->node_rank * nproc + i;

    sigset_t set, old_mask;
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old_chld;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set, &old_mask);
    sigaction(SIGCHLD, &dfl, &old_chld); /* not SIG_IGN: that would reap the children for us */
    fflush(NULL);
    start_args a = {av, envp, &old_mask, &old_chld};
    start_all(&s, l, &a, ours, exe, port, token, grace_s);
    supervise(&s, &set, grace_s);
    sigaction(SIGCHLD, &old_chld, NULL);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    rc = outcome(&s, grace_s, e);
out:
    if (held >= 0)
        close(held);
    free(s.c);
    free(envp);
    free(av);
    return rc;
}
