/* outfile.c: atomic output files (see outfile.h). */
#include "common/io/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void outfile_reset(gk_outfile *o)
{
    free(o->path);
    free(o->tmp_path);
    memset(o, 0, sizeof *o);
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

int gk_outfile_open(gk_outfile *o, const char *path, gk_err *e)
{
    memset(o, 0, sizeof *o);
    if (!path || strcmp(path, "-") == 0)
        return open_stdout(o);
    size_t n = strlen(path);
    o->path = strdup(path);
    o->tmp_path = malloc(n + 16);
    if (!o->path || !o->tmp_path) {
        outfile_reset(o);
        return gk_errf(e, GK_ENOMEM, "%s: out of memory", path);
    }
    snprintf(o->tmp_path, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(o->tmp_path);
    if (fd < 0) {
        int rc = gk_errno(e, path);
        outfile_reset(o);
        return rc;
    }
    mode_t mask = umask(0); /* mkstemp makes 0600; outputs get the usual 0666 & ~umask */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    o->fp = fdopen(fd, "wb");
    if (!o->fp) {
        int rc = gk_errno(e, path);
        close(fd);
        unlink(o->tmp_path);
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

static int sync_dir_of(const char *path)
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
    if (fclose(o->fp) != 0 && rc == 0)
        rc = gk_errno(e, o->path);
    o->fp = NULL;
    if (rc == 0 && rename(o->tmp_path, o->path) != 0)
        rc = gk_errno(e, o->path);
    if (rc != 0)
        unlink(o->tmp_path);
    else
        sync_dir_of(o->path);
    outfile_reset(o);
    return rc;
}

void gk_outfile_abort(gk_outfile *o)
{
    if (!o || !o->fp)
        return;
    if (o->path) {
        fclose(o->fp);
        unlink(o->tmp_path);
    } else if (o->start >= 0) {
        fflush(o->fp);
        if (ftruncate(STDOUT_FILENO, (off_t)o->start) == 0)
            lseek(STDOUT_FILENO, (off_t)o->start, SEEK_SET);
    }
    outfile_reset(o);
}
