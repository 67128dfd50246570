/* input.h: documents from one input (a file or stdin) through libarchive.
 * Owns: an open libarchive reader. A plain file, stdin, or a single compressed file (.gz, .xz,
 * .zst, .bz2: detected by content) is one document; each regular member of a tar/zip/7z archive
 * is one document, except members that look binary (a NUL in their first 8 KB) and members that
 * are links, devices, FIFOs or other special files, which are skipped and counted (directories are
 * skipped silently). Lifetime: open .. close. Thread safety: one source per thread. */
#ifndef TK_INPUT_H
#define TK_INPUT_H

#include <stddef.h>

#include "common/err.h"

typedef struct tk_source tk_source;

/* Archive members that are not regular files, by kind (hard and symbolic links are links). */
enum { TK_SKIP_LINK, TK_SKIP_DEVICE, TK_SKIP_FIFO, TK_SKIP_OTHER, TK_SKIP_KINDS };

/* Opens path ("-" for stdin). Errors name the input. One layer of compression at most (a tar
 * may have one; a zip or 7z none): more is refused as GK_EFORMAT (here or at the first
 * tk_source_next), as a decompression bomb's nesting would be. Reading needs a fixed amount of
 * memory whatever the input declares. */
int tk_source_open(tk_source **out, const char *path, gk_err *e);
/* Moves to the next document; *more = 0 when there is none left. */
int tk_source_next(tk_source *s, int *more, gk_err *e);
/* Reads the current document; *got = 0 at its end. */
int tk_source_read(tk_source *s, char *buf, size_t cap, size_t *got, gk_err *e);
/* After tk_source_next: whether the input is an archive (its documents are members), not one
 * plain or compressed stream. */
int tk_source_is_archive(const tk_source *s);
/* Archive members skipped as binary so far. */
size_t tk_source_skipped(const tk_source *s);
/* Archive members of one TK_SKIP_* kind skipped so far. */
size_t tk_source_skipped_special(const tk_source *s, int kind);
/* After the last document: what the input was when it was an archive with no members at all
 * ("an empty tar archive (...)"), else NULL. */
const char *tk_source_empty_archive(const tk_source *s);
/* Compressed bytes consumed so far (for progress). */
long long tk_source_position(const tk_source *s);
void tk_source_close(tk_source *s);

#endif
