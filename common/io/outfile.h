/* outfile.h: output that is never left half-written.
 * Owns: an output stream and, for a named file, its temporary sibling. A named file is written to
 * PATH.tmp.XXXXXX in the same directory, then fsync + rename on commit; abort removes the temp.
 * Stdout ("-" or NULL) is written in place; abort truncates it back when it is a regular file.
 * Thread safety: one gk_outfile per thread. */
#ifndef GK_OUTFILE_H
#define GK_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "common/err.h"

typedef struct gk_outfile {
    FILE *fp;
    char *path;      /* final name; NULL for stdout */
    char *tmp_path;  /* temporary name; NULL for stdout */
    long start;      /* stdout: offset at open when it is a regular file, else -1 */
    int seekable;    /* the stream is a regular file (patching a header is possible) */
} gk_outfile;

/* Opens path for writing ("-" or NULL: stdout). */
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

#endif
