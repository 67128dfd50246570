/* inputs.h: gpt-tokenize's operands expanded into the list of inputs it reads, in order:
 *   "-" and the path of a file: as given;
 *   a directory: every regular file under it, depth first, each directory's entries in byte
 *     order of their names, names starting with '.' skipped (symbolic links to files are
 *     followed, to directories not);
 *   an operand with * ? or [ that names no file: glob(3)'s matches (shell-style, sorted; the
 *     shell left it quoted), a directory among them expanded as above; none is an error.
 * Owns: the path strings and the array (expand .. free). Not thread-safe. */
#ifndef TK_INPUTS_H
#define TK_INPUTS_H

#include "common/err.h"

typedef struct tk_inputs {
    char **paths;
    int n, cap;
} tk_inputs;

int tk_inputs_add(tk_inputs *in, const char *path, gk_err *e);
/* Appends what operand stands for. */
int tk_inputs_expand(tk_inputs *in, const char *operand, gk_err *e);
void tk_inputs_free(tk_inputs *in);

#endif
