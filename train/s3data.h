/* s3data.h: train_data and val_data shards in a bucket, read where they are: s3://BUCKET/KEYGLOB
 * among the comma-separated patterns (data.h). The objects a pattern matches (ListObjectsV2 from
 * the key's part before its first wildcard, then fnmatch(3) over the whole key: '*' also
 * matches '/') are the shards, in the listing's order (S3's: UTF-8 bytes, as glob(3)'s in the C
 * locale). Each one's header, its first 1024 bytes (one ranged GET), is validated as a file's
 * (gk_shard_parse against the object's size from the listing: a bad magic, version or count is
 * one line naming the object); its tokens are then read by ranged GETs of the windows that
 * training asks for (data.c, read ahead by readahead.h): nothing is downloaded whole, and
 * memory does not grow with the shards' size.
 * Owns: the client and the list of objects. Lifetime: open .. close. Thread safety:
 * tr_s3data_read from several threads at once; the rest from one. */
#ifndef TR_S3DATA_H
#define TR_S3DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/io/shard.h"
#include "common/s3/s3.h"

typedef struct tr_s3data tr_s3data;

int tr_s3data_open(tr_s3data **out, const gk_s3_conf *conf, gk_err *e);
/* One shard found: m filled as gk_shard_map_open fills it, but with nothing mapped (base and
 * tokens NULL; name, the object's URL, to be freed by gk_shard_map_close), obj its number for
 * tr_s3data_read, data_off where its tokens start in the object (0 or 1024). */
typedef int (*tr_s3data_fn)(void *ud, gk_shard_map *m, size_t obj, int64_t data_off, gk_err *e);
/* The shards url (s3://BUCKET/KEYGLOB) matches, each given to fn in order. GK_ENOTFOUND naming
 * url when it matches no object; what ("train_data") leads every message. */
int tr_s3data_add(tr_s3data *d, const char *url, const char *what, tr_s3data_fn fn, void *ud,
                  gk_err *e);
/* Bytes [off, off + n) of object obj into buf (a GET that is cut short is retried, s3.h). */
int tr_s3data_read(tr_s3data *d, size_t obj, int64_t off, size_t n, void *buf, gk_err *e);
/* Requests retried so far. */
long tr_s3data_retries(const tr_s3data *d);
void tr_s3data_close(tr_s3data *d); /* accepts NULL */

#endif
