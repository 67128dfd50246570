/* data.h: training and evaluation windows from token shards.
 * A window is block_size + 1 consecutive tokens inside one shard (inputs = the first T, targets
 * = the last T), chosen uniformly among all window starts of all shards by a counter-based
 * hash of (seed, stream, batch, j): the data for optimizer step s does not depend on earlier
 * steps, on the thread count or on the world size, so a resumed or rescaled run reads exactly
 * the windows an uninterrupted run would. The "data position" is just the step counter.
 * Shards in a bucket (s3://BUCKET/KEYGLOB, s3data.h) are not downloaded: the windows are read by
 * ranged GETs, fetched ahead of the run in the order a plan per stream says (readahead.h), so
 * that a training step does not wait on the network.
 * Owns: the mapped shards, and for a bucket's the client and the read-ahead threads. Lifetime:
 * open .. close. tr_data_window and tr_data_plan from one thread (the run's). */
#ifndef TR_DATA_H
#define TR_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/s3/s3.h"
#include "common/text/vocab.h"

typedef struct tr_data tr_data;

enum { TR_STREAM_TRAIN = 1, TR_STREAM_EVAL_TRAIN = 2, TR_STREAM_EVAL_VAL = 3 };

enum { TR_DATA_CONNECTIONS = 8 }; /* ranged GETs at once, for shards in a bucket */

/* What reading from a bucket needs (NULL: an s3:// pattern is refused). */
typedef struct tr_data_remote {
    const gk_s3_conf *conf; /* the client's settings (copied) */
    size_t readahead;       /* bytes of windows read ahead, at most, for each stream's plan */
    int threads;            /* ranged GETs at once */
} tr_data_remote;

/* patterns: one or more globs separated by commas ("data/train_*.bin,more.bin",
 * "s3://corpus/fw/train_*.bin"). Every shard needs at least T + 1 tokens; tokens must be below
 * vocab_limit. what names the config key. */
int tr_data_open(tr_data **out, const char *patterns, int T, uint32_t vocab_limit,
                 const tr_data_remote *remote, const char *what, gk_err *e);
/* The order in which the run will ask for windows of stream (readahead.h's plan: batches first,
 * first + stride, ... (count of them, again and again; 0: for ever), windows j0 .. j0 + n - 1 of
 * each): read ahead from now on when shards are in a bucket, else nothing done. */
int tr_data_plan(tr_data *d, uint64_t seed, int stream, uint64_t first, uint64_t stride,
                 uint64_t count, uint64_t j0, uint64_t n, gk_err *e);
int64_t tr_data_tokens(const tr_data *d);
size_t tr_data_shards(const tr_data *d);
/* Fingerprint and vocab size of the first shard's header (0 when unknown). */
uint32_t tr_data_fingerprint(const tr_data *d);
uint32_t tr_data_vocab_size(const tr_data *d);
/* The first shard's path (or s3:// URL). */
const char *tr_data_first_name(const tr_data *d);
/* The data's vocabulary, found without a `vocab` setting: beside the first shard (a directory
 * of GPT-2 files, or gpt-tokenize --vocab-out's vocab.json; not in a bucket), else the default
 * lookup (gk_vocab_find); only one whose fingerprint is the data's. path[cap]: where it was
 * found ("" when none: NULL). */
gk_vocab *tr_data_find_vocab(const tr_data *d, char *path, size_t cap);
/* Checks every shard of d against the model before any training: a fingerprint other than
 * *fingerprint (0: unknown; then the first shard that has one sets it, for the next calls too)
 * and a header vocab size above vocab_size are errors naming the shard (`what` its config key,
 * `whose` what *fingerprint belongs to: "the model's vocabulary"); a shard that does not say
 * its vocab size (0, or nanoGPT's header-less files) has every token checked (one pass over
 * it; in a bucket, as its windows are read). Windows are checked against vocab_size from then
 * on. */
int tr_data_check(tr_data *d, uint32_t vocab_size, uint32_t *fingerprint, const char *whose,
                  const char *what, gk_err *e);
/* Window j of batch `batch` in stream: x[0..T) inputs, y[0..T) targets. */
int tr_data_window(const tr_data *d, uint64_t seed, int stream, uint64_t batch, uint64_t j,
                   uint32_t *x, uint32_t *y, gk_err *e);
void tr_data_close(tr_data *d);

/* The counter-based hash behind data windows: splitmix64 steps (kernels/rng.h's mixer) chained
 * over the four words. */
uint64_t tr_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d);

#endif
