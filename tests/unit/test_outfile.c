/* test_outfile.c: output files: the mode (umask honoured without touching it), what is said
 * about a missing or wrong directory, stale temporaries swept on the next open (never a live
 * one), temporaries removed on a signal, and paths that name something else than a file: a
 * symbolic link (followed), a FIFO and a character device (written in place, never replaced).
 * (Commit and abort: test_common.c.) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

static int file_is(const char *path, const char *text)
{
    char buf[256] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    return f && n == strlen(text) && memcmp(buf, text, n) == 0;
}

static int link_is(const char *path, const char *to)
{
    char buf[256];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    return n >= 0 && (buf[n] = '\0', strcmp(buf, to) == 0);
}

/* A symbolic link is followed, as `> link` and cp do: the target is replaced (atomically, from a
 * temporary beside it) and the link stays; relative links are read from the link's directory,
 * chains and dangling links too. A stale temporary beside the target is swept, none left. */
static void test_symlink_followed(void)
{
    CHECK(mkdir(tmp("sub"), 0777) == 0);
    CHECK(write_file(tmp("t.txt"), "old") == 0);
    CHECK(symlink("t.txt", tmp("l.txt")) == 0);
    CHECK(symlink("../l.txt", tmp("sub/l2.txt")) == 0); /* a chain: sub/l2 -> l -> t */
    CHECK(write_file(tmp("l.txt"), "new") == 0);
    CHECK(link_is(tmp("l.txt"), "t.txt") && file_is(tmp("t.txt"), "new"));
    CHECK(write_file(tmp("t.txt.tmp.Ab12cD"), "stale") == 0);
    CHECK(write_file(tmp("sub/l2.txt"), "newer") == 0);
    CHECK(link_is(tmp("sub/l2.txt"), "../l.txt") && link_is(tmp("l.txt"), "t.txt"));
    CHECK(file_is(tmp("t.txt"), "newer") && access(tmp("t.txt.tmp.Ab12cD"), F_OK) != 0);
    /* dangling: the file is made where the link points */
    CHECK(symlink("sub/new.txt", tmp("d.txt")) == 0);
    CHECK(write_file(tmp("d.txt"), "made") == 0);
    CHECK(link_is(tmp("d.txt"), "sub/new.txt") && file_is(tmp("sub/new.txt"), "made"));
    gk_outfile o;
    gk_err e = {0};
    CHECK(symlink("nodir/x.bin", tmp("bad.txt")) == 0);
    CHECK(gk_outfile_check(tmp("bad.txt"), &e) == GK_ENOTFOUND);
    CHECKF(strstr(e.msg, "bad.txt: directory ") && strstr(e.msg, "/nodir does not exist"), "%s",
           e.msg);
    CHECK(symlink("loop.txt", tmp("loop.txt")) == 0);
    CHECK(gk_outfile_open(&o, tmp("loop.txt"), &e) != 0);
    CHECKF(strstr(e.msg, "loop.txt: Too many levels of symbolic links") != NULL, "%s", e.msg);
    /* a link to a directory is a directory */
    CHECK(symlink("sub", tmp("dl")) == 0);
    CHECK(gk_outfile_open(&o, tmp("dl"), &e) == GK_EIO && strstr(e.msg, "dl: is a directory"));
    CHECK(count_entries() == 7); /* sub t.txt l.txt d.txt bad.txt loop.txt dl: no temporary */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s/*", dir);
    CHECK(system(cmd) == 0);
}

/* A FIFO with a reader waiting gets the bytes, and stays a FIFO (was: renamed over, the reader
 * waiting forever). A stale-looking temporary beside it is no business of a FIFO's output. */
static void test_fifo_written_in_place(void)
{
    CHECK(mkfifo(tmp("p"), 0600) == 0);
    CHECK(write_file(tmp("p.tmp.Ab12cD"), "not swept") == 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10); /* the reader gives up rather than hang the test */
        char buf[64] = {0};
        int fd = open(tmp("p"), O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        _exit(n == 9 && memcmp(buf, "to reader", 9) == 0 ? 0 : 1);
    }
    CHECK(write_file(tmp("p"), "to reader") == 0);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader status %d", status);
    struct stat st;
    CHECK(lstat(tmp("p"), &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(file_is(tmp("p.tmp.Ab12cD"), "not swept") && count_entries() == 2);
    unlink(tmp("p"));
    unlink(tmp("p.tmp.Ab12cD"));
}

/* A socket (as a block device) is neither a file to replace nor one to write in place: refused,
 * before and at open, and left where it is. */
static void test_socket_refused(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", tmp("s"));
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    gk_outfile o;
    gk_err e = {0};
    CHECK(gk_outfile_check(tmp("s"), &e) == GK_EIO);
    CHECK(gk_outfile_open(&o, tmp("s"), &e) == GK_EIO);
    CHECKF(strstr(e.msg, "/s: is a socket: give a file, a character device or a FIFO") != NULL,
           "%s", e.msg);
    struct stat st;
    CHECK(lstat(tmp("s"), &st) == 0 && S_ISSOCK(st.st_mode) && count_entries() == 1);
    if (fd >= 0)
        close(fd);
    unlink(tmp("s"));
}

/* A character device is written in place, its write errors reported: the real /dev/null and
 * /dev/full (as root, where a rename would replace them: they must stay character devices), and
 * a node of /dev/null's numbers in the test's directory with a stale-looking temporary beside it
 * that is kept (no sweep beside a device). Without root: skipped, nothing could be replaced. */
static void test_devices_written_in_place(void)
{
    if (geteuid() != 0)
        SKIP("not root: /dev/null and /dev/full cannot be replaced, so nothing to test");
    struct stat null0, full0, st;
    CHECK(stat("/dev/null", &null0) == 0 && S_ISCHR(null0.st_mode));
    CHECK(stat("/dev/full", &full0) == 0 && S_ISCHR(full0.st_mode));
    if (mknod(tmp("nul"), S_IFCHR | 0666, null0.st_rdev) != 0) {
        CHECKF(errno == EPERM, "mknod: %s", strerror(errno));
    } else {
        CHECK(write_file(tmp("nul.tmp.Ab12cD"), "kept") == 0);
        CHECK(write_file(tmp("nul"), "into the device") == 0);
        CHECK(lstat(tmp("nul"), &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == null0.st_rdev);
        CHECK(file_is(tmp("nul.tmp.Ab12cD"), "kept") && count_entries() == 2);
        unlink(tmp("nul"));
        unlink(tmp("nul.tmp.Ab12cD"));
    }
    CHECK(write_file("/dev/null", "into /dev/null") == 0);
    gk_outfile o;
    gk_err e = {0};
    CHECK_OK(gk_outfile_open(&o, "/dev/full", &e), &e);
    if (o.fp) {
        int rc = gk_outfile_write(&o, "x", 1, &e);
        if (rc == 0)
            rc = gk_outfile_commit(&o, &e);
        else
            gk_outfile_abort(&o);
        CHECKF(rc == GK_EIO && strcmp(e.msg, "/dev/full: No space left on device") == 0, "%d %s",
               rc, e.msg);
    }
    CHECK(lstat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == null0.st_rdev);
    CHECK(lstat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == full0.st_rdev);
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
    RUN(test_symlink_followed);
    RUN(test_fifo_written_in_place);
    RUN(test_socket_refused);
    RUN(test_devices_written_in_place);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return TEST_END();
}
