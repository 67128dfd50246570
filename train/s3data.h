/* s3data.h: train_data and val_data in a bucket: s3://BUCKET/KEYGLOB among the comma-separated
 * patterns. The objects a pattern matches (ListObjectsV2 from the key's part before its first
 * wildcard, then fnmatch(3) over the whole key: '*' also matches '/') are downloaded whole, in
 * the listing's order (S3's: UTF-8 bytes, as glob(3)'s in the C locale), into a data directory
 * in TMPDIR before training starts, and the patterns are rewritten to those files, which
 * data.c maps as local shards: once training runs no step waits on the network. Disk: the
 * matched shards' total size, for the run's length (every step may draw a window from any
 * shard, data.h); the directory is removed at tr_s3data_close. */
#ifndef TR_S3DATA_H
#define TR_S3DATA_H

#include "common/err.h"
#include "common/s3/s3.h"

typedef struct tr_s3data tr_s3data;

/* When patterns names no s3:// URL: *out = NULL, *local = NULL, nothing done. Else downloads
 * as above and sets *local (malloc'd) to the patterns with each URL replaced by the files it
 * matched. GK_ENOTFOUND naming the pattern when it matches no object; what ("train_data")
 * leads every message. */
int tr_s3data_fetch(tr_s3data **out, const char *patterns, const gk_s3_conf *conf, const char *tmpdir,
                    const char *what, char **local, gk_err *e);
/* Removes the data directory. Accepts NULL. */
void tr_s3data_close(tr_s3data *d);

#endif
