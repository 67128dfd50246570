/* stagedir.c: staging directories in TMPDIR, locked by their owner, and the sweep of those
 * whose owner is gone (see stagedir.h). */
#include "common/io/stagedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *tmp_or_default(const char *tmpdir)
{
    return tmpdir && *tmpdir ? tmpdir : "/tmp";
}

/* Whether name is gpt-NAME.XXXXXX: NAME lower-case letters, then 6 letters or digits. */
static int is_stage_name(const char *name)
{
    if (strncmp(name, "gpt-", 4) != 0)
        return 0;
    const char *p = name + 4;
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz");
    if (n == 0 || p[n] != '.')
        return 0;
    p += n + 1;
    for (int i = 0; i < 6; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'z') ||
              (p[i] >= 'A' && p[i] <= 'Z')))
            return 0;
    return p[6] == '\0';
}

struct dirent64_raw {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* Unlinks every entry of the open directory dfd but . and .. (subdirectories stay). */
static void unlink_all(int dfd)
{
    char buf[4096] __attribute__((aligned(8)));
    for (int pass = 0; pass < 2; pass++) { /* a second pass for what the first one's reads missed */
        lseek(dfd, 0, SEEK_SET);
        for (;;) {
            long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
            if (n <= 0)
                break;
            for (long off = 0; off < n;) {
                struct dirent64_raw *de = (struct dirent64_raw *)(buf + off);
                off += de->reclen;
                if (strcmp(de->name, ".") != 0 && strcmp(de->name, "..") != 0)
                    unlinkat(dfd, de->name, 0);
            }
        }
    }
}

void gk_stagedir_remove_path(const char *path)
{
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0)
        return;
    unlink_all(dfd);
    close(dfd);
    rmdir(path);
}

/* Removes tmp/name when it is a marked staging directory that no live process holds. */
static int sweep_one(int tmp, const char *name)
{
    struct stat st;
    int dfd = openat(tmp, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (dfd < 0)
        return 0;
    int gone = flock(dfd, LOCK_EX | LOCK_NB) == 0 &&
               fstatat(dfd, GK_STAGEDIR_MARK, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (gone) {
        unlink_all(dfd);
        gone = unlinkat(tmp, name, AT_REMOVEDIR) == 0;
    }
    close(dfd);
    return gone;
}

int gk_stagedir_sweep(const char *tmpdir)
{
    DIR *d = opendir(tmp_or_default(tmpdir));
    int removed = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        if (is_stage_name(de->d_name))
            removed += sweep_one(dirfd(d), de->d_name);
    if (d)
        closedir(d);
    return removed;
}

int gk_stagedir_make(gk_stagedir *d, const char *tmpdir, const char *tool, gk_err *e)
{
    const char *tmp = tmp_or_default(tmpdir);
    d->fd = -1;
    gk_stagedir_sweep(tmp);
    int n = snprintf(d->path, sizeof d->path, "%s/%s.XXXXXX", tmp, tool);
    int fd = -1;
    if (n < 0 || (size_t)n >= sizeof d->path) {
        d->path[0] = '\0';
        return gk_errf(e, GK_EUSAGE, "TMPDIR %s: name too long (set TMPDIR to another directory)",
                       tmp);
    }
    if (!mkdtemp(d->path) || (fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        flock(fd, LOCK_EX) != 0 || mknodat(fd, GK_STAGEDIR_MARK, S_IFREG | 0600, 0) != 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
            rmdir(d->path);
        }
        d->path[0] = '\0';
        return gk_errf(e, GK_EIO,
                       "%s: cannot make a staging directory there: "
                       "%s (set TMPDIR to another directory)",
                       tmp, strerror(err));
    }
    d->fd = fd;
    return 0;
}

void gk_stagedir_remove(gk_stagedir *d)
{
    if (!d->path[0]) /* never made (a zeroed d too) */
        return;
    gk_stagedir_remove_path(d->path);
    if (d->fd >= 0)
        close(d->fd);
    d->path[0] = '\0';
    d->fd = -1;
}
