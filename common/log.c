/* log.c: stderr messages by verbosity (see log.h). */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>

/* Set once at start-up by gk_log_setup; read-only afterwards. */
static const char *log_prog = "gptkit";
static int log_level = GK_LOG_NORMAL;

void gk_log_setup(const char *prog, int verbosity)
{
    log_prog = prog;
    log_level = verbosity;
}

const char *gk_prog(void) { return log_prog; }
int gk_verbosity(void) { return log_level; }

static void vlog(const char *tag, const char *fmt, va_list ap)
{
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s: %s%s\n", log_prog, tag, line);
}

#define GK_LOG_BODY(min, tag)            \
    if (log_level < (min)) return;       \
    va_list ap;                          \
    va_start(ap, fmt);                   \
    vlog(tag, fmt, ap);                  \
    va_end(ap)

void gk_error(const char *fmt, ...) { GK_LOG_BODY(GK_LOG_QUIET, ""); }
void gk_warn(const char *fmt, ...) { GK_LOG_BODY(GK_LOG_NORMAL, "warning: "); }
void gk_info(const char *fmt, ...) { GK_LOG_BODY(GK_LOG_NORMAL, ""); }
void gk_verbose(const char *fmt, ...) { GK_LOG_BODY(GK_LOG_VERBOSE, ""); }

void gk_warn_note(char *note)
{
    if (note && note[0]) gk_warn("%s", note);
    if (note) note[0] = 0;
}
