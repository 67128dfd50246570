/* inputs.h: gpt-tokenize's operands expanded into the list of inputs it reads, in order:
 *   "-" and the path of a file: as given;
 *   a directory: every regular file under it, depth first, each directory's entries in byte
 *     order of their names, names starting with '.' skipped (symbolic links to files are
 *     followed, to directories not);
 *   an operand with * ? or [ that names no file: glob(3)'s matches (shell-style, sorted; the
 *     shell left it quoted), a directory among them expanded as above; none is an error;
 *   hf://datasets/OWNER/NAME/PATH: the dataset's files PATH names (common/hub/hub.h), listed
 *     now; tk_inputs_fetch downloads each into the HF cache (unless there) when it is asked
 *     for, and the next one in a background thread while the caller reads this one.
 * Owns: the path strings, the arrays, the datasets and the download thread (expand .. free).
 * Call from one thread. */
#ifndef TK_INPUTS_H
#define TK_INPUTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "common/err.h"
#include "common/hub/hub.h"

typedef struct tk_remote {
    gk_hub_dataset *d; /* NULL: a local input */
    int i;             /* its file */
} tk_remote;

/* The download of the next remote input, running while the current one is read. */
typedef struct tk_prefetch {
    pthread_t thread;
    int running, i, rc;
    gk_err err;
    char path[4096];
    atomic_int cancel;
} tk_prefetch;

typedef struct tk_inputs {
    char **paths;       /* local paths, or hf://datasets/OWNER/NAME/FILE */
    long long *sizes;   /* bytes as stored, -1 unknown (stdin) */
    tk_remote *remote;
    int n, cap;
    gk_hub_dataset **sets;
    int nsets;
    tk_prefetch pf;
} tk_inputs;

int tk_inputs_add(tk_inputs *in, const char *path, gk_err *e);
/* Appends what operand stands for; hub (NULL: hf:// refused) for hf://datasets/ operands. */
int tk_inputs_expand(tk_inputs *in, const char *operand, const gk_hub_conf *hub, gk_err *e);
/* The local path of input i into path[0..cap): a remote one downloaded first (unless cached),
 * then the next remote input's download started in the background. */
int tk_inputs_fetch(tk_inputs *in, int i, char *path, size_t cap, gk_err *e);
void tk_inputs_free(tk_inputs *in);

#endif
