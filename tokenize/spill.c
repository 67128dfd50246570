/* spill.c: unlinked temporary files of gpt-tokenize (see spill.h). */
#include "spill.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPILL_BUF (1 << 16)

static int spill_err(tk_spill *s, gk_err *e)
{
    int err = errno ? errno : EIO;
    return gk_errf(e, GK_EIO, "%s: %s (writing %s there; set TMPDIR to another directory)",
                   s->dir, strerror(err), s->what);
}

/* O_TMPFILE where the file system has it, else a named file removed at once. */
static int open_unlinked(const char *dir)
{
#ifdef O_TMPFILE
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd;
#endif
    char path[4200];
    snprintf(path, sizeof path, "%s/gpt-tokenize.XXXXXX", dir);
    int fd2 = mkostemp(path, O_CLOEXEC);
    if (fd2 >= 0)
        unlink(path);
    return fd2;
}

int tk_spill_open(tk_spill *s, const char *dir, const char *what, gk_err *e)
{
    memset(s, 0, sizeof *s);
    s->what = what;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    int fd = open_unlinked(s->dir);
    if (fd < 0 || !(s->fp = fdopen(fd, "w+"))) {
        if (fd >= 0)
            close(fd);
        return spill_err(s, e);
    }
    setvbuf(s->fp, NULL, _IOFBF, SPILL_BUF);
    return 0;
}

int tk_spill_write(tk_spill *s, const void *p, size_t n, gk_err *e)
{
    errno = 0;
    if (n && fwrite(p, 1, n, s->fp) != n)
        return spill_err(s, e);
    s->size += (int64_t)n;
    return 0;
}

int tk_spill_rewind(tk_spill *s, gk_err *e)
{
    errno = 0;
    if (fflush(s->fp) != 0 || fseeko(s->fp, 0, SEEK_SET) != 0)
        return spill_err(s, e);
    return 0;
}

int tk_spill_read(tk_spill *s, void *p, size_t n, gk_err *e)
{
    errno = 0;
    if (n && fread(p, 1, n, s->fp) != n)
        return gk_errf(e, GK_EIO, "%s: %s (reading back %s)", s->dir,
                       ferror(s->fp) && errno ? strerror(errno) : "temporary file cut short",
                       s->what);
    return 0;
}

int tk_spill_pread(tk_spill *s, void *p, size_t n, int64_t off, gk_err *e)
{
    ssize_t got = pread(fileno(s->fp), p, n, (off_t)off);
    if (got != (ssize_t)n)
        return gk_errf(e, GK_EIO, "%s: %s (reading back %s)", s->dir,
                       got < 0 ? strerror(errno) : "temporary file cut short", s->what);
    return 0;
}

void tk_spill_close(tk_spill *s)
{
    if (s->fp)
        fclose(s->fp);
    s->fp = NULL;
}
