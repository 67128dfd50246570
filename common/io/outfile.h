/* outfile.h: output that is never left half-written, and never replaces what its path names.
 * Owns: an output stream and, for a named file, its temporary sibling. A named file is written to
 * PATH.tmp.XXXXXX in the same directory (mode 0666 & ~umask, flock'd while it lives), then fsync
 * + rename on commit; abort removes the temp. Opening PATH first removes the PATH.tmp.XXXXXX
 * files that no live process holds (left by a run that was killed). Live temps are also kept in
 * a fixed registry that a signal handler may empty (gk_outfile_unlink_temps).
 * A symbolic link is followed (dangling too, as shell redirection and cp do): its target is
 * replaced that way, from a temporary beside the target, and the link stays. A character device
 * or a FIFO is written in place (no temporary, no atomicity: a write error such as ENOSPC on
 * /dev/full is reported as for a file); a directory, block device or socket is refused.
 * Stdout ("-" or NULL) is written in place; abort truncates it back when it is a regular file.
 * Thread safety: one gk_outfile per thread; the registry is lock-free and async-signal-safe. */
#ifndef GK_OUTFILE_H
#define GK_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "common/err.h"

typedef struct gk_outfile {
    FILE *fp;
    char *path;      /* the name given (for messages); NULL for stdout */
    char *target;    /* what path names, symbolic links followed: renamed over or written */
    char *tmp_path;  /* temporary name; NULL for stdout, a device or a FIFO */
    long start;      /* stdout: offset at open when it is a regular file, else -1 */
    int seekable;    /* the stream is a regular file (patching a header is possible) */
    int slot;        /* its place in the signal registry, or -1 */
    int in_place;    /* a character device or FIFO, written where it is */
} gk_outfile;

/* Whether path can be opened for writing, without creating or opening anything: its directory
 * exists (a symbolic link's target's) and it is not a directory, block device or socket ("-" or
 * NULL: yes). Errors name the path and the directory. */
int gk_outfile_check(const char *path, gk_err *e);
/* Opens path for writing ("-" or NULL: stdout). Errors say what is wrong with the directory. */
int gk_outfile_open(gk_outfile *o, const char *path, gk_err *e);
/* Writes n bytes; an error (disk full, closed pipe) names the output. */
int gk_outfile_write(gk_outfile *o, const void *data, size_t n, gk_err *e);
/* Writes n bytes at byte offset off from where the output started (header patching). */
int gk_outfile_pwrite(gk_outfile *o, const void *data, size_t n, long off, gk_err *e);
/* Flushes, fsyncs and renames into place. The outfile is closed afterwards either way. */
int gk_outfile_commit(gk_outfile *o, gk_err *e);
/* Drops everything written (temp file removed, stdout truncated back if possible). NULL-safe. */
void gk_outfile_abort(gk_outfile *o);
/* The name to use in messages: the path or "stdout". */
const char *gk_outfile_name(const gk_outfile *o);

/* Removes every live temporary file. Async-signal-safe: for a tool's own signal handler. */
void gk_outfile_unlink_temps(void);
/* Installs handlers for SIGHUP, SIGINT, SIGPIPE and SIGTERM (those at their default action) that
 * remove the live temporaries and then die of the signal as before. For tools that do not
 * handle these signals themselves; call once from main before threads start. */
void gk_outfile_cleanup_on_signals(void);

/* fsyncs the directory that holds path (after a rename in it), best effort: -1 when it cannot
 * be opened, else 0 (some file systems refuse fsync on a directory). */
int gk_sync_dir_of(const char *path);

#endif
