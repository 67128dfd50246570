/* outfile.c: atomic output files, their temporaries, and the removal of those on a signal or
 * on the next run (see outfile.h). */
#include "common/io/outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_SUFFIX ".tmp."
#define TMP_RANDOM 6

/* ---------------------------------------------------------------- temporaries a signal removes */

/* Slots a signal handler reads: state 0 free, 1 being filled, 2 live (path complete). Fixed
 * storage, lock-free atomics: nothing the handler touches is ever freed or half-written. */
enum { SLOTS = 32, SLOT_PATH = 4096 };
static struct {
    atomic_int state;
    char path[SLOT_PATH];
} temps[SLOTS];

static int temp_register(const char *path)
{
    if (strlen(path) >= SLOT_PATH)
        return -1;
    for (int i = 0; i < SLOTS; i++) {
        int free_state = 0;
        if (atomic_compare_exchange_strong(&temps[i].state, &free_state, 1)) {
            strcpy(temps[i].path, path);
            atomic_store(&temps[i].state, 2);
            return i;
        }
    }
    return -1; /* all taken: this one is left to the next run's sweep */
}

static void temp_unregister(int slot)
{
    if (slot >= 0)
        atomic_store(&temps[slot].state, 0);
}

void gk_outfile_unlink_temps(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (atomic_load(&temps[i].state) == 2)
            unlink(temps[i].path);
}

static void on_signal(int sig)
{
    gk_outfile_unlink_temps();
    signal(sig, SIG_DFL); /* async-signal-safe; then die of the same signal */
    raise(sig);
}

void gk_outfile_cleanup_on_signals(void)
{
    static const int sigs[] = {SIGHUP, SIGINT, SIGPIPE, SIGTERM};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa = {0};
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL)
            continue; /* ignored (nohup) or handled by the tool: leave it */
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ---------------------------------------------------------------- creating and sweeping temporaries */

static int is_temp_of(const char *name, const char *base)
{
    size_t n = strlen(base), k = strlen(TMP_SUFFIX);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, TMP_SUFFIX, k) != 0)
        return 0;
    const char *r = name + n + k;
    for (int i = 0; i < TMP_RANDOM; i++)
        if (!((r[i] >= '0' && r[i] <= '9') || (r[i] >= 'a' && r[i] <= 'z') || (r[i] >= 'A' && r[i] <= 'Z')))
            return 0;
    return r[TMP_RANDOM] == '\0';
}

/* Removes PATH.tmp.XXXXXX files that no process holds (their writer died: killed, or power lost).
 * A live writer holds an exclusive flock on its temporary from creation to rename. */
static void sweep_stale(const char *path)
{
    char *d = strdup(path), *b = strdup(path);
    DIR *dir = d && b ? opendir(dirname(d)) : NULL;
    const char *base = b ? basename(b) : NULL;
    for (struct dirent *de; dir && (de = readdir(dir));) {
        if (!is_temp_of(de->d_name, base))
            continue;
        int fd = openat(dirfd(dir), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat held, named;
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &held) == 0 &&
            fstatat(dirfd(dir), de->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
            held.st_dev == named.st_dev && held.st_ino == named.st_ino)
            unlinkat(dirfd(dir), de->d_name, 0);
        if (fd >= 0)
            close(fd);
    }
    if (dir)
        closedir(dir);
    free(d);
    free(b);
}

static void random_name(char *out)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static atomic_uint counter;
    unsigned char r[TMP_RANDOM];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32 ^ atomic_fetch_add(&counter, 1);
        for (int i = 0; i < TMP_RANDOM; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
            r[i] = (unsigned char)(x >> 56);
    }
    for (int i = 0; i < TMP_RANDOM; i++)
        out[i] = chars[r[i] % (sizeof chars - 1)];
    out[TMP_RANDOM] = '\0';
}

/* Creates o->tmp_path with mode 0666 & ~umask (the kernel applies the umask: no process-wide
 * umask() toggling), locked against other runs' sweeps. Returns the fd, or -1 with errno set. */
static int create_temp(gk_outfile *o, size_t cap)
{
    size_t n = strlen(o->path);
    for (int tries = 0; tries < 100; tries++) {
        snprintf(o->tmp_path, cap, "%s" TMP_SUFFIX, o->path);
        random_name(o->tmp_path + n + strlen(TMP_SUFFIX));
        int fd = open(o->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return -1;
        struct stat st;
        if (flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 && st.st_nlink == 0) {
            close(fd); /* another run's sweep took it between open and flock: try again */
            continue;
        }
        return fd;
    }
    errno = EEXIST;
    return -1;
}

/* ---------------------------------------------------------------- the output file */

static void outfile_reset(gk_outfile *o)
{
    temp_unregister(o->slot);
    free(o->path);
    free(o->tmp_path);
    memset(o, 0, sizeof *o);
    o->slot = -1;
}

const char *gk_outfile_name(const gk_outfile *o)
{
    return o->path ? o->path : "stdout";
}

static int open_stdout(gk_outfile *o)
{
    struct stat st;
    o->fp = stdout;
    o->start = -1;
    if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
        off_t pos = lseek(STDOUT_FILENO, 0, SEEK_CUR);
        if (pos >= 0) {
            o->start = (long)pos;
            /* Patching needs real positions: with O_APPEND (>>) writes ignore the offset. */
            o->seekable = !(fcntl(STDOUT_FILENO, F_GETFL) & O_APPEND);
        }
    }
    return 0;
}

/* Why a file cannot be created at path (errno from the attempt), naming its directory. */
static int create_error(const char *path, gk_err *e)
{
    int err = errno;
    char *copy = strdup(path);
    const char *dir = copy ? dirname(copy) : ".";
    int rc = err == ENOENT    ? gk_errf(e, GK_ENOTFOUND, "%s: directory %s does not exist", path, dir)
             : err == ENOTDIR ? gk_errf(e, GK_ENOTFOUND, "%s: %s is not a directory", path, dir)
                              : gk_errf(e, err == ENOMEM ? GK_ENOMEM : GK_EIO,
                                        "%s: cannot create a file in %s: %s", path, dir, strerror(err));
    free(copy);
    return rc;
}

int gk_outfile_check(const char *path, gk_err *e)
{
    struct stat st;
    if (!path || strcmp(path, "-") == 0)
        return 0;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return gk_errf(e, GK_EIO, "%s: is a directory", path);
    char *copy = strdup(path);
    if (!copy)
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    int rc = 0;
    if (stat(dirname(copy), &st) != 0)
        rc = create_error(path, e);
    else if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        rc = create_error(path, e);
    }
    free(copy);
    return rc;
}

int gk_outfile_open(gk_outfile *o, const char *path, gk_err *e)
{
    memset(o, 0, sizeof *o);
    o->slot = -1;
    if (!path || strcmp(path, "-") == 0)
        return open_stdout(o);
    int rc = gk_outfile_check(path, e);
    if (rc)
        return rc;
    size_t cap = strlen(path) + sizeof TMP_SUFFIX + TMP_RANDOM;
    o->path = strdup(path);
    o->tmp_path = malloc(cap);
    if (!o->path || !o->tmp_path) {
        outfile_reset(o);
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    }
    sweep_stale(path);
    int fd = create_temp(o, cap);
    if (fd < 0) {
        rc = create_error(path, e);
        outfile_reset(o);
        return rc;
    }
    o->slot = temp_register(o->tmp_path);
    o->fp = fdopen(fd, "wb");
    if (!o->fp) {
        rc = gk_errno(e, path);
        unlink(o->tmp_path);
        close(fd);
        outfile_reset(o);
        return rc;
    }
    o->seekable = 1;
    o->start = 0;
    return 0;
}

int gk_outfile_write(gk_outfile *o, const void *data, size_t n, gk_err *e)
{
    if (n && fwrite(data, 1, n, o->fp) != n)
        return gk_errno(e, gk_outfile_name(o));
    return 0;
}

int gk_outfile_pwrite(gk_outfile *o, const void *data, size_t n, long off, gk_err *e)
{
    if (!o->seekable)
        return gk_errf(e, GK_EIO, "%s: cannot seek in this output", gk_outfile_name(o));
    if (fflush(o->fp) != 0)
        return gk_errno(e, gk_outfile_name(o));
    int fd = fileno(o->fp);
    ssize_t w = pwrite(fd, data, n, (off_t)(o->start + off));
    if (w < 0 || (size_t)w != n)
        return w < 0 ? gk_errno(e, gk_outfile_name(o))
                     : gk_errf(e, GK_EIO, "%s: short write", gk_outfile_name(o));
    return 0;
}

int gk_sync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0)
        return -1;
    fsync(fd); /* best effort: some file systems refuse fsync on directories */
    close(fd);
    return 0;
}

int gk_outfile_commit(gk_outfile *o, gk_err *e)
{
    int rc = 0;
    if (fflush(o->fp) != 0 || ferror(o->fp))
        rc = gk_errno(e, gk_outfile_name(o));
    if (!o->path) { /* stdout: nothing to rename */
        outfile_reset(o);
        return rc;
    }
    if (rc == 0 && fsync(fileno(o->fp)) != 0)
        rc = gk_errno(e, o->path);
    /* Renamed while still open: the lock keeps other runs' sweeps off it until it has its name. */
    if (rc == 0 && rename(o->tmp_path, o->path) != 0)
        rc = gk_errno(e, o->path);
    if (rc != 0)
        unlink(o->tmp_path);
    temp_unregister(o->slot);
    o->slot = -1;
    if (fclose(o->fp) != 0 && rc == 0)
        rc = gk_errno(e, o->path);
    o->fp = NULL;
    if (rc == 0)
        gk_sync_dir_of(o->path);
    outfile_reset(o);
    return rc;
}

void gk_outfile_abort(gk_outfile *o)
{
    if (!o || !o->fp)
        return;
    if (o->path) {
        unlink(o->tmp_path);
        fclose(o->fp);
    } else if (o->start >= 0) {
        fflush(o->fp);
        if (ftruncate(STDOUT_FILENO, (off_t)o->start) == 0)
            lseek(STDOUT_FILENO, (off_t)o->start, SEEK_SET);
    }
    outfile_reset(o);
}
