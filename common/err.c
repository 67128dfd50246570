/* err.c: filling gk_err records (see err.h). */
#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gk_errf(gk_err *e, int code, const char *fmt, ...)
{
    if (e) { /* through a copy: e->msg may be one of the arguments (adding to a message) */
        char msg[sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        memcpy(e->msg, msg, sizeof msg);
        e->code = code;
    }
    return code;
}

int gk_errno(gk_err *e, const char *what)
{
    int saved = errno;
    int code = saved == ENOENT ? GK_ENOTFOUND : saved == ENOMEM ? GK_ENOMEM : GK_EIO;
    return gk_errf(e, code, "%s: %s", what, strerror(saved));
}

int gk_exit_status(int code)
{
    if (code == GK_OK)
        return 0;
    return code == GK_EUSAGE ? 2 : 1;
}
