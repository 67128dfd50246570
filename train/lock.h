/* lock.h: one gpt-train per out_dir: out_dir/gpt-train.lock, flock'd while the run holds it and
 * holding "PID HOST" so that a second run can say who is using the directory.
 * Owns: the open lock file from tr_lock_take to tr_lock_release (which removes the file while
 * still holding the lock, so a waiting run never locks a file that is gone). Not thread-safe. */
#ifndef TR_LOCK_H
#define TR_LOCK_H

#include "common/err.h"

typedef struct tr_lock {
    char *path; /* NULL: not held */
    int fd;
} tr_lock;

/* Locks dir (which must exist). Held already: 0. Held by another process: GK_EIO, "out_dir o
 * is in use by gpt-train (pid 123 on host h)". A file system without locks: a warning, 0. */
int tr_lock_take(tr_lock *l, const char *dir, gk_err *e);
/* Removes the lock file and unlocks. NULL-safe; a lock not held is a no-op. */
void tr_lock_release(tr_lock *l);

#endif
