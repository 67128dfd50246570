/* lock.c: out_dir/gpt-train.lock (see lock.h). */
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

/* "out_dir o is in use by gpt-train (pid 123 on host h)", from what the holder wrote. */
static int held_by_other(const char *dir, const char *path, int fd, gk_err *e)
{
    char buf[320] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    long pid = 0;
    char host[256] = "";
    if (sscanf(buf, "%ld %255s", &pid, host) == 2)
        return gk_errf(e, GK_EIO, "out_dir %s is in use by gpt-train (pid %ld on host %s; lock %s)",
                       dir, pid, host, path);
    return gk_errf(e, GK_EIO, "out_dir %s is in use by another gpt-train (lock %s)", dir, path);
}

/* Writes "PID HOST\n" into the lock file. */
static void write_owner(int fd)
{
    char host[256] = "unknown", buf[320];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    int n = snprintf(buf, sizeof buf, "%ld %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
        gk_verbose("could not record the owner in the lock file: %s", strerror(errno));
}

int tr_lock_take(tr_lock *l, const char *dir, gk_err *e)
{
    if (l->path)
        return 0;
    size_t cap = strlen(dir) + sizeof "/gpt-train.lock";
    char *path = malloc(cap);
    if (!path)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    snprintf(path, cap, "%s/gpt-train.lock", dir);
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            int rc = gk_errno(e, path);
            free(path);
            return rc;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int rc = errno == EWOULDBLOCK ? held_by_other(dir, path, fd, e) : 0;
            if (!rc) /* no locks on this file system (some network mounts) */
                gk_warn("%s: cannot lock (%s): nothing stops a second run on out_dir", path,
                        strerror(errno));
            close(fd);
            free(path);
            return rc;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            write_owner(fd);
            l->path = path;
            l->fd = fd;
            return 0;
        }
        close(fd); /* its holder removed it while we waited for it: take the new one */
    }
    int rc = gk_errf(e, GK_EIO, "%s: replaced again and again while locking it", path);
    free(path);
    return rc;
}

void tr_lock_release(tr_lock *l)
{
    if (!l || !l->path)
        return;
    unlink(l->path);
    close(l->fd);
    free(l->path);
    l->path = NULL;
}
