/* stagedir.h: the staging directories of gptkit's tools in TMPDIR (gpt-train.XXXXXX for an
 * out_dir in a bucket, gpt-tokenize.XXXXXX and gpt-ckpt.XXXXXX for outputs written locally before
 * their upload), and the removal of those whose owner is gone (killed: SIGKILL, a lost node, a
 * power cut), as gk_outfile sweeps FILE.tmp.XXXXXX.
 * A live directory is held by its owner with an exclusive flock on the directory itself, taken
 * before its marker file (GK_STAGEDIR_MARK) is created: a directory with the marker that another
 * process can lock has no live owner. Only directories named gpt-NAME.XXXXXX (NAME lower-case
 * letters, 6 letters or digits) that hold the marker are ever swept, and only their files (a
 * staging directory holds no subdirectories). Anything else in TMPDIR, such as gpt-train's
 * unsent checkpoints (gpt-train-unsent.*), is never touched.
 * Owns: the lock's descriptor from gk_stagedir_make to gk_stagedir_remove. */
#ifndef GK_STAGEDIR_H
#define GK_STAGEDIR_H

#include <stddef.h>

#include "common/err.h"

#define GK_STAGEDIR_MARK ".gptkit-stage"

typedef struct gk_stagedir {
    char path[4096]; /* "" when none */
    int fd;          /* the directory, flock'd; -1 when none */
} gk_stagedir;

/* Sweeps dead staging directories in tmpdir (NULL or "": /tmp), then makes tmpdir/TOOL.XXXXXX
 * (mode 0700), locked and marked. A failure names the directory and suggests TMPDIR. */
int gk_stagedir_make(gk_stagedir *d, const char *tmpdir, const char *tool, gk_err *e);
/* Removes the staging directories in tmpdir whose owner is gone; returns how many. */
int gk_stagedir_sweep(const char *tmpdir);
/* Removes d's files and d, and releases its lock. Accepts a d never made (path "", or zeroed). */
void gk_stagedir_remove(gk_stagedir *d);
/* Removes the files of the directory at path and the directory: async-signal-safe (no memory
 * allocated; getdents64), for a tool's signal handler. */
void gk_stagedir_remove_path(const char *path);

#endif
