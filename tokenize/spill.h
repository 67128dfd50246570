/* spill.h: unlinked temporary files where gpt-tokenize keeps what it must see whole before it
 * can write (the tokens of a validation split, the text of a char vocabulary), so that memory
 * stays bounded whatever the input. They live in $TMPDIR (default /tmp: gk_env's tmpdir, which
 * main reads and passes down), as sort(1)'s do, and vanish when closed or when the process dies.
 * Owns: the open file and its stdio buffer. Lifetime: open .. close. Not thread-safe. */
#ifndef TK_SPILL_H
#define TK_SPILL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

typedef struct tk_spill {
    FILE *fp;
    const char *what; /* for messages: "the tokens held for --val-fraction" */
    char dir[4096];
    int64_t size;     /* bytes written */
} tk_spill;

/* Opens one in dir (what: for messages). */
int tk_spill_open(tk_spill *s, const char *dir, const char *what, gk_err *e);
/* Errors (a full disk) name the directory and what was being held. */
int tk_spill_write(tk_spill *s, const void *p, size_t n, gk_err *e);
/* Flushes what was written and goes back to its start for tk_spill_read. */
int tk_spill_rewind(tk_spill *s, gk_err *e);
/* Reads exactly n bytes (a short file is an error). */
int tk_spill_read(tk_spill *s, void *p, size_t n, gk_err *e);
/* Reads n bytes at offset off, after tk_spill_rewind. */
int tk_spill_pread(tk_spill *s, void *p, size_t n, int64_t off, gk_err *e);
void tk_spill_close(tk_spill *s);

#endif
