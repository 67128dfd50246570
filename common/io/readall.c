/* readall.c: a whole file or stream into memory (see readall.h). */
#include "common/io/readall.h"

#include <stdlib.h>

#include "common/grow.h"

int gk_read_all(FILE *f, const char *name, size_t max, char **data, size_t *len, gk_err *e)
{
    size_t cap = 0, n = 0, got = 1;
    char *b = NULL;
    /* keeps one byte free for the '\0'; reads past max to tell "exactly max" from more */
    for (; got && n <= max; n += got) {
        if (gk_grow(&b, &cap, n + 2, 1, 1 << 16)) {
            free(b);
            return gk_errf(e, GK_ENOMEM, "%s: out of memory", name);
        }
        got = fread(b + n, 1, cap - n - 1, f);
    }
    if (ferror(f)) {
        free(b);
        return gk_errno(e, name);
    }
    if (n > max) {
        free(b);
        return gk_errf(e, GK_EFORMAT, "%s: larger than %zu bytes", name, max);
    }
    b[n] = '\0';
    *data = b;
    *len = n;
    return 0;
}

int gk_read_file(const char *path, size_t max, char **data, size_t *len, gk_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return gk_errno(e, path);
    int rc = gk_read_all(f, path, max, data, len, e);
    fclose(f);
    return rc;
}
