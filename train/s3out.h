/* s3out.h: out_dir = s3://BUCKET/PREFIX. Checkpoints are written as for a local out_dir into a
 * staging directory (a temporary directory in TMPDIR), and the checkpoint writer thread uploads
 * each one (gk_s3_put_file: multipart over the part size), then moves the object PREFIX/latest
 * (its text: the checkpoint's name) to it, then prunes objects as keep_last and keep_every prune
 * files. A kill at any moment leaves PREFIX/latest on a whole checkpoint; the multipart uploads a
 * killed run left under PREFIX/ are aborted at the next start. The run's lock is the object
 * PREFIX/gpt-train.lock, created with If-None-Match ("PID HOST UNIXTIME"), renewed (the time) every
 * TR_S3_LOCK_RENEW_S by a thread; one not renewed for TR_S3_LOCK_STALE_S (its run lost with its
 * node), or left by a pid of this host that is not running, is taken over. Resuming downloads
 * the checkpoint latest names (and metrics.jsonl) into the staging directory, whose
 * latest.safetensors then names it, so that the rest of gpt-train sees a local out_dir.
 * The staging directory is a gk_stagedir (TMPDIR/gpt-train.XXXXXX, flock'd: a killed run's is
 * swept by the next tool that makes one). A checkpoint whose upload fails for good is moved to
 * TMPDIR/gpt-train-unsent.HASH (s3unsent.c), named in the error, and uploaded by the next run of
 * the out_dir (init_from = auto or resume) before it resumes. */
#ifndef TR_S3OUT_H
#define TR_S3OUT_H

#include <stdint.h>

#include "common/err.h"
#include "common/s3/s3.h"

enum { TR_S3_LOCK_RENEW_S = 60, TR_S3_LOCK_STALE_S = 300 };

typedef struct tr_s3out tr_s3out;

/* Opens url's bucket with conf, makes the staging directory in tmpdir, takes the lock object,
 * aborts unfinished uploads under the prefix and, for init_from = resume or auto, downloads the
 * checkpoint latest names (init_from = resume without one, or scratch or a path with one, is
 * GK_EUSAGE as for a local out_dir). */
int tr_s3out_open(tr_s3out **out, const char *url, const gk_s3_conf *conf, const char *tmpdir,
                  const char *init_from, gk_err *e);
/* The staging directory (the out_dir the rest of the run writes); the URL as given. */
const char *tr_s3out_stage(const tr_s3out *o);
const char *tr_s3out_url(const tr_s3out *o);
/* The object a file of the staging directory stands for (latest.safetensors: the checkpoint it
 * links to), as s3://BUCKET/PREFIX/NAME into url: for ranks on other machines, which cannot see
 * the staging directory. -1 when path is not in it or url is too small. */
int tr_s3out_object_url(const tr_s3out *o, const char *path, char *url, size_t cap);
/* Downloads the checkpoint at url into an unlinked temporary file in tmpdir (NULL: /tmp), open
 * on *fd: a rank on another machine than rank 0 resuming from a bucket. */
int tr_s3out_fetch_ckpt(const gk_s3_conf *conf, const char *url, const char *tmpdir, int *fd,
                        gk_err *e);
/* After the checkpoint writer wrote stage/name (step): uploads it, moves latest to it, uploads
 * metrics.jsonl and loss.svg, prunes the step checkpoints (keep_last, keep_every). Called by the
 * writer thread only. */
int tr_s3out_publish(tr_s3out *o, const char *name, int64_t step, int64_t keep_last,
                     int64_t keep_every, gk_err *e);
/* Uploads metrics.jsonl and loss.svg (when upload_logs), deletes the lock object, removes the
 * staging directory, closes. Accepts NULL. */
void tr_s3out_close(tr_s3out *o, int upload_logs);

#endif
