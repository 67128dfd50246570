/* inputs.h: gpt-tokenize's operands expanded into the list of inputs it reads, in order:
 *   "-" and the path of a file: as given;
 *   a directory: every regular file under it, depth first, each directory's entries in byte
 *     order of their names, names starting with '.' skipped (symbolic links to files are
 *     followed, to directories not);
 *   an operand with * ? or [ that names no file: glob(3)'s matches (shell-style, sorted; the
 *     shell left it quoted), a directory among them expanded as above; none is an error;
 *   hf://datasets/OWNER/NAME/PATH: the dataset's files PATH names (common/hub/hub.h), listed
 *     now; tk_inputs_fetch downloads each into the HF cache (unless there) when it is asked
 *     for, and the next one in a background thread while the caller reads this one;
 *   s3://BUCKET/KEY (inputs_s3.c): the object; s3://BUCKET/PREFIX/ (or a KEY that names no
 *     object but has objects under KEY/): every object under it; a KEY with * ? or [: the
 *     objects whose keys match it (fnmatch, '*' not crossing '/'), in S3's order (sorted by
 *     bytes); tk_inputs_fetch streams one object at a time through a pipe, or, for Parquet,
 *     zip and 7z (read from their end), downloads it into an unlinked temporary file in
 *     tmpdir; either way it gives /dev/fd/N (the reader names the URL), and tk_inputs_done
 *     says whether the stream ended in a failure.
 * Owns: the path strings, the arrays, the datasets, the download thread and the temporary of
 * the s3:// input read now (expand .. free); s3 is borrowed.
 * Call from one thread. */
#ifndef TK_INPUTS_H
#define TK_INPUTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "common/err.h"
#include "common/hub/hub.h"
#include "common/s3/s3.h"

typedef struct tk_remote {
    gk_hub_dataset *d; /* NULL: a local input or an s3:// object */
    int i;             /* its file */
    int s3;            /* an s3://BUCKET/KEY object */
} tk_remote;

/* The download of the next remote input, running while the current one is read. */
typedef struct tk_prefetch {
    pthread_t thread;
    int running, i, rc;
    gk_err err;
    char path[4096];
    atomic_int cancel;
} tk_prefetch;

typedef struct tk_s3_stream tk_s3_stream;

typedef struct tk_inputs {
    char **paths;       /* local paths, or hf://datasets/OWNER/NAME/FILE */
    long long *sizes;   /* bytes as stored, -1 unknown (stdin) */
    tk_remote *remote;
    int n, cap;
    gk_hub_dataset **sets;
    int nsets;
    tk_prefetch pf;
    gk_s3 *s3;          /* for s3:// operands (NULL: refused) */
    const char *tmpdir; /* where s3:// objects are downloaded */
    int s3fd;           /* > 0: the temporary or pipe of the s3:// input read now */
    struct tk_s3_stream *stream; /* the transfer into that pipe */
    int cur;            /* the s3:// input fetched last */
} tk_inputs;

int tk_inputs_add(tk_inputs *in, const char *path, gk_err *e);
int tk_inputs_add_entry(tk_inputs *in, const char *path, long long size, tk_remote rem, gk_err *e);
/* inputs_s3.c: appends what an s3:// operand stands for / the local path of s3:// input i. */
int tk_inputs_add_s3(tk_inputs *in, const char *url, gk_err *e);
int tk_inputs_fetch_s3(tk_inputs *in, int i, char *path, size_t cap, gk_err *e);
/* After input i was read with result rc: rc, or the error of a stream that failed (whose end
 * the reader took for the object's); the temporary or pipe is closed. */
int tk_inputs_done_s3(tk_inputs *in, int rc, gk_err *e);
/* Appends what operand stands for; hub (NULL: hf:// refused) for hf://datasets/ operands. */
int tk_inputs_expand(tk_inputs *in, const char *operand, const gk_hub_conf *hub, gk_err *e);
/* The local path of input i into path[0..cap): a remote one downloaded first (unless cached),
 * then the next remote input's download started in the background. */
int tk_inputs_fetch(tk_inputs *in, int i, char *path, size_t cap, gk_err *e);
/* Stops the download running in the background, if any, and waits for its thread, so that it
 * says nothing after this (call when the reading ends, before the summary). */
void tk_inputs_stop(tk_inputs *in);
void tk_inputs_free(tk_inputs *in);

#endif
