/* readall.h: a whole file (or stream) into memory, for the inputs that are parsed in one piece
 * (vocabularies, prompts, evaluation texts). Owns nothing; the buffer it returns is the caller's
 * (free()). Thread-safe (one stream per call). */
#ifndef GK_READALL_H
#define GK_READALL_H

#include <stddef.h>
#include <stdio.h>

#include "common/err.h"

#define GK_READALL_NO_LIMIT ((size_t)-1)

/* Reads f to its end into *data (malloc'd, with a '\0' after the *len bytes read). name is what
 * the messages say: "name: strerror" on a read error (GK_EIO), "name: out of memory"
 * (GK_ENOMEM), "name: larger than N bytes" (GK_EFORMAT) past max bytes. f stays open. */
int gk_read_all(FILE *f, const char *name, size_t max, char **data, size_t *len, gk_err *e);
/* The same for the file at path, opened and closed here ("path: strerror" when it cannot be). */
int gk_read_file(const char *path, size_t max, char **data, size_t *len, gk_err *e);

#endif
