/* shard_s3.h: token shards in a bucket, read in place by ranged GETs (no local copy), for every
 * tool that reads shards (gpt-train's data, gpt-tokenize -d, gpt-evalppl): the header checked as
 * gk_shard_map_open checks a file's (the same messages, naming s3://BUCKET/KEY), then any range
 * of the object. The client is borrowed; its calls may run on several threads. */
#ifndef GK_SHARD_S3_H
#define GK_SHARD_S3_H

#include <stdint.h>

#include "common/err.h"
#include "common/io/shard.h"
#include "common/s3/s3.h"

/* Bytes [off, off + n) of the object into buf, all of them (fewer is GK_EFORMAT: "the object
 * changed?"). */
int gk_shard_s3_range(gk_s3 *s, const char *bucket, const char *key, int64_t off, size_t n,
                      void *buf, gk_err *e);
/* The object's header (its size given: a listing's or a HEAD's) read and checked into m, whose
 * name the caller set (messages use it); nothing is mapped (m->base and m->tokens stay NULL).
 * *data_off: where the tokens start (0 for a raw uint16 object). A text object is "not a token
 * shard". */
int gk_shard_s3_header(gk_s3 *s, const char *bucket, const char *key, int64_t size, gk_shard_map *m,
                       int64_t *data_off, gk_err *e);

#endif
