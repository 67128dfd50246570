/* proc.h: process-level duties every tool's main shares: standard descriptors that exist
 * before anything is opened, and output that is known to have reached stdout/stderr.
 * Owns: a record of which of fds 0-2 were closed at start, set once by gk_std_fds_open() at the
 * top of main before threads start; read-only afterwards. */
#ifndef GK_PROC_H
#define GK_PROC_H

#include "common/err.h"

/* Makes sure fds 0, 1 and 2 are open (closed ones are opened on /dev/null), so that no file the
 * tool opens later lands on a standard descriptor. Call first thing in main. */
void gk_std_fds_open(void);
/* True if fd (0, 1 or 2) was closed when the process started. A tool that reads stdin checks
 * gk_std_was_closed(0) and reports "standard input is closed" instead of reading /dev/null. */
int gk_std_was_closed(int fd);
/* Flushes stdout and stderr and reports a write that failed on either (a full disk, a closed
 * pipe): GK_EIO with "standard output: No space left on device". Call before returning 0. */
int gk_std_finish(gk_err *e);

#endif
