/* test_outfile.c: output files: the mode (umask honoured without touching it), what is said
 * about a missing or wrong directory, stale temporaries swept on the next open (never a live
 * one), and temporaries removed on a signal. (Commit and abort: test_common.c.) */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/io/outfile.h"
#include "test.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char path[2][256];
    static int k;
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

static int count_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static int write_file(const char *path, const char *text)
{
    gk_err e = {0};
    gk_outfile o;
    int rc = gk_outfile_open(&o, path, &e);
    if (!rc)
        rc = gk_outfile_write(&o, text, strlen(text), &e);
    return rc ? rc : gk_outfile_commit(&o, &e);
}

static void test_mode_follows_umask(void)
{
    struct stat st;
    mode_t old = umask(027);
    CHECK(write_file(tmp("m.txt"), "x") == 0);
    CHECK(stat(tmp("m.txt"), &st) == 0 && (st.st_mode & 0777) == 0640);
    CHECK(umask(old) == 027); /* left as it was */
    unlink(tmp("m.txt"));
}

static void test_directory_errors(void)
{
    gk_outfile o;
    gk_err e = {0};
    CHECK(gk_outfile_open(&o, tmp("nodir/x.bin"), &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "nodir/x.bin: directory ") && strstr(e.msg, "/nodir does not exist"), "%s",
           e.msg);
    CHECK(gk_outfile_check(tmp("nodir/x.bin"), &e) == GK_ENOTFOUND);
    CHECK(write_file(tmp("f"), "x") == 0);
    CHECK(gk_outfile_open(&o, tmp("f/x.bin"), &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "/f is not a directory") != NULL, "%s", e.msg);
    CHECK(gk_outfile_open(&o, dir, &e) == GK_EIO);
    CHECKF(strstr(e.msg, ": is a directory") != NULL, "%s", e.msg);
    CHECK(gk_outfile_check("-", &e) == 0 && gk_outfile_check(tmp("ok.bin"), &e) == 0);
    CHECK(count_entries() == 1);
    unlink(tmp("f"));
}

/* A killed run's PATH.tmp.XXXXXX goes on the next open of PATH; a live writer's (flock'd), other
 * names' and non-matching names stay. */
static void test_stale_temps_swept(void)
{
    CHECK(write_file(tmp("out.bin.tmp.Ab12cD"), "stale") == 0);
    CHECK(write_file(tmp("out.bin.tmp.keep"), "not ours") == 0);
    CHECK(write_file(tmp("other.bin.tmp.Ab12cD"), "another output's") == 0);
    CHECK(write_file(tmp("out.bin.tmp.LIVE00"), "live") == 0);
    int live = open(tmp("out.bin.tmp.LIVE00"), O_RDONLY);
    CHECK(live >= 0 && flock(live, LOCK_EX) == 0);
    CHECK(write_file(tmp("out.bin"), "new") == 0);
    CHECK(access(tmp("out.bin.tmp.Ab12cD"), F_OK) != 0);
    CHECK(access(tmp("out.bin.tmp.LIVE00"), F_OK) == 0);
    CHECK(access(tmp("out.bin.tmp.keep"), F_OK) == 0);
    CHECK(access(tmp("other.bin.tmp.Ab12cD"), F_OK) == 0);
    CHECK(count_entries() == 4);
    if (live >= 0)
        close(live);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
    CHECK(system(cmd) == 0);
}

/* A process killed by SIGTERM while writing leaves no temporary, and still dies of SIGTERM. */
static void test_signal_removes_temps(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        gk_outfile_cleanup_on_signals();
        gk_outfile a, b;
        gk_err e = {0};
        if (gk_outfile_open(&a, tmp("a.bin"), &e) || gk_outfile_open(&b, tmp("b.bin"), &e) ||
            gk_outfile_write(&a, "aaaa", 4, &e))
            _exit(3);
        fflush(a.fp);
        raise(SIGTERM);
        _exit(4);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %d", status);
    CHECK(count_entries() == 0);
    /* gk_outfile_unlink_temps, for a tool's own handler */
    gk_outfile o;
    gk_err e = {0};
    CHECK_OK(gk_outfile_open(&o, tmp("c.bin"), &e), &e);
    CHECK(count_entries() == 1);
    gk_outfile_unlink_temps();
    CHECK(count_entries() == 0);
    gk_outfile_abort(&o);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_outfile_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN(test_mode_follows_umask);
    RUN(test_directory_errors);
    RUN(test_stale_temps_swept);
    RUN(test_signal_removes_temps);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return TEST_END();
}
