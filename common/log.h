/* log.h: messages on stderr, prefixed with the tool's name, filtered by verbosity.
 * Owns: the program name and verbosity, set once by a tool's main (gk_log_setup) before threads
 * start; after that the functions only read them and may be called from any thread. */
#ifndef GK_LOG_H
#define GK_LOG_H

enum gk_verbosity { GK_LOG_QUIET = 0, GK_LOG_NORMAL = 1, GK_LOG_VERBOSE = 2, GK_LOG_DEBUG = 3 };

void gk_log_setup(const char *prog, int verbosity);
const char *gk_prog(void);
int gk_verbosity(void);

/* Always printed: "prog: message". */
void gk_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed unless -q: "prog: warning: message". */
void gk_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed unless -q: "prog: message". */
void gk_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed with -v: "prog: message". */
void gk_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A note kept for the tool to warn of once (a backend's be->note): printed as gk_warn when not
 * empty, then emptied. */
void gk_warn_note(char *note);

#endif
