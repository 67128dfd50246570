/* ckpt_src.h: a checkpoint a tool names, made readable: gk_ckpt_where's resolution (an out_dir,
 * local or in a bucket, stands for its latest), then, for one in a bucket, a download
 * (gk_s3_fetch_url) into an unlinked temporary file in env->tmpdir that the readers map, named by
 * its URL in every message. The tools' one edge with object storage for the checkpoints they
 * read (gpt-sample and gpt-evalppl through kernels/infer/runner.h, gpt-ckpt): the S3 client's
 * settings come from the environment (env->getenv_fn, the tool's) and ~/.aws.
 * Owns: the download's descriptor, from gk_ckpt_src_open to gk_ckpt_src_close. One thread. */
#ifndef GK_CKPT_SRC_H
#define GK_CKPT_SRC_H

#include "common/env.h"
#include "common/err.h"

typedef struct gk_ckpt_src {
    char where[4400]; /* the path or s3:// URL that holds the checkpoint: what messages name */
    int fd;           /* the download, for gk_ckpt_open_fd / gk_st_open_fd; -1: open `where` */
    long long bytes;  /* the download's size; -1 for a path */
    long retries;     /* S3 requests retried (the tool may say so) */
} gk_ckpt_src;

/* Resolves path (gk_ckpt_where) into s->where and downloads it when it is in a bucket. Errors:
 * gk_ckpt_where's and the download's (naming the URL, or TMPDIR for a failed write). s is
 * closable whatever it returns. */
int gk_ckpt_src_open(gk_ckpt_src *s, const char *path, const gk_env *env, gk_err *e);
/* Closes the download's descriptor (a reader that mapped it keeps its own); -1 after. */
void gk_ckpt_src_close(gk_ckpt_src *s);

#endif
