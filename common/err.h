/* err.h: error values for libgptcommon and the tools.
 * Owns: gk_err, a caller-owned record of what went wrong (code + one-line message).
 * Library functions fill it and return its (negative) code; only a tool's main prints and exits.
 * Thread safety: a gk_err belongs to one call chain; use one per thread. */
#ifndef GK_ERR_H
#define GK_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

enum gk_code {
    GK_OK = 0,
    GK_EIO = -1,       /* read/write/open failure (errno-based) */
    GK_EFORMAT = -2,   /* input is not what it claims to be: bad header, bad JSON, truncated */
    GK_ENOMEM = -3,    /* allocation failed */
    GK_EUSAGE = -4,    /* bad option or argument value: tools exit 2 */
    GK_ENOTFOUND = -5, /* a named file, key or resource does not exist */
    GK_EINTR = -6,     /* interrupted by a signal the tool asked to honour */
};

typedef struct gk_err {
    int code;
    char msg[1024];
} gk_err;

/* Sets e (if not NULL) to code and a printf-formatted message; returns code. */
int gk_errf(gk_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets e to GK_EIO (GK_ENOTFOUND for ENOENT) with "what: strerror(errno)"; returns the code. */
int gk_errno(gk_err *e, const char *what);
/* Exit status a tool should use for code: 0 ok, 2 usage, 1 anything else. */
int gk_exit_status(int code);

#ifdef __cplusplus
}
#endif

#endif
