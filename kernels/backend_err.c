/* backend_err.c: the sticky backend error (see "Errors are sticky" in backend.h). */
#include <stdarg.h>
#include <stdio.h>

#include "kernels/backend.h"

int gk_backend_fail(gk_backend *be, int code, const char *file, int line, const char *fmt, ...)
{
    if (be->err.code) return code; /* keep the first error */
    char what[sizeof be->err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return gk_errf(&be->err, code, "%.900s (%.100s:%d)", what, file, line);
}

int gk_backend_status(gk_backend *be, gk_err *err)
{
    if (!be->err.code) return 0;
    if (err) *err = be->err;
    return be->err.code;
}

int gk_backend_sync(gk_backend *be, gk_err *err)
{
    be->ops->sync(be);
    return gk_backend_status(be, err);
}
