/* train_launch_children.h: the child side of test_train_launch.c (included there, after dir and
 * fields(), which it uses): the modes this binary runs in when tr_launch_spawn re-runs it as a
 * rank, and the files in dir through which they and the parent meet. */

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    (void)sig;
    got_signal = 1;
}

static void put(const char *d, const char *name, int rank, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s%d", d, name, rank);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int exists(const char *name, int rank)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s%d", dir, name, rank);
    return access(path, F_OK) == 0;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR && !got_signal) {
    }
}

/* Waits (up to 10 s) for the file name+rank in dir; 0 when it came. */
static int await(const char *name, int rank)
{
    for (int i = 0; i < 1000; i++, sleep_s(0.01))
        if (exists(name, rank))
            return 0;
    return -1;
}

/* Waits (up to 10 s) until the process whose pid the file name+rank holds is stopped (state T in
 * /proc/PID/stat); 0 when it is. */
static int await_stopped(const char *name, int rank)
{
    char path[128], buf[512];
    for (int i = 0; i < 1000; i++, sleep_s(0.01)) {
        snprintf(path, sizeof path, "%s/%s%d", dir, name, rank);
        FILE *f = fopen(path, "r");
        int pid = 0;
        if (f) {
            if (fscanf(f, "%d", &pid) != 1)
                pid = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        f = pid > 0 ? fopen(path, "r") : NULL;
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        const char *end = strrchr(buf, ')'); /* after the command name: " STATE ..." */
        if (end && end[1] == ' ' && end[2] == 'T')
            return 0;
    }
    return -1;
}

/* child-ok: writes what tr_launch_from_env read. child-fail: rank 1 exits 3, rank 0 sleeps.
 * child-usage: every rank exits 2 (a bad setting), rank 0 only after 0.5 s and a file (its
 * message).
 * child-crash: rank 1 ignores SIGTERM, rank 0 kills itself with SIGKILL once rank 1 is ready.
 * child-signal: waits for SIGINT/SIGTERM (a second one ends it, as in gpt-train), then takes
 * 300 ms to "checkpoint" and exits 0. child-token: writes its GPT_DIST_TOKEN ("-" unset).
 * child-stopped: rank 1 stops itself (SIGSTOP) and exits 0 on SIGTERM; rank 0 exits 3 once it
 * is stopped. */
static int child_main(char **argv)
{
    const char *mode = argv[1];
    tr_launch l;
    gk_err e;
    char text[512];
    snprintf(dir, sizeof dir, "%s", argv[2]);
    if (tr_launch_from_env(&l, gk_env_getenv, NULL, &e))
        return fprintf(stderr, "child: %s\n", e.msg), 5;
    if (strcmp(mode, "child-ok") == 0) {
        put(dir, "rank", l.rank, fields(&l));
        return 0;
    }
    if (strcmp(mode, "child-fail") == 0) {
        if (l.rank == 1)
            return 3;
        sleep_s(30);
        return 0;
    }
    if (strcmp(mode, "child-usage") == 0) { /* a bad setting: rank 0 takes a while to say so */
        if (l.rank == 0) {
            sleep_s(0.5);
            put(dir, "said", 0, "");
        }
        return 2;
    }
    if (strcmp(mode, "child-token") == 0) {
        put(dir, "token", l.rank, getenv("GPT_DIST_TOKEN") ? getenv("GPT_DIST_TOKEN") : "-");
        return 0;
    }
    if (strcmp(mode, "child-stopped") == 0) {
        if (l.rank == 0) /* once rank 1 is stopped: a SIGTERM before its SIGSTOP would leave it
                          * stopped for good (a machine under load showed it) */
            return await("ready", 1) == 0 && await_stopped("ready", 1) == 0 ? 3 : 4;
        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGTERM, &sa, NULL);
        snprintf(text, sizeof text, "%d", (int)getpid());
        put(dir, "ready", 1, text);
        raise(SIGSTOP);
        if (!got_signal) /* handled as it was continued */
            sleep_s(30);
        return got_signal ? 0 : 6;
    }
    if (strcmp(mode, "child-crash") == 0) {
        if (l.rank == 1) {
            signal(SIGTERM, SIG_IGN);
            put(dir, "ready", 1, "");
            sleep_s(30);
            return 0;
        }
        snprintf(text, sizeof text, "%d", (int)getpid());
        put(dir, "pid", 0, text);
        if (await("ready", 1) == 0)
            kill(getpid(), SIGKILL);
        return 4;
    }
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESETHAND};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    put(dir, "ready", l.rank, "");
    sleep_s(30);
    if (!got_signal)
        return 6;
    got_signal = 0;
    sleep_s(0.3);
    put(dir, "stopped", l.rank, "");
    return 0;
}
