/* stage.h: gpt-tokenize's outputs in a bucket (-o and --val-output s3://BUCKET/KEY): each is
 * written in a staging directory made in tmpdir at the first one, then uploaded
 * (gk_s3_put_file: one PUT, or a multipart upload over the part size, aborted when a part
 * fails, so no partial object is left) and removed; numbered shards are uploaded one by one as
 * each is complete (output.c), so at most one is held locally at a time.
 * The staging directory is a gk_stagedir (common/io/stagedir.h: TMPDIR/gpt-tokenize.XXXXXX,
 * locked; those of killed runs are swept when the next one is made). Before an upload, the
 * multipart uploads a killed run left in progress on the same key are aborted. On SIGINT,
 * SIGTERM, SIGHUP or SIGPIPE (tk_stage_signal, from main's handler) the upload under way is
 * cut short and aborted, the staging directory removed, and the process dies of the signal.
 * Owns: the staging directory (removed at close). s3 is borrowed. Not thread-safe, but for
 * tk_stage_signal. */
#ifndef TK_STAGE_H
#define TK_STAGE_H

#include <stddef.h>

#include "common/err.h"
#include "common/io/stagedir.h"
#include "common/s3/s3.h"

typedef struct tk_stage {
    gk_s3 *s3;         /* NULL: s3:// outputs are refused */
    const char *tmpdir;
    gk_stagedir dir;   /* path "" until the first s3:// output */
    int n;             /* outputs staged so far */
} tk_stage;

/* The local path to write for out: out itself unless it is an s3:// URL, else a new name in the
 * staging directory ending in the key's last part (for a series, the prefix's). The URL's form
 * is checked here (it must name a key). */
int tk_stage_path(tk_stage *st, const char *out, char *path, size_t cap, gk_err *e);
/* Uploads the file at path to url, then removes the file (also when the upload fails). */
int tk_stage_put(tk_stage *st, const char *path, const char *url, gk_err *e);
/* Deletes an object uploaded already (the half of a split whose other half failed). */
void tk_stage_delete(tk_stage *st, const char *url);
void tk_stage_close(tk_stage *st);
/* From a signal handler (async-signal-safe): 1 when an upload is under way (it stops, then the
 * process dies of sig: the handler returns), else 0 once the staging directory is removed (the
 * handler then dies of sig). */
int tk_stage_signal(int sig);

#endif
