/* outfile.c: atomic output files, their temporaries, and the removal of those on a signal or
 * on the next run; what an output path names (a symbolic link followed, a device or FIFO written
 * in place) (see outfile.h). */
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

/* ------------------------------------------------------------ creating and sweeping temporaries */

static int is_temp_of(const char *name, const char *base)
{
    size_t n = strlen(base), k = strlen(TMP_SUFFIX);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, TMP_SUFFIX, k) != 0)
        return 0;
    const char *r = name + n + k;
    for (int i = 0; i < TMP_RANDOM; i++)
        if (!((r[i] >= '0' && r[i] <= '9') || (r[i] >= 'a' && r[i] <= 'z') ||
              (r[i] >= 'A' && r[i] <= 'Z')))
            return 0;
    return r[TMP_RANDOM] == '\0';
}

/* Removes PATH.tmp.XXXXXX files that no process holds (their writer died: killed, or power lost).
 * A live writer holds an exclusive flock on its temporary from creation to rename. Only called
 * for a regular or absent PATH (never beside a device: no sweep of /dev), and only regular files
 * go. */
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
            S_ISREG(held.st_mode) &&
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
        uint64_t x =
            (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32 ^ atomic_fetch_add(&counter, 1);
        for (int i = 0; i < TMP_RANDOM;
             i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
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
    size_t n = strlen(o->target);
    for (int tries = 0; tries < 100; tries++) {
        snprintf(o->tmp_path, cap, "%s" TMP_SUFFIX, o->target);
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
    free(o->target);
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

/* Why a file cannot be created at target (errno from the attempt), naming path (what the user
 * gave) and target's directory. */
static int create_error(const char *path, const char *target, gk_err *e)
{
    int err = errno;
    char *copy = strdup(target);
    const char *dir = copy ? dirname(copy) : ".";
    int rc = err == ENOENT ? gk_errf(e, GK_ENOTFOUND, "%s: directory %s does not exist", path, dir)
             : err == ENOTDIR
                 ? gk_errf(e, GK_ENOTFOUND, "%s: %s is not a directory", path, dir)
                 : gk_errf(e, err == ENOMEM ? GK_ENOMEM : GK_EIO,
                           "%s: cannot create a file in %s: %s", path, dir, strerror(err));
    free(copy);
    return rc;
}

/* ---------------------------------------------------------------- what a path names */

enum { MAX_HOPS = 40 }; /* as the kernel's limit on nested symbolic links */

/* The name a chain of symbolic links from path ends at, whether or not it exists (a dangling
 * link's target is where the file goes, as shell redirection and cp do). A relative link is read
 * against the directory of the link. NULL with errno set on failure (ELOOP for a cycle). */
static char *follow_links(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur; /* the end of the chain: absent, or not a link */
        char link[4096];
        ssize_t n = hops < MAX_HOPS ? readlink(cur, link, sizeof link - 1) : -1;
        if (hops >= MAX_HOPS)
            errno = ELOOP;
        if (n < 0) {
            free(cur);
            return NULL;
        }
        link[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(keep + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, keep);
            memcpy(next + keep, link, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* What path names, through any symbolic links: *in_place = 1 for a character device or a FIFO
 * (written where it is: nothing to rename over), else *target = the name of the regular file or
 * absent file that the output replaces atomically (the caller frees it). A directory, block
 * device or socket is refused, naming path. */
static int resolve(const char *path, char **target, int *in_place, gk_err *e)
{
    struct stat st;
    *target = NULL;
    *in_place = 0;
    if (stat(path, &st) == 0) { /* follows links, /proc's magic ones (/dev/stdout) too */
        if (S_ISDIR(st.st_mode))
            return gk_errf(e, GK_EIO, "%s: is a directory", path);
        if (S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
            return gk_errf(e, GK_EIO, "%s: is a %s: give a file, a character device or a FIFO",
                           path, S_ISBLK(st.st_mode) ? "block device" : "socket");
        *in_place = !S_ISREG(st.st_mode);
    } else if (errno == ELOOP) {
        return gk_errno(e, path);
    }
    *target = *in_place ? strdup(path) : follow_links(path);
    if (!*target)
        return errno == ENOMEM ? gk_errf(e, GK_ENOMEM, "%s: out of memory", path)
                               : gk_errno(e, path);
    return 0;
}

/* Whether the directory that would hold target exists (name: the path in messages). */
static int check_dir(const char *name, const char *target, gk_err *e)
{
    struct stat st;
    char *copy = strdup(target);
    if (!copy)
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", name);
    int rc = 0;
    if (stat(dirname(copy), &st) != 0)
        rc = create_error(name, target, e);
    else if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        rc = create_error(name, target, e);
    }
    free(copy);
    return rc;
}

int gk_outfile_check(const char *path, gk_err *e)
{
    if (!path || strcmp(path, "-") == 0)
        return 0;
    char *target;
    int in_place, rc = resolve(path, &target, &in_place, e);
    if (rc == 0 && !in_place)
        rc = check_dir(path, target, e);
    free(target);
    return rc;
}

/* Opens a character device or FIFO where it is (a FIFO waits for its reader, as `> fifo` does). */
static int open_in_place(gk_outfile *o, gk_err *e)
{
    int fd = open(o->target, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    o->fp = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!o->fp) {
        int rc = gk_errno(e, o->path);
        if (fd >= 0)
            close(fd);
        outfile_reset(o);
        return rc;
    }
    o->in_place = 1;
    o->start = -1;
    return 0;
}

int gk_outfile_open(gk_outfile *o, const char *path, gk_err *e)
{
    memset(o, 0, sizeof *o);
    o->slot = -1;
    if (!path || strcmp(path, "-") == 0)
        return open_stdout(o);
    int in_place, rc = resolve(path, &o->target, &in_place, e);
    if (rc == 0 && !(o->path = strdup(path)))
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    if (rc == 0 && in_place)
        return open_in_place(o, e);
    if (rc == 0)
        rc = check_dir(path, o->target, e);
    size_t cap = rc ? 0 : strlen(o->target) + sizeof TMP_SUFFIX + TMP_RANDOM;
    if (rc == 0 && !(o->tmp_path = malloc(cap)))
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    if (rc) {
        outfile_reset(o);
        return rc;
    }
    sweep_stale(o->target);
    int fd = create_temp(o, cap);
    if (fd < 0) {
        rc = create_error(path, o->target, e);
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
    if (!o->path || o->in_place) { /* stdout, a device or a FIFO: nothing to rename */
        if (o->in_place && fclose(o->fp) != 0 && rc == 0)
            rc = gk_errno(e, o->path);
        outfile_reset(o);
        return rc;
    }
    if (rc == 0 && fsync(fileno(o->fp)) != 0)
        rc = gk_errno(e, o->path);
    /* Renamed while still open: the lock keeps other runs' sweeps off it until it has its name. */
    if (rc == 0 && rename(o->tmp_path, o->target) != 0)
        rc = gk_errno(e, o->path);
    if (rc != 0)
        unlink(o->tmp_path);
    temp_unregister(o->slot);
    o->slot = -1;
    if (fclose(o->fp) != 0 && rc == 0)
        rc = gk_errno(e, o->path);
    o->fp = NULL;
    if (rc == 0)
        gk_sync_dir_of(o->target);
    outfile_reset(o);
    return rc;
}

void gk_outfile_abort(gk_outfile *o)
{
    if (!o || !o->fp)
        return;
    if (o->path) {
        if (o->tmp_path)
            unlink(o->tmp_path);
        fclose(o->fp);
    } else if (o->start >= 0) {
        fflush(o->fp);
        if (ftruncate(STDOUT_FILENO, (off_t)o->start) == 0)
            lseek(STDOUT_FILENO, (off_t)o->start, SEEK_SET);
    }
    outfile_reset(o);
}
