/* proc.c: standard descriptors at start, checked stdout/stderr at the end (see proc.h). */
#include "common/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static int closed_at_start[3];

void gk_std_fds_open(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        closed_at_start[fd] = 1;
        int nfd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (nfd >= 0 && nfd != fd) { /* lower fds were open: cannot happen, but never leak */
            dup2(nfd, fd);
            close(nfd);
        }
    }
}

int gk_std_was_closed(int fd)
{
    return fd >= 0 && fd < 3 && closed_at_start[fd];
}

static int finish_stream(FILE *f, const char *name, gk_err *e)
{
    errno = 0;
    int bad = fflush(f) != 0 || ferror(f);
    if (!bad) return 0;
    if (errno == 0) errno = EIO;
    return gk_errno(e, name);
}

int gk_std_finish(gk_err *e)
{
    int rc = finish_stream(stdout, "standard output", e);
    if (rc == 0) rc = finish_stream(stderr, "standard error", e);
    return rc;
}
